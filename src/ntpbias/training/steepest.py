"""Steepest-descent directions in the norms of :mod:`ntpbias.geometry.norms`, batched over runs (docs/optimizers.md).

For a gradient G the normalized steepest-descent direction in a norm is a maximizer of <G, D> over ||D|| <= 1; it
attains the dual norm, <G, D> = ||G||_*, with ||D|| = 1 (the update is W <- W - η D):

============ ============================================================= ==================
norm         direction D                                                   <G, D> = ||G||_*
============ ============================================================= ==================
l2           G / ||G||_F                                                   ||G||_F
linf         sign(G) (sign descent)                                        Σ |G_vc| (l1)
l1           sign(G_vc) e_v e_c^T at the largest |G_vc| (shared by ties)   max |G_vc| (linf)
spectral     U_r V_r^T, the polar factor of G = U_r Σ_r V_r^T (rank r)      Σ σ_i (nuclear)
nuclear      u_1 v_1^T, the top singular pair                              σ_1 (spectral)
============ ============================================================= ==================

Parameters are dicts ``name -> (B, ...)`` batched over runs; a run's parameters are one vector for the entrywise norms
(l2, linf, l1) and a list of matrices for spectral (the norm max_i ||W_i||_2, whose steepest direction is the polar
factor of every block) and nuclear (Σ_i ||W_i||_*: the top singular pair of the block with the largest σ_1). A vector
parameter (B, n) counts as one row (1, n). The polar factor is exact by SVD (singular values below max(r, c) ε σ_1
count as zero, so a rank-deficient gradient, e.g. the linear NTP gradient whose rows sum to zero, gets the
minimum-Frobenius-norm maximizer U_r V_r^T), or approximate by Newton-Schulz iterations on X_0 = G/||G||_F: the cubic
X <- (3 X - X X^T X)/2, which converges to U_r V_r^T (zero singular values stay zero), or Muon's quintic
X <- a X + (b A + c A^2) X with A = X X^T and (a, b, c) = (3.4445, -4.7750, 2.0315), which maps every singular value
into about [0.7, 1.2] in 5 steps (Jordan et al. 2024).
"""

from __future__ import annotations

import torch

from .config import POLAR_METHODS

#: Newton-Schulz steps when not given: enough for the cubic iteration to reach singular values 1e-3 σ_1 exactly;
#: Muon's 5 for the quintic.
DEFAULT_NS_STEPS = {"newton_schulz": 40, "quintic": 5}
QUINTIC = (3.4445, -4.7750, 2.0315)


def _matrix(t: torch.Tensor) -> torch.Tensor:
    """A (B, ...) parameter as a batch of matrices (B, r, c)."""
    if t.ndim == 2:
        return t[:, None, :]
    if t.ndim == 3:
        return t
    raise ValueError("the spectral and nuclear directions need matrix parameters (B, r, c); got shape "
                     f"{tuple(t.shape)}")


def polar(G: torch.Tensor, method: str = "svd", steps: int | None = None) -> torch.Tensor:
    """The polar factor U_r V_r^T of each matrix of G (..., r, c) (module docstring); zero for a zero matrix.

    >>> G = torch.tensor([[[3.0, 0.0], [0.0, -2.0]]], dtype=torch.float64)
    >>> polar(G).tolist(), polar(G, "newton_schulz").round(decimals=12).tolist()
    ([[[1.0, 0.0], [0.0, -1.0]]], [[[1.0, 0.0], [0.0, -1.0]]])
    """
    if method == "svd":
        U, S, Vh = torch.linalg.svd(G, full_matrices=False)
        tol = max(G.shape[-2:]) * torch.finfo(G.dtype).eps * S[..., :1]
        keep = (S > tol).to(G.dtype)
        return (U * keep[..., None, :]) @ Vh
    if method not in DEFAULT_NS_STEPS:
        raise ValueError(f"unknown polar method {method!r}; choose one of {', '.join(POLAR_METHODS)}")
    steps = DEFAULT_NS_STEPS[method] if not steps else steps
    wide = G.shape[-2] <= G.shape[-1]
    X = G if wide else G.mT  # iterate on the short side: A = X X^T is (min, min)
    scale = torch.linalg.vector_norm(X, dim=(-2, -1), keepdim=True)
    X = X / torch.where(scale > 0, scale, torch.ones_like(scale))
    a, b, c = (1.5, -0.5, 0.0) if method == "newton_schulz" else QUINTIC
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * (A @ A)) @ X
    return X if wide else X.mT


def _per_run(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1)


def _expand(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape(-1, *([1] * (like.ndim - 1)))


def steepest_direction(grads: dict[str, torch.Tensor], norm: str, *, polar_method: str = "svd",
                       ns_steps: int | None = None) -> dict[str, torch.Tensor]:
    """The unit-norm steepest-descent direction of each run in ``norm`` (module docstring), same shapes as ``grads``.

    A run whose gradient is zero gets a zero direction.

    >>> g = {"W": torch.tensor([[[1.0, -3.0], [3.0, 0.5]]], dtype=torch.float64)}
    >>> steepest_direction(g, "l1")["W"].tolist()  # the two largest entries tie
    [[[0.0, -0.5], [0.5, 0.0]]]
    >>> steepest_direction(g, "linf")["W"].tolist()
    [[[1.0, -1.0], [1.0, 1.0]]]
    """
    names = list(grads)
    if norm == "l2":
        total = sum(_per_run(g).pow(2).sum(1) for g in grads.values()).sqrt()
        inv = torch.where(total > 0, 1 / torch.where(total > 0, total, 1), 0)
        return {k: g * _expand(inv, g) for k, g in grads.items()}
    if norm == "linf":
        return {k: torch.sign(g) for k, g in grads.items()}
    if norm == "l1":
        top = torch.stack([_per_run(g).abs().amax(1) for g in grads.values()]).amax(0)  # (B,)
        masks = {k: (g.abs() == _expand(top, g)) & (_expand(top, g) > 0) for k, g in grads.items()}
        count = sum(_per_run(m).sum(1) for m in masks.values()).clamp(min=1).to(top.dtype)
        return {k: torch.sign(g) * masks[k] / _expand(count, g) for k, g in grads.items()}
    if norm == "spectral":
        return {k: polar(_matrix(g), polar_method, ns_steps).reshape(g.shape) for k, g in grads.items()}
    if norm == "nuclear":
        tops = []
        for k in names:
            U, S, Vh = torch.linalg.svd(_matrix(grads[k]), full_matrices=False)
            tops.append((S[:, 0], U[:, :, 0], Vh[:, 0, :]))
        sigma = torch.stack([s for s, _, _ in tops])  # (n_params, B)
        best = sigma.argmax(0)
        out = {}
        for i, k in enumerate(names):
            s, u, v = tops[i]
            chosen = ((best == i) & (s > 0)).to(s.dtype)
            out[k] = (chosen[:, None, None] * u[:, :, None] * v[:, None, :]).reshape(grads[k].shape)
        return out
    raise ValueError(f"unknown norm {norm!r}")
