"""Context embedding maps h: contexts -> R^d for data built from token sequences.

Spec strings (the ``--embedding`` option):

* ``onehot``: h̄_j = e_j in R^m (d = m; H is invertible, so the data are always compatible and separable: the
  square case of Lemma 1 of paper A, which states "d > m and full-rank H̄");
* ``gaussian[:d=60,scale=1,seed=0]``: i.i.d. N(0, scale^2) entries, seeded;
* ``path/to/file.npy``: a user matrix of shape (m, d), row j for the j-th distinct context (the order of
  ``NTPData.contexts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE
from ..errors import DataError
from ..io import load_npy


@dataclass(frozen=True)
class EmbeddingSpec:
    """A parsed ``--embedding`` value (see the module docstring)."""

    kind: str = "onehot"  # "onehot" | "gaussian" | "file"
    d: int = 60
    scale: float = 1.0
    seed: int = 0
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> EmbeddingSpec:
        """Parse ``onehot``, ``gaussian[:d=..,scale=..,seed=..]`` or a ``.npy`` path.

        >>> EmbeddingSpec.parse("gaussian:d=8,seed=3")
        EmbeddingSpec(kind='gaussian', d=8, scale=1.0, seed=3, path=None)
        """
        text = text.strip()
        if text == "onehot":
            return cls(kind="onehot")
        if text.split(":", 1)[0] == "gaussian":
            opts = {}
            if ":" in text:
                for item in filter(None, text.split(":", 1)[1].split(",")):
                    key, _, value = item.partition("=")
                    key = key.strip()
                    if key not in ("d", "scale", "seed") or not value:
                        raise DataError(
                            f"--embedding {text!r}: unknown or empty option {item!r}; use gaussian:d=60,scale=1,seed=0"
                        )
                    try:
                        opts[key] = float(value) if key == "scale" else int(value)
                    except ValueError:
                        raise DataError(f"--embedding {text!r}: {key} must be a number, got {value!r}") from None
            spec = cls(kind="gaussian", **opts)
            if spec.d < 1 or not 0 < spec.scale < float("inf") or not 0 <= spec.seed < 2**63:
                raise DataError(f"--embedding {text!r}: need d >= 1 and scale > 0 (finite), and 0 <= seed < 2^63")
            return spec
        if text.endswith(".npy"):
            return cls(kind="file", path=text)
        raise DataError(f"--embedding {text!r}: expected onehot, gaussian[:d=..,scale=..,seed=..], or a .npy file")

    def matrix(self, m: int, dtype: torch.dtype = DEFAULT_DTYPE) -> torch.Tensor:
        """The (m, d) embedding matrix H for m distinct contexts."""
        if self.kind == "onehot":
            return torch.eye(m, dtype=dtype)
        if self.kind == "gaussian":
            gen = torch.Generator().manual_seed(self.seed)
            return self.scale * torch.randn(m, self.d, generator=gen, dtype=torch.float64).to(dtype)
        path = Path(self.path)
        arr = load_npy(path, "--embedding")
        if arr.ndim != 2 or arr.shape[0] != m:
            raise DataError(
                f"--embedding {path}: expected an (m, d) matrix with m = {m} rows (one per distinct context), "
                f"got shape {arr.shape}"
            )
        if arr.dtype.kind not in "fiu":
            raise DataError(f"--embedding {path}: expected a numeric array, got dtype {arr.dtype}")
        return torch.as_tensor(arr.astype(np.float64), dtype=dtype)
