"""Cross-entropy of a linear next-token predictor in distinct-context form (docs/paper-a-linear-ntp.md#objects).

All functions take W with optional leading batch dimensions, W: (..., V, d), and return one value per
batch entry; logits are ``L = H W^T`` (..., m, V), computed with log-sum-exp.
"""

from __future__ import annotations

import torch

from ...data.ntp import NTPData
from ..scaling import data_scale


def logits(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """Logits (..., m, V): row j = W h̄_j."""
    return data.H @ W.mT


def log_probs(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """log S(W h̄_j) for every context, (..., m, V)."""
    return torch.log_softmax(logits(W, data), dim=-1)


def cross_entropy(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """CE(W) = -Σ_j π̂_j Σ_z p̂_{j,z} log S_z(W h̄_j), eq. (2) of paper A."""
    return -(data.pi * (data.P * log_probs(W, data)).sum(-1)).sum(-1)


def logit_cross_entropy_grad(L: torch.Tensor, data: NTPData) -> tuple[torch.Tensor, torch.Tensor]:
    """CE as a function of the logit matrix and its gradient G = ∇_L CE, no autograd.

    ``L`` (..., V, m) holds one column of logits per context (column j = ℓ_j); CE(L) = Σ_j π̂_j
    (logsumexp_z ℓ_{j,z} - Σ_z p̂_{j,z} ℓ_{j,z}) (eq. (2) of paper A with ℓ_j = W h̄_j) and G[z, j] = π̂_j (s_{j,z} -
    p̂_{j,z}) with s_j = softmax(ℓ_j). The softmax reductions run over the short V axis with contiguous m. Models
    whose logits are not W h̄_j (the log-bilinear model of docs/ufm.md) reuse this kernel.

    Returns (loss (...,), grad (..., V, m)).

    >>> import torch
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> loss, G = logit_cross_entropy_grad(torch.zeros(3, 2, dtype=torch.float64), data)
    >>> round(float(loss), 6), bool(G.sum(0).abs().max() < 1e-15)  # log 3; every column of G sums to 0
    (1.098612, True)
    """
    weighted = data._cache.get("pi_P_T")
    if weighted is None or weighted.dtype != L.dtype or weighted.device != L.device:
        weighted = data._cache["pi_P_T"] = (data.P * data.pi[:, None]).T.contiguous().to(L)  # (V, m): π̂_j p̂_{j,z}
    pi = data.pi.to(L)
    top = L.amax(-2, keepdim=True)
    E = torch.exp(L - top)
    Z = E.sum(-2, keepdim=True)
    lse = (torch.log(Z) + top).squeeze(-2)  # (..., m)
    loss = (pi * lse).sum(-1) - (weighted * L).sum((-2, -1))
    return loss, E * (pi / Z) - weighted  # π̂_j (s_j - p̂_j), (..., V, m)


def cross_entropy_grad(W: torch.Tensor, data: NTPData) -> tuple[torch.Tensor, torch.Tensor]:
    """CE(W) and its closed-form gradient ∇CE(W) = Σ_j π̂_j (S(W h̄_j) - p̂_j) h̄_j^T
    (docs/paper-a-linear-ntp.md#objects, item 2), no autograd.

    The hot path of training: all runs' logits come from one matrix product (W as (B V, d)) in a (B, V, m)
    layout (:func:`logit_cross_entropy_grad`), and the gradient is one more product with H.

    Returns (loss (...,), grad (..., V, d)).
    """
    *batch, V, d = W.shape
    m = data.m
    L = (W.reshape(-1, d) @ data.H.T).view(*batch, V, m)
    loss, residual = logit_cross_entropy_grad(L, data)
    return loss, (residual.reshape(-1, m) @ data.H).view(*batch, V, d)


def kl_terms(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """Per-context KL(p̂_j || S(W h̄_j)), (..., m); CE = H + Σ_j π̂_j KL_j (eq. (26) of paper A)."""
    logp = log_probs(W, data)
    return (torch.special.xlogy(data.P, data.P) - data.P * logp).sum(-1)


def cross_entropy_F(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """CE_F(W) = Σ_j π̂_j Σ_{z∈S_j} p̂_{j,z} log(1 + Σ_{z'∈S_j, z'≠z} e^{-(ℓ_z - ℓ_z')}) (eq. (12), corrected sum).

    The cross-entropy of the softmax restricted to each support; CE(W) >= CE_F(W) and CE_F(W*) = H.
    """
    L = logits(W, data).masked_fill(~data.support, float("-inf"))
    logp = torch.log_softmax(L, dim=-1).masked_fill(~data.support, 0.0)
    return -(data.pi * (data.P * logp).sum(-1)).sum(-1)


def per_sample_cross_entropy(W: torch.Tensor, H_samples: torch.Tensor, next_tokens: torch.Tensor) -> torch.Tensor:
    """(1/n) Σ_i -log S_{z_i}(W h(x_i)) over raw samples: the reference the distinct-context form must equal."""
    logp = torch.log_softmax(H_samples @ W.mT, dim=-1)
    return -logp.gather(-1, next_tokens[:, None]).mean()


def smoothness_bound(data: NTPData) -> float:
    """L <= (1/2) λ_max(Σ_j π̂_j h̄_j h̄_j^T): a smoothness constant of CE; GD with η <= 1/(2L)
    descends (docs/paper-a-linear-ntp.md#objects, item 3)."""
    s = data_scale(data.H)  # at unit scale: H H^T neither over- nor underflows (geometry.scaling); L scales as s²
    H = data.H / s
    cov = (H * data.pi[:, None]).T @ H
    return 0.5 * float(torch.linalg.eigvalsh(cov).max()) * s * s
