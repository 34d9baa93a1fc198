"""Accelerated projected gradient on the dual of a max-margin program with an adaptive step: the inner solver of
:mod:`ntpbias.geometry.solvers.workset`.

The dual (D) of (P) (:mod:`ntpbias.geometry.margins.program`), its parametrizations (``"grouped"``, ``"rows"``), the
projection and the residuals are those of :mod:`ntpbias.geometry.solvers.dual` (the grouped form laid out as the
logit-cell matrix itself where every cell is used, :class:`~ntpbias.geometry.solvers.dual_forms.CellForm`: the NTP-SVM
on every row, whose products then need no gather); what differs is the step. The dual method steps 1/L̂ with L̂ a
Lanczos estimate of the largest eigenvalue of the scaled Hessian over *all* multipliers. Near the optimum only the
multipliers of the active face move, and the curvature along the face is several times smaller (measured: 3.9 against
17.3 on one-hot data with m = 10 d, V = 100), so that step is several times too short. Here the step backtracks on the
exact quadratic model instead. Since -(D) is quadratic in the multipliers x with W(x) = A^T x linear,

    f(x) - f(z) - <∇f(z), x - z> = ½ ||W(x) - W(z)||²,

so a step with constant L from z is accepted iff ||W(x) - W(z)||² <= L ||x - z||²_{D^-1} (the descent lemma in
the scaled metric; FISTA with backtracking, Beck & Teboulle 2009). The test costs no extra product and uses no
function values (which in float32 would be rounding noise at these scales). L shrinks by :data:`STEP_DECAY` after
each accepted step and doubles on a rejected one, so it tracks the local curvature; momentum restarts on the
gradient test of O'Donoghue & Candès (2015) as in the dual method.

Infeasible programs make (D) unbounded; the run stops with Gordan multipliers exactly as
:func:`~ntpbias.geometry.solvers.dual.solve_dual` does (the same two candidates and the same rounding-safe test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .dual import DIVERGENCE_TOL, _drift, _gordan_ratio, _residuals
from .dual_forms import CellForm, dual_form
from .face_ops import cells_times_H
from .gram import ConstraintOps
from .lowp import Increments, increments_dtype

#: Factor applied to the step constant L after an accepted step (a rejected one doubles it).
STEP_DECAY = 0.9
#: Starting step constant, in units of the scaled Hessian's diagonal (backtracking corrects it in a step or two).
STEP_START = 2.0
#: The run counts checks without progress (towards ``patience``) only once its best residual is below this: early
#: residuals are not monotone, a precision floor is low.
STALL_BELOW = 1e-2
#: A rejected step with ||ΔW|| below this multiple of the working precision's rounding of ||W|| is accepted
#: (the test cannot resolve it; rejecting would only grow L without cause).
ROUNDING_SLACK = 64.0
#: Without a warm start, start from the first projected-gradient direction at its exact line-search length
#: (the quadratic model makes it one product pair) instead of from zero.
START_SCALED = True
#: ``settle`` stops a run only once its residual is below this.
SETTLE_BELOW = 1e-3
#: Unit roundoff of the low-precision increments (bfloat16: 2^-8), for the same test on an increment.
LOWP_EPS = 2.0 ** -8


@dataclass(frozen=True, eq=False)
class APGRun:
    """Outcome of :func:`apg` (tensors in the working dtype and device).

    Attributes
    ----------
    lam, mu : Tensor (R_in,), (R_eq,)
        Multipliers; when ``diverged``, Gordan multipliers normalized to Σλ = 1.
    iterations : int
        Accelerated steps taken.  products : int, matrix products (W = E^T Λ H or L = E W H^T) spent.
    converged : bool
        Every residual of the dual method (primal violation, relative complementary slackness and duality gap, as
        in the KKT certificate) <= ``tol``.
    stalled : bool
        Stopped because the residual stopped improving (the working precision's floor).
    settled : bool
        Stopped because the support of λ stopped changing (``settle`` of :func:`apg`).
    face_changes : int
        Rows whose λ > 0 changed between the last two checks that compared supports (-1: none did).
    diverged : bool
        (D) is unbounded: no W has a normalized margin above ``DIVERGENCE_TOL`` times the largest row norm.
    nonfinite : bool
        The working precision over- or underflowed.
    residual : float
        Worst residual at the returned point.  form : "grouped" or "rows".  step_constant : last L.
    gordan : float
        ||A^T y|| / (Σλ · max_i ||A_i||) at the returned multipliers.
    history : tuple of (iteration, worst residual) at each check.
    """

    lam: torch.Tensor
    mu: torch.Tensor
    iterations: int
    products: int
    converged: bool
    stalled: bool
    diverged: bool
    nonfinite: bool
    residual: float
    form: str
    step_constant: float
    gordan: float
    history: tuple[tuple[int, float], ...] = ()
    products_lowp: int = 0
    settled: bool = False
    face_changes: int = -1


def apg(program, *, tol: float, max_iter: int, lam0: torch.Tensor | None = None, mu0: torch.Tensor | None = None,
        form: str = "auto", check_every: int = 5, patience: int = 8, verify=None,
        increments: str | None = None, settle: float | None = None) -> APGRun:
    """Minimize -(D) of ``program`` (on its own device and dtype) by accelerated projected gradient with an
    adaptive step (module doc).

    Parameters
    ----------
    program : MarginProgram (or anything with ``ineq``, ``eq``) in the working dtype and device.
    tol : float
        Stop when the worst residual (primal violation, relative complementary slackness and duality gap: those of
        :func:`ntpbias.geometry.solvers.dual._residuals`) is at most this.
    max_iter : int
        Cap on accelerated steps.
    lam0, mu0 : Tensor or None
        Warm start (projected onto the feasible set of (D)).
    form : "auto", "grouped" or "rows" (:mod:`ntpbias.geometry.solvers.dual`).
    check_every : int
        Steps between residual checks (host synchronizations).
    patience : int
        Checks without a 10% improvement of the best residual before the run stops as ``stalled``.
    verify : callable (λ, μ) -> bool or None
        Decides whether candidate Gordan multipliers prove infeasibility (default: the dual method's rounding-safe
        test in the working precision, which float32 cannot pass; :mod:`ntpbias.geometry.solvers.workset` checks in
        float64 on the full program instead).
    increments : "auto", "bfloat16", "none" or None
        Between residual checks, compute the two products as a working-precision anchor plus a bfloat16 increment
        (:mod:`ntpbias.geometry.solvers.lowp`; "auto": where bfloat16 is fast). Every check re-anchors, so the residuals
        the run stops on are exact in the working precision.
    settle : float or None
        Also stop (``settled``) once the residual is below :data:`SETTLE_BELOW` and the support of λ changed in at
        most this fraction of its rows since the previous check: the active face is identified, and the caller
        finishes on it (the handover of :mod:`ntpbias.geometry.solvers.workset`).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> from ntpbias.geometry.constraints import constraints
    >>> from ntpbias.geometry.margins.program import MarginProgram
    >>> cons = constraints(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> run = apg(MarginProgram(cons.ineq, cons.eq), tol=1e-10, max_iter=500)
    >>> run.converged, [round(float(x), 6) for x in run.lam]
    (True, [0.666667, 0.333333, 0.333333])
    """
    H = program.ineq.H
    dtype, device = H.dtype, H.device
    ops = ConstraintOps.build(program.ineq, program.eq, device, dtype)
    P = CellForm.detect(ops) if form != "rows" else None
    if P is not None:  # the NTP reduced form on every row: no gathers, the cheaper projection
        row_norm = P.row_norm
    else:
        norms2 = ops.row_sq_norms()
        row_norm = float(norms2.max().sqrt()) if ops.R else 1.0
        P = _permuted(dual_form(ops, form, norms2))
    if not (math.isfinite(row_norm) and row_norm > 0):
        return _give_up(P, ops)
    D = P.scale
    eps = torch.finfo(dtype).eps
    project = _Projection(P)
    X = P.zeros() if lam0 is None else project(P.from_duals(lam0.to(device=device, dtype=dtype),
                                                              mu0.to(device=device, dtype=dtype)))
    zero = not bool((X != 0).any())
    if zero:  # W = 0 and L = 0 need no product
        W = torch.zeros(ops.p if ops.left is None else ops.left.shape[1], ops.H.shape[1], dtype=dtype, device=device)
        L = torch.zeros(ops.p, ops.H.shape[0], dtype=dtype, device=device)
    else:
        W, L = ops.primal(P.scatter(X))
    products, lowp_products = 0 if zero else 2, 0
    if START_SCALED and zero:  # from zero: the first projected-gradient direction, scaled
        g0 = P.grad(L)
        X1 = project(-D * g0)
        W1, L1 = ops.primal(P.scatter(X1))
        products += 2
        w2, lin = float((W1 * W1).sum()), float((g0 * X1).sum())
        if w2 > 0 and lin < 0 and math.isfinite(w2):  # -(D)(t X1) = t² w2 / 2 + t lin, a cone point for t >= 0
            t1 = -lin / w2
            X, W, L = t1 * X1, t1 * W1, t1 * L1
            project.tau = None
    low_dtype = increments_dtype(increments, device, dtype, left=ops.left)
    inc = Increments(ops.H, low_dtype) if low_dtype is not None else None
    if inc is not None:
        inc.anchor(X, W, L)
    Z, Wz, Lz = X, W, L
    t, lip = 1.0, STEP_START
    best = (math.inf, X)
    stalled = 0
    ref = (0, X, W)
    threshold = DIVERGENCE_TOL * row_norm
    history: list[tuple[int, float]] = []
    outcome = {"converged": False, "stalled": False, "diverged": None, "settled": False}
    it = 0
    prev_face, face_changes = None, -1
    while True:
        if it % check_every == 0 or it >= max_iter:
            primal, cs, gap, gordan, drift, finite = _residuals(P, ops, X, W, L, ref[1], ref[2]).tolist()
            worst = max(primal, cs, gap)
            history.append((it, worst))
            if settle is not None and worst <= SETTLE_BELOW:  # has the support of λ stopped changing?
                face = P.duals(X)[0] > 0
                if prev_face is not None:
                    face_changes = int((face != prev_face).sum())
                    if face_changes <= settle * int(face.sum()):
                        outcome["settled"] = True
                        break
                prev_face = face
            if not finite:
                return _give_up(P, ops, it, products, history)
            stalled = 0 if worst < 0.9 * best[0] or best[0] > STALL_BELOW else stalled + 1
            if worst < best[0]:
                best = (worst, X)
            if worst <= tol:
                outcome["converged"] = True
                break
            if min(gordan, drift) <= 10 * threshold:
                for lam_c, mu_c in (P.duals(X), _drift(P, X, ref[1])):
                    if (verify(lam_c, mu_c) if verify is not None
                            else _gordan_ratio(ops, P, lam_c, mu_c, row_norm=row_norm) <= threshold):
                        outcome["diverged"] = (lam_c, mu_c)
                        break
                if outcome["diverged"] is not None:
                    break
            if it >= 2 * ref[0]:
                ref = (max(it, 1), X, W)
            if it >= max_iter or stalled >= patience:
                outcome["stalled"] = stalled >= patience
                X = best[1]
                W, L = ops.primal(P.scatter(X))
                products += 2
                break
        grad = P.grad(Lz)
        # with increments, the step that lands on the next residual check is an anchor (measured: anchoring every
        # second check only, or only below residual 1e-2, costs more steps than it saves)
        exact = inc is None or (it + 1) % check_every == 0 or it + 1 >= max_iter
        while True:  # backtracking on the exact quadratic model
            Xn = project(torch.addcmul(Z, D, grad, value=-1.0 / lip))
            if exact:
                Wn = _primal_w(ops, P.scatter(Xn))
                products += 1
                floor = ROUNDING_SLACK * eps * float(torch.linalg.vector_norm(Wn))
            else:
                Wn = inc.primal_w(P.scatter, Xn)
                lowp_products += 1
                floor = ROUNDING_SLACK * LOWP_EPS * float(torch.linalg.vector_norm(Wn - inc.Wa))
            dX = Xn - Z
            lhs = float(torch.linalg.vector_norm(Wn - Wz)) ** 2
            rhs = lip * _scaled_sq(dX, D)
            if lhs <= rhs or lhs <= floor ** 2 or lip > 1e12:
                break
            lip *= 2.0
        if exact:
            Ln = _logits(ops, Wn)
            products += 1
            if inc is not None:
                inc.anchor(Xn, Wn, Ln)
        else:
            Ln = inc.logits(Wn)
            lowp_products += 1
        step = Xn - X
        restart = float(torch.dot(dX.reshape(-1), step.reshape(-1))) < 0  # <Z - Xn, Xn - X> > 0
        tn = 1.0 if restart else (1 + math.sqrt(1 + 4 * t * t)) / 2
        beta = 0.0 if restart else (t - 1) / tn
        if restart:
            Z, Wz, Lz = Xn, Wn, Ln
        else:  # Z = Xn + β (Xn - X), the same for W and L (lerp with weight 1 + β: one pass)
            Z = torch.add(Xn, step, alpha=beta)
            Wz = torch.lerp(W, Wn, 1 + beta)
            Lz = torch.lerp(L, Ln, 1 + beta)
        X, W, L, t = Xn, Wn, Ln, tn
        lip *= STEP_DECAY
        it += 1
    lam, mu = P.duals(X) if outcome["diverged"] is None else outcome["diverged"]
    if outcome["diverged"] is not None:  # recomputed from the multipliers, with its rounding bound
        gordan = _gordan_ratio(ops, P, lam, mu) / row_norm
    else:  # informative only (W is W(X), up to the increments' rounding between anchors)
        total = float(lam.sum())
        gordan = float(torch.linalg.vector_norm(W)) / total / row_norm if total > 0 else math.inf
    if outcome["diverged"] is not None:
        total = lam.sum()
        lam, mu = lam / total, mu / total
    return APGRun(lam=lam, mu=mu, iterations=it, products=products, converged=outcome["converged"],
                  stalled=outcome["stalled"], diverged=outcome["diverged"] is not None, nonfinite=False,
                  residual=history[-1][1] if history else math.inf, form=P.name, step_constant=lip,
                  gordan=gordan, history=tuple(history), products_lowp=lowp_products,
                  settled=outcome["settled"], face_changes=face_changes)


class _Projection:
    """The projection of the dual method's form; for the grouped form by Newton's method on the group root,
    warm-started from the previous call's roots.

    The grouped projection (:meth:`ntpbias.geometry.solvers.dual_forms.GroupForm.project`) needs the root τ of the
    decreasing concave piecewise-linear φ(τ) = Σ_free (x - τ) + Σ_ineq min(x - τ, 0) per group; the dual method sorts
    every group for it, which on (contexts, V) = (20000, 100) costs as much as half a matrix product. Newton's step from
    τ_k, with S_k = {inequality cells with x < τ_k}, is τ_{k+1} = (Σ_free x + Σ_{S_k} x) / (n_free + |S_k|) (the
    root of φ with S_k fixed). Since φ is concave, a step from the left of the root lands on its right (or on it),
    and from the right the iterates decrease monotonically to the root (φ_{S_k} bounds φ from above on
    [root, τ_k]; from S = every inequality cell this is Michelot's algorithm, 1986); they stop, exactly, when S no
    longer changes. Started from the previous iterate's roots this takes one or two elementwise passes. The cell layout
    (:class:`~ntpbias.geometry.solvers.dual_forms.CellForm`) runs the same iteration along its columns in fewer passes
    (:meth:`~ntpbias.geometry.solvers.dual_forms.CellForm.project_from`).
    """

    def __init__(self, P):
        self.P = P
        self.tau = None
        if P.name == "grouped" and not isinstance(P, CellForm):
            dtype = P.c.dtype
            self.free = P.free.to(dtype)
            self.ineq = P.ineq.to(dtype)
            self.n_free = self.free.sum(1, keepdim=True)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        P = self.P
        if isinstance(P, CellForm):
            Y, self.tau = P.project_from(X, self.tau)
            return Y
        if P.name != "grouped":
            return P.project(X)
        s_free = (X * self.free).sum(1, keepdim=True)
        S = P.ineq if self.tau is None else P.ineq & (X < self.tau)
        for _ in range(X.shape[1] + 2):  # one step past the root at most, then one cell or more leaves per step
            Sf = S.to(X.dtype)
            tau = (s_free + (X * Sf).sum(1, keepdim=True)) / (self.n_free + Sf.sum(1, keepdim=True))
            S_next = P.ineq & (X < tau)
            if torch.equal(S_next, S):
                break
            S = S_next
        self.tau = tau
        Y = X - tau
        return Y * self.free + Y.clamp(max=0) * self.ineq


def _permuted(P):
    """``P``, or for a grouped form without padding whose cells are every logit cell (one-hot data) a
    :class:`_Permuted` view of it."""
    if P.name != "grouped" or not bool(P.valid.all()) or P.valid.numel() != P.ops.p * P.ops.H.shape[0]:
        return P
    cell = P.cell.reshape(-1)
    return _Permuted(P, torch.empty_like(cell).index_copy_(0, cell, torch.arange(cell.numel(), device=cell.device)))


class _Permuted:
    """The grouped form ``P`` (:class:`ntpbias.geometry.solvers.dual_forms.GroupForm`) whose scatter is a permutation of
    the cells: done as a gather (``index_select``, several times faster than the scatter-add), and no padding to mask in
    the gradient. Everything else is ``P``'s."""

    def __init__(self, P, perm: torch.Tensor):
        self._P, self._perm = P, perm

    def __getattr__(self, name):
        return getattr(self._P, name)

    def scatter(self, X: torch.Tensor) -> torch.Tensor:
        return X.reshape(-1).index_select(0, self._perm)

    def grad_quad(self, L: torch.Tensor) -> torch.Tensor:
        return L.reshape(-1).index_select(0, self._P.cell.view(-1)).view(self._P.shape)

    def grad(self, L: torch.Tensor) -> torch.Tensor:
        return self.grad_quad(L).add_(self._P.c)


def _scaled_sq(dX: torch.Tensor, D: torch.Tensor) -> float:
    """Σ dX² / D (the squared step in the scaled metric); one pass when D is constant along rows."""
    if D.dim() == 2 and D.shape[1] == 1:
        return float((torch.linalg.vector_norm(dX, dim=1) ** 2 / D[:, 0]).sum())
    if D.dim() == 2 and D.shape[0] == 1:  # constant along columns (the cell layout; vector_norm(dim=0): 7x slower)
        return float((dX.square().sum(0) / D[0]).sum())
    return float((dX * dX / D).sum())


def _primal_w(ops: ConstraintOps, Lam: torch.Tensor) -> torch.Tensor:
    """W = E^T Λ H (rows, c) for Λ (p * m,) flat: the first half of ``ConstraintOps.primal`` (without a left factor
    through Λ's nonzero cells where they are few: :func:`~ntpbias.geometry.solvers.face_ops.cells_times_H`)."""
    Lam = Lam.view(ops.p, -1)
    if ops.left is not None:
        return (ops.left.T @ Lam) @ ops.H
    return cells_times_H(Lam, ops.H)


def _logits(ops: ConstraintOps, W: torch.Tensor) -> torch.Tensor:
    """L = E W H^T (p, m): the second half of ``ConstraintOps.primal``."""
    L = W @ ops.H.T
    return L if ops.left is None else ops.left @ L


def _give_up(P, ops: ConstraintOps, it: int = 0, products: int = 0, history=()) -> APGRun:
    """The run for a working precision that over- or underflowed (the caller retries in float64)."""
    z = torch.zeros(ops.R, dtype=ops.H.dtype, device=ops.H.device)
    return APGRun(lam=z[: ops.n_in], mu=z[ops.n_in:], iterations=it, products=products, converged=False,
                  stalled=False, diverged=False, nonfinite=True, residual=math.inf, form=P.name,
                  step_constant=math.nan, gordan=math.inf, history=tuple(history))
