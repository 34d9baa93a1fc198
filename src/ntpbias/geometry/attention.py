"""Theory of paper 003 (one-layer attention with trained embeddings; spec attention_embeddings.md §1-§4, §8).

Model (1): f(X; p, E) = Σ_i q_i E_{x_i}^T v with q = softmax over the real positions of a_i = p^T E_{x_i}; loss (2):
L = Ê log(1 + exp(-y f)). Everything here is closed form on tensors ``E: (|S|, d)``, ``p: (d,)``, ``v: (d,)`` and a
:class:`~ntpbias.data.tokens.TokenSequences` (padding masked out of every softmax); it runs on the device of E.

* Loss and gradients in the stable weight form (Lemma A.1, spec §2.2 and §8 notes): :func:`readout`,
  :func:`loss_and_gradients`, :func:`loss_and_grad_p`.
* Stage 1 (eq. (4), Lemma 4.1): :func:`theory_init`, :func:`gd_step`, :func:`stage_one` -> :class:`StageOne`
  (error norms, the bound 11 η₀ d^{-1/4}, correlation and slope of <E¹_s - E⁰_s, v> against α_s);
  the initialisation event (22): :func:`init_event`.
* Stage 2: token selection S_X(p) (eq. (10)): :func:`token_selection`; the max-margin problem (12) for a given
  selection, selected tokens tied by equalities, through :class:`~ntpbias.geometry.svm.MarginProgram`:
  :func:`max_margin_selection` -> :class:`SelectionSVM`; Lemma 4.5's important-only SVM: :func:`important_svm`;
  Theorem 4.3's checks on a trained p: :func:`directional_convergence`, :func:`important_selection`; the
  Lemma 4.4 corollary (one irrelevant token): :func:`one_irrelevant_limit`; Lemma 4.5's gap condition:
  :func:`lemma45_gap`; the loss floor of a selection: :func:`selection_loss_floor`.

Training p along the flow (9) (GD or normalized GD on the shared engine) lives in
:mod:`ntpbias.training.attention` (:func:`~ntpbias.training.attention.train_stage_two`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._tensor import DEFAULT_DTYPE
from ..data.tokens import TokenSequences, relevant_tokens, token_statistics
from ..errors import DataError, NotSeparableError
from .constraints import LogitGaps
from .svm import KKT_TOL, MarginProgram, SVMResult

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
    q_i ((u_i - r) - Σ_j q_j (u_j - r)): at that position this is exactly q_i Σ_j q_j (u_i - u_j) (spec §8),
    free of the cancellation of u_i - f once q_i ≈ 1. Padded positions get q = w = 0.
    """
    a = z[ds.X].masked_fill(~ds.mask, -math.inf)
    q = torch.softmax(a, dim=1)
    uX = u[ds.X]
    r = uX.gather(1, a.argmax(1, keepdim=True))
    du = uX - r
    fr = (q * du).sum(1, keepdim=True)
    return q, q * (du - fr), (r + fr).squeeze(1)


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
    """Loss (2) and the closed-form gradients of Lemma A.1 in the stable form of spec §2.2, no autograd.

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


def theory_init(num_tokens: int, d: int, *, seed: int = 0, dtype: torch.dtype = DEFAULT_DTYPE,
                device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E⁰_s, p⁰ ~ N(0, I_d/d) i.i.d. and v uniform on the unit sphere (spec §1.4), drawn in this order on the CPU.

    Returns (E0 (|S|, d), p0 (d,), v (d,)).
    """
    gen = torch.Generator().manual_seed(seed)
    E = torch.randn(num_tokens, d, generator=gen, dtype=DEFAULT_DTYPE) / math.sqrt(d)
    p = torch.randn(d, generator=gen, dtype=DEFAULT_DTYPE) / math.sqrt(d)
    v = torch.randn(d, generator=gen, dtype=DEFAULT_DTYPE)
    v = v / torch.linalg.vector_norm(v)
    return tuple(t.to(dtype=dtype, device=device) for t in (E, p, v))


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
        return float(torch.corrcoef(torch.stack([x, y]))[0, 1])

    @property
    def slope_ratio(self) -> float:
        """Least-squares slope of <E¹_s - E⁰_s, v> on α_s divided by η₀/2 (Lemma 4.1 predicts 1)."""
        x, y = self._shift()
        xc = x - x.mean()
        return float((xc * (y - y.mean())).sum() / (xc * xc).sum()) / (0.5 * self.eta0)

    def predicted_margins(self, ds: TokenSequences) -> torch.Tensor:
        """(n,) leading-order y f(X; E¹, p¹) ≈ (η₀/2) y · mean_i α_{x_i} (Lemma B.2, spec §8 N4)."""
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


# ---------------------------------------------------------------------------------------------------------------
# Stage 2: token selection and the max-margin problem (12)
# ---------------------------------------------------------------------------------------------------------------


def token_selection(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *, tol: float = 0.0) -> torch.Tensor:
    """S_X(p) of eq. (10) as a position mask (n, T): real positions whose score p^T E_{x_i} is maximal in X.

    With ``tol > 0``, positions whose normalized gap (max_j a_j - a_i)/||p|| is at most ``tol`` count as tied
    (spec §8: at finite ||p|| true ties leave gaps O(1/||p||), non-selected gaps stay bounded away from 0).
    Repeated tokens share their score, so the mask selects token identities.
    """
    ds = _check(E, ds)
    a = (E @ p)[ds.X].masked_fill(~ds.mask, -math.inf)
    gap = a.amax(1, keepdim=True) - a
    return (gap <= tol * torch.linalg.vector_norm(p)) & ds.mask


@dataclass(frozen=True, eq=False)
class SelectionSVM:
    """The max-margin problem (12) for one selection, solved (or found infeasible), with its certificate.

    Attributes
    ----------
    status : "optimal" | "inaccurate" (solved, certificate above tolerance) | "infeasible" | "degenerate"
        ("degenerate": every sequence selects all its tokens, so there is no inequality and p̂ = 0, Lemma 4.4).
    message : one line saying why, for the last two.
    p_hat : (d,) the solution, or None.
    result : the :class:`~ntpbias.geometry.svm.SVMResult` (KKT certificate), or None.
    n_ineq, n_eq : number of distinct inequality rows p^T(E_s - E_s') >= 1 and tie rows p^T(E_s - E_s0) = 0.
    """

    status: str
    message: str
    p_hat: torch.Tensor | None
    result: SVMResult | None
    n_ineq: int
    n_eq: int

    @property
    def feasible(self) -> bool:
        return self.p_hat is not None

    @property
    def certified(self) -> bool:
        return self.result is not None and self.result.certified

    @property
    def norm(self) -> float:
        """||p̂|| (inf when there is no solution)."""
        return float(torch.linalg.vector_norm(self.p_hat)) if self.feasible else math.inf

    @property
    def direction(self) -> torch.Tensor | None:
        """p_* = p̂/||p̂||, or None."""
        return self.p_hat / self.norm if self.feasible else None

    @property
    def margin(self) -> float:
        """The maximal normalized margin 1/||p̂|| (0 when there is no solution)."""
        return 1.0 / self.norm


def _selection_rows(E: torch.Tensor, ds: TokenSequences, selected: torch.Tensor):
    """Reduced rows of (12): anchor s0_X = first selected token of X; ineq (s0_X, s') for s' ∈ X unselected,
    eq (s, s0_X) for the other selected s. Given the ties, these are equivalent to all (s, s') pairs of (12).

    Returns (ineq LogitGaps, eq LogitGaps, clash) where ``clash`` is a message when one token is both selected
    and unselected in a sequence (then (12) is infeasible: p^T(E_s - E_s) = 0 < 1).
    """
    selected = selected.to(ds.mask.device)
    if selected.shape != ds.X.shape:
        raise DataError(f"the selection has shape {tuple(selected.shape)}; it must be a (n, T) = {tuple(ds.X.shape)} "
                        f"boolean mask over positions")
    sel = selected.bool() & ds.mask
    empty = ~sel.any(1)
    if bool(empty.any()):
        raise DataError(f"the selection picks no token of sequence {int(torch.nonzero(empty)[0])}; S_X(p) is never "
                        f"empty (eq. (10))")
    anchor = ds.X.gather(1, sel.to(torch.int8).argmax(1, keepdim=True)).expand_as(ds.X)  # (n, T)
    S = E.shape[0]
    rest = ds.mask & ~sel
    ij, ik = anchor[rest], ds.X[rest]
    clash = None
    if bool((ij == ik).any()):
        k = int(torch.nonzero(rest & (anchor == ds.X))[0, 0])
        clash = f"sequence {k} has token {int(anchor[k, 0])} both selected and not selected"
    tie = sel & (ds.X != anchor)
    ej, ek = ds.X[tie], anchor[tie]

    def gaps(j, k):
        key = torch.unique(j * S + k)
        j, k = key // S, key % S
        zeros = torch.zeros_like(j)
        return LogitGaps(E, 1, zeros, j, zeros, k)

    return gaps(ij, ik), gaps(ej, ek), clash


def max_margin_selection(E: torch.Tensor, ds: TokenSequences, selected: torch.Tensor, *, solver: str = "auto",
                         tol: float = KKT_TOL) -> SelectionSVM:
    """Solve (12) for the selection ``selected`` (n, T): min ||p|| s.t. p^T(E_s - E_s') >= 1 for s selected and
    s' not selected in the same X, with the selected tokens of each X tied (p^T(E_s - E_s0) = 0, spec §9.5).

    Solved by :class:`~ntpbias.geometry.svm.MarginProgram` on the variable p as a (1, d) matrix with
    H = E (|S|, d) (logit rows a = b = 0, columns j = s, k = s'). When |S| < d the solution lies in the row
    space of E, so the same program is solved exactly in coordinates c of an orthonormal basis Q of it
    (p = Q c, H = E Q, ||p|| = ||c||); the certificate ``result.kkt`` then refers to c. An infeasible
    selection is reported as ``status="infeasible"``, never raised.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.tokens import TokenSequences
    >>> ds = TokenSequences.from_lists([[0, 2], [1, 2]], [1, -1])
    >>> E = torch.eye(3, dtype=torch.float64)
    >>> res = max_margin_selection(E, ds, ds.X != 2)
    >>> res.status, [round(x, 6) for x in res.p_hat.tolist()]
    ('optimal', [0.333333, 0.333333, -0.666667])
    """
    ds = _check(E, ds)
    basis = None
    if E.shape[0] < E.shape[1]:  # |S| < d: solve for c in p = Q c, Q an orthonormal basis of E's row space
        basis, R = torch.linalg.qr(E.T)
        H = R.T  # = E Q, (|S|, |S|)
    else:
        H = E
    ineq, eq, clash = _selection_rows(H, ds, selected)
    counts = {"n_ineq": len(ineq), "n_eq": len(eq)}
    if clash is not None:
        return SelectionSVM("infeasible", f"(12) is infeasible: {clash}", None, None, **counts)
    if len(ineq) == 0:
        return SelectionSVM("degenerate", "the selection ties every token of every sequence: (12) has no "
                            "inequality and its solution is p = 0 (no direction; cf. Lemma 4.4)", None, None, **counts)
    try:
        res = MarginProgram(ineq, eq if len(eq) else None).solve(solver, tol=tol)
    except NotSeparableError:
        return SelectionSVM("infeasible", "(12) is infeasible for this selection: no p keeps the selected tokens "
                            "tied and above the others by a positive margin in every sequence", None, None, **counts)
    p_hat = res.W.reshape(-1) if basis is None else basis @ res.W.reshape(-1)
    return SelectionSVM(res.status, "", p_hat, res, **counts)


def important_svm(E: torch.Tensor, ds: TokenSequences, *, relevant: torch.Tensor | None = None, solver: str = "auto",
                  tol: float = KKT_TOL) -> SelectionSVM:
    """Lemma 4.5's p̂ = argmin ||p|| s.t. p^T(E_{s*_X} - E_s) >= 1 for every s ∈ X \\ {s*_X}, every X.

    ``relevant`` (n,) defaults to s*_X of Assumption 1 (:func:`~ntpbias.data.tokens.relevant_tokens`).
    """
    ds = _check(E, ds)
    s_star = relevant_tokens(ds) if relevant is None else relevant.to(ds.X.device)
    return max_margin_selection(E, ds, (ds.X == s_star[:, None]) & ds.mask, solver=solver, tol=tol)


def one_irrelevant_limit(E: torch.Tensor, ds: TokenSequences, *, solver: str = "auto",
                         tol: float = KKT_TOL) -> SelectionSVM:
    """The predicted limit direction in the Lemma 4.4 case: exactly one irrelevant token in the vocabulary.

    Under Assumption 1 a limit p_∞ selects s*_X in every X (Theorem 4.3) and, by Lemma 4.4, cannot tie it with
    the irrelevant token in every sequence; with a single irrelevant token the only selection left that (12) can
    realise is {s*_X}, so p_∞ = p̂/||p̂|| of :func:`important_svm`. DataError when the data do not have
    exactly one irrelevant token or violate Assumption 1.
    """
    ds = _check(E, ds)
    stats = token_statistics(ds)
    n_irr = int(stats.irrelevant.sum())
    if n_irr != 1:
        raise DataError(f"the Lemma 4.4 case needs exactly one irrelevant token in the data; found {n_irr}")
    return important_svm(E, ds, relevant=relevant_tokens(ds, stats), solver=solver, tol=tol)


def _normalized_gaps(p: torch.Tensor, rows: LogitGaps) -> torch.Tensor:
    norm = torch.linalg.vector_norm(p)
    return rows.apply(p.reshape(1, -1)) / norm


@dataclass(frozen=True, eq=False)
class DirectionalConvergence:
    """Theorem 4.3 item 2 at a (trained) p: is p/||p|| the max-margin direction p_*(p) of its own selection?

    Attributes
    ----------
    selected : (n, T) S_X(p).  svm : (12) for that selection.
    cosine : cos(p, p̂) (NaN without a solution).
    normalized_margin : min over (12)'s inequality rows of p^T(E_s - E_s')/||p||, compare with
        ``max_margin`` = 1/||p̂||, the largest value any direction achieves.
    tie_spread : max over tie rows of |p^T(E_s - E_s0)|/||p|| (0 for single selections).
    """

    selected: torch.Tensor
    svm: SelectionSVM
    cosine: float
    normalized_margin: float
    max_margin: float
    tie_spread: float


def directional_convergence(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *, tol: float = 0.0,
                            solver: str = "auto") -> DirectionalConvergence:
    """Compare a trained p with the solution of (12) for its own selection S_X(p) (``tol`` as in
    :func:`token_selection`)."""
    ds = _check(E, ds)
    sel = token_selection(E, p, ds, tol=tol)
    ineq, eq, _ = _selection_rows(E, ds, sel)
    svm = max_margin_selection(E, ds, sel, solver=solver)
    norm = torch.linalg.vector_norm(p)
    cos = float(p @ svm.p_hat / (norm * svm.norm)) if svm.feasible else math.nan
    margin = float(_normalized_gaps(p, ineq).min()) if len(ineq) else math.nan
    spread = float(_normalized_gaps(p, eq).abs().max()) if len(eq) else 0.0
    return DirectionalConvergence(selected=sel, svm=svm, cosine=cos, normalized_margin=margin,
                                  max_margin=svm.margin if svm.feasible else math.nan, tie_spread=spread)


@dataclass(frozen=True, eq=False)
class ImportantSelection:
    """Theorem 4.3 item 1 at a (trained) p, per sequence (the stronger form that Lemma C.2 proves, spec §9.7).

    Attributes
    ----------
    relevant : (n,) s*_X.  selected : (n, T) S_X(p).
    relevant_selected : (n,) bool, s*_X ∈ S_X(p).
    only_relevant : (n,) bool, S_X(p) = {s*_X} (what Lemma 4.5 adds).
    covers_important : bool, S_c ⊆ ∪_X S_X(p) (the theorem's statement).
    """

    relevant: torch.Tensor
    selected: torch.Tensor
    relevant_selected: torch.Tensor
    only_relevant: torch.Tensor
    covers_important: bool

    @property
    def all_relevant_selected(self) -> bool:
        return bool(self.relevant_selected.all())

    @property
    def all_only_relevant(self) -> bool:
        return bool(self.only_relevant.all())


def important_selection(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *,
                        tol: float = 0.0) -> ImportantSelection:
    """Does p select the completely positive/negative token of every sequence (Assumption-1 data)?"""
    ds = _check(E, ds)
    stats = token_statistics(ds)
    s_star = relevant_tokens(ds, stats)
    sel = token_selection(E, p, ds, tol=tol)
    is_star = (ds.X == s_star[:, None]) & ds.mask
    ever = torch.zeros(E.shape[0], dtype=torch.bool, device=E.device)
    ever[ds.X[sel]] = True
    important = stats.important.to(E.device)
    return ImportantSelection(relevant=s_star, selected=sel, relevant_selected=(sel & is_star).any(1),
                              only_relevant=(sel == is_star).all(1),
                              covers_important=bool((ever[:important.shape[0]] | ~important).all()))


def selection_loss_floor(E: torch.Tensor, v: torch.Tensor, ds: TokenSequences, *,
                         relevant: torch.Tensor | None = None) -> float:
    """Ê log(1 + exp(-γ_{s*})), γ_{s*} = y E_{s*_X}^T v: the loss once all attention sits on s*_X (spec N7)."""
    ds = _check(E, ds)
    s_star = relevant_tokens(ds) if relevant is None else relevant.to(ds.X.device)
    return float(torch.nn.functional.softplus(-ds.y * (E @ v)[s_star]).mean())


@dataclass(frozen=True, eq=False)
class GapCondition:
    """Lemma 4.5's margin-gap condition, as corrected (spec §9.4): ||p̂|| <= (1 - μ) ||p̂'|| with μ > 0, where p̂ is
    the important-only SVM and p̂' solves (12) for a selection that also ties one irrelevant token u with s*_X in
    one sequence X.

    Attributes
    ----------
    norm : ||p̂||.  alternatives : (A, 2) LongTensor of (sequence index, token u).
    alternative_norms : (A,) ||p̂'|| (inf where that (12) is infeasible).
    """

    norm: float
    alternatives: torch.Tensor
    alternative_norms: torch.Tensor

    @property
    def ratio(self) -> float:
        """max ||p̂|| / ||p̂'|| over the alternatives."""
        return float((self.norm / self.alternative_norms).max())

    @property
    def mu(self) -> float:
        return 1.0 - self.ratio

    @property
    def n_infeasible(self) -> int:
        return int(torch.isinf(self.alternative_norms).sum())


def lemma45_gap(E: torch.Tensor, ds: TokenSequences, *, solver: str = "auto", tol: float = KKT_TOL) -> GapCondition:
    """Solve (12) for every alternative selection {s*_X, u} (one sequence X, one irrelevant u ∈ X; all other
    sequences select s* only) and compare norms with the important-only SVM (spec N10).

    One QP per distinct (X, u) pair (a loop over programs). DataError on data violating Assumption 1; an
    infeasible alternative is kept with norm inf (it cannot be a limit direction).
    """
    ds = _check(E, ds)
    s_star = relevant_tokens(ds)
    base = (ds.X == s_star[:, None]) & ds.mask
    ref = max_margin_selection(E, ds, base, solver=solver, tol=tol)
    if not ref.feasible:
        raise NotSeparableError(f"Lemma 4.5's important-only SVM has no solution: {ref.message}")
    cand = ds.mask & ~base
    key = torch.unique(torch.nonzero(cand)[:, 0] * E.shape[0] + ds.X[cand])
    alts = torch.stack([key // E.shape[0], key % E.shape[0]], 1)
    norms = torch.empty(alts.shape[0], dtype=E.dtype)
    for idx, (k, u) in enumerate(alts.tolist()):
        sel = base.clone()
        sel[k] |= ds.X[k] == u
        norms[idx] = max_margin_selection(E, ds, sel, solver=solver, tol=tol).norm
    return GapCondition(norm=ref.norm, alternatives=alts, alternative_norms=norms)
