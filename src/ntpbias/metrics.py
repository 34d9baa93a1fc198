"""One vocabulary of implicit-bias metrics, shared by the three papers.

Every metric is a function of a batch of parameters (leading dimension = runs) returning one value per run.
:data:`DEFINITIONS` documents each name once; reports, CSV columns and the README use these names.
"""

from __future__ import annotations

import torch

from .data.ntp import NTPData
from .geometry.loss import cross_entropy, cross_entropy_grad
from .geometry.subspace import DataSubspace
from .geometry.svm import ntp_margin

#: name -> definition (the columns of metrics.csv).
DEFINITIONS: dict[str, str] = {
    "loss": "training loss at the iterate (CE for NTP, logistic for classification)",
    "loss_gap": "CE(W_k) - H: excess over the entropy floor (-> 0, Lemma 2 of paper A)",
    "grad_norm": "||∇L(W_k)||: Frobenius norm of the full gradient",
    "norm": "||W_k||: parameter norm (-> ∞ for separable data)",
    "cos_mm": "<W_k, W^mm> / (||W_k|| ||W^mm||): alignment with the max-margin direction",
    "cos_mm_corrected": "<W_k - W*, W^mm> / (||W_k - W*|| ||W^mm||): alignment after removing the finite part",
    "F_error": "||P_F(W_k) - W*||: distance of the F-component to the finite solution W* (-> 0, Thm 2 of paper A)",
    "F_error_rel": "||P_F(W_k) - W*|| / ||W*||",
    "F_norm": "||P_F(W_k)|| (bounded, -> ||W*||)",
    "perp_norm": "||P_⊥(W_k)|| (-> ∞)",
    "margin_perp": "γ(P_⊥ W_k) ||W^mm|| / ||P_⊥ W_k||: normalized NTP margin of the F^⊥ part relative to the "
                   "maximum 1/||W^mm|| (-> 1)",
    "key_lemma": "1 if CE(P_F W_k + (1+α)||P_⊥ W_k|| W^mm/||W^mm||) <= CE(W_k) (eq. (14) of paper A, α = 0.5), else 0",
}


def frobenius(A: torch.Tensor) -> torch.Tensor:
    """Per-run Frobenius norm of A (B, ...): (B,)."""
    return torch.linalg.vector_norm(A.reshape(A.shape[0], -1), dim=1)


def cosine(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Per-run cosine <A, B> / (||A|| ||B||) for A (R, ...) and B broadcastable to it: (R,)."""
    B = B.expand_as(A)
    num = (A * B).reshape(A.shape[0], -1).sum(1)
    return num / (frobenius(A) * frobenius(B)).clamp_min(torch.finfo(A.dtype).tiny)


def linear_ntp_metrics(W: torch.Tensor, data: NTPData, F: DataSubspace, W_mm: torch.Tensor | None, *,
                       alpha: float = 0.5) -> dict[str, torch.Tensor]:
    """Every metric of :data:`DEFINITIONS` for linear NTP iterates W (B, V, d).

    ``W_mm`` may be None (non-separable data): the max-margin metrics are then omitted.
    """
    H = data.entropy
    loss, grad = cross_entropy_grad(W, data)
    W_F = F.project(W)
    W_perp = W - W_F
    out = {
        "loss": loss,
        "loss_gap": loss - H,
        "grad_norm": frobenius(grad),
        "norm": frobenius(W),
        "F_error": frobenius(W_F - F.W_star),
        "F_error_rel": frobenius(W_F - F.W_star) / max(F.norm_W_star, torch.finfo(W.dtype).tiny),
        "F_norm": frobenius(W_F),
        "perp_norm": frobenius(W_perp),
    }
    if W_mm is not None:
        mm_norm = float(torch.linalg.vector_norm(W_mm))
        perp_norm = out["perp_norm"]
        out["cos_mm"] = cosine(W, W_mm[None])
        out["cos_mm_corrected"] = cosine(W - F.W_star, W_mm[None])
        out["margin_perp"] = ntp_margin(W_perp, data) * mm_norm / perp_norm
        genie = W_F + ((1 + alpha) * perp_norm / mm_norm)[:, None, None] * W_mm
        out["key_lemma"] = (cross_entropy(genie, data) <= loss).to(W.dtype)
    return out
