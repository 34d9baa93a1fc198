"""CE(W) - H and ∇CE(W) without cancellation, for training far into the separable regime
(docs/optimizers.md#numerics-training-far-into-the-separable-regime).

:func:`~ntpbias.geometry.linear.loss.cross_entropy_grad` computes CE and the residual S(W h̄_j) - p̂_j directly; once the
probability mass off the supports falls below float64's resolution (about 1e-16, logit gaps of about 37) the loss
gap CE - H rounds to zero and the in-support residuals lose the part that drives the margin. Normalized and
adaptive optimizers (sign descent, Muon, Adam) reach that regime within a few thousand steps. Here, per context j,
with q_j the softmax restricted to S_j, ρ_j the softmax mass off S_j and
u_j = log(Σ_{v∉S_j} e^{ℓ_v} / Σ_{z∈S_j} e^{ℓ_z}):

* CE - H = Σ_j π̂_j [KL(p̂_j || q_j) + softplus(u_j)], with KL(p || q) = Σ_z p_z (expm1(t_z) - t_z),
  t_z = log q_z - log p_z (Σ_z p_z e^{t_z} = 1);
* S_z - p̂_z = p̂_z expm1(t_z) - ρ_j q_z on S_j, and S_v = e^{ℓ_v - log Σ_{z∈S_j} e^{ℓ_z} - softplus(u_j)} off it,
  ρ_j = sigmoid(u_j).

Both are exact rewritings of eq. (2) of paper A and its gradient (docs/paper-a-linear-ntp.md#objects, item 2); the
one-hot case (|S_j| = 1, t = 0) stays accurate until e^{-gap} underflows (gaps of about 745). With |S_j| > 1 the
in-support log-odds are resolved only to the logits' absolute precision (about 1e-16 |ℓ|), an inherent floor of float64
NTP training.
"""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from ...data.ntp import NTPData


def context_excess(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """KL(p̂_j || S(W h̄_j)) = KL(p̂_j || q_j) + softplus(u_j) per context, (..., m), without cancellation."""
    return _terms(W, data)[0]


def excess_loss_grad(W: torch.Tensor, data: NTPData) -> tuple[torch.Tensor, torch.Tensor]:
    """(CE(W) - H (...,), ∇CE(W) (..., V, d)) for W (..., V, d), computed without cancellation (module docstring).

    >>> from ntpbias.data.synthetic import random_ntp
    >>> from ntpbias.geometry.linear.loss import cross_entropy_grad
    >>> data = random_ntp(m=5, d=4, V=3, support_size=2, seed=0)
    >>> W = torch.randn(2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> gap, grad = excess_loss_grad(W, data)
    >>> loss, ref = cross_entropy_grad(W, data)
    >>> bool(torch.allclose(gap, loss - data.entropy)), bool(torch.allclose(grad, ref))
    (True, True)
    """
    kl, residual = _terms(W, data, residual=True)
    excess = (data.pi * kl).sum(-1)
    grad = (residual * data.pi[:, None]).mT @ data.H  # (..., V, d)
    return excess, grad


def _constants(data: NTPData, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """(0/-inf masks of the supports and of their complements, log p̂ (0 off the supports), 1 on the supports) as
    (m, V) tensors of ``dtype``, cached on ``data``."""
    key = f"excess_constants:{dtype}"
    if key not in data._cache:
        S = data.support
        zero = torch.zeros(S.shape, dtype=dtype, device=S.device)
        neg = torch.full(S.shape, float("-inf"), dtype=dtype, device=S.device)
        logP = torch.log(torch.where(S, data.P, torch.ones_like(data.P))).to(dtype)
        data._cache[key] = (torch.where(S, zero, neg), torch.where(S, neg, zero), logP, S.to(dtype))
    return data._cache[key]


def _terms(W: torch.Tensor, data: NTPData, residual: bool = False):
    """(per-context KL (..., m), residual S(W h̄_j) - p̂_j (..., m, V) or None)."""
    in_add, out_add, logP, Sf = _constants(data, W.dtype)
    L = data.H @ W.mT  # (..., m, V)
    lse_in = (L + in_add).logsumexp(-1, keepdim=True)  # (..., m, 1)
    u = (L + out_add).logsumexp(-1, keepdim=True) - lse_in  # -inf for a context with full support
    t = (L - lse_in - logP) * Sf  # log q_z - log p_z on S_j, 0 off it
    em = torch.expm1(t)
    soft = nnf.softplus(u)
    kl = (data.P * (em - t)).sum(-1) + soft.squeeze(-1)  # (..., m)
    if not residual:
        return kl, None
    base = torch.exp(L - lse_in - (1 - Sf) * soft)  # q_z on S_j, S_v = the softmax off it (both <= 1)
    return kl, base * ((1 - Sf) - torch.sigmoid(u) * Sf) + data.P * em
