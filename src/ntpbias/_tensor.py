"""Small torch helpers shared by every layer: dtype/device defaults and array conversion."""

from __future__ import annotations

import numpy as np
import torch

DEFAULT_DTYPE = torch.float64
#: the torch dtype of each ``dtype`` name a config accepts (:data:`ntpbias.config.DTYPE_BYTES`, which holds no torch)
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def floating_dtype(where: str, dtype) -> torch.dtype:
    """``dtype`` checked at the Python API's boundary: ``torch.float64`` or ``torch.float32`` (or their names)."""
    from .errors import ArgumentTypeError, describe_value

    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    if not any(dtype is t for t in DTYPES.values()):
        raise ArgumentTypeError(f"{where}: dtype = {describe_value(dtype)}: expected torch.float64 or torch.float32")
    return dtype


def as_tensor(x, *, dtype: torch.dtype | None = DEFAULT_DTYPE, device=None) -> torch.Tensor:
    """Convert ``x`` (array-like or tensor) to a tensor of ``dtype`` on ``device`` without copying when possible."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype=dtype if dtype is not None else x.dtype, device=device or x.device)
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def to_numpy(x) -> np.ndarray:
    """Convert a tensor (any device) or array-like to a numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Return a torch device; ``"cuda"`` without a GPU is a clear error rather than a crash deep inside."""
    from .errors import ConfigError

    if device is None:
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was requested but no CUDA GPU is available; use --device cpu")
    return dev

