"""The working-set active-face method for max-margin programs: ``MarginProgram.solve(solver="workset")``.

It solves the program (P) of :mod:`ntpbias.geometry.margins.program`, minimize ½||W||² s.t. A_in(W) >= 1, A_eq(W) = 0,
in three stages, each cheaper per digit than the one before (docs/paper-a-linear-ntp.md#objects):

1. **Working set.** Problems with more than :data:`ALL_ROWS_MAX` inequality rows start from a subset: per group
   of rows sharing their first logit cell (per context, for the NTP-SVM) the :data:`START_PER_GROUP` rows with the
   smallest gaps under W0 = A_in^T 1 (one product). The restricted problem is a relaxation: after each solve one
   product W H^T finds the violated rows of the full problem and the most violated :data:`ADD_PER_GROUP` of each
   group enter; rows whose multiplier stayed zero for two rounds and whose gap exceeds 1 + :data:`DROP_GAP`
   leave. A restricted problem that proves infeasible proves the full one infeasible (its Gordan multipliers,
   padded with zeros, are valid for every row).
2. **Accelerated projected gradient with an adaptive step** (:func:`ntpbias.geometry.solvers.apg.apg`) on the dual
   of the working set, in float32 by default, its products between residual checks as float32 anchors plus bfloat16
   increments where those are faster (:mod:`ntpbias.geometry.solvers.lowp`), until its residual reaches
   :data:`HANDOVER_TOL`, or stalls at the working precision's floor, or (below 1e-3) the support of λ changes in at
   most :data:`SETTLE_CHANGE` of its rows between two checks. This identifies the active face.
3. **Face refinement** (a primal-dual active-set method with mixed-precision iterative refinement): with F the
   rows with positive multiplier (plus violated rows, plus every equality row), the face equations A_F(W) = [1; 0]
   at W = A_F^T ν are the Gram system (A_F A_F^T) ν = [1; 0]. Each round computes the residual in float64 on the
   full program (two products; every row's gap, so violated rows join F), solves for the correction by
   preconditioned conjugate gradients in the working precision (:func:`~ntpbias.geometry.solvers.gram.gram_solve`,
   through the face's cells only where that is cheaper: :mod:`ntpbias.geometry.solvers.face_ops`), and
   clips negative multipliers to zero (their rows leave F). On the right face each round gains the digits the
   correction solve was asked for, so float32 inner solves reach float64 accuracy in two or three rounds.

The caller (:meth:`~ntpbias.geometry.margins.program.MarginProgram.finish`) recomputes the KKT certificate from (W, λ,
μ) in float64 on the full program, every row included, so a wrong face or a missed row can never be certified. If
refinement does not reach the tolerance, the method falls back to the accelerated gradient in float64 on the full
program (to the tolerance itself), then refines again.
"""

from __future__ import annotations

import math
import time

import torch

from ...errors import SolverError
from .apg import APGRun, apg
from .dual import DIVERGENCE_TOL, _SolverRun, _warm_duals
from .face_ops import cells_times_H, face_operator
from .gram import ConstraintOps, gram_solve
from .lowp import CHOICES as LOWP_CHOICES

#: Programs with at most this many inequality rows are solved on all of them (no working set).
ALL_ROWS_MAX = 4_000_000
#: Rows per group in the starting working set, and rows per group that enter per round (the most violated).
START_PER_GROUP = 16
ADD_PER_GROUP = 16
#: When violated rows exist, rows outside the working set with gap below 1 + ADD_BAND are candidates too (the
#: most violated first): rows that become violated as the solution sharpens enter a round earlier.
ADD_BAND = 0.1
#: Working-set rounds are solved to this residual while rows still enter.
ROUND_TOL = 1e-2
#: A working-set row with zero multiplier for two rounds and gap above 1 + DROP_GAP leaves the working set.
DROP_GAP = 0.5
#: The accelerated-gradient stage hands over to face refinement at this residual (or at its precision's floor), or
#: earlier, below 1e-3, once the support of λ changed in at most SETTLE_CHANGE of its rows over the last 5 steps.
HANDOVER_TOL = 1e-4
SETTLE_CHANGE = 2.5e-4
#: Cap on accelerated-gradient steps (all stages together) unless asked otherwise.
WORKSET_MAX_ITER = 20000
#: Face-refinement rounds before falling back to the accelerated gradient in float64, and conjugate-gradient
#: iterations per round.
REFINE_ROUNDS = 10
PCG_MAX_ITER = 1000
#: Relative accuracy of the correction solve on a face seen for the first time (rows entered or left since the
#: last round): loose, because the next round's residual tells whether the face is right.
FRESH_FACE_RTOL = 1e-3
#: The first round's accuracy when the accelerated stage's last two supports differed in more than FACE_RIGHT of the
#: face's rows (a face still moving: the round only shows which rows enter and leave).
WRONG_FACE_RTOL = 3e-2
FACE_RIGHT = 1e-4
#: A correction solve on a settled face asks for RTOL_FACTOR * (target / residual) of relative accuracy: the
#: residual that results was measured 2-15x below the target at RTOL_FACTOR = 0.3-1 on the one-hot benchmark sizes.
RTOL_FACTOR = 0.5
#: A face whose rows changed by at most this fraction since the last round, and that no violated row outside it joins
#: this round, counts as settled (solved to the accuracy the residual asks for): a handful of rows entering or leaving a
#: large face moves the solution little. A face that rows join is solved to FRESH_FACE_RTOL only (measured on onehot-c:
#: its next residual was the same, 5e-5, at 1e-4 and at 1e-3, set by the face's change; 90 instead of 100 iterations).
SETTLED_CHANGE = 1e-3
#: Refinement aims below tol by this factor so that the caller's independent recomputation certifies.
TARGET_FACTOR = 0.25


def solve_workset(program, *, tol: float = 1e-6, max_iter: int = WORKSET_MAX_ITER, warm_start=None,
                  dtype: torch.dtype | str | None = None, device=None, form: str = "auto",
                  working_set: str = "auto", check_every: int = 5, increments: str = "auto",
                  face_products: bool = True) -> _SolverRun:
    """Solve the max-margin ``program`` by the working-set active-face method (module doc).

    Parameters
    ----------
    program : SolverProgram
        Its dtype (float64 by default) is the precision of the refinement residuals and of the result.
    tol : float
        KKT tolerance the refinement aims at (the caller certifies).
    max_iter : int
        Cap on accelerated-gradient steps.
    warm_start : SVMResult, a solver's run or (λ, μ), or None
        Multipliers of the full program to start from.
    dtype : torch.float32 (default) or torch.float64
        Working precision of the accelerated gradient and of the correction solves.
    device : torch device or None
        Where to iterate (default: the program's device).
    form : "auto", "grouped" or "rows"
        Parametrization of the multipliers in the accelerated stage (:mod:`ntpbias.geometry.solvers.dual`).
    working_set : "auto" or "all"
        "all" solves on every row from the start; "auto" restricts beyond :data:`ALL_ROWS_MAX` rows.
    check_every : int
        Accelerated steps between residual checks.
    increments : "auto", "bfloat16" or "none"
        Between residual checks the accelerated gradient computes its products as a working-precision anchor plus a
        bfloat16 increment (:mod:`ntpbias.geometry.solvers.lowp`); "auto" does so for float32 work where bfloat16
        products are measured fast (CPUs with native bfloat16, GPUs).
    face_products : bool
        Let the refinement's conjugate gradients apply the face through its cells only where that is faster
        (:func:`ntpbias.geometry.solvers.face_ops.face_operator`; False: always the dense products).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> from ntpbias.geometry.constraints import constraints
    >>> from ntpbias.geometry.margins.program import MarginProgram
    >>> cons = constraints(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> sol = solve_workset(MarginProgram(cons.ineq, cons.eq))
    >>> sol.converged, [round(float(x), 6) for x in sol.lam]
    (True, [0.666667, 0.333333, 0.333333])
    """
    start = time.perf_counter()
    if working_set not in ("auto", "all"):
        raise SolverError(f"unknown working_set {working_set!r}; choose auto or all")
    if increments not in LOWP_CHOICES:
        raise SolverError(f"unknown increments {increments!r}; choose one of {', '.join(LOWP_CHOICES)}")
    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "float64": torch.float64}.get(dtype, dtype)
    work_dtype = dtype or torch.float32
    if work_dtype not in (torch.float32, torch.float64):
        raise SolverError(f"the workset solver iterates in float32 or float64, not {work_dtype}")
    home_dtype, home_device = program.ineq.H.dtype, program.ineq.H.device
    work_device = torch.device(device) if device is not None else home_device
    lam0, mu0 = _warm_duals(warm_start, program)
    n_in = len(program.ineq)
    n_eq = 0 if program.eq is None else len(program.eq)
    stats = {"working_set": [], "rounds": 0, "apg_iterations": 0, "pcg_iterations": 0, "refine_rounds": 0,
             "products": 0, "products_float64": 0, "products_lowp": 0, "handover_residual": math.nan,
             "increments": increments, "face_products": face_products}
    try:
        work = program.to(device=work_device, dtype=work_dtype)
        lam = torch.zeros(n_in, dtype=work_dtype, device=work_device) if lam0 is None else \
            lam0.to(device=work_device, dtype=work_dtype).clamp(min=0)
        mu = torch.zeros(n_eq, dtype=work_dtype, device=work_device) if mu0 is None else \
            mu0.to(device=work_device, dtype=work_dtype)
        precision = "float32+float64" if work_dtype == torch.float32 else "float64"
        already = lam0 is not None and _certified_enough(program, lam0, mu0, tol)
        run = None
        if not already:
            gordan = _GordanCheck(program)
            run = _accelerated(work, lam, mu, working_set, max(HANDOVER_TOL, tol), max_iter,
                               form, check_every, stats, gordan)
            if run.nonfinite and work_dtype == torch.float32:
                work = program.to(device=work_device, dtype=torch.float64)
                precision = "float64 (float32 gave non-finite values)"
                run = _accelerated(work, lam.double(), mu.double(), working_set, max(HANDOVER_TOL, tol), max_iter,
                                   form, check_every, stats, gordan)
            if run.nonfinite:
                raise SolverError("the workset solver produced non-finite values in float64; check the data for "
                                  "extreme magnitudes (rescale H)")
            if run.diverged:
                return _diverged(program, run, gordan, stats, precision, start)
            lam, mu = run.lam, run.mu
        src = (lam0, mu0) if already else (lam, mu)  # a certified warm start is returned as given
        if already:
            precision = "warm start (certified as given)"
        lam_h, mu_h = (x.to(device=home_device, dtype=home_dtype) for x in src)
        ok = already
        if not ok:
            ok, lam_h, mu_h = _refine(program, work, lam_h, mu_h, tol, stats)
        if not ok:  # the face was not identified: the accelerated gradient in the program's precision, then again
            home = program.to(device=work_device, dtype=home_dtype)
            left = max(1, max_iter - stats["apg_iterations"])
            gordan = _GordanCheck(program)
            run = apg(home, tol=TARGET_FACTOR * tol, max_iter=left, lam0=lam_h, mu0=mu_h, form=form,
                      check_every=check_every, patience=20, verify=gordan)
            stats["apg_iterations"] += run.iterations
            stats["products_float64"] += run.products
            if run.diverged:
                return _diverged(program, run, gordan, stats, precision + " (fallback)", start)
            ok, lam_h, mu_h = _refine(program, work, run.lam.to(home_device), run.mu.to(home_device), tol, stats)
            precision += " (fallback)"
    except torch.cuda.OutOfMemoryError:
        raise SolverError(f"out of GPU memory on {work_device} solving a max-margin program with "
                          f"{n_in + n_eq} constraints in {work_dtype}; use float32, a larger GPU, or device "
                          "cpu") from None
    except MemoryError:
        raise SolverError(f"out of memory solving a max-margin program with {n_in + n_eq} constraints") from None
    return _solution(program, lam_h, mu_h, stats, run, precision, start, converged=ok, diverged=False)


def _certified_enough(program, lam, mu, tol) -> bool:
    """Whether a warm start already meets ``tol`` (then it is returned as given)."""
    lam = lam.to(program.ineq.H)
    mu = mu.to(program.ineq.H)
    return bool((lam >= 0).all()) and program.certificate(program._stack(lam, mu), lam, mu).worst <= tol


def _accelerated(work, lam, mu, working_set, tol, max_iter, form, check_every, stats, gordan) -> APGRun:
    """Stages 1 and 2: the accelerated gradient on a growing working set of rows (module doc).

    Rounds are solved to :data:`ROUND_TOL` while rows still enter, then to ``tol``; a row enters when its gap is
    below 1 - (the round's tolerance)."""
    ineq = work.ineq
    n_in = len(ineq)
    increments = stats["increments"] if ineq.H.dtype == torch.float32 else "none"  # bfloat16 would overflow too
    if working_set == "all" or n_in <= ALL_ROWS_MAX:
        ws = torch.ones(n_in, dtype=torch.bool, device=lam.device)
    else:
        ws = _start_set(work, lam, mu)
        stats["products"] += 2
    gid = None  # rows' groups, for the working-set rounds (computed when a round first adds rows)
    idle = torch.zeros(n_in, dtype=torch.int8, device=lam.device)
    round_tol = tol if bool(ws.all()) else max(tol, ROUND_TOL)
    while True:
        stats["rounds"] += 1
        stats["working_set"].append(int(ws.sum()))
        sub = type(work)(ineq.subset(ws), work.eq)  # the program's own class (MarginProgram)
        left = max(1, max_iter - stats["apg_iterations"])
        gordan.rows = ws
        run = apg(sub, tol=round_tol, max_iter=left, lam0=lam[ws], mu0=mu, form=form, check_every=check_every,
                  verify=gordan, increments=increments, settle=SETTLE_CHANGE)
        stats["apg_iterations"] += run.iterations
        stats["products"] += run.products
        stats["products_lowp"] += run.products_lowp
        stats["handover_residual"] = run.residual
        stats["handover_face_changes"] = run.face_changes
        if run.nonfinite:
            return run
        full = torch.zeros_like(lam)
        full[ws] = run.lam
        run = APGRun(**{**run.__dict__, "lam": full})
        if bool(ws.all()) or run.diverged:
            return run
        lam, mu = run.lam, run.mu
        g = ineq.apply(work._stack(lam, mu))
        stats["products"] += 2
        violated = ~ws & (g < 1 - round_tol)
        if stats["apg_iterations"] >= max_iter:
            return run
        if not bool(violated.any()):
            if round_tol <= tol:
                return run
            round_tol = tol
            continue
        near = ~ws & (g < 1 + ADD_BAND)  # with the violated rows, the ones about to be: fewer rounds
        if gid is None:
            gid = torch.unique(ineq.a * ineq.H.shape[0] + ineq.j, return_inverse=True)[1]
        ws = ws | _top_per_group(torch.where(near, 1 - g, -math.inf), gid, ADD_PER_GROUP)
        idle = torch.where(ws & (lam == 0), idle + 1, torch.zeros_like(idle))
        ws = ws & ~((idle >= 2) & (g > 1 + DROP_GAP))


class _GordanCheck:
    """Whether multipliers of the working-set rows ``rows`` (zero elsewhere) prove the full program infeasible,
    decided in the program's own precision (float64): ||A_in^T λ + A_eq^T μ|| / Σλ plus a bound on its rounding
    error at most ``DIVERGENCE_TOL`` times the largest row norm (the test of
    :func:`ntpbias.geometry.solvers.dual._gordan_ratio`). A float32 screen proposes, this decides."""

    def __init__(self, program):
        self.program = program
        self.rows = None
        self._row_norm = None
        self.n_rows = program.n_rows
        self.eps = torch.finfo(program.ineq.H.dtype).eps

    @property
    def row_norm(self) -> float:
        """max_i ||A_i|| in the program's precision (computed on first use: most solves never need it)."""
        if self._row_norm is None:
            H = self.program.ineq.H
            ops = ConstraintOps.build(self.program.ineq, self.program.eq, H.device, H.dtype)
            self._row_norm = float(ops.row_sq_norms().max().sqrt()) if ops.R else 1.0
        return self._row_norm

    def full(self, lam: torch.Tensor, mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H = self.program.ineq.H
        lam = lam.to(device=H.device, dtype=H.dtype).clamp(min=0)
        if self.rows is not None and lam.numel() != len(self.program.ineq):
            out = torch.zeros(len(self.program.ineq), dtype=H.dtype, device=H.device)
            out[self.rows.to(H.device)] = lam
            lam = out
        return lam, mu.to(device=H.device, dtype=H.dtype)

    def ratio(self, lam: torch.Tensor, mu: torch.Tensor) -> float:
        """||A^T y|| / (Σλ · max_i ||A_i||) with the rounding bound (inf if Σλ = 0), for full-length (λ, μ)."""
        total = float(lam.sum())
        if not total > 0:
            return math.inf
        W = self.program._stack(lam, mu)
        mass = float(lam.abs().sum() + mu.abs().sum())
        bound = 8 * self.eps * math.sqrt(max(self.n_rows, 1)) * self.row_norm * mass / total
        return (float(torch.linalg.vector_norm(W)) / total + bound) / self.row_norm

    def __call__(self, lam: torch.Tensor, mu: torch.Tensor) -> bool:
        return self.ratio(*self.full(lam, mu)) <= DIVERGENCE_TOL


def _diverged(program, run: APGRun, gordan: _GordanCheck, stats, precision, start) -> _SolverRun:
    """The Gordan multipliers of a diverged run, on every row, normalized to Σλ = 1, with their float64 ratio."""
    lam, mu = gordan.full(run.lam, run.mu)
    total = lam.sum()
    lam, mu = lam / total, mu / total
    run = APGRun(**{**run.__dict__, "gordan": gordan.ratio(lam, mu)})
    return _solution(program, lam, mu, stats, run, precision, start, converged=False, diverged=True)


def _start_set(work, lam, mu) -> torch.Tensor:
    """Starting working set: per group the rows with the smallest gaps under the warm start, or under
    W0 = A_in^T 1 without one."""
    ineq = work.ineq
    y = lam if bool((lam > 0).any()) else torch.ones_like(lam)
    g = ineq.apply(work._stack(y, mu if bool((lam > 0).any()) else torch.zeros_like(mu)))
    gid = torch.unique(ineq.a * ineq.H.shape[0] + ineq.j, return_inverse=True)[1]
    return _top_per_group(-g, gid, START_PER_GROUP) | (lam > 0)


def _top_per_group(score: torch.Tensor, gid: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean mask of the (at most) k largest finite entries of ``score`` within each group ``gid``."""
    order = torch.argsort(score, descending=True, stable=True)
    order = order[torch.argsort(gid[order], stable=True)]
    counts = torch.bincount(gid)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(order), device=gid.device) - starts[gid[order]]
    keep = order[(rank < k) & torch.isfinite(score[order])]
    mask = torch.zeros_like(gid, dtype=torch.bool)
    mask[keep] = True
    return mask


def _refine(program, work, lam, mu, tol, stats) -> tuple[bool, torch.Tensor, torch.Tensor]:
    """Stage 3: primal-dual active-set rounds with float64 residuals and working-precision corrections."""
    ineq, eq = program.ineq, program.eq
    target = TARGET_FACTOR * tol
    work_dtype = work.ineq.H.dtype
    prev_face = None
    for _ in range(REFINE_ROUNDS + 1):
        W = _adjoint(program, lam, mu)
        g = ineq.apply(W)
        geq = eq.apply(W) if eq is not None else W.new_zeros(0)
        stats["products_float64"] += 2
        worst = _residual(W, g, geq, lam)
        stats["face_rows"] = int((lam > 0).sum())
        if worst <= target:
            stats["_W"] = W
            return True, lam, mu
        if stats["refine_rounds"] >= REFINE_ROUNDS:
            return False, lam, mu
        stats["refine_rounds"] += 1
        face = (lam > 0) | (g < 1 - target)
        first = prev_face is None
        entering = bool((face & (lam == 0)).any())  # violated rows join: the face changes again next round
        settled = not first and not entering and int((face != prev_face).sum()) <= SETTLED_CHANGE * int(face.sum())
        prev_face = face
        rows = work.ineq.subset(face.to(work.ineq.a.device))
        if work.eq is not None:
            rows = rows.concat(work.eq)
        resid = torch.cat([1 - g[face], -geq])
        scale = float(resid.abs().max())
        if not scale > 0:
            return False, lam, mu
        rtol = min(0.1, max(1e-5 if work_dtype == torch.float32 else 1e-12, RTOL_FACTOR * target / worst))
        if not settled:  # a face that just changed may change again: solve it loosely first
            moving = first and stats.get("handover_face_changes", -1) > FACE_RIGHT * int(face.sum())
            rtol = max(rtol, WRONG_FACE_RTOL if moving else FRESH_FACE_RTOL)
        op = face_operator(rows) if stats["face_products"] else rows
        delta, _, its = gram_solve(rows, (resid / scale).to(device=rows.H.device, dtype=work_dtype), rtol=rtol,
                                   max_iter=PCG_MAX_ITER, op=op, true_residual=False)
        stats["face_operator"] = type(op).__name__
        stats["pcg_iterations"] += its
        stats["products"] += 2 * its
        nu = torch.cat([lam[face], mu]) + delta.to(lam) * scale
        n_face = int(face.sum())
        lam = torch.zeros_like(lam)
        lam[face] = nu[:n_face].clamp(min=0)
        mu = nu[n_face:]
    return False, lam, mu


def _adjoint(program, lam: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """A_in^T λ + A_eq^T μ; without left factors as one scatter into the logit cells and one product through the
    nonzero ones (:func:`~ntpbias.geometry.solvers.face_ops.cells_times_H`: the multipliers vanish off the face)."""
    ineq, eq = program.ineq, program.eq
    if ineq.left is not None or (eq is not None and eq.left is not None):
        return program._stack(lam, mu)
    m = ineq.H.shape[0]
    Lam = torch.zeros(ineq.rows * m, dtype=lam.dtype, device=lam.device)
    Lam.index_add_(0, ineq.a * m + ineq.j, lam).index_add_(0, ineq.b * m + ineq.k, -lam)
    if eq is not None:
        Lam.index_add_(0, eq.a * m + eq.j, mu).index_add_(0, eq.b * m + eq.k, -mu)
    return cells_times_H(Lam.view(ineq.rows, m), ineq.H)


def _residual(W, g, geq, lam) -> float:
    """The worst of the KKT certificate's residuals (:class:`ntpbias.geometry.margins.result.Certificate`, relative) at
    W = A^T y, where stationarity and dual feasibility hold by construction: primal violation, complementary slackness
    over max |λ|, duality gap over max(½||W||², |Σλ - ½||W||²|)."""
    tiny = torch.finfo(W.dtype).tiny
    viol = max(_max0((1 - g).clamp(min=0)), _max0(geq.abs()))
    cs = _max0((lam * (g - 1)).abs()) / max(_max0(lam.abs()), tiny)
    primal = 0.5 * float((W * W).sum())
    dual = float(lam.sum()) - primal
    return max(viol, cs, abs(primal - dual) / max(primal, abs(dual), tiny))


def _solution(program, lam, mu, stats, run, precision, start, *, converged, diverged) -> _SolverRun:
    home = program.ineq.H
    W = stats.pop("_W", None)
    return _SolverRun(W=W if converged and not diverged else None,
        lam=lam.to(device=home.device, dtype=home.dtype), mu=mu.to(device=home.device, dtype=home.dtype),
        iterations=stats["apg_iterations"] + stats["pcg_iterations"], converged=converged, diverged=diverged,
        gordan_residual=math.inf if run is None else run.gordan, form="" if run is None else run.form,
        precision=precision, lipschitz=math.nan if run is None else run.step_constant,
        seconds=time.perf_counter() - start, details=dict(stats))


def _max0(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else 0.0
