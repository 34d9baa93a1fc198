"""Scale equivariance: the NTP programs are solved on embeddings of unit scale and answered in the user's units.

Multiplying every context embedding by c > 0 (H -> cH) changes none of the theory's verdicts: F, dim F, NTP_H-
compatibility and NTP-separability are the same, and so are the logit gaps of the solutions, while W* and W^mm
scale as 1/c, the maximum normalized margin 1/||W^mm|| as c, and the NTP-SVM multipliers as 1/c²
(docs/paper-a-linear-ntp.md; docs/errors-and-limits.md). Solvers, however, have absolute tolerances (an LP's
feasibility tolerance, an eigenvalue cutoff, a divergence test), and H H^T over- or underflows for extreme scales.
So the entry points (:func:`~ntpbias.geometry.linear.subspace.subspace`, :func:`~ntpbias.geometry.separability.verdict.
ntp_separability`, :func:`~ntpbias.geometry.margins.program.ntp_svm`, :func:`~ntpbias.geometry.analysis.analyze`) work
on :func:`normalized` data, H / s with s a power of two (the division is exact), and report W / s: the same answer
to the last bit for every c = 2^k, and to round-off for any c.

Data whose largest embedding entry lies in :data:`UNIT_BAND` are used as they are (s = 1; every dataset of the
papers), so their results are unchanged. Answers that would not fit a float64 in the user's units are refused
(:func:`in_user_units`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from ..data.ntp import NTPData
from ..errors import DataError

#: embeddings whose largest |entry| lies in this band are used as given (s = 1)
UNIT_BAND = (2.0**-4, 2.0**4)
#: where the normalized copy of a dataset is kept (``data._cache``), so every entry point shares it and its caches
CACHE_KEY = "normalized"


def data_scale(H: torch.Tensor) -> float:
    """The power of two s by which H is divided (1 when max |H| lies in :data:`UNIT_BAND`, or H = 0).

    >>> data_scale(torch.tensor([[3.0, -1.0]])), data_scale(torch.tensor([[3e8, 1.0]]))
    (1.0, 268435456.0)
    """
    top = max(float(H.max()), -float(H.min())) if H.numel() else 0.0  # no |H| copy: a large H is read twice
    if top == 0.0 or not math.isfinite(top) or UNIT_BAND[0] <= top <= UNIT_BAND[1]:
        return 1.0
    return math.ldexp(1.0, round(math.log2(top)))


def normalized(data: NTPData) -> tuple[NTPData, float]:
    """(data with H / s, s): the copy the programs are solved on, cached on ``data`` (s = 1: ``data`` itself)."""
    s = data_scale(data.H)
    if s == 1.0:
        return data, 1.0
    if CACHE_KEY not in data._cache:
        data._cache[CACHE_KEY] = replace(data, H=data.H / s, _cache={})
    return data._cache[CACHE_KEY], s


def in_user_units(X: torch.Tensor | None, s: float, power: int = 1, what: str = "W") -> torch.Tensor | None:
    """X / s**power (a W of the normalized problem in the user's units); a value that overflows float64 there is a
    :class:`DataError` saying how to rescale."""
    if X is None or s == 1.0:
        return X
    out = X
    for _ in range(power):  # s is a power of two: each division is exact (s**power itself may overflow)
        out = out / s
    if not bool(torch.isfinite(out).all()):
        raise DataError(f"the embeddings' scale (max |H| about {s:.1e}) is too extreme: {what} would overflow "
                        f"float64 in these units (it scales as 1/scale^{power}); multiply H by a constant closer to "
                        "1 (every verdict is the same, W* and W^mm scale as 1/c)")
    return out


def stable_norm(X: torch.Tensor) -> float:
    """||X|| (Frobenius) without overflow or underflow of the squares (scaled by the largest |entry|).

    >>> f"{stable_norm(torch.tensor([3e200, 4e200], dtype=torch.float64)):.6g}"
    '5e+200'
    """
    top = float(X.abs().max()) if X.numel() else 0.0
    if top == 0.0 or not math.isfinite(top):
        return top
    return top * float(torch.linalg.vector_norm(X / top))
