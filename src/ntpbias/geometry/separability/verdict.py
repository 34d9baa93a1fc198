"""NTP-separability (Def. 2 of paper A, eqs. (6a)-(6b)) decided with a certificate, by an LP or by the dual solver.

Separable: some W satisfies A_eq(W) = 0 (W ∈ F^⊥, in-support logits tied) and A_in(W) >= 1 (in-support logits
exceed out-of-support ones). Two methods:

* ``"lp"`` (small problems): one LP (HiGHS through scipy), the capped margin program

      max s  subject to  A_in(W) >= s 1,  A_eq(W) = 0,  s <= 1        (W free),

  decides either way. Its optimum is s* = 1 when the data are separable (scale any separating W) and s* = 0
  otherwise; the primal W is then cleaned (projected onto F^⊥ exactly and rescaled to margin 1) and checked, and
  otherwise the LP duals are a Gordan-type certificate: y >= 0 with Σy = 1 and μ such that
  A_in^T y + A_eq^T μ = 0 (stationarity in W and in s, where the bound s <= 1 is inactive), which proves that no W
  has A_in(W) > 0 and A_eq(W) = 0 (since then 0 = <W, A_in^T y + A_eq^T μ> = y^T A_in(W) > 0). When the duals
  miss the tolerance, a dedicated Gordan LP (find such y, μ) recomputes the certificate. Large LPs (from
  :data:`IPM_MIN_ROWS` rows and :data:`IPM_MIN_COLUMNS` columns) are solved by HiGHS's interior-point method with
  crossover, small ones by dual simplex. ``lp_form="cokernel"`` solves the Gordan alternative over the cokernel of
  H instead (:mod:`ntpbias.geometry.separability.cokernel`: (m - d) V variables, for supports near V and d near m
  thousands of times smaller), with the same certificates checked the same way; ``lp_form="auto"`` (the default) takes
  the form with fewer constraint nonzeros. ``lp_form="feasibility"`` is the earlier two-LP path (the feasibility LP
  A_in(W) >= 1, then the Gordan LP on infeasible data), kept as the reference of
  ``benchmarks/bench_separability.py``: it solves two LPs per non-separable verdict.
* ``"dual"`` (large problems, where the LP's constraint matrix is too big): the matrix-free dual solver of the
  NTP-SVM (:mod:`ntpbias.geometry.solvers.dual`). A certified W^mm is a separating W (cleaned and rescaled as above) and
  is kept for the NTP-SVM; a diverging dual yields normalized multipliers as the Gordan certificate, whose
  residual is reported (it is small but not zero: divergence is detected at a finite iterate).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch

from ..._repr import short_repr
from ...data.ntp import NTPData
from ...errors import SolverError
from ..constraints import constraints
from ..linear.subspace import subspace
from ..margins.program import DUAL_CACHE_KEY, KKT_TOL, MarginProgram, SVMResult
from ..scaling import in_user_units, normalized
from ..solvers.dual import DIVERGENCE_TOL, solve_dual
from ..solvers.lp import highs_linprog
from .cokernel import cokernel_lp, cokernel_nnz

#: A separating certificate must have margin >= 1 - CERT_TOL after cleaning; an infeasibility certificate
#: must have residual ||A_in^T y + A_eq^T μ|| <= CERT_TOL.
CERT_TOL = 1e-7
#: ``method="auto"`` solves the LP up to this many constraint-matrix nonzeros and uses the dual solver beyond.
LP_MAX_NNZ = 300_000
#: ``method="auto"``: when the dual solver does not decide, the LP still does up to this many nonzeros
FALLBACK_LP_MAX_NNZ = 20 * LP_MAX_NNZ
#: ``lp_form`` choices: ``auto`` takes the one of margin / cokernel with fewer constraint nonzeros
LP_FORMS = ("auto", "margin", "cokernel", "feasibility")
#: the margin LP uses HiGHS's interior-point method (with crossover) from this many rows and columns (V*d), dual
#: simplex below. Measured on random NTP data near the threshold: IPM 1.2-3.5x faster with >= 1600 rows and >= 600
#: columns, equal at ~1800 x 440, 1.2-2x slower with 800 rows (V = 2, m = 800; V = 5, |S_j| = 2, m = 200)
IPM_MIN_ROWS, IPM_MIN_COLUMNS = 1200, 400
#: how the verdict is decided (``method`` of :func:`ntp_separability`)
METHODS = ("auto", "lp", "dual")


@short_repr
@dataclass(frozen=True, eq=False)
class SeparabilityResult:
    """Verdict of the NTP-separability LP.

    Attributes
    ----------
    separable : bool
    W : Tensor (V, d) or None
        When separable: a certificate in F^⊥ with min in-vs-out logit gap exactly 1 (not the max-margin one).
    farkas_y, farkas_mu : Tensor or None
        When not separable: y >= 0, Σy = 1, μ with A_in^T y + A_eq^T μ ≈ 0.
    residual : float
        The certificate's defect: max(1 - margin, ||A_eq(W)||) if separable, else ||A_in^T y + A_eq^T μ||.
    certified : bool
        ``residual <= CERT_TOL``.
    reason : str
        One line saying why (shown in reports).
    method : str
        What decided: ``"lp"``, ``"dual"``, ``"interior"`` (the interior-point search of
        :mod:`~ntpbias.geometry.separability.nested`), ``"trivial"`` (no out-of-support token) or ``"structure"``
        (the support graph ties a context: :mod:`~ntpbias.geometry.separability.structure`).
    svm : SVMResult or None
        With ``method="dual"`` on separable data: the NTP-SVM solution whose W^mm served as the certificate.
    """

    separable: bool
    W: torch.Tensor | None
    farkas_y: torch.Tensor | None
    farkas_mu: torch.Tensor | None
    residual: float
    certified: bool
    reason: str
    method: str = "lp"
    svm: SVMResult | None = None

    def _summary(self) -> dict:
        """What ``repr`` shows: the verdict, its certificate and the method that decided."""
        return {"separable": self.separable, "certified": self.certified, "residual": self.residual,
                "method": self.method, "reason": self.reason}


def ntp_separability(data: NTPData, *, method: str = "auto", lp_form: str = "auto",
                     **solver_options) -> SeparabilityResult:
    """Decide NTP-separability of ``data`` and return a checkable certificate.

    ``method``: ``"auto"`` (the LP up to :data:`LP_MAX_NNZ` constraint nonzeros, the dual solver beyond),
    ``"lp"`` or ``"dual"``. ``lp_form`` (LP only): ``"auto"`` (the smaller of the next two), ``"margin"`` (one LP
    decides both ways, module docstring), ``"cokernel"`` (the Gordan alternative over the cokernel of H,
    :mod:`ntpbias.geometry.separability.cokernel`) or ``"feasibility"`` (the earlier two-LP path). ``solver_options``
    (``dtype``, ``device``, ``max_iter``, ``warm_start``) go to the dual solver.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> ntp_separability(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])).separable
    True

    The verdict is taken at unit scale (:mod:`ntpbias.geometry.scaling`): the same for H and cH, with W (and the
    NTP-SVM of the dual method) in the user's units and residuals relative to the data's scale.
    """
    unit, scale = normalized(data)
    result = _decide(unit, method=method, lp_form=lp_form, **solver_options)
    if scale == 1.0:
        return result
    return replace(result, W=in_user_units(result.W, scale), svm=None if result.svm is None
                   else result.svm.in_user_units(scale))


def _decide(data: NTPData, *, method: str, lp_form: str, **solver_options) -> SeparabilityResult:
    """:func:`ntp_separability` on data of unit scale."""
    cons = constraints(data)
    if method not in METHODS:
        raise SolverError(f"unknown separability method {method!r}; choose {', '.join(METHODS)}")
    if lp_form not in LP_FORMS:
        raise SolverError(f"unknown separability lp_form {lp_form!r}; choose {', '.join(LP_FORMS)}")
    if len(cons.ineq) == 0:
        return SeparabilityResult(False, None, None, None, 0.0, True,
                                  "every context has full support: the entropy is attained at W* and no "
                                  "out-of-support token needs to be separated", method="trivial")
    program = MarginProgram(cons.ineq, cons.eq)
    if lp_form == "auto":
        lp_form = "cokernel" if cokernel_nnz(data, cons) < program.nnz else "margin"
    lp_nnz = cokernel_nnz(data, cons) if lp_form == "cokernel" else program.nnz
    if method == "auto" and lp_nnz > LP_MAX_NNZ:  # the support graph first: it decides most large non-separable data
        tied = _structural_verdict(data)
        if tied is not None:
            return tied
    if method == "dual" or (method == "auto" and lp_nnz > LP_MAX_NNZ):
        try:
            return _dual_verdict(data, program, **solver_options)
        except SolverError:
            if method == "dual" or lp_nnz > FALLBACK_LP_MAX_NNZ:
                raise  # (auto) the dual did not decide: the certified LP below does
    if lp_form == "cokernel":
        verdict = cokernel_verdict(data, cons)
        if verdict is not None:
            return verdict
    A_in = cons.ineq.to_sparse()
    A_eq = cons.eq.to_sparse() if len(cons.eq) else None
    r_in, n = A_in.shape
    b_eq = None if A_eq is None else np.zeros(A_eq.shape[0])
    if lp_form == "feasibility":
        res = highs_linprog(np.zeros(n), A_ub=-A_in, b_ub=-np.ones(r_in), A_eq=A_eq, b_eq=b_eq, bounds=(None, None),
                            algorithm="highs-ds")
        if res.status == 0:
            verdict = _separating_certificate(res.x, data, cons)
            if verdict is not None:
                return verdict
        elif res.status not in (2, 4):  # 2 = infeasible; 4 = HiGHS numerical trouble: let the Gordan LP decide
            raise SolverError(f"separability LP failed: {res.message}")
        return _gordan_certificate(A_in, A_eq, data)
    # the capped margin LP over x = [s, vec W]: min -s, s 1 - A_in W <= 0, A_eq W = 0, s <= 1
    c = np.zeros(n + 1)
    c[0] = -1.0
    A_ub = sp.hstack([sp.csr_matrix(np.ones((r_in, 1))), -A_in]).tocsr()
    A_eq1 = None if A_eq is None else sp.hstack([sp.csr_matrix((A_eq.shape[0], 1)), A_eq]).tocsr()
    rows = r_in + (0 if A_eq is None else A_eq.shape[0])
    algorithm = "highs-ipm" if rows >= IPM_MIN_ROWS and n >= IPM_MIN_COLUMNS else "highs-ds"
    res = highs_linprog(c, A_ub=A_ub, b_ub=np.zeros(r_in), A_eq=A_eq1, b_eq=b_eq,
                        bounds=[(None, 1.0)] + [(None, None)] * n, algorithm=algorithm)
    if res.status == 0 and res.x[0] > 0.5:  # s* = 1: the primal W separates
        verdict = _separating_certificate(res.x[1:], data, cons)
        if verdict is not None:
            return verdict
    elif res.status == 0:  # s* = 0: the duals (scipy's marginals are the negated multipliers) are the certificate
        y = np.maximum(-res.ineqlin.marginals, 0.0)
        mu = res.eqlin.marginals if A_eq is not None else np.zeros(0)
        if y.sum() > 0:
            verdict = _gordan_result(A_in, A_eq, y / y.sum(), mu / y.sum(), data)
            if verdict.certified:
                return verdict
    elif res.status != 4:  # 4 = HiGHS numerical trouble: let the Gordan LP decide
        raise SolverError(f"separability LP failed: {res.message}")
    return _gordan_certificate(A_in, A_eq, data)


def _structural_verdict(data: NTPData) -> SeparabilityResult | None:
    """Not separable when the support graph ties a context (:mod:`~ntpbias.geometry.separability.structure`), with
    the certificate's residual; None when structure does not decide that, or when its certificate misses its tolerance
    (the other methods decide then)."""
    from .structure import ntp_structure

    st = ntp_structure(data)
    if st.separable is not False or st.separability["method"] != "structure" or not st.separability["certified"]:
        return None
    sep = st.separability
    return SeparabilityResult(False, None, None, None, sep["residual"], sep["certified"], sep["reason"],
                              method="structure")


def cokernel_verdict(data: NTPData, cons) -> SeparabilityResult | None:
    """The verdict of the cokernel LP (:mod:`ntpbias.geometry.separability.cokernel`) with its certificate checked on
    the original constraints ``cons`` (:func:`~ntpbias.geometry.constraints.constraints` of ``data``, at unit scale);
    None when the certificate misses the tolerance (:func:`ntp_separability` then solves the margin LP)."""
    rows = len(cons.ineq) + max(data.m - data.d, 0)
    columns = data.V * max(data.m - data.d, 0)
    algorithm = "highs-ipm" if rows >= IPM_MIN_ROWS and columns >= IPM_MIN_COLUMNS else "highs-ds"
    sol = cokernel_lp(data, cons, algorithm=algorithm)
    if sol.separable:
        verdict = _separating_certificate(sol.W.reshape(-1), data, cons)
        return verdict if verdict is not None and verdict.certified else None
    dtype, device = data.H.dtype, data.H.device
    y, mu = (torch.as_tensor(x, dtype=dtype, device=device) for x in (sol.y, sol.mu))
    residual = cons.ineq.adjoint(y) + (cons.eq.adjoint(mu) if len(cons.eq) else 0)
    resid = float(torch.linalg.vector_norm(residual))
    if resid > CERT_TOL:
        return None
    return SeparabilityResult(False, None, y, mu, resid, True,
                              "no W in F^⊥ separates in-support from out-of-support tokens (Gordan certificate from "
                              "the cokernel LP: a convex combination of the separation constraints cancels out)")


def _separating_certificate(x: np.ndarray, data: NTPData, cons) -> SeparabilityResult | None:
    """The LP's W (flattened, (V*d,)) cleaned: projected onto F^⊥, rescaled to margin 1; None if it separates
    nothing after the projection."""
    W = torch.as_tensor(x, dtype=data.H.dtype).reshape(data.V, data.d).to(data.H.device)
    W = subspace(data).project_perp(W)
    margin = float(cons.ineq.apply(W).min())
    if margin <= 0:
        return None
    W = W / margin
    eq_res = float(cons.eq.apply(W).abs().max()) if len(cons.eq) else 0.0
    residual = max(1 - float(cons.ineq.apply(W).min()), eq_res, 0.0)
    return SeparabilityResult(True, W, None, None, residual, residual <= CERT_TOL,
                              "an LP found W in F^⊥ with every in-support logit at least 1 above every "
                              "out-of-support logit")


def _dual_verdict(data: NTPData, program: MarginProgram, **options) -> SeparabilityResult:
    """Separability from the dual NTP-SVM solver: W^mm (cleaned) as the separating W, or Gordan multipliers."""
    start = time.perf_counter()
    run = solve_dual(program, tol=KKT_TOL, **options)
    if run.diverged:
        residual = float(torch.linalg.vector_norm(program._stack(run.lam, run.mu)))
        return SeparabilityResult(
            False, None, run.lam, run.mu, residual, residual <= CERT_TOL,
            "no W in F^⊥ separates in-support from out-of-support tokens: the dual of the NTP-SVM diverges "
            f"(Gordan multipliers from the dual solver after {run.iterations} iterations; every W has normalized "
            f"margin below {DIVERGENCE_TOL:g} x max constraint norm)", method="dual")
    status = "optimal" if run.converged else f"iteration limit ({run.iterations} iterations; raise max_iter)"
    svm = program.finish(program._stack(run.lam, run.mu), run.lam, run.mu, solver="dual", start=start,
                         iterations=run.iterations, status=status, tol=KKT_TOL,
                         details={"form": run.form, "precision": run.precision, "lipschitz": run.lipschitz,
                                  "dual_seconds": run.seconds})
    data._cache[DUAL_CACHE_KEY] = svm  # a warm start for a later ntp_svm(data, "dual")
    W = subspace(data).project_perp(svm.W)
    margin = float(program.ineq.apply(W).min())
    if margin <= 0:
        raise SolverError(f"separability undecided: the dual solver stopped after {run.iterations} iterations without "
                          f"a verdict (KKT residual {svm.certificate.worst:.1e}), the support graph does not decide it "
                          "and the LP is too large; analyse fewer contexts (or a smaller embedding)")
    W = W / margin
    eq_res = float(program.eq.apply(W).abs().max()) if program.eq is not None else 0.0
    residual = max(1 - float(program.ineq.apply(W).min()), eq_res, 0.0)
    how = "the certified" if svm.certified else "an uncertified (iteration-capped)"
    return SeparabilityResult(True, W, None, None, residual, residual <= CERT_TOL,
                              f"{how} max-margin W^mm from the dual solver, projected onto F^⊥, has every "
                              "in-support logit above every out-of-support logit", method="dual", svm=svm)


def _gordan_certificate(A_in: sp.csr_matrix, A_eq: sp.csr_matrix | None, data: NTPData) -> SeparabilityResult:
    """Find y >= 0, Σy = 1, μ free with A_in^T y + A_eq^T μ = 0 (proof of non-separability)."""
    r_in = A_in.shape[0]
    r_eq = 0 if A_eq is None else A_eq.shape[0]
    blocks = [A_in.T] + ([A_eq.T] if A_eq is not None else [])
    ones = [sp.csr_matrix(np.ones((1, r_in)))] + ([sp.csr_matrix((1, r_eq))] if r_eq else [])
    M = sp.vstack([sp.hstack(blocks), sp.hstack(ones)])
    rhs = np.zeros(M.shape[0])
    rhs[-1] = 1.0
    bounds = [(0, None)] * r_in + [(None, None)] * r_eq
    res = highs_linprog(np.zeros(r_in + r_eq), A_eq=M.tocsr(), b_eq=rhs, bounds=bounds, algorithm="highs-ds")
    if res.status != 0:
        raise SolverError(f"the separability LP was infeasible but no Gordan certificate was found: {res.message}")
    return _gordan_result(A_in, A_eq, res.x[:r_in], res.x[r_in:], data)


def _gordan_result(A_in: sp.csr_matrix, A_eq: sp.csr_matrix | None, y: np.ndarray, mu: np.ndarray,
                   data: NTPData) -> SeparabilityResult:
    """Non-separable verdict with the Gordan certificate (y, μ), its residual ||A_in^T y + A_eq^T μ|| recomputed."""
    residual = A_in.T @ y + (A_eq.T @ mu if A_eq is not None else 0)
    resid = float(np.linalg.norm(residual))
    dtype = data.H.dtype
    return SeparabilityResult(False, None, torch.as_tensor(y, dtype=dtype), torch.as_tensor(mu, dtype=dtype),
                              resid, resid <= CERT_TOL,
                              "no W in F^⊥ separates in-support from out-of-support tokens (Gordan certificate: a "
                              "convex combination of the separation constraints cancels out)")


def critical_dimension(data: NTPData, guess: int | None = None, *, step: int = 1, method: str = "lp",
                       **options) -> tuple[int, dict[int, SeparabilityResult]]:
    """Smallest d such that the first d embedding coordinates of ``data`` are NTP-separable (nested dimensions).

    Separability is monotone in d along nested coordinates (a separating W for d coordinates, padded with zero
    columns, separates with more), so a search suffices: starting at ``guess`` (e.g. the predicted threshold
    round(δ* m) of :func:`ntpbias.geometry.separability.thresholds.separability_threshold`), steps of ``step``, 2
    ``step``, 4 ``step``, ... away from it bracket d*, then bisection closes the bracket (:func:`smallest_true_from`).
    With a guess within g of d* this takes about 2 log2(g) + 2 verdicts, all near d* (the cheap end for small
    thresholds), instead of log2(d) starting at d/2; without a guess it is the bisection on 0..d. d = 0 is not
    separable (all logits vanish); the full d is not assumed separable (it is, almost surely, for Gaussian H with
    d > m: Lemma 1 of paper A assumes "d > m and full-rank H̄"; a square invertible H suffices as well).

    Parameters
    ----------
    data : NTPData with embeddings H: (m, d)
    guess : first dimension tried, clipped to 1..d (default: none, plain bisection)
    step : first step away from the guess (about the spread of d* around it)
    method, options : passed to :func:`ntp_separability`

    Returns
    -------
    d_star : int, the smallest separable dimension (d + 1 if even the full d is not separable)
    verdicts : {dimension: SeparabilityResult} of every verdict taken, with its certificate
    """
    d_max = data.d
    verdicts: dict[int, SeparabilityResult] = {}

    def separable(d: int) -> bool:
        if d == 0:
            return False
        if d not in verdicts:
            sub = data if d == d_max else NTPData.from_arrays(data.H[:, :d], data.P, data.pi)
            verdicts[d] = ntp_separability(sub, method=method, **options)
        return verdicts[d].separable

    if guess is None:  # plain bisection on (0, d_max + 1]
        return smallest_true(separable, 0, d_max + 1), verdicts
    return smallest_true_from(separable, guess, d_max, step=step), verdicts


def smallest_true_from(pred, guess: int, d_max: int, *, step: int = 1) -> int:
    """Smallest d in 1..d_max with pred(d) (d_max + 1 if none), for pred monotone in d, searched from ``guess``.

    Steps of ``step``, 2 ``step``, 4 ``step``, ... away from the guess (clipped to 1..d_max) bracket the answer,
    then :func:`smallest_true` closes the bracket: with the answer within g of the guess, about
    2 + log2(g / step) + log2(step) evaluations, all near the answer. pred(0) is taken as false and pred(d_max + 1)
    as true; neither is evaluated.

    >>> calls = []
    >>> smallest_true_from(lambda d: calls.append(d) or d >= 37, 30, 100, step=4), sorted(calls)
    (37, [30, 34, 36, 37, 38, 42])
    """
    g = min(max(int(guess), 1), d_max)
    step = max(int(step), 1)
    if pred(g):  # walk down until a false d brackets the answer in (lo, hi]
        hi, lo = g, max(g - step, 0)
        while lo > 0 and pred(lo):
            hi, step = lo, 2 * step
            lo = max(hi - step, 0)
    else:  # walk up until a true d
        lo, hi = g, min(g + step, d_max + 1)
        while hi <= d_max and not pred(hi):
            lo, step = hi, 2 * step
            hi = min(lo + step, d_max + 1)
    return smallest_true(pred, lo, hi)


def smallest_true(pred, lo: int, hi: int) -> int:
    """Smallest d in (lo, hi] with pred(d), by bisection, for pred monotone in d with pred(lo) false and pred(hi)
    true (pred(hi) is not evaluated)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi
