"""A bound on ||P_F(W) - W*|| from the per-context excess loss, whatever the optimizer (docs/optimizers.md#f-bound).

The in-support log-odds of W are A_eq(W) (the rows spanning F, eq. (5) of paper A), so they see only P_F(W): for
NTP_H-compatible data, P_F(W) - W* lies in F and A_eq(P_F(W) - W*) = A_eq(W) - b (b the log-odds of p̂, eq. (4)), hence

    ||P_F(W) - W*|| <= ||A_eq(W) - b|| / σ_min^+(A_eq),                                              (B1)

σ_min^+ the smallest nonzero singular value of A_eq. Each entry of A_eq(W) - b is a difference δ_z - δ_z' of the
logit errors δ = ℓ - ℓ* on one support S_j (ℓ* = log p̂_j), so it is at most their spread Δ_j = max δ - min δ.
With q_j the softmax of W h̄_j restricted to S_j, KL(p̂_j || S(W h̄_j)) >= KL(p̂_j || q_j), and KL(p̂_j || q_j) is the
Bregman divergence of log-sum-exp: ∫_0^1 (1 - t) Var_{r_t}(δ) dt with r_t ∝ p̂_j e^{tδ} >= p̂_j e^{-tΔ_j}, and
Var_{p̂_j}(δ) >= c_j Δ_j², c_j = 1/(1/p_(1) + 1/p_(2)) from the two smallest in-support probabilities. So

    KL_j := KL(p̂_j || S(W h̄_j)) >= c_j ψ(Δ_j),  ψ(Δ) = e^{-Δ} - 1 + Δ,  i.e.  Δ_j <= ψ^{-1}(KL_j / c_j),      (B2)

(ψ^{-1} by Newton's method, :func:`psi_inverse`). (B1) and (B2) give a bound that goes to 0 with CE - H =
Σ_j π̂_j KL_j: P_F(W_k) -> W* for every optimizer that reaches the entropy (our derivation; the log-odds only see F).
"""

from __future__ import annotations

import numpy as np
import torch

from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ..constraints import constraints
from .excess import context_excess

#: The Gram matrix of A_eq is eigendecomposed up to this many rows (no bound beyond).
MAX_ROWS = 3000


def sigma_min_F(data: NTPData) -> float | None:
    """σ_min^+(A_eq): the smallest nonzero singular value of the equality rows (None above :data:`MAX_ROWS` rows or
    for one-hot supports, where F = {0})."""
    cache = data._cache
    if "sigma_min_F" not in cache:
        A = constraints(data).eq
        if not len(A) or len(A) > MAX_ROWS:
            cache["sigma_min_F"] = None
        else:
            ev = torch.linalg.eigvalsh(A.gram())
            keep = ev > max(1e-10, len(A) * torch.finfo(ev.dtype).eps) * float(ev.max())
            cache["sigma_min_F"] = float(ev[keep].min()) ** 0.5
    return cache["sigma_min_F"]


def psi_inverse(y: np.ndarray, iterations: int = 80) -> np.ndarray:
    """The Δ >= 0 with ψ(Δ) = e^{-Δ} - 1 + Δ = y, for y >= 0 (elementwise).

    Newton's method from Δ_0 = 1 + y >= the root (ψ(Δ) >= Δ - 1): ψ is convex and increasing, so the iterates decrease
    monotonically to the root and stay above it (a safe side for a bound); ψ(Δ) by its series near 0 keeps small Δ
    accurate (the closed form 1 + y + W_0(-e^{-(1+y)}) loses it near the branch point).
    """
    y = np.asarray(y, dtype=np.float64)
    D = 1.0 + y
    for _ in range(iterations):
        slope = -np.expm1(-D)
        D = np.where(slope > 0, D - (_psi(D) - y) / np.where(slope > 0, slope, 1.0), 0.0)
    return np.maximum(D, 0.0)


def _psi(D: np.ndarray) -> np.ndarray:
    """ψ(Δ) = Δ + expm1(-Δ), by its Taylor series below 1e-3 (where the two terms cancel)."""
    series = D * D * (0.5 - D * (1 / 6 - D * (1 / 24 - D / 120)))
    return np.where(D < 1e-3, series, D + np.expm1(-np.maximum(D, 1e-3)))


def f_error_bound(W: torch.Tensor, data: NTPData) -> np.ndarray | None:
    """The bound (B1)-(B2) on ||P_F(W) - W*|| for W (..., V, d), from the per-context KL terms; None where it does not
    apply (one-hot supports: F = {0}; too many rows). Valid for NTP_H-compatible data.

    >>> from ntpbias.data.synthetic import random_ntp
    >>> from ntpbias.geometry.linear.subspace import subspace
    >>> data = random_ntp(m=6, d=8, V=4, support_size=2, seed=0)
    >>> F = subspace(data)
    >>> W = F.W_star + 0.01 * torch.randn(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    >>> err = float(torch.linalg.vector_norm(F.project(W) - F.W_star))
    >>> bool(err <= f_error_bound(W, data))
    True
    """
    sigma = sigma_min_F(data)
    if sigma is None:
        return None
    S = data.support
    P = torch.where(S, data.P, torch.full_like(data.P, float("inf")))
    two = P.topk(2, dim=1, largest=False).values  # the two smallest in-support probabilities (inf if |S_j| = 1)
    c = to_numpy(1 / (1 / two[:, 0] + 1 / two[:, 1]))  # (m,), 0 where |S_j| = 1
    kl = np.clip(to_numpy(context_excess(W, data)), 0, None)  # (..., m)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(c > 0, psi_inverse(kl / np.where(c > 0, c, 1)), 0.0)
    rows = to_numpy(data.support_sizes - 1).astype(np.float64)  # equality rows per context
    return np.sqrt((rows * spread ** 2).sum(-1)) / sigma
