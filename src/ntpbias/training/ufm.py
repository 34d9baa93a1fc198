"""Training the log-bilinear model (W, H) jointly on NTP data (docs/ufm.md#training).

:class:`UFMProblem` is a :class:`~ntpbias.training.loop.Problem`: the parameters are the word embeddings W (B, V, d)
and one embedding per distinct context H (B, m, d), batched over seeds B, from a small random initialisation
N(0, init_scale²); the loss is CE(W H^T) + (λ/2)(||W||² + ||H||²) at a fixed λ >= 0 with the closed-form gradient of
:func:`~ntpbias.geometry.ufm.logits.ufm_loss_grad`. Every optimizer of the engine (GD, normalized GD, Adam, AdamW) and
SGD-free full-batch training apply unchanged.

The logged metrics compare the logits and Gram matrices of the iterates with the logit-space predictions (the finite
part L*, the nuclear-norm NTP-SVM L^mm, the SVD of the centred support matrix): never raw coordinates, which are
defined only up to a rotation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.ntp import NTPData
from ..geometry.margins.result import SVMResult
from ..geometry.ufm.logit_svm import nuclear_svm
from ..geometry.ufm.logits import (
    SupportSVD,
    collapse,
    gram_alignment,
    logit_decomposition,
    mode_strengths,
    optimality_certificate,
    predicted_grams,
    subspace_collapse,
    support_groups,
    support_svd,
    ufm_logits,
    ufm_loss_grad,
)

#: modes of the order-of-learning analysis logged as ``mode_<i>`` (the leading singular pairs)
MAX_MODES = 12


@dataclass(frozen=True, eq=False)
class UFMReference:
    """What the iterates are measured against (docs/ufm.md#predicted-geometry).

    Attributes
    ----------
    svm : the certified nuclear-norm NTP-SVM L^mm; ``mm_U`` (V, r): its left singular vectors (the support-pattern
        word subspace of :func:`~ntpbias.geometry.ufm.logits.subspace_collapse`)
    support : the SVD of the centred support matrix S̃
    groups : (m,) the support set of each context
    word_gram, context_gram : the predicted Gram directions (L^mm L^mm^T)^{1/2} and (L^mm^T L^mm)^{1/2}
    D0_U, D0_sigma, D0_Vt : the leading singular pairs of D0 = -∇CE(0), the directions small-initialisation training
        grows first (U-6), at most :data:`MAX_MODES`
    L_opt : (V, m) the optimum at the training λ when known (for ``dist_opt``), else None
    """

    svm: SVMResult
    support: SupportSVD
    groups: torch.Tensor
    word_gram: torch.Tensor
    context_gram: torch.Tensor
    mm_U: torch.Tensor
    D0_U: torch.Tensor
    D0_sigma: torch.Tensor
    D0_Vt: torch.Tensor
    L_opt: torch.Tensor | None = None

    @classmethod
    def of(cls, data: NTPData, *, solver: str = "auto", svm: SVMResult | None = None) -> UFMReference:
        from ..geometry.linear.loss import logit_cross_entropy_grad

        svm = svm if svm is not None else nuclear_svm(data, solver)
        word, context = predicted_grams(svm.L)
        groups, _ = support_groups(data)
        _, G0 = logit_cross_entropy_grad(torch.zeros(data.V, data.m, dtype=data.P.dtype), data)
        U, s, Vt = torch.linalg.svd(-G0, full_matrices=False)
        r = min(int((s > 1e-9 * s[0]).sum()), MAX_MODES)
        Um = torch.linalg.svd(svm.L, full_matrices=False)[0][:, :max(svm.rank, 1)]
        return cls(svm, support_svd(data), groups, word, context, Um, U[:, :r], s[:r], Vt[:r])


def ufm_metrics(W: torch.Tensor, H: torch.Tensor, data: NTPData, lam: float, ref: UFMReference
                ) -> dict[str, torch.Tensor]:
    """Every logged quantity of the log-bilinear model for iterates W (B, V, d), H (B, m, d): each (B,).

    Names (``ntpbias.metrics.DEFINITIONS``): ``loss`` (CE), ``objective``, ``loss_gap``, ``F_error_rel``,
    ``cos_perp_mm``, ``cos_mm``, ``perp_norm``, ``logit_norm``, ``nuclear``, ``cos_word_gram``, ``cos_context_gram``,
    ``cos_word_gram_S``, ``cos_context_gram_S`` (against the SVD of S̃), ``within_angle``, ``between_angle``,
    ``collapse_ratio``, their ``sub_`` versions (support-pattern subspace), ``balance``, ``dist_opt`` (when the
    optimum is known), ``mode_<i>`` (strength of D0's i-th singular pair in the logits) and ``smode_<i>`` (of S̃'s).
    """
    f, ce, _ = ufm_loss_grad(W, H, data, lam)
    L = ufm_logits(W, H)
    out = {"loss": ce, "objective": f, "loss_gap": ce - data.entropy}
    out.update(logit_decomposition(L, data, ref.svm.L))
    out.update(gram_alignment(W, H, ref.word_gram, ref.context_gram))
    s = ref.support
    if s.rank:
        S_grams = gram_alignment(W, H, (s.U * s.sigma) @ s.U.mT, (s.Vt.mT * s.sigma) @ s.Vt)
        out.update({f"{k}_S": v for k, v in S_grams.items()})
    out.update(collapse(H, ref.groups))
    out.update(subspace_collapse(W, H, ref.groups, ref.mm_U))
    WtW, HtH = W.mT @ W, H.mT @ H
    out["balance"] = torch.linalg.matrix_norm(WtW - HtH) / torch.linalg.matrix_norm(WtW).clamp_min(1e-300)
    if ref.L_opt is not None:
        out["dist_opt"] = torch.linalg.matrix_norm(L - ref.L_opt.to(L)) / torch.linalg.matrix_norm(ref.L_opt)
    strengths = mode_strengths(L, ref.D0_U, ref.D0_Vt)
    out.update({f"mode_{i}": strengths[..., i] for i in range(strengths.shape[-1])})
    if s.rank:
        strengths = mode_strengths(L, s.U, s.Vt)
        out.update({f"smode_{i}": strengths[..., i] for i in range(min(strengths.shape[-1], MAX_MODES))})
    return out


class UFMProblem:
    """CE of the log-bilinear model plus the ridge (λ/2)(||W||² + ||H||²), for the :class:`~ntpbias.training.loop.
    Trainer`.

    Parameters
    ----------
    data : NTPData (its H is ignored: every context gets a trainable embedding)
    reference : UFMReference
    d : embedding dimension (d >= min(V, m) lets the model represent every logit matrix)
    lam : ridge strength λ >= 0
    init_scale : standard deviation of the Gaussian initialisation of W and H
    """

    def __init__(self, data: NTPData, reference: UFMReference, *, d: int, lam: float, init_scale: float = 1e-3):
        if d < 1 or lam < 0 or init_scale < 0:
            raise ValueError(f"need d >= 1, lam >= 0, init_scale >= 0; got d={d}, lam={lam}, init_scale={init_scale}")
        self.data, self.reference, self.d, self.lam, self.init_scale = data, reference, d, lam, init_scale
        self.loss_floor = data.entropy

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        """W (B, V, d) and H (B, m, d) ~ N(0, init_scale²), each run from its own seed."""
        return init_embeddings(self.data, seeds, self.d, self.init_scale)

    def loss_and_grad(self, params, step, generators):
        f, _, grads = ufm_loss_grad(params["W"], params["H"], self.data, self.lam)
        return f, grads

    def metrics(self, params) -> dict[str, torch.Tensor]:
        out = ufm_metrics(params["W"], params["H"], self.data, self.lam, self.reference)
        if self.lam > 0:
            cert = optimality_certificate(params["W"], params["H"], self.data, self.lam)
            out.update({"grad_rel": cert["grad_rel"], "op_ratio": cert["op_ratio"]})
        return out


def init_embeddings(data: NTPData, seeds: list[int], d: int, scale: float) -> dict[str, torch.Tensor]:
    """Small Gaussian W (B, V, d) and H (B, m, d); run b depends only on seeds[b] (two streams per seed)."""
    dtype, device = data.P.dtype, data.P.device
    Ws, Hs = [], []
    for seed in seeds:  # one generator per run, so batching never changes a run's numbers
        gen = torch.Generator().manual_seed(1_000_003 * seed + 7)
        Ws.append(torch.randn(data.V, d, generator=gen, dtype=torch.float64))
        Hs.append(torch.randn(data.m, d, generator=gen, dtype=torch.float64))
    return {"W": (scale * torch.stack(Ws)).to(dtype=dtype, device=device),
            "H": (scale * torch.stack(Hs)).to(dtype=dtype, device=device)}
