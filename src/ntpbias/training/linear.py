"""Training a linear next-token predictor W (V x d) on fixed context embeddings (Sec. 5 and App. A of paper A).

The step uses the closed-form gradient ∇CE(W) = Σ_j π̂_j (S(W h̄_j) - p̂_j) h̄_j^T (no autograd graph), batched
over seeds. Stochastic gradients (SGD, footnote 8 of paper A) sample either distinct contexts j ~ π̂ or raw
samples (j, z) ~ π̂_j p̂_{j,z}; both are unbiased for ∇CE.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.ntp import NTPData
from ..geometry.linear.loss import cross_entropy_grad
from ..geometry.linear.subspace import DataSubspace, subspace
from ..metrics import linear_ntp_metrics
from .init import lecun

SAMPLING = ("contexts", "samples")


@dataclass(frozen=True, eq=False)
class LinearReference:
    """What linear iterates are measured against: F (with W*) and W^mm (None if not separable)."""

    F: DataSubspace
    W_mm: torch.Tensor | None


class LinearNTPProblem:
    """CE of a linear decoder on NTP data, for :class:`~ntpbias.training.loop.Trainer`.

    Parameters
    ----------
    data : NTPData
    reference : LinearReference, optional
        W* / W^mm for the metrics (computed lazily from ``data`` when omitted, W^mm via :func:`ntp_svm`).
    init : "lecun_normal" | "lecun_uniform" | "zeros"
    batch_size : 0 for full-batch gradients, else the minibatch size of SGD
    sample_over : "contexts" (j ~ π̂) or "samples" ((j, z) ~ π̂_j p̂_{j,z}) for SGD
    """

    def __init__(self, data: NTPData, reference: LinearReference, *, init: str = "lecun_normal",
                 batch_size: int = 0, sample_over: str = "contexts"):
        if sample_over not in SAMPLING:
            raise ValueError(f"sample_over must be one of {SAMPLING}, got {sample_over!r}")
        self.data = data
        self.reference = reference
        self.init = init
        self.batch_size = batch_size
        self.sample_over = sample_over
        self.loss_floor = data.entropy

    @classmethod
    def reference_for(cls, data: NTPData, *, solver: str = "auto") -> LinearReference:
        """Compute F, W* and (when separable) W^mm for ``data``."""
        from ..geometry.margins.program import ntp_svm
        from ..geometry.separability.verdict import ntp_separability

        W_mm = ntp_svm(data, solver).W if ntp_separability(data).separable else None
        return LinearReference(F=subspace(data), W_mm=W_mm)

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        W = lecun((self.data.V, self.data.d), seeds, scheme=self.init, dtype=self.data.H.dtype,
                  device=self.data.H.device)
        return {"W": W}

    def loss_and_grad(self, params, step, generators):
        W = params["W"]
        if not self.batch_size:
            loss, grad = cross_entropy_grad(W, self.data)
            return loss, {"W": grad}
        return self._stochastic(W, generators)

    def _stochastic(self, W: torch.Tensor, generators: list[torch.Generator]):
        """Minibatch gradient (unbiased for ∇CE) and the full loss of the current iterate."""
        data = self.data
        weights = data.pi if self.sample_over == "contexts" else (data.pi[:, None] * data.P).reshape(-1)
        idx = torch.stack([torch.multinomial(weights.cpu(), self.batch_size, replacement=True, generator=g)
                           for g in generators]).to(W.device)  # (B, b); one draw per run
        if self.sample_over == "contexts":
            ctx, target = idx, data.P[idx]  # (B, b), (B, b, V)
        else:
            ctx = idx // data.V
            target = torch.nn.functional.one_hot(idx % data.V, data.V).to(W.dtype)
        H = data.H[ctx]  # (B, b, d)
        probs = torch.softmax(H @ W.mT, dim=-1)
        grad = (probs - target).mT @ H / self.batch_size
        loss, _ = cross_entropy_grad(W, data)
        return loss, {"W": grad}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        return linear_ntp_metrics(params["W"], self.data, self.reference.F, self.reference.W_mm)
