"""Max-margin programs behind one result type with a KKT certificate.

Every hard-margin SVM of the three papers has the form

    minimize ½||W||²  subject to  A_in(W) >= 1,  A_eq(W) = 0,                                   (P)

with A_in, A_eq given as :class:`~ntpbias.geometry.constraints.LogitGaps`. Its dual is

    maximize Σ λ - ½||A_in^T λ + A_eq^T μ||²  subject to  λ >= 0,                               (D)

and at the optimum W = A_in^T λ + A_eq^T μ. :class:`MarginProgram` solves (P) with a chosen backend and
returns an :class:`~ntpbias.geometry.margins.result.SVMResult` whose certificate (the KKT residuals of (P)) is
recomputed from (W, λ, μ) independently of the solver, so a result is only called certified when it can be checked.

Backends: ``"clarabel"`` (cvxpy with the Clarabel interior-point solver named explicitly, the reference for
small problems; the constraints are assembled as one sparse matrix), ``"dual"`` (the matrix-free accelerated
projected-gradient method of :mod:`ntpbias.geometry.solvers.dual` on (D): two matrix products per iteration, memory
linear in the number of constraints, CPU or GPU, float64 or float32 with a float64 certificate, warm starts) and
``"workset"`` (:mod:`ntpbias.geometry.solvers.workset`: a working set of rows, an adaptive-step accelerated gradient in
float32 to find the active face, then active-face refinement with float64 residuals; the same operators, devices
and warm starts) and, for the NTP-SVM, ``"ipm"`` (:mod:`ntpbias.geometry.solvers.ipm`: an interior-point method whose
Newton systems are solved exactly by one Cholesky factorization per token, so that its cost does not depend on the
conditioning of the features: a trained model's features, where the first-order methods stall;
docs/benchmarks.md#ill-conditioned-features). ``"auto"`` picks Clarabel up to :data:`AUTO_CLARABEL_MAX_NNZ`
constraint-matrix nonzeros and the dual method beyond; :func:`ntp_svm` (the NTP-SVM, where the workset method was
measured 3-4x faster than the dual method: README, "Scale") picks the workset method beyond instead, so papers B and C
keep the backend their results were produced with.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from ...data.ntp import NTPData
from ...errors import NotSeparableError, SolverError
from ..config import SOLVERS
from ..constraints import LogitGaps, constraints
from ..scaling import normalized, stable_norm
from ..solvers.dual import DIVERGENCE_TOL, solve_dual
from ..solvers.gram import gram_solve
from ..solvers.ipm import solve_ipm
from ..solvers.workset import solve_workset
from .result import Certificate, SVMResult

#: A result is certified when every KKT residual is at most this.
KKT_TOL = 1e-6
#: Active-set polishing solves its linear system densely (exactly) up to this many rows and by matrix-free
#: conjugate gradients beyond.
POLISH_MAX_ROWS = 1000
#: ``solver="auto"`` uses Clarabel up to this many nonzeros in the constraint matrices, the dual method beyond
#: (Clarabel's KKT factorization is dense in min(#variables, #constraints) here: docs/paper-a-linear-ntp.md#objects).
AUTO_CLARABEL_MAX_NNZ = 300_000
#: Where a dual-solver NTP-SVM solution of a dataset is kept (``data._cache``) to warm-start later dual solves.
DUAL_CACHE_KEY = "ntp_svm_dual"


class MarginProgram:
    """minimize ½||W||² s.t. ``ineq(W) >= 1``, ``eq(W) = 0`` (both :class:`LogitGaps` on the same variable)."""

    def __init__(self, ineq: LogitGaps, eq: LogitGaps | None = None):
        if eq is not None and eq.var_shape != ineq.var_shape:
            raise SolverError(f"constraint shapes differ: {ineq.var_shape} vs {eq.var_shape}")
        self.ineq = ineq
        self.eq = eq if eq is not None and len(eq) else None

    @property
    def var_shape(self) -> tuple[int, int]:
        return self.ineq.var_shape

    @property
    def n_rows(self) -> int:
        """Number of constraints (inequalities and equalities)."""
        return len(self.ineq) + (0 if self.eq is None else len(self.eq))

    @property
    def nnz(self) -> int:
        """Nonzeros of the stacked constraint matrix (2c per row; rows·c per row with a left factor)."""
        c = self.ineq.H.shape[1]
        per_row = 2 * c if self.ineq.left is None else self.ineq.rows * c
        return self.n_rows * per_row

    def choose_solver(self, solver: str = "auto") -> str:
        """The backend ``solver`` resolves to: ``"auto"`` -> Clarabel for small problems, the dual beyond (the
        NTP-SVM's :func:`ntp_svm` picks the workset method beyond instead: module doc)."""
        if solver not in SOLVERS:
            raise SolverError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
        if solver == "auto":
            return "clarabel" if self.nnz <= AUTO_CLARABEL_MAX_NNZ else "dual"
        return solver

    def to(self, device=None, dtype=None) -> MarginProgram:
        """A copy of the program with its tensors on ``device`` and floating tensors in ``dtype``."""
        def conv(A: LogitGaps) -> LogitGaps:
            f = {"device": device, "dtype": dtype or A.H.dtype}
            return LogitGaps(A.H.to(**f), A.rows, *(getattr(A, n).to(device) for n in "ajbk"),
                             None if A.left is None else A.left.to(**f))

        return MarginProgram(conv(self.ineq), None if self.eq is None else conv(self.eq))

    def _stack(self, lam: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        """A_in^T λ + A_eq^T μ."""
        out = self.ineq.adjoint(lam)
        if self.eq is not None:
            out = out + self.eq.adjoint(mu)
        return out

    def certificate(self, W: torch.Tensor, lam: torch.Tensor, mu: torch.Tensor) -> Certificate:
        """KKT residuals of (P) at (W, λ, μ), computed in the dtype of W (use float64 to certify)."""
        return self._certify(W, lam, mu)[0]

    def _certify(self, W: torch.Tensor, lam: torch.Tensor, mu: torch.Tensor) -> tuple[Certificate, float]:
        """(:meth:`certificate`, the smallest gap min_i A_in(W)_i) from one product W H^T."""
        g = self.ineq.apply(W)
        viol = _max0(torch.clamp(1 - g, min=0))
        if self.eq is not None:
            viol = max(viol, _max0(self.eq.apply(W).abs()))
        AtY = self._stack(lam, mu)
        tiny = torch.finfo(W.dtype).tiny
        wnorm, anorm = stable_norm(W), stable_norm(AtY)
        primal = 0.5 * wnorm**2
        dual = float(lam.sum()) - 0.5 * anorm**2
        lam_max = max(_max0(lam.abs()), tiny)
        return Certificate(  # relative residuals: the same at every scale of the data (Certificate's docstring)
            primal_violation=viol,
            dual_violation=_max0(torch.clamp(-lam, min=0)) / lam_max + 0.0,
            complementary_slackness=_max0((lam * (g - 1)).abs()) / lam_max,
            stationarity=stable_norm(W - AtY) / max(wnorm, anorm, tiny),
            duality_gap=abs(primal - dual) / max(primal, abs(dual), tiny),
        ), float(g.min())

    def solve(self, solver: str = "auto", *, tol: float = KKT_TOL, polish: bool = True, warm_start=None,
              dtype: torch.dtype | str | None = None, device=None, **options) -> SVMResult:
        """Solve (P) and certify the result.

        Parameters
        ----------
        solver : "auto", "clarabel", "dual", "workset" or "ipm" (module doc; :meth:`choose_solver`).
        tol : float, the KKT tolerance of the certificate.
        polish : bool, refine on the active set (:meth:`polish`) unless already exact (workset: only a result its
            own refinement left uncertified).
        warm_start : SVMResult, a solver's run or (λ, μ); dual and workset (Clarabel has no warm start and ignores it).
        dtype, device : working precision and device of the dual or workset solver (the certificate is computed in
            the program's own dtype, float64 by default; workset iterates in float32 unless told float64).
        **options : passed to the backend (Clarabel: ``max_iter``, ``eps``; dual: see
            :func:`~ntpbias.geometry.solvers.dual.solve_dual`; workset:
            :func:`~ntpbias.geometry.solvers.workset.solve_workset`; ipm: ``max_iter``,
            :func:`~ntpbias.geometry.solvers.ipm.solve_ipm`).

        Raises
        ------
        NotSeparableError
            The program is infeasible (Clarabel's infeasibility status, or the dual diverging).
        """
        name = self.choose_solver(solver)
        start = time.perf_counter()
        if name == "clarabel":
            W, lam, mu, iters, status = _solve_clarabel(self, **options)
            details = {}
        else:
            backend = {"workset": solve_workset, "ipm": solve_ipm}.get(name, solve_dual)
            run = backend(self, tol=tol, warm_start=warm_start, dtype=dtype, device=device, **options)
            if run.diverged:
                raise NotSeparableError(
                    "not separable: the dual of the max-margin program grows without bound (no W reaches a "
                    f"normalized margin of {DIVERGENCE_TOL:g} x the largest constraint norm; Gordan residual "
                    f"{run.gordan_residual:.1e}); run `ntpbias analyze` for the separability verdict and its "
                    "certificate"
                )
            lam, mu, iters = run.lam, run.mu, run.iterations
            W = self._stack(lam, mu) if run.W is None else run.W  # the workset refinement's A^T y, if it has it
            status = "optimal" if run.converged else run.details.get(
                "stopped", f"iteration limit ({iters} iterations; raise max_iter)")
            details = {"form": run.form, "precision": run.precision, "lipschitz": run.lipschitz,
                       "dual_seconds": run.seconds, **run.details}
            if name == "workset":  # it ends with its own active-face refinement; polish only what that missed
                polish = polish and not run.converged
            elif name == "ipm":  # its own exact face solve is the polish (the generic one's CG would stall)
                polish = False
        return self.finish(W, lam, mu, solver=name, start=start, iterations=iters, status=status, tol=tol,
                           polish=polish, details=details)

    def finish(self, W, lam, mu, *, solver: str, start: float, iterations: int | None, status: str, tol: float,
               polish: bool = True, details: dict | None = None) -> SVMResult:
        """Certify a backend's (W, λ, μ), polish it unless already exact, and warn if it misses ``tol``."""
        result = self._result(W, lam, mu, solver, start, iterations, tol, details or {})
        if polish and not (result.certified and result.certificate.worst < 1e-12):
            polished = self.polish(result)
            if polished is None:
                result.details["polish"] = "rejected (not KKT-valid)"
            elif polished.certificate.worst < result.certificate.worst:
                result = polished
                result.details["polish"] = "applied"
            else:
                result.details["polish"] = "no improvement"
        if status != "optimal" and not result.certified:
            warnings.warn(f"{solver} stopped with status {status!r}; KKT residual {result.certificate.worst:.2e} > "
                          f"{tol:g}", stacklevel=3)
        return result

    def _result(self, W, lam, mu, solver, start, iters, tol, details=None) -> SVMResult:
        cert, min_gap = self._certify(W, lam, mu)
        return SVMResult(
            W=W, dual_ineq=lam, dual_eq=mu, certificate=cert,
            status="optimal" if cert.worst <= tol else "inaccurate", solver=solver,
            solve_seconds=time.perf_counter() - start, iterations=iters, tol=tol,
            min_gap=min_gap, details=dict(details or {}),
        )

    def polish(self, result: SVMResult, active_tol: float = 1e-6) -> SVMResult | None:
        """Active-set refinement: solve the equality-constrained problem on the (nearly) active rows exactly.

        With active rows A_act (margin within ``active_tol`` of 1, or λ > 0) and the equality rows, the optimum
        is W = A_c^T ν with (A_c A_c^T) ν = [1; 0]: solved densely up to :data:`POLISH_MAX_ROWS` rows, and by
        matrix-free conjugate gradients (:func:`~ntpbias.geometry.solvers.gram.gram_solve`, started from the current
        multipliers) beyond. Returns None when the refined point is not KKT-valid (a negative multiplier or a
        violated inactive row).
        """
        g = self.ineq.apply(result.W)
        lam_scale = max(1.0, _max0(result.dual_ineq))
        act = (g - 1 <= active_tol) | (result.dual_ineq > 1e-8 * lam_scale)
        n_act = int(act.sum())
        n_eq = 0 if self.eq is None else len(self.eq)
        if n_act == 0:
            return None
        rows = self.ineq.subset(act)
        if self.eq is not None:
            rows = rows.concat(self.eq)
        if n_act + n_eq > POLISH_MAX_ROWS:
            return self._polish_cg(result, rows, act)
        G = rows.gram()
        rhs = torch.cat([torch.ones(n_act, dtype=G.dtype, device=G.device),
                         torch.zeros(n_eq, dtype=G.dtype, device=G.device)])
        nu = torch.linalg.lstsq(G.cpu(), rhs.cpu()[:, None], driver="gelsd").solution[:, 0].to(G.device)
        if n_act and float(nu[:n_act].min()) < -1e-10:  # degenerate (non-unique) multipliers: ask for λ >= 0
            from scipy.optimize import lsq_linear

            lb = np.r_[np.zeros(n_act), np.full(n_eq, -np.inf)]
            sol = lsq_linear(G.cpu().numpy(), rhs.cpu().numpy(), bounds=(lb, np.inf), method="bvls", tol=1e-15)
            nu = torch.as_tensor(sol.x, dtype=G.dtype, device=G.device)
        W = rows.adjoint(nu)
        lam = torch.zeros_like(result.dual_ineq)
        lam[act] = nu[:n_act]
        mu = nu[n_act:] if n_eq else result.dual_eq
        if float(lam.min()) < -1e-10 or float(self.ineq.apply(W).min()) < 1 - 1e-10:
            return None
        start = time.perf_counter() - result.solve_seconds
        return self._result(W, lam, mu, result.solver, start, result.iterations, result.tol, result.details)

    def _polish_cg(self, result: SVMResult, rows: LogitGaps, act: torch.Tensor) -> SVMResult | None:
        """The active-set system of :meth:`polish` by matrix-free CG (large active sets)."""
        n_act = int(act.sum())
        dtype, device = result.W.dtype, result.W.device
        rhs = torch.cat([torch.ones(n_act, dtype=dtype, device=device),
                         torch.zeros(len(rows) - n_act, dtype=dtype, device=device)])
        nu, rel, _ = gram_solve(rows, rhs, x0=torch.cat([result.dual_ineq[act], result.dual_eq]), rtol=1e-13,
                                max_iter=2000)
        if not bool(torch.isfinite(nu).all()) or float(rel) > 1e-9:
            return None
        W = rows.adjoint(nu)
        lam = torch.zeros_like(result.dual_ineq)
        lam[act] = nu[:n_act]
        mu = nu[n_act:] if self.eq is not None else result.dual_eq
        if float(lam.min()) < -1e-10 or float(self.ineq.apply(W).min()) < 1 - 1e-10:
            return None
        start = time.perf_counter() - result.solve_seconds
        return self._result(W, lam, mu, result.solver, start, result.iterations, result.tol, result.details)


def _max0(t: torch.Tensor) -> float:
    """max of a tensor as a float, 0 for an empty one."""
    return float(t.max()) if t.numel() else 0.0


def _solve_clarabel(program: MarginProgram, *, max_iter: int = 200, eps: float = 1e-10):
    """cvxpy + Clarabel on vec(W) with the constraints as one sparse matrix each."""
    import cvxpy as cp

    A_in = program.ineq.to_sparse()
    n = A_in.shape[1]
    x = cp.Variable(n)
    cons = [A_in @ x >= 1]
    if program.eq is not None:
        cons.append(program.eq.to_sparse() @ x == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(x)), cons)
    try:
        prob.solve(solver=cp.CLARABEL, max_iter=max_iter, tol_gap_abs=eps, tol_gap_rel=eps, tol_feas=eps,
                   tol_ktratio=1e-8)
    except cp.error.SolverError as exc:
        raise SolverError(f"Clarabel failed: {exc}") from None
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise NotSeparableError(
            "the max-margin program is infeasible: the data are not separable (run `ntpbias analyze` for the "
            "separability verdict and its certificate)"
        )
    if x.value is None:
        raise SolverError(f"Clarabel returned no solution (status {prob.status})")
    dtype, device = program.ineq.H.dtype, program.ineq.H.device
    W = torch.as_tensor(x.value, dtype=dtype, device=device).reshape(program.var_shape)
    lam = torch.as_tensor(np.asarray(cons[0].dual_value), dtype=dtype, device=device).reshape(-1)
    if program.eq is not None:
        mu = -torch.as_tensor(np.asarray(cons[1].dual_value), dtype=dtype, device=device).reshape(-1)
    else:
        mu = torch.zeros(0, dtype=dtype, device=device)
    iters = prob.solver_stats.num_iters if prob.solver_stats is not None else None
    return W, lam, mu, iters, prob.status


def ntp_svm(data: NTPData, solver: str = "auto", *, tol: float = KKT_TOL, warm_start=None, norm: str = "l2",
            **options) -> SVMResult:
    """The NTP-SVM W^mm = argmin ||W|| s.t. (6a), (6b) (Def. 3 of paper A), in the reduced (anchor) form
    of docs/paper-a-linear-ntp.md#objects (items 4 and 10).

    ``norm``: "l2" (this program; the default), or "linf", "l1", "spectral", "nuclear": the same constraints with that
    norm minimized, with the certificate of that norm's program (:func:`~ntpbias.geometry.margins.norm_svm.norm_svm`;
    docs/optimizers.md#the-max-margin-programs; ``solver`` must then be "auto" or "clarabel", and ``options`` go to it).

    Its ``min_gap`` is 1 (the smallest logit gap) and the maximum normalized NTP margin is 1/||W^mm||.
    ``solver="auto"`` takes Clarabel up to :data:`AUTO_CLARABEL_MAX_NNZ` nonzeros and the workset method beyond.
    ``solver``, ``warm_start`` and ``options`` (``dtype``, ``device``, ``max_iter``, ...) go to
    :meth:`MarginProgram.solve`; W^mm depends on the data only through H and the supports, so a solution for
    the same supports (or nearby H) is a good warm start. Without one, the dual solver starts from the solution
    the dual separability check (:func:`~ntpbias.geometry.separability.verdict.ntp_separability`) left for ``data``.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> res = ntp_svm(data)
    >>> res.certified, round(res.min_gap, 9)
    (True, 1.0)
    """
    if norm != "l2":
        from .norm_svm import norm_svm

        if solver not in ("auto", "clarabel"):
            raise SolverError(f"the {norm} NTP-SVM is solved by Clarabel: solver must be 'auto' or 'clarabel', got "
                              f"{solver!r}")
        unit, scale = normalized(data)  # solved at unit scale, answered in the user's units (geometry.scaling)
        return norm_svm(unit, norm, tol=tol, **options).in_user_units(scale)
    data, scale = normalized(data)  # solved at unit scale, answered in the user's units (geometry.scaling)
    cons = constraints(data)
    if len(cons.ineq) == 0:
        raise NotSeparableError("every context has full support: no out-of-support token, so no max-margin direction")
    program = MarginProgram(cons.ineq, cons.eq)
    if solver == "auto":
        solver = "clarabel" if program.nnz <= AUTO_CLARABEL_MAX_NNZ else "workset"
    if warm_start is None and program.choose_solver(solver) in ("dual", "workset"):
        warm_start = data._cache.get(DUAL_CACHE_KEY)  # e.g. from the dual separability check (unit scale)
    elif warm_start is not None and scale != 1.0:  # the user's multipliers, at unit scale
        lam = getattr(warm_start, "dual_ineq", getattr(warm_start, "lam", None))
        mu = getattr(warm_start, "dual_eq", getattr(warm_start, "mu", None))
        if isinstance(warm_start, tuple | list):
            lam, mu = warm_start
        warm_start = (torch.as_tensor(lam) * scale**2, None if mu is None else torch.as_tensor(mu) * scale**2)
    return program.solve(solver, tol=tol, warm_start=warm_start, **options).in_user_units(scale)


def ntp_margin(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """γ(W) = min_{j, z∈S_j, v∉S_j} (e_z - e_v)^T W h̄_j, the NTP margin of Sec. 4 of paper A, for W (..., V, d);
    +inf without out-of-support pairs.

    The normalized margin is γ(W)/||W||, at most 1/||W^mm|| over F^⊥.
    """
    L = data.H @ W.mT  # (..., m, V)
    inf = torch.tensor(float("inf"), dtype=L.dtype, device=L.device)
    lowest_in = torch.where(data.support, L, inf).amin(-1)
    highest_out = torch.where(data.support, -inf, L).amax(-1)
    return (lowest_in - highest_out).amin(-1)

