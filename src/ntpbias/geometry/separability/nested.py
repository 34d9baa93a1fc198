"""The critical dimension of NTP-separability along nested coordinates: one LP, warm re-solves, both certificates.

For data with embeddings H (m x d), d* is the smallest d' such that the data restricted to the first d' coordinates
of H are NTP-separable (Def. 2 of paper A). Separability is monotone along nested coordinates (a separating W, padded
with zero columns, still separates), so a search of about log2 verdicts finds d*
(:func:`~ntpbias.geometry.separability.verdict.critical_dimension`, one cold LP per verdict). Here one family of LPs
does it, in W (V x d0) with the last token's row fixed at zero (every constraint is a logit difference, so a common
shift of the rows of W changes nothing):

    (P_c)   minimize  Σ_{t ∈ T} ω_t ||W_{:,t}||_1   subject to  A_in(W) >= 1,  A_eq(W) = 0,  W_{:,t} = 0 for t >= c.

1. **Where the separating W ends.** (P_{d0}) is solved once, by dual simplex, at d0 = guess + 2 step (above d*
   for most datasets), with weights ω_t = ρ^(t - t0) on a window T of the last :data:`WINDOW` coordinates and none
   before it: the optimum prefers early coordinates, so its last nonzero column u lies at or just above d* - 1, and W
   is a separating certificate on the first u + 1 coordinates.
2. **Down to d*.** Column u is fixed at zero and (P_u) re-solved by dual simplex from the last basis: a bound change
   keeps the basis dual feasible, so a re-solve takes tens of pivots where a cold solve takes about a thousand.
   Feasible: a new W ends before u; repeat. Infeasible: by Farkas' lemma HiGHS's dual ray is a Gordan certificate
   y >= 0, μ with A_in^T y + A_eq^T μ = 0 on the first u coordinates (the columns there are free, or split into
   nonnegative parts, so the ray's reduced costs vanish on them), and d* = u + 1 with a certificate on each side.
3. **A low guess.** If (P_{d0}) is infeasible, its ray certifies d* > d0, and the search starts again higher.

Each certificate is checked in float64 on the data's own constraints (:class:`~ntpbias.geometry.constraints.
LogitGaps`), as every verdict of :mod:`~ntpbias.geometry.separability.verdict` is: W rescaled to margin 1 with
||A_eq(W)||_∞ <= CERT_TOL (W ∈ F^⊥ to the tolerance, not projected), y normalized to Σy = 1 with residual
||A_in^T y + A_eq^T μ|| <= CERT_TOL. Where a certificate misses the tolerance, or HiGHS stops for another reason, the
verdict search takes over (``method="verdicts"``); its certificates are checked the same way.

The LP has V - 1 variables per coordinate and one row per constraint; for supports near V and d near m the cokernel
LP of :mod:`~ntpbias.geometry.separability.cokernel` is far smaller, and :func:`nested_is_smaller` says which to use.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import highspy
import numpy as np
import scipy.sparse as sp
import torch

from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ..constraints import NTPConstraints, constraints
from ..scaling import in_user_units, normalized
from .cokernel import cokernel_nnz
from .verdict import CERT_TOL, SeparabilityResult, critical_dimension

#: coordinates weighted in the first solve: at least the last WINDOW below its top (and from guess - ABOVE step);
#: the weights grow geometrically, by at most MAX_RATIO per coordinate and WEIGHT_RANGE over the window
WINDOW, MAX_RATIO, WEIGHT_RANGE = 10, 5.0, 1e6
#: the first solve's top coordinate: guess + ABOVE * step (step: about the spread of d*)
ABOVE = 2
#: entries of W below ZERO_TOL x max |W| count as zero when reading where W ends
ZERO_TOL = 1e-9
#: seconds one HiGHS run may take before the verdict search takes over (a stall guard, as in solvers.lp)
RUN_SECONDS = 240.0
#: HiGHS options: no presolve (a warm basis is kept between runs) and no scaling (the data are at unit scale,
#: :mod:`ntpbias.geometry.scaling`); measured on V = 5, |S_j| = 1, m = 200: 20-25% fewer seconds than the defaults
HIGHS_OPTIONS = {"output_flag": False, "presolve": "off", "simplex_scale_strategy": 0, "threads": 1,
                 "time_limit": RUN_SECONDS}
_STATUS = highspy.HighsModelStatus


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
        LP runs (the nested LP's cold and warm runs, or the verdict search's LPs).
    iterations : int
        Simplex iterations of the nested LP's runs (0 for the verdict search).
    method : str
        ``"nested"`` (this module's LP) or ``"verdicts"`` (the verdict search, after a certificate missed).

    Examples
    --------
    >>> from ntpbias.data.synthetic import random_ntp
    >>> found = nested_critical_dimension(random_ntp(40, 40, 3, 1, seed=0), guess=17, step=2)
    >>> found.d_star, found.certified
    (19, True)
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


def nested_is_smaller(data: NTPData, d: int) -> bool:
    """Whether the nested LP at d coordinates has fewer constraint nonzeros than the cokernel LP
    (:func:`~ntpbias.geometry.separability.cokernel.cokernel_nnz`); for one-hot and small supports it has."""
    cons = constraints(data)
    rows = len(cons.ineq) + len(cons.eq)
    return 2 * rows * d * (data.V - 1) / data.V < cokernel_nnz(replace_d(data, d), cons)


def replace_d(data: NTPData, d: int) -> NTPData:
    """The data restricted to their first ``d`` embedding coordinates (``data`` itself when d is all of them)."""
    return data if d == data.d else NTPData.from_arrays(data.H[:, :d], data.P, data.pi)


def nested_critical_dimension(data: NTPData, guess: int, *, step: int = 1) -> CriticalDimension:
    """d* of ``data`` along its nested coordinates by the nested LP (module docstring), both sides certified.

    Parameters
    ----------
    data : NTPData with embeddings H: (m, d)
    guess : where d* is expected (e.g. round(δ* m), :func:`~ntpbias.geometry.separability.thresholds.
        separability_threshold`); it changes the cost, never d*
    step : about the spread of d* around the guess (the first solve starts ``ABOVE * step`` above it)

    Returns
    -------
    CriticalDimension, with the verdicts in the user's units (W scaled as in :func:`ntp_separability`)
    """
    unit, scale = normalized(data)
    found = _search(unit, int(guess), max(int(step), 1))
    if scale == 1.0:
        return found
    sep = found.separating
    return replace(found, separating=None if sep is None else replace(sep, W=in_user_units(sep.W, scale)))


def _search(data: NTPData, guess: int, step: int) -> CriticalDimension:
    cons = constraints(data)
    d = data.d
    if len(cons.ineq) == 0:  # every context has full support: never separable (no out-of-support token)
        return _fallback(data, guess, step, 0)
    top = min(d, max(1, guess + ABOVE * step))
    spent = 0  # runs of the first solves given up (below d*)
    while True:
        lp = _NestedLP(data, cons, top, max(0, min(top - WINDOW, guess - ABOVE * step)))
        if lp.run(dual=True):
            break
        spent += lp.runs
        if top == d:  # no optimum even with every coordinate: the verdict search decides (and certifies)
            return _fallback(data, guess, step, spent)
        top = min(d, top + 2 * ABOVE * step)
    end = lp.end()  # the first solve's W separates on the first `end` coordinates
    while True:  # (Q_c), c = end - 1: is column c needed?
        c = end - 1
        lp.only(c)
        if not lp.run(dual=False):
            return _fallback(data, guess, step, spent + lp.runs)
        end = lp.end()
        if end <= c:  # W_c = 0 at the optimum: separable on the first c coordinates
            continue
        separating = _separating(cons, lp.W()[:, :end])
        not_separating = _gordan(cons, c, lp.duals()) if c > 0 else None
        if separating is None or (c > 0 and not_separating is None):
            return _fallback(data, guess, step, spent + lp.runs)
        return CriticalDimension(end, separating, not_separating, spent + lp.runs, lp.iterations, "nested")


def _fallback(data: NTPData, guess: int, step: int, solves: int) -> CriticalDimension:
    """The verdict search of :func:`~ntpbias.geometry.separability.verdict.critical_dimension` (cold LPs)."""
    d_star, verdicts = critical_dimension(data, guess, step=step)
    return CriticalDimension(d_star, verdicts.get(d_star), verdicts.get(d_star - 1), solves + len(verdicts), 0,
                             "verdicts")


class _NestedLP:
    """(P) and (Q_c) of the module docstring in HiGHS: rows = the constraints, columns = W's first V - 1 rows per
    coordinate (coordinate-major), free before the window and split into nonnegative parts inside it (a coordinate
    below the window is split when (Q_c) needs it)."""

    def __init__(self, data: NTPData, cons: NTPConstraints, top: int, start: int):
        self.V, self.top, self.nv, self.start = data.V, top, data.V - 1, start
        self.n_in, self.n_eq = len(cons.ineq), len(cons.eq)
        H = to_numpy(data.H[:, :top]).astype(np.float64)
        a, j, b = (np.concatenate([to_numpy(getattr(cons.ineq, f)), to_numpy(getattr(cons.eq, f))]).astype(np.int64)
                   for f in "ajb")
        self.A = _gap_columns(H, a, j, b, self.V)  # (rows, top * nv), CSC
        n = self.A.shape[1]
        self.minus: dict[int, np.ndarray] = {}  # coordinate -> columns of its negative part
        ratio = min(MAX_RATIO, WEIGHT_RANGE ** (1.0 / max(top - start - 1, 1)))
        self.weights = {t: ratio ** (t - start) for t in range(start, top)}
        lower = np.full(n, -highspy.kHighsInf)
        lower[start * self.nv:] = 0.0
        rows = self.n_in + self.n_eq
        row_lower = np.concatenate([np.ones(self.n_in), np.zeros(self.n_eq)])
        row_upper = np.concatenate([np.full(self.n_in, highspy.kHighsInf), np.zeros(self.n_eq)])
        # the core class: the Python wrapper's callbacks print a banner to stdout when it is constructed
        h = highspy._core._Highs()
        for key, value in HIGHS_OPTIONS.items():
            h.setOptionValue(key, value)
        h.addRows(rows, row_lower, row_upper, 0, np.zeros(rows, np.int32), np.zeros(0, np.int32), np.zeros(0))
        h.addCols(n, np.zeros(n), lower, np.full(n, highspy.kHighsInf), self.A.nnz, self.A.indptr.astype(np.int32),
                  self.A.indices.astype(np.int32), self.A.data)
        self.h, self.n, self.runs, self.iterations, self.dtype = h, n, 0, 0, data.H.dtype
        for t in range(start, top):
            self._add_minus(t)
        self._costs(self.weights)

    def _plus(self, t: int) -> np.ndarray:
        return t * self.nv + np.arange(self.nv)

    def _add_minus(self, t: int) -> None:
        """The negative part of coordinate t (its positive part gets lower bound 0)."""
        plus = self._plus(t)
        self.h.changeColsBounds(self.nv, plus.astype(np.int32), np.zeros(self.nv), np.full(self.nv, highspy.kHighsInf))
        block = -self.A[:, plus]
        self.h.addCols(self.nv, np.zeros(self.nv), np.zeros(self.nv), np.full(self.nv, highspy.kHighsInf), block.nnz,
                       block.indptr.astype(np.int32), block.indices.astype(np.int32), block.data)
        self.minus[t] = self.n + np.arange(self.nv)
        self.n += self.nv

    def _columns(self, t: int) -> np.ndarray:
        return np.concatenate([self._plus(t), self.minus.get(t, np.zeros(0, np.int64))]).astype(np.int32)

    def _costs(self, weights: dict[int, float]) -> None:
        cost = np.zeros(self.n)
        for t, w in weights.items():
            cost[self._columns(t)] = w
        self.h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), cost)

    def only(self, c: int) -> None:
        """(Q_c): coordinates after c fixed at zero, cost ||W_{:,c}||_1 alone (a cost and bound change: the last
        basis stays primal feasible, so primal simplex continues from it)."""
        if c not in self.minus:
            self._add_minus(c)
        after = [self._columns(t) for t in range(c + 1, self.top)]
        if after:
            idx = np.concatenate(after)
            self.h.changeColsBounds(len(idx), idx, np.zeros(len(idx)), np.zeros(len(idx)))
        self._costs({c: 1.0})

    def run(self, *, dual: bool) -> bool:
        """Solve from the current basis by dual (or primal) simplex; True at an optimum."""
        self.h.setOptionValue("simplex_strategy", 1 if dual else 4)
        self.h.run()
        self.runs += 1
        self.iterations += int(self.h.getInfo().simplex_iteration_count)
        return self.h.getModelStatus() == _STATUS.kOptimal

    def W(self) -> torch.Tensor:
        """The primal W (V, top), last token's row zero."""
        x = np.asarray(self.h.getSolution().col_value)
        W = x[:self.top * self.nv].copy()
        for t, cols in self.minus.items():
            W[self._plus(t)] -= x[cols]
        return torch.as_tensor(np.vstack([W.reshape(self.top, self.nv).T, np.zeros((1, self.top))]), dtype=self.dtype)

    def end(self) -> int:
        """1 + the last coordinate W uses (entries below ZERO_TOL x max |W| count as zero)."""
        size = self.W().abs().amax(0)
        return int(torch.nonzero(size > ZERO_TOL * float(size.max())).max()) + 1

    def duals(self) -> np.ndarray:
        """The row duals (y on the ineq rows, μ on the eq rows)."""
        return np.asarray(self.h.getSolution().row_dual)


def _restricted(cons: NTPConstraints, c: int):
    """The constraints on the first ``c`` coordinates, in float64."""
    return tuple(replace(g, H=g.H[:, :c].to(torch.float64)) for g in (cons.ineq, cons.eq))


def _separating(cons: NTPConstraints, W: torch.Tensor) -> SeparabilityResult | None:
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
                              "the nested LP found W in F^⊥ with every in-support logit at least 1 above every "
                              "out-of-support logit")


def _gordan(cons: NTPConstraints, c: int, ray: np.ndarray) -> SeparabilityResult | None:
    """A dual ray (y on the ineq rows, μ on the eq rows) normalized to Σy = 1 and checked on the first c coordinates
    (None when y is not nonnegative or the residual misses the tolerance)."""
    n_in = len(cons.ineq)
    y, mu = ray[:n_in], ray[n_in:]
    total = float(y.sum())
    if total < 0:
        y, mu, total = -y, -mu, -total
    if not total > 0 or float(y.min()) < -CERT_TOL * total:
        return None
    y, mu = torch.as_tensor(np.maximum(y, 0.0) / total), torch.as_tensor(mu / total)
    ineq, eq = _restricted(cons, c)
    resid = float(torch.linalg.vector_norm(ineq.adjoint(y) + (eq.adjoint(mu) if len(eq) else 0)))
    if resid > CERT_TOL:
        return None
    return SeparabilityResult(False, None, y, mu, resid, True,
                              "no W in F^⊥ separates in-support from out-of-support tokens (Gordan certificate: the "
                              "nested LP's dual ray, a convex combination of the separation constraints that "
                              "cancels out)")


def _gap_columns(H: np.ndarray, a: np.ndarray, j: np.ndarray, b: np.ndarray, V: int) -> sp.csc_matrix:
    """The rows (e_a - e_b)^T W h_j as a sparse (rows, coordinates * (V - 1)) matrix in coordinate-major order,
    token V - 1 left out."""
    rows, d = len(a), H.shape[1]
    r = np.repeat(np.arange(rows), d)
    t = np.tile(np.arange(d), rows)
    vals = H[j].ravel()
    tok = np.concatenate([np.repeat(a, d), np.repeat(b, d)])
    keep = tok < V - 1
    col = (np.concatenate([t, t]) * (V - 1) + tok)[keep]
    return sp.csc_matrix((np.concatenate([vals, -vals])[keep], (np.concatenate([r, r])[keep], col)),
                         shape=(rows, d * (V - 1)))
