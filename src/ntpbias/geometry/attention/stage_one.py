"""Theory of paper B (one-layer attention with trained embeddings): model (1) and stage 1.

Model (1): f(X; p, E) = Σ_i q_i E_{x_i}^T v with q = softmax over the real positions of a_i = p^T E_{x_i}; loss (2):
L = Ê log(1 + exp(-y f)). Everything here is closed form on tensors ``E: (|S|, d)``, ``p: (d,)``, ``v: (d,)`` and a
:class:`~ntpbias.data.tokens.TokenSequences` (padding masked out of every softmax); it runs on the device of E.

* Loss and gradients in the stable weight form (Lemma A.1 of paper B; docs/paper-b-attention.md#objects and
#theory-checks, B-C3): :func:`readout`,
  :func:`loss_and_gradients`, :func:`loss_and_grad_p`.
* Stage 1 (eq. (4), Lemma 4.1): :func:`theory_init`, :func:`gd_step`, :func:`stage_one` -> :class:`StageOne`
  (error norms, the bound 11 η₀ d^{-1/4}, correlation and slope of <E¹_s - E⁰_s, v> against α_s);
  the initialisation event (22): :func:`init_event`.
* Stage 2 (token selection and the max-margin problem (12)): :mod:`ntpbias.geometry.attention.selection`.

Training p along the flow (9) (GD or normalized GD on the shared engine) lives in
:mod:`ntpbias.training.attention` (:func:`~ntpbias.training.attention.train_stage_two`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..._tensor import DEFAULT_DTYPE
from ...data.tokens import TokenSequences, token_statistics
from ...errors import DataError
from ...models.attention import readout_terms, theory_init
from ...stats import pearson

# ---------------------------------------------------------------------------------------------------------------
# Model (1): readout, loss, gradients
# ---------------------------------------------------------------------------------------------------------------


def _check(E: torch.Tensor, ds: TokenSequences) -> TokenSequences:
    if E.ndim != 2 or E.shape[0] < ds.num_tokens:
        raise DataError(f"the embedding matrix has shape {tuple(E.shape)} but the data use {ds.num_tokens} tokens; "
                        f"E must be (|S|, d) with |S| >= {ds.num_tokens}")
    return ds.to(E.device)


def _readout(z: torch.Tensor, u: torch.Tensor, ds: TokenSequences):
    """Attention q (n, T), stable weights w (n, T) and output f (n,) from token scores z = E p, u = E v.

    f is evaluated relative to r = u at the most attended position, and w_i = q_i (u_i - f) as
    q_i ((u_i - r) - Σ_j q_j (u_j - r)): at that position this is exactly q_i Σ_j q_j (u_i - u_j)
    (docs/paper-b-attention.md#theory-checks), free of the cancellation of u_i - f once q_i ≈ 1. Padded positions get q
    = w = 0.
    """
    a = z[ds.X].masked_fill(~ds.mask, -math.inf)
    q, centered, f = readout_terms(a, u[ds.X])
    return q, q * centered, f


def readout(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, ds: TokenSequences) -> torch.Tensor:
    """f(X; p, E) of eq. (1) for every sequence, (n,).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.tokens import TokenSequences
    >>> ds = TokenSequences.from_lists([[0, 1], [1]], [1, -1])
    >>> E = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> readout(E, torch.zeros(2, dtype=E.dtype), torch.tensor([2.0, -2.0], dtype=E.dtype), ds).tolist()
    [0.0, -2.0]
    """
    ds = _check(E, ds)
    return _readout(E @ p, E @ v, ds)[2]


def _loss_terms(E, p, v, ds):
    ds = _check(E, ds)
    q, w, f = _readout(E @ p, E @ v, ds)
    m = ds.y * f
    loss = torch.nn.functional.softplus(-m).mean()
    coef = (ds.y * torch.sigmoid(-m) / ds.n)[:, None]  # y g / n, with g = 1/(1 + exp(y f)) (eq. (21))
    return ds, loss, coef, q, w


def _scatter(ds: TokenSequences, values: torch.Tensor, size: int) -> torch.Tensor:
    """Σ over positions (k, i) with x_{k,i} = s of values[k, i], (size,) (padded positions carry 0)."""
    out = torch.zeros(size, dtype=values.dtype, device=values.device)
    return out.index_add_(0, ds.X.reshape(-1), values.reshape(-1))


@dataclass(frozen=True, eq=False)
class AttentionGradients:
    """Loss (2) and its gradients at (E, p) for fixed v. loss: scalar tensor; grad_E: (|S|, d); grad_p: (d,)."""

    loss: torch.Tensor
    grad_E: torch.Tensor
    grad_p: torch.Tensor


def loss_and_gradients(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, ds: TokenSequences) -> AttentionGradients:
    """Loss (2) and the closed-form gradients of Lemma A.1 in the stable form of docs/paper-b-attention.md#objects, no
    autograd.

    With w_{k,i} = q_{k,i} Σ_j q_{k,j} (u_{k,i} - u_{k,j}), u = E v, g_k = 1/(1 + exp(y_k f_k)) and
    c_{k,i} = y_k g_k w_{k,i} / n:

        ∇_p L = -Σ_{k,i} c_{k,i} E_{x_{k,i}},
        ∇_{E_s} L = -[Σ_{x_{k,i}=s} c_{k,i}] p - [Σ_{x_{k,i}=s} y_k g_k q_{k,i} / n] v.

    Every row of ∇_E L lies in span(p, v); ∇_p L lies in the row space of E.
    """
    ds, loss, coef, q, w = _loss_terms(E, p, v, ds)
    C = _scatter(ds, coef * w, E.shape[0])
    B = _scatter(ds, coef * q, E.shape[0])
    return AttentionGradients(loss=loss, grad_E=-(C[:, None] * p + B[:, None] * v), grad_p=-(C @ E))


def loss_and_grad_p(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor,
                    ds: TokenSequences) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss (2) and ∇_p L with E fixed (the stage-2 flow (9)); returns (loss, grad_p (d,))."""
    ds, loss, coef, _, w = _loss_terms(E, p, v, ds)
    return loss, -(_scatter(ds, coef * w, E.shape[0]) @ E)


# ---------------------------------------------------------------------------------------------------------------
# Stage 1: initialisation, one GD step, Lemma 4.1
# ---------------------------------------------------------------------------------------------------------------


def gd_step(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, ds: TokenSequences, *,
            eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One simultaneous full-batch gradient step on (E, p), eq. (4); returns (E¹, p¹)."""
    grads = loss_and_gradients(E, p, v, ds)
    return E - eta * grads.grad_E, p - eta * grads.grad_p


@dataclass(frozen=True, eq=False)
class StageOne:
    """One GD step from the theory initialisation and Lemma 4.1's comparison (eqs. (4), (6), (7)).

    Attributes
    ----------
    E0, E1 : (|S|, d); p0, p1, v : (d,); eta0 : step size; alpha : (|S|,) α_s of eq. (3);
    present : (|S|,) bool, tokens that occur; loss0, loss1 : loss (2) before and after the step.
    """

    E0: torch.Tensor
    p0: torch.Tensor
    v: torch.Tensor
    E1: torch.Tensor
    p1: torch.Tensor
    eta0: float
    alpha: torch.Tensor
    present: torch.Tensor
    loss0: float
    loss1: float

    @property
    def d(self) -> int:
        return self.E0.shape[1]

    @property
    def err_E(self) -> torch.Tensor:
        """(|S|, d) err_s = E¹_s - E⁰_s - (η₀/2) α_s v, eq. (6)."""
        return self.E1 - self.E0 - 0.5 * self.eta0 * self.alpha[:, None] * self.v

    @property
    def err_p(self) -> torch.Tensor:
        """(d,) err_p = p¹ - p⁰."""
        return self.p1 - self.p0

    @property
    def max_error(self) -> float:
        """max{max_s ||err_s||, ||err_p||}, the left side of (7)."""
        return max(float(torch.linalg.vector_norm(self.err_E, dim=1).max()),
                   float(torch.linalg.vector_norm(self.err_p)))

    @property
    def bound(self) -> float:
        """11 η₀ d^{-1/4}, the right side of (7)."""
        return 11 * self.eta0 * self.d ** -0.25

    @property
    def within_bound(self) -> bool:
        return self.max_error <= self.bound

    def _shift(self) -> tuple[torch.Tensor, torch.Tensor]:
        dv = ((self.E1 - self.E0) @ self.v)[self.present]
        return self.alpha[self.present], dv

    @property
    def correlation(self) -> float:
        """Pearson correlation of <E¹_s - E⁰_s, v> with α_s over present tokens (Lemma 4.1 predicts 1)."""
        x, y = self._shift()
        return float(pearson(x, y))

    @property
    def slope_ratio(self) -> float:
        """Least-squares slope of <E¹_s - E⁰_s, v> on α_s divided by η₀/2 (Lemma 4.1 predicts 1)."""
        x, y = self._shift()
        xc = x - x.mean()
        return float((xc * (y - y.mean())).sum() / (xc * xc).sum()) / (0.5 * self.eta0)

    def predicted_margins(self, ds: TokenSequences) -> torch.Tensor:
        """(n,) leading-order y f(X; E¹, p¹) ≈ (η₀/2) y · mean_i α_{x_i} (Lemma B.2,
        docs/paper-b-attention.md#theory-checks)."""
        ds = ds.to(self.alpha.device)
        a = torch.where(ds.mask, self.alpha[ds.X], 0.0).sum(1) / ds.lengths
        return 0.5 * self.eta0 * ds.y * a


def stage_one(ds: TokenSequences, *, d: int, eta0: float, seed: int = 0, dtype: torch.dtype = DEFAULT_DTYPE,
              device=None) -> StageOne:
    """Draw (E⁰, p⁰, v) by :func:`theory_init` and take one GD step of size η₀ (eq. (4)).

    Examples
    --------
    >>> from ntpbias.data.tokens import sample_assumption1
    >>> st = stage_one(sample_assumption1(seed=0), d=256, eta0=1.0)
    >>> st.within_bound, st.correlation > 0.99
    (True, True)
    """
    E0, p0, v = theory_init(ds.num_tokens, d, seed=seed, dtype=dtype, device=device)
    g = loss_and_gradients(E0, p0, v, ds)
    E1, p1 = E0 - eta0 * g.grad_E, p0 - eta0 * g.grad_p
    stats = token_statistics(ds)
    loss1 = loss_and_grad_p(E1, p1, v, ds)[0]
    return StageOne(E0=E0, p0=p0, v=v, E1=E1, p1=p1, eta0=float(eta0), alpha=stats.alpha.to(E0),
                    present=stats.present.to(E0.device), loss0=float(g.loss), loss1=float(loss1))


@dataclass(frozen=True)
class InitEvent:
    """The initialisation event (22): overlaps and norms of (E⁰, p⁰, v) against their bounds."""

    max_overlap_EE: float  # max_{s≠s'} |E_s^T E_s'|
    max_overlap_Ev: float  # max_s |E_s^T v|
    max_overlap_Ep: float  # max_s |E_s^T p|
    overlap_pv: float  # |p^T v|
    max_norm: float  # max{max_s ||E_s||, ||p||}
    min_norm: float  # min_s ||E_s||
    bound: float  # sqrt(2 log(|S|²/δ) / d)

    @property
    def holds(self) -> bool:
        over = max(self.max_overlap_EE, self.max_overlap_Ev, self.max_overlap_Ep, self.overlap_pv)
        return over <= self.bound and self.max_norm <= 2 and self.min_norm >= 0.5


def init_event(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, *, delta: float) -> InitEvent:
    """Evaluate the event (22) at (E, p, v) with failure probability δ."""
    S, d = E.shape
    G = E @ E.T
    G.fill_diagonal_(0.0)
    norms = torch.linalg.vector_norm(E, dim=1)
    return InitEvent(max_overlap_EE=float(G.abs().max()) if S > 1 else 0.0,
                     max_overlap_Ev=float((E @ v).abs().max()), max_overlap_Ep=float((E @ p).abs().max()),
                     overlap_pv=float((p @ v).abs()),
                     max_norm=max(float(norms.max()), float(torch.linalg.vector_norm(p))),
                     min_norm=float(norms.min()), bound=math.sqrt(2 * math.log(S * S / delta) / d))
