"""Matrix-free solvers for max-margin programs: the dual method of ``MarginProgram.solve(solver="dual")``.

The program (P) of :mod:`ntpbias.geometry.margins.program`,

    minimize ½||W||²  subject to  A_in(W) >= 1,  A_eq(W) = 0,

has the dual (D): maximize Σλ - ½||A_in^T λ + A_eq^T μ||² over λ >= 0 and free μ, with W = A_in^T λ + A_eq^T μ
at the optimum (docs/paper-a-linear-ntp.md#objects). Both constraint maps are
:class:`~ntpbias.geometry.constraints.LogitGaps`: row i reads L[a_i, j_i] - L[b_i, k_i] of the logit matrix
L = E W H^T (E = I without a left factor), so A^T y is a scatter of ±y into a (p, m) matrix Λ followed by
W = E^T Λ H. One iteration costs two matrix products (W = E^T Λ H and L = E W H^T); memory is linear in the
number of constraints plus the size of the logit matrix (index arrays only, never a constraint matrix).

:func:`solve_dual` minimizes -(D) by accelerated projected gradient (FISTA) with the gradient restart of
O'Donoghue & Candès (2015), a diagonal (Jacobi) scaling and a step from a Lanczos estimate of the largest
eigenvalue of the scaled Hessian. It works in one of two parametrizations of the multipliers:

* ``"grouped"``: when every row's second cell (b_i, k_i) is its own and no second cell is any row's first
  cell (the NTP reduced form: per context one anchor cell, one row per other token; attention token selection),
  the scatter y -> Λ is injective and the dual becomes a problem in Λ itself: rows sharing a first cell form a
  group whose cells sum to zero, Λ at an inequality row's second cell is <= 0 (λ_i = -Λ[b_i, k_i]) and free at
  an equality row's. Its Hessian is Λ ↦ E E^T Λ K (K = H H^T): the anchored row form carries an extra factor
  up to the group size in its condition number, which this form avoids (for the NTP-SVM about sqrt(V) times
  fewer iterations). The projection onto {group sum 0, sign constraints} is exact, by a sort per group.
* ``"rows"``: otherwise, y = (λ, μ) itself with λ projected on >= 0 and μ free.

Stopping uses the same residuals as the KKT certificate (:class:`~ntpbias.geometry.margins.result.Certificate`),
evaluated every ``check_every`` iterations (the only host synchronizations, so the loop runs unchanged on a GPU). Data
that admit no feasible W make (D) unbounded: the multipliers grow without bound while W = A^T y stays bounded. Since
||A^T y|| / Σλ >= 1/||W^mm|| for every dual-feasible y (λ >= 0) when (P) is feasible, a ratio below
``DIVERGENCE_TOL`` times the largest row norm proves that no W has a normalized margin above that. Two
candidates y are tried: the iterate itself and its growth since a checkpoint (λ part clipped at 0), which
isolates the recession direction and shows divergence long before the iterate's own ratio (which decays only
like 1/k²) does. The run then stops with ``diverged=True`` and the normalized candidate, a Gordan certificate of
(near) infeasibility.

The constraint operators and conjugate gradients on A A^T are in :mod:`ntpbias.geometry.solvers.gram`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ...errors import SolverError
from ..constraints import LogitGaps
from .dual_forms import dual_form
from .gram import ConstraintOps


class SolverProgram(Protocol):
    """What the matrix-free solvers need of a max-margin program
    (:class:`ntpbias.geometry.margins.program.MarginProgram` is one): its constraint maps, the shape of W, a copy on a
    device and dtype, and its certificate at (W, λ, μ)."""

    ineq: LogitGaps
    eq: LogitGaps | None
    var_shape: tuple[int, ...]

    def to(self, device, dtype) -> SolverProgram: ...

    def certificate(self, W: torch.Tensor, lam: torch.Tensor, mu: torch.Tensor): ...

#: Iteration cap of :func:`solve_dual` unless asked otherwise.
DUAL_MAX_ITER = 20000
#: Residuals are checked (one host synchronization) every this many iterations.
CHECK_EVERY = 10
#: A dual iterate with ||A^T y|| / Σλ below this times max_i ||A_i|| proves the max normalized margin is
#: below it as well: the program is declared infeasible ("not separable").
DIVERGENCE_TOL = 1e-6
#: float32 runs stop at this residual (float32 round-off) before the float64 certificate and refinement, or
#: after this many checks without a 10% improvement.
FLOAT32_TOL = 2e-5
FLOAT32_PATIENCE = 50
#: Lanczos steps for the step size, and the safety factor applied to the estimate.
LANCZOS_STEPS = 30
STEP_SAFETY = 1.02


@dataclass(frozen=True, eq=False)
class _SolverRun:
    """Outcome of a matrix-free solver (:func:`solve_dual`, :func:`~ntpbias.geometry.solvers.workset.solve_workset`),
    private to the solvers: :meth:`~ntpbias.geometry.margins.program.MarginProgram.solve` certifies it into the one
    public result type, :class:`~ntpbias.geometry.margins.result.SVMResult`. Multipliers are in the program's dtype and
    device.

    Attributes
    ----------
    lam : Tensor (R_in,)
        Inequality multipliers λ >= 0. When ``diverged``: normalized to Σλ = 1 (a Gordan direction).
    mu : Tensor (R_eq,)
        Equality multipliers (free), scaled like ``lam``.
    iterations : int
        Accelerated-gradient iterations run (all precisions together).
    converged : bool
        The working-precision residuals reached the tolerance (the caller certifies in float64).
    diverged : bool
        The dual grew without bound: no W has a normalized margin above ``DIVERGENCE_TOL`` (see module doc).
    gordan_residual : float
        ||A_in^T λ + A_eq^T μ|| / (Σλ · max_i ||A_i||) at the returned multipliers (scale-free; small when
        ``diverged``).
    form : str
        ``"grouped"`` or ``"rows"`` (module doc).
    precision : str
        ``"float64"``, ``"float32"``, ``"float32+float64"`` (refined in float64) or ``"float64 (float32 gave
        non-finite values)"``.
    lipschitz : float
        Step-size constant of the (scaled) dual (the workset method: of its accelerated stage's last step).
    seconds : float
        Wall time.
    residual_history : tuple of (int, float)
        The dual method: (iteration, worst residual) at each check.
    details : dict
        The workset method: ``working_set`` (rows per round), ``rounds``, ``apg_iterations``, ``pcg_iterations``,
        ``refine_rounds``, ``face_rows`` (rows with positive multiplier), ``products`` (matrix products of the working
        precision), ``products_float64``, ``handover_residual``.
    W : Tensor or None
        The workset method: A_in^T λ + A_eq^T μ at the returned multipliers, when its refinement computed it.
    """

    lam: torch.Tensor
    mu: torch.Tensor
    iterations: int
    converged: bool
    diverged: bool
    gordan_residual: float
    form: str
    precision: str
    lipschitz: float
    seconds: float
    residual_history: tuple[tuple[int, float], ...] = ()
    details: dict = field(default_factory=dict)
    W: torch.Tensor | None = None


# --------------------------------------------------------------------------------------------- step size
def _lanczos_max(op, x0: torch.Tensor, steps: int) -> float:
    """Largest eigenvalue of a symmetric PSD operator by plain Lanczos from x0, plus its residual bound."""
    q = x0 / torch.linalg.vector_norm(x0)
    q_prev = torch.zeros_like(q)
    beta = torch.zeros((), dtype=q.dtype, device=q.device)
    alphas, betas = [], []
    for _ in range(steps):
        w = op(q) - beta * q_prev
        alpha = (w * q).sum()
        w = w - alpha * q
        beta = torch.linalg.vector_norm(w)
        alphas.append(alpha)
        betas.append(beta)
        q_prev, q = q, w / beta.clamp(min=torch.finfo(q.dtype).tiny)
    a = torch.stack(alphas).double().cpu()
    b = torch.stack(betas).double().cpu()
    if not bool(torch.isfinite(a).all()):
        return float("nan")
    T = torch.diag(a) + torch.diag(b[:-1], 1) + torch.diag(b[:-1], -1)
    evals, evecs = torch.linalg.eigh(T)
    return float(evals[-1] + b[-1] * evecs[-1, -1].abs())


# --------------------------------------------------------------------------------------------- the solver
def solve_dual(program: SolverProgram, *, tol: float = 1e-6, max_iter: int = DUAL_MAX_ITER,
               warm_start=None, dtype: torch.dtype | str | None = None, device=None, form: str = "auto",
               check_every: int = CHECK_EVERY) -> _SolverRun:
    """Solve the dual (D) of ``program`` matrix-free by accelerated projected gradient with restart.

    Parameters
    ----------
    program : SolverProgram
        The max-margin program (its tensors' dtype and device are those of the returned multipliers).
    tol : float
        Stop when every KKT residual (primal violation, complementary slackness, relative duality gap; the
        dual feasibility and stationarity hold by construction) is below ``tol``.
    max_iter : int
        Iteration cap (per precision); the best iterate seen at a check is returned with ``converged=False``.
    warm_start : SVMResult, a solver's run or (λ, μ), or None
        Multipliers to start from (e.g. the solution of a nearby program with the same rows).
    dtype : torch.float64 (default: the program's dtype) or torch.float32
        Working precision. float32 stops at ``max(tol, FLOAT32_TOL)``, then the multipliers are checked in
        float64 and, if that misses ``tol``, refined in float64 from there. Non-finite float32 values restart
        the solve in float64 (with a warning).
    device : torch device or None
        Where to iterate (default: the program's device); results come back to the program's device.
    form : "auto", "grouped" or "rows"
        Parametrization of the multipliers (module doc); "auto" takes "grouped" when it applies.
    check_every : int
        Iterations between residual checks (host synchronizations).

    Returns
    -------
    _SolverRun
        ``diverged=True`` (normalized Gordan multipliers) when the program is infeasible; the caller decides
        whether that is an error (:meth:`MarginProgram.solve` raises :class:`~ntpbias.errors.NotSeparableError`).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> from ntpbias.geometry.constraints import constraints
    >>> from ntpbias.geometry.margins.program import MarginProgram
    >>> cons = constraints(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> sol = solve_dual(MarginProgram(cons.ineq, cons.eq), tol=1e-10)
    >>> sol.converged, sol.form, [round(float(x), 6) for x in sol.lam]
    (True, 'grouped', [0.666667, 0.333333, 0.333333])
    """
    start = time.perf_counter()
    home_dtype, home_device = program.ineq.H.dtype, program.ineq.H.device
    work_device = torch.device(device) if device is not None else home_device
    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "float64": torch.float64}.get(dtype, dtype)
    work_dtype = dtype or home_dtype
    if work_dtype not in (torch.float32, torch.float64):
        raise SolverError(f"the dual solver runs in float32 or float64, not {work_dtype}")
    lam0, mu0 = _warm_duals(warm_start, program)
    n_vars = program.var_shape[0] * program.var_shape[1]
    n_rows = len(program.ineq) + (0 if program.eq is None else len(program.eq))
    try:
        run = _run(program, work_device, work_dtype, tol if work_dtype == torch.float64 else max(tol, FLOAT32_TOL),
                   max_iter, lam0, mu0, form, check_every)
        precision = "float64" if work_dtype == torch.float64 else "float32"
        if run["nonfinite"] and work_dtype == torch.float32:
            warnings.warn("the float32 dual solve produced non-finite values (the problem is too large or badly "
                          "scaled for float32); solving again in float64", stacklevel=2)
            used = run["iterations"]
            run = _run(program, work_device, torch.float64, tol, max_iter, lam0, mu0, form, check_every)
            run["iterations"] += used
            precision = "float64 (float32 gave non-finite values)"
        elif work_dtype == torch.float32 and not run["diverged"]:
            lam, mu = (x.to(device=home_device, dtype=torch.float64) for x in (run["lam"], run["mu"]))
            check = program.to(dtype=torch.float64)
            if check.certificate(check._stack(lam, mu), lam, mu).worst > tol:
                used = run["iterations"]
                run = _run(program, work_device, torch.float64, tol, max_iter, lam, mu, form, check_every)
                run["iterations"] += used
                precision = "float32+float64"
        if run["nonfinite"]:
            raise SolverError("the dual solver produced non-finite values in float64; check the data for "
                              "extreme magnitudes (rescale H)")
    except torch.cuda.OutOfMemoryError:
        hint = "float32, " if work_dtype == torch.float64 else ""
        raise SolverError(f"out of GPU memory on {work_device} solving a max-margin program with {n_vars} variables "
                          f"and {n_rows} constraints in {work_dtype}; use {hint}a larger GPU, or device cpu") from None
    except MemoryError:
        raise SolverError(f"out of memory solving a max-margin program with {n_vars} variables and {n_rows} "
                          "constraints") from None
    return _SolverRun(
        lam=run["lam"].to(device=home_device, dtype=home_dtype), mu=run["mu"].to(device=home_device, dtype=home_dtype),
        iterations=run["iterations"], converged=run["converged"], diverged=run["diverged"],
        gordan_residual=run["gordan"], form=run["form"], precision=precision, lipschitz=run["lipschitz"],
        seconds=time.perf_counter() - start, residual_history=tuple(run["history"]),
    )


def _warm_duals(warm_start, program: SolverProgram):
    """(λ, μ) from a warm start (SVMResult, a solver's run or a pair), shape-checked; (None, None) without one."""
    if warm_start is None:
        return None, None
    if isinstance(warm_start, tuple | list):
        lam, mu = warm_start
    else:
        lam = getattr(warm_start, "dual_ineq", getattr(warm_start, "lam", None))
        mu = getattr(warm_start, "dual_eq", getattr(warm_start, "mu", None))
    n_eq = 0 if program.eq is None else len(program.eq)
    lam = torch.as_tensor(lam).reshape(-1)
    mu = torch.zeros(0) if mu is None else torch.as_tensor(mu).reshape(-1)
    if lam.numel() != len(program.ineq) or mu.numel() != n_eq:
        raise SolverError(f"warm start has {lam.numel()} inequality and {mu.numel()} equality multipliers; the "
                          f"program has {len(program.ineq)} and {n_eq}")
    return lam, mu


def _run(program, device, dtype, tol, max_iter, lam0, mu0, form, check_every) -> dict:
    """One accelerated projected-gradient run in one precision (see :func:`solve_dual`)."""
    ops = ConstraintOps.build(program.ineq, program.eq, device, dtype)
    norms2 = ops.row_sq_norms()
    row_norm = float(norms2.max().sqrt()) if ops.R else 1.0
    P = dual_form(ops, form, norms2)
    if not (math.isfinite(row_norm) and row_norm > 0):  # H overflows or underflows in this precision
        return _nonfinite(P, ops)
    D = P.scale
    sqrtD = D.sqrt()

    def hess(X):  # the quadratic part's Hessian, scaled and restricted to the feasible set's span
        return P.center(sqrtD * P.grad_quad(ops.primal(P.scatter(sqrtD * P.center(X)))[1]))

    gen = torch.Generator(device="cpu").manual_seed(0)
    x0 = P.center(torch.rand(P.zeros().shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype))
    lip = _lanczos_max(hess, x0, LANCZOS_STEPS) * STEP_SAFETY
    if not math.isfinite(lip):
        return _nonfinite(P, ops)
    lip = max(lip, torch.finfo(dtype).tiny)
    step = D / lip

    X = P.zeros() if lam0 is None else P.project(P.from_duals(lam0.to(device=device, dtype=dtype),
                                                              mu0.to(device=device, dtype=dtype)))
    W, L = ops.primal(P.scatter(X))
    Z, Lz = X, L
    t = torch.ones((), dtype=dtype, device=device)
    best = (math.inf, X, 0)
    stalled = 0  # checks without a 10% improvement of the best residual (float32 only: hand over to float64)
    ref = (0, X, W)  # checkpoint for the drift direction X - X_ref, renewed when the iteration count doubles
    threshold = DIVERGENCE_TOL * row_norm
    history = []
    state = {"converged": False, "diverged": None, "nonfinite": False}
    it = 0
    while True:
        if it % check_every == 0 or it == max_iter:
            res = _residuals(P, ops, X, W, L, ref[1], ref[2])
            primal, cs, gap, gordan, drift, finite = res.tolist()
            worst = max(primal, cs, gap)
            history.append((it, worst))
            if not finite:
                state["nonfinite"] = True
                break
            stalled = 0 if worst < 0.9 * best[0] else stalled + 1
            if worst < best[0]:
                best = (worst, X, it)
            if worst <= tol:
                state["converged"] = True
                break
            if min(gordan, drift) <= 10 * threshold:  # candidates y = X and (X - X_ref)^+, checked exactly
                for lam_c, mu_c in (P.duals(X), _drift(P, X, ref[1])):
                    if _gordan_ratio(ops, P, lam_c, mu_c, row_norm=row_norm) <= threshold:
                        state["diverged"] = (lam_c, mu_c)
                        break
                if state["diverged"] is not None:
                    break
            if it >= 2 * ref[0]:
                ref = (max(it, 1), X, W)
            if it >= max_iter or (dtype == torch.float32 and stalled >= FLOAT32_PATIENCE):
                X = best[1]
                break
        Xn = P.project(Z - step * P.grad(Lz))
        Wn, Ln = ops.primal(P.scatter(Xn))
        restart = ((Z - Xn) * (Xn - X)).sum() > 0  # gradient restart (O'Donoghue & Candès), branch-free
        tn = torch.where(restart, torch.ones_like(t), (1 + torch.sqrt(1 + 4 * t * t)) / 2)
        beta = torch.where(restart, torch.zeros_like(t), (t - 1) / tn)
        Z = Xn + beta * (Xn - X)
        Lz = Ln + beta * (Ln - L)
        X, W, L, t = Xn, Wn, Ln, tn
        it += 1
    if state["nonfinite"]:
        return _nonfinite(P, ops) | {"iterations": it, "history": history}
    lam, mu = P.duals(X) if state["diverged"] is None else state["diverged"]
    gordan = _gordan_ratio(ops, P, lam, mu) / row_norm
    if state["diverged"] is not None:
        total = lam.sum()
        lam, mu = lam / total, mu / total
    return {"lam": lam, "mu": mu, "iterations": it, "converged": state["converged"],
            "diverged": state["diverged"] is not None, "nonfinite": False, "gordan": gordan, "form": P.name,
            "lipschitz": lip, "history": history}


def _nonfinite(P, ops) -> dict:
    z = torch.zeros(ops.R, dtype=ops.H.dtype, device=ops.H.device)
    return {"lam": z[: ops.n_in], "mu": z[ops.n_in:], "iterations": 0, "converged": False, "diverged": False,
            "nonfinite": True, "gordan": math.inf, "form": P.name, "lipschitz": math.nan, "history": []}


def _residuals(P, ops: ConstraintOps, X, W, L, X_ref, W_ref) -> torch.Tensor:
    """[primal violation, complementary slackness, relative duality gap, ||A^T y||/Σλ, the same ratio for the
    drift y = X - X_ref (unclipped: a cheap screen), all finite] at X, as one tensor (one host sync)."""
    lam, mu = P.duals(X)
    g = ops.gaps(L)
    g_in, g_eq = g[: ops.n_in], g[ops.n_in:]
    zero = torch.zeros((), dtype=g.dtype, device=g.device)
    viol = torch.maximum((1 - g_in).clamp(min=0).amax() if g_in.numel() else zero,
                         g_eq.abs().amax() if g_eq.numel() else zero)
    tiny = torch.finfo(g.dtype).tiny  # relative residuals, as the KKT certificate's (scale-free)
    cs = (lam * (g_in - 1)).abs().amax() / lam.abs().amax().clamp(min=tiny) if g_in.numel() else zero
    w2 = (W * W).sum()
    total = lam.sum()
    gap = (w2 - total).abs() / torch.maximum(0.5 * w2, (total - 0.5 * w2).abs()).clamp(min=tiny)
    gordan = torch.where(total > 0, w2.sqrt() / total, torch.full_like(total, math.inf))
    grown = total - P.duals(X_ref)[0].sum()
    drift = torch.where(grown > 0, torch.linalg.vector_norm(W - W_ref) / grown, torch.full_like(total, math.inf))
    finite = torch.isfinite(torch.stack([viol, cs, gap, w2])).all().to(g.dtype)
    return torch.stack([viol, cs, gap, gordan, drift, finite])


def _drift(P, X, X_ref) -> tuple[torch.Tensor, torch.Tensor]:
    """The multipliers' growth since the checkpoint, λ clipped at 0: the recession direction of a diverging dual."""
    lam, mu = P.duals(X)
    lam_ref, mu_ref = P.duals(X_ref)
    return (lam - lam_ref).clamp(min=0), mu - mu_ref


def _gordan_ratio(ops: ConstraintOps, P, lam: torch.Tensor, mu: torch.Tensor, *,
                  row_norm: float | None = None) -> float:
    """||A_in^T λ + A_eq^T μ|| / Σλ for λ >= 0 (inf if Σλ = 0), recomputed from (λ, μ); given ``row_norm``
    (max_i ||A_i||), plus a bound on its rounding error, so that a value below a threshold is one in exact
    arithmetic too.

    For every such (λ, μ) and every feasible W of (P): Σλ <= <W, A_in^T λ + A_eq^T μ> <= ||W|| ||A^T y||, so the
    ratio bounds the max normalized margin 1/||W^mm|| from above.
    """
    total = float(lam.sum())
    if not total > 0:
        return math.inf
    W, _ = ops.primal(P.scatter(P.from_duals(lam, mu)))
    ratio = float(torch.linalg.vector_norm(W)) / total
    if row_norm is not None:
        mass = float(lam.abs().sum() + mu.abs().sum())
        ratio += 8 * torch.finfo(W.dtype).eps * math.sqrt(max(ops.R, 1)) * row_norm * mass / total
    return ratio
