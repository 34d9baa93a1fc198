"""The critical dimension of NTP-separability along nested coordinates: one LP and warm re-solves, or an
interior-point search for large LPs; both certificates.

For data with embeddings H (m x d), d* is the smallest d' such that the data restricted to the first d' coordinates
of H are NTP-separable (Def. 2 of paper A). Separability is monotone along nested coordinates (a separating W, padded
with zero columns, still separates), so a search of about log2 verdicts finds d*
(:func:`~ntpbias.geometry.separability.verdict.critical_dimension`: one cold LP per verdict). Here one LP and a few
warm re-solves of it find d* with a certificate on each side, in whichever of two forms is smaller
(:mod:`ntpbias.geometry.separability.nested_lp`; :func:`_w_is_smaller` says which, from the variables at the
guess):

**W form** (small supports: one-hot, |S_j| = 2). Variables W, one block W_{:,t} per coordinate t.

1. *Where a separating W ends.* One LP at ``top`` = guess + ABOVE step coordinates (above d* for most datasets; step
   is about the spread of d*), dual simplex from scratch:

       (P)     minimize  Σ_{t ∈ T} ω_t ||W_{:,t}||_1   subject to  A_in(W) >= 1,  A_eq(W) = 0,

   with weights growing geometrically over a window T around the guess (none below it): the optimum prefers early
   coordinates, so its last nonzero column e - 1 lies at or just above d* - 1, and W separates on the first e.
2. *Is column c = e - 1 needed?* Coordinates after c are fixed at zero and the cost becomes ||W_{:,c}||_1 alone:

       (Q_c)   minimize  ||W_{:,c}||_1   subject to  A_in(W) >= 1,  A_eq(W) = 0,  W_{:,t} = 0 for t > c,

   re-solved by primal simplex from the last basis (still primal feasible: tens to hundreds of pivots where a cold
   solve takes about a thousand). Optimal value 0: the data separate on the first c coordinates; go on from the new
   W's end. Positive value p*: they do not, d* = c + 1, and the one optimal LP carries both certificates: its W
   separates on the first c + 1 coordinates, and its duals y >= 0 (ineq rows), μ (eq rows) have
   A_in^T y + A_eq^T μ = 0 on every coordinate before c (their columns are free, or split with zero cost, so their
   reduced costs vanish) and Σy = p* > 0: a Gordan certificate on the first c coordinates.

**Cokernel form** (large supports, d* near m). The Gordan alternative over the cokernel of H
(:mod:`ntpbias.geometry.separability.cokernel`) in the nested basis of H = Q R: the cokernel of H[:, :d] is spanned by
Q[:, d:], so the blocks are the directions C_{i,:}, and the roles turn around: the first LP, from lo = guess -
ABOVE step (below d* for most datasets), weighs the *earliest* directions most, so the Gordan certificate it
finds starts at a direction f as late as possible and certifies non-separability on the first f coordinates; (Q_f)
fixes the directions before f and minimizes ||C_{f,:}||_1: value 0 gives a certificate that starts later, a positive
value gives d* = f + 1, with the certificate U = Q C (on the first f coordinates) from the primal and a separating
W on the first f + 1 coordinates from the duals (stationarity in the free directions: Q_{:, i}^T Λ is constant across
tokens for i > f, so Z = -Q_{:, :f+1} Q_{:, :f+1}^T Λ ties every support and puts every out-of-support logit at
least min Λ below it; W^T = -R^{-1} Q_{:, :f+1}^T Λ; :mod:`~ntpbias.geometry.separability.cokernel` derives it).

The cokernel form's LP is dense (a sign row has an entry for every direction), and at (V, |S_j|, m) = (20, 10, 400) its
first solve with all 4000 sign rows ran past the time guard; from :data:`~ntpbias.geometry.separability.nested_lp.
LAZY_SIGN_ROWS` sign rows on, they enter the model only when a solution violates them (row generation,
:class:`~ntpbias.geometry.separability.nested_lp.BlockLP`): the LP solved is then the whole LP, and its duals are
zero on the rows never added. A warm primal re-solve that stalls (degenerate pivots past
:data:`~ntpbias.geometry.separability.nested_lp.STALL_FRACTION` of all earlier ones) goes on by dual simplex.

Either way a first LP on the wrong side of d* (infeasible) is rebuilt further out, and every certificate is checked
in float64 on the data's own constraints (:class:`~ntpbias.geometry.constraints.LogitGaps`), as every verdict of
:mod:`~ntpbias.geometry.separability.verdict` is: W rescaled to margin 1 with ||A_eq(W)||_∞ <= CERT_TOL (W ∈ F^⊥ to the
tolerance), y normalized to Σy = 1 with residual ||A_in^T y + A_eq^T μ|| <= CERT_TOL. Where a certificate misses the
tolerance, or HiGHS stops for another reason, the verdict search takes over (``method="verdicts"``), with its own
certificates checked the same way.

**Interior-point search** (large LPs: from :data:`INTERIOR_MIN_VARIABLES` variables in the smaller form at the guess).
The simplex method's cost on these dense LPs is thousands of pivots; instead the search from the guess
(:func:`~ntpbias.geometry.separability.verdict.smallest_true_from`) takes one verdict per dimension by the
interior-point method of :mod:`~ntpbias.geometry.separability.interior` (the elastic LP pair, in W or cokernel
coordinates, whichever is smaller at that dimension), each certificate checked as above; a dimension where it does
not converge or a certificate misses gets the LP verdict of
:func:`~ntpbias.geometry.separability.verdict.ntp_separability`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ...errors import SolverError
from ..constraints import NTPConstraints, constraints
from ..scaling import in_user_units, normalized
from .cokernel import RANK_RTOL
from .interior import cokernel_solve, elastic_solve
from .nested_lp import CokernelForm, WForm, geometric
from .verdict import CERT_TOL, SeparabilityResult, critical_dimension, ntp_separability, smallest_true_from

#: the first LP starts ABOVE * step beyond the guess (above it in the W form, below it in the cokernel form)
ABOVE = 1.5
#: levels weighted in the first LP: from ABOVE * step on the near side of the guess to ABOVE * step on the far side,
#: at least WINDOW; the weights grow geometrically, by at most MAX_RATIO per level and WEIGHT_RANGE over the window
#: (measured on V = 5, |S_j| = 1, m = 200: ABOVE 1.5 takes 10% fewer pivots than 2 or 2.5; wider ranges change little)
WINDOW, MAX_RATIO, WEIGHT_RANGE = 10, 5.0, 1e6
#: ``form="auto"`` takes the W form when its variables are fewer than COKERNEL_FAVOUR x the cokernel form's
COKERNEL_FAVOUR = 0.9
#: ... and the interior-point search instead of that form's LP from this many variables at the guess (measured at
#: m = 400, CPU s a dataset, interior against LP: W form (5, 1) 1.6 / 2.5 (528 variables), (3, 1) 0.6 / 0.5 (330);
#: cokernel form (5, 2) 2.1 / 2.3 (875), (10, 5) 2.6 / 6.4 (1270), (20, 10) 4.1-5.1 / 130-324 (2340), (3, 2)
#: 0.6 / 0.35 (324), (5, 4) 0.47 / 0.11 (280))
INTERIOR_MIN_VARIABLES = 400
#: ``form`` choices of :func:`nested_critical_dimension`
FORMS = ("auto", "w", "cokernel", "interior")


@dataclass(frozen=True, eq=False)
class CriticalDimension:
    """The critical dimension d* of a dataset along its nested coordinates, with a certificate on each side.

    Attributes
    ----------
    d_star : int
        Smallest d' with the first d' coordinates NTP-separable (d + 1 if even all d are not).
    separating : SeparabilityResult or None
        The verdict at d*: a W (V, d*) in F^⊥ with margin 1 (None when d* = d + 1).
    not_separating : SeparabilityResult or None
        The verdict at d* - 1: Gordan multipliers (y, μ) (None when d* = 1: no coordinate, no logit).
    solves : int
        Solver runs (the nested LP's cold and warm runs, the interior-point verdicts, or the verdict search's LPs).
    iterations : int
        Simplex iterations of the nested LP's runs, interior-point iterations of the interior search (0 for the
        verdict search).
    method : str
        ``"nested"`` (this module's LP), ``"interior"`` (the interior-point search) or ``"verdicts"`` (the verdict
        search, after a certificate missed).

    Examples
    --------
    >>> from ntpbias.data.synthetic import random_ntp
    >>> found = nested_critical_dimension(random_ntp(40, 40, 3, 1, seed=0), guess=17, step=2)
    >>> found.d_star, found.certified
    (17, True)
    """

    d_star: int
    separating: SeparabilityResult | None
    not_separating: SeparabilityResult | None
    solves: int
    iterations: int
    method: str

    @property
    def verdicts(self) -> dict[int, SeparabilityResult]:
        """{dimension: verdict} of the two certificates present."""
        both = ((self.d_star, self.separating), (self.d_star - 1, self.not_separating))
        return {d: v for d, v in both if v is not None}

    @property
    def certified(self) -> bool:
        """Every certificate present is within tolerance."""
        return all(v.certified for v in self.verdicts.values())


def nested_critical_dimension(data: NTPData, guess: int, *, step: int = 1, form: str = "auto") -> CriticalDimension:
    """d* of ``data`` along its nested coordinates by the nested LP (module docstring), both sides certified.

    Parameters
    ----------
    data : NTPData with embeddings H: (m, d)
    guess : where d* is expected (e.g. round(δ* m), :func:`~ntpbias.geometry.separability.thresholds.
        separability_threshold`); it changes the cost, never d*
    step : about the spread of d* around the guess
    form : ``"auto"`` (:func:`_auto_form`: the LP form with fewer variables at the guess, or the interior-point
        search from :data:`INTERIOR_MIN_VARIABLES` variables on), ``"w"``, ``"cokernel"`` or ``"interior"``

    Returns
    -------
    CriticalDimension, with the verdicts in the user's units (W scaled as in :func:`ntp_separability`)
    """
    if form not in FORMS:
        raise SolverError(f"unknown nested form {form!r}; choose {', '.join(FORMS)}")
    unit, scale = normalized(data)
    guess, step = min(max(int(guess), 1), data.d), max(int(step), 1)
    cons = constraints(unit)
    if len(cons.ineq) == 0:  # every context has full support: never separable (no out-of-support token)
        found = _fallback(unit, guess, step, 0)
    else:
        if form == "auto":
            form = _auto_form(unit, guess)
        search = {"w": _w_search, "cokernel": _cokernel_search, "interior": _interior_search}[form]
        found = search(unit, cons, guess, step)
    if scale == 1.0:
        return found
    sep = found.separating
    return replace(found, separating=None if sep is None else replace(sep, W=in_user_units(sep.W, scale)))


def _auto_form(data: NTPData, guess: int) -> str:
    """The LP of the form with fewer variables at the guess (:func:`_w_is_smaller`), or the interior-point search
    when that form has at least :data:`INTERIOR_MIN_VARIABLES` variables."""
    w_smaller = _w_is_smaller(data, guess)
    variables = (data.V - 1) * guess if w_smaller else data.V * (data.m - guess)
    if variables >= INTERIOR_MIN_VARIABLES:
        return "interior"
    return "w" if w_smaller else "cokernel"


def _w_is_smaller(data: NTPData, d: int) -> bool:
    """Whether the W form at d coordinates has fewer variables than the cokernel form, (V - 1) d against V (m - d),
    with a margin of :data:`COKERNEL_FAVOUR` (measured at m = 200: the W form takes 2.5 s against 4.4 s a dataset for
    (V, |S_j|) = (10, 2), 0.6 s against 0.3 s for (5, 2) where the counts tie, and 62 s against 2.5 s for (20, 10))."""
    return (data.V - 1) * d < COKERNEL_FAVOUR * data.V * (data.m - d)


def _ratio(levels: int) -> float:
    return min(MAX_RATIO, WEIGHT_RANGE ** (1.0 / max(levels - 1, 1)))


def _w_search(data: NTPData, cons: NTPConstraints, guess: int, step: int) -> CriticalDimension:
    """The W form's search (module docstring)."""
    d, reach = data.d, round(ABOVE * step)
    top, spent = min(d, guess + reach), 0
    while True:
        start = max(0, min(top - WINDOW, guess - reach))
        lp = WForm(data, cons, top, geometric(range(start, top), _ratio(top - start)))
        if lp.run(dual=True):
            break
        spent += lp.runs
        if top == d:  # no optimum even with every coordinate: the verdict search decides (and certifies)
            return _fallback(data, guess, step, spent)
        top = min(d, top + 2 * reach)
    end = int(lp.used().max()) + 1
    while True:
        c = end - 1
        lp.only(c, range(c + 1, top))
        if not lp.run(dual=False):
            return _fallback(data, guess, step, spent + lp.runs)
        end = int(lp.used().max()) + 1
        if end <= c:  # column c unused: separable on the first c coordinates
            continue
        separating = _separating(cons, lp.W(end))
        not_separating = _gordan(cons, c, *lp.gordan()) if c > 0 else None
        if separating is None or (c > 0 and not_separating is None):
            return _fallback(data, guess, step, spent + lp.runs)
        return CriticalDimension(end, separating, not_separating, spent + lp.runs, lp.iterations, "nested")


def _cokernel_search(data: NTPData, cons: NTPConstraints, guess: int, step: int) -> CriticalDimension:
    """The cokernel form's search (module docstring)."""
    m, d, reach = data.m, data.d, round(ABOVE * step)
    basis = _nested_basis(data)
    if basis is None:
        return _fallback(data, guess, step, 0)
    Q, R = basis
    out = _cells(cons)[0]
    lo, spent = max(0, guess - reach), 0
    while True:
        stop = min(m, max(lo + WINDOW, guess + reach))
        lp = CokernelForm(Q, out, data.V, lo, geometric(range(stop - 1, lo - 1, -1), _ratio(stop - lo)))
        if lp.run(dual=True):
            break
        spent += lp.runs
        if lo == 0:
            return _fallback(data, guess, step, spent)
        lo = max(0, lo - 2 * reach)
    first = int(lp.used().min())
    while True:
        f = first
        lp.only(f, range(lo, f))
        if not lp.run(dual=False):
            return _fallback(data, guess, step, spent + lp.runs)
        first = int(lp.used().min())
        if first > f:  # direction f unused: not separable on the first f + 1 coordinates either
            continue
        if f + 1 > d:  # not separable with every coordinate
            return CriticalDimension(d + 1, None, _cokernel_gordan(cons, f, lp.U()), spent + lp.runs,
                                     lp.iterations, "nested")
        separating = _separating(cons, _cokernel_W(Q, R, f + 1, lp.multipliers()))
        not_separating = _cokernel_gordan(cons, f, lp.U()) if f > 0 else None
        if separating is None or (f > 0 and not_separating is None):
            return _fallback(data, guess, step, spent + lp.runs)
        return CriticalDimension(f + 1, separating, not_separating, spent + lp.runs, lp.iterations, "nested")


def _interior_search(data: NTPData, cons: NTPConstraints, guess: int, step: int) -> CriticalDimension:
    """The search from the guess (:func:`~ntpbias.geometry.separability.verdict.smallest_true_from`) with a verdict
    per dimension by the interior-point method (:mod:`~ntpbias.geometry.separability.interior`), in W coordinates or
    cokernel coordinates, whichever has fewer variables at that dimension (:func:`_w_is_smaller`), both
    certificates checked; a dimension where the method does not converge or a certificate misses the tolerance gets
    the LP verdict of :func:`~ntpbias.geometry.separability.verdict.ntp_separability` instead."""
    basis = _nested_basis(data)  # None: no cokernel coordinates
    cells = _cells(cons)
    verdicts: dict[int, SeparabilityResult] = {}
    iterations = 0

    def by_interior_point(c: int) -> SeparabilityResult | None:
        nonlocal iterations
        if basis is not None and not _w_is_smaller(data, c):
            Q, R = basis
            found = cokernel_solve(Q[:, c:], *cells, data.V)
            if found is None:
                return None
            iterations += found.iterations
            verdict = _separating(cons, _cokernel_W(Q, R, c, found.Lam), "interior")
            if verdict is None and found.value > 0:
                verdict = _cokernel_gordan(cons, c, found.U, "interior")
            return verdict
        found = elastic_solve(*_restricted(cons, c))
        if found is None:
            return None
        iterations += found.iterations
        verdict = _separating(cons, torch.as_tensor(found.W), "interior")
        if verdict is None and found.value > 0:
            verdict = _gordan(cons, c, *found.gordan(), "interior")
        return verdict

    def separable(c: int) -> bool:
        verdicts[c] = by_interior_point(c) or ntp_separability(
            NTPData.from_arrays(data.H[:, :c], data.P, data.pi), method="lp")
        return verdicts[c].separable

    d_star = smallest_true_from(separable, guess, data.d, step=step)
    return CriticalDimension(d_star, verdicts.get(d_star), verdicts.get(d_star - 1), len(verdicts), iterations,
                             "interior")


def _cokernel_gordan(cons: NTPConstraints, c: int, U: np.ndarray, method: str = "lp") -> SeparabilityResult | None:
    """The Gordan certificate y = -U on the out-of-support cells, μ = -U on the tied cells, checked on the first c
    coordinates."""
    out, tied = _cells(cons)
    return _gordan(cons, c, -U[out], -U[tied], method)


def _nested_basis(data: NTPData) -> tuple[np.ndarray, np.ndarray] | None:
    """H = Q R (Q complete, m x m): Q[:, c:] spans the cokernel of the first c columns; None when the nested columns
    are not independent (a diagonal entry of R below RANK_RTOL x the largest)."""
    Q, R = np.linalg.qr(to_numpy(data.H).astype(np.float64), mode="complete")
    diag = np.abs(np.diag(R))
    return (Q, R) if diag.size and diag.min() > RANK_RTOL * diag.max() else None


def _cokernel_W(Q: np.ndarray, R: np.ndarray, c: int, Lam: np.ndarray) -> torch.Tensor:
    """The separating W (V, c) of cell multipliers Λ (m, V) with Q_{:, i}^T Λ constant across tokens for i >= c:
    W^T = -R_c^{-1} Q_{:, :c}^T Λ (module docstring, cokernel form)."""
    return torch.as_tensor(-np.linalg.solve(R[:c, :c], Q[:, :c].T @ Lam).T)


def _cells(cons: NTPConstraints) -> list[tuple[np.ndarray, np.ndarray]]:
    """(context, token) of the out-of-support cells (the ineq rows' b) and of the tied cells (the eq rows' b)."""
    return [tuple(to_numpy(x).astype(np.int64) for x in (g.j, g.b)) for g in (cons.ineq, cons.eq)]


def _fallback(data: NTPData, guess: int, step: int, solves: int) -> CriticalDimension:
    """The verdict search of :func:`~ntpbias.geometry.separability.verdict.critical_dimension` (cold LPs)."""
    d_star, verdicts = critical_dimension(data, guess, step=step)
    return CriticalDimension(d_star, verdicts.get(d_star), verdicts.get(d_star - 1), solves + len(verdicts), 0,
                             "verdicts")


#: who found a certificate (``method`` of the verdict -> its reason)
_SOURCE = {"lp": "the nested LP", "interior": "the interior-point method"}


def _restricted(cons: NTPConstraints, c: int):
    """The constraints on the first ``c`` coordinates, in float64."""
    return tuple(replace(g, H=g.H[:, :c].to(torch.float64)) for g in (cons.ineq, cons.eq))


def _separating(cons: NTPConstraints, W: torch.Tensor, method: str = "lp") -> SeparabilityResult | None:
    """W (V, c) rescaled to margin 1 and checked on the first c coordinates (None when it misses the tolerance)."""
    ineq, eq = _restricted(cons, W.shape[1])
    W = W.to(torch.float64)
    margin = float(ineq.apply(W).min())
    if not margin > 0:
        return None
    W = W / margin
    eq_res = float(eq.apply(W).abs().max()) if len(eq) else 0.0
    residual = max(1 - float(ineq.apply(W).min()), eq_res, 0.0)
    if residual > CERT_TOL:
        return None
    return SeparabilityResult(True, W, None, None, residual, True,
                              f"{_SOURCE[method]} found W in F^⊥ with every in-support logit at least 1 above every "
                              "out-of-support logit", method=method)


def _gordan(cons: NTPConstraints, c: int, y: np.ndarray, mu: np.ndarray,
            method: str = "lp") -> SeparabilityResult | None:
    """Multipliers y (ineq rows), μ (eq rows) normalized to Σy = 1 and checked on the first c coordinates (None when y
    is not nonnegative or the residual misses the tolerance)."""
    total = float(y.sum())
    if not total > 0 or float(y.min()) < -CERT_TOL * total:
        return None
    y, mu = torch.as_tensor(np.maximum(y, 0.0) / total), torch.as_tensor(mu / total)
    ineq, eq = _restricted(cons, c)
    resid = float(torch.linalg.vector_norm(ineq.adjoint(y) + (eq.adjoint(mu) if len(eq) else 0)))
    if resid > CERT_TOL:
        return None
    return SeparabilityResult(False, None, y, mu, resid, True,
                              "no W in F^⊥ separates in-support from out-of-support tokens (Gordan certificate from "
                              f"{_SOURCE[method]}: a convex combination of the separation constraints that cancels "
                              "out)", method=method)
