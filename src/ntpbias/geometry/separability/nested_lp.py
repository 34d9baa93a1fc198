"""The two nested LPs of :mod:`ntpbias.geometry.separability.nested` in HiGHS (its direct API: one model, warm
re-solves from the last basis).

Both LPs have their variables in blocks, one block per *level* t: a coordinate of H in the W form, a direction of the
nested cokernel in the cokernel form. A block is free, or split into nonnegative parts (plus, minus) when the
objective weighs its l1 norm; :meth:`BlockLP.only` fixes the blocks beyond a level at zero and leaves the l1 norm of
one block as the objective.

* :class:`WForm`: W (V x d0), token V - 1's row fixed at zero (every constraint is a logit difference), block t =
  the V - 1 entries W_{:,t}; rows A_in(W) >= 1 and A_eq(W) = 0 (:func:`~ntpbias.geometry.constraints.constraints`).
* :class:`CokernelForm`: the Gordan alternative over the cokernel of H
  (:mod:`ntpbias.geometry.separability.cokernel`), with the cokernel written in the nested basis of a QR
  factorization H = Q R: the first d columns of H span the first d columns of Q, so the cokernel of H[:, :d] is
  spanned by Q[:, d:] and grows one direction at a time as d falls. U = Q_{:, i >= lo} C (m x V), block i = the V
  entries C_{i,:}; rows U_jv <= 0 for v ∉ S_j, Σ_{v ∉ S_j} U_jv = -1 and C 1 = 0 (rows of U sum to zero).
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp
import torch

from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ..constraints import NTPConstraints

#: seconds one HiGHS run may take before the caller's fallback takes over (a stall guard, as in solvers.lp)
RUN_SECONDS = 240.0
#: HiGHS options: no presolve (the basis is kept between runs) and no scaling (the data are at unit scale,
#: :mod:`ntpbias.geometry.scaling`; 15% fewer dual simplex pivots on V = 5, |S_j| = 1, m = 200)
HIGHS_OPTIONS = {"output_flag": False, "presolve": "off", "simplex_scale_strategy": 0, "threads": 1,
                 "time_limit": RUN_SECONDS}
#: block entries below ZERO_TOL x the largest entry count as zero when reading which blocks a solution uses
ZERO_TOL = 1e-9
#: row generation: a row outside the model enters when a solution violates it by more than ROW_TOL (the data are at
#: unit scale), at most ROWS_PER_ROUND rows per context and round
ROW_TOL, ROWS_PER_ROUND = 1e-9, 2
#: the cokernel form generates its sign rows when it has at least LAZY_SIGN_ROWS of them (measured on the study's
#: datasets: at (V, |S_j|, m) = (20, 10, 400), 4000 sign rows, the first LP with every row ran past RUN_SECONDS and
#: the search fell back to single verdicts, 786 s a dataset, where row generation took 64-186 s; with 2000 sign rows,
#: m = 200, it costs 1.5-2x; the W form never gains from it: 10-40% slower at m = 200 and 400)
LAZY_SIGN_ROWS = 3000
_INF = highspy.kHighsInf
_UNLIMITED = 2**31 - 1
#: a warm primal re-solve past this fraction of all earlier pivots switches to dual simplex (measured: re-solves took
#: 3-20% of the cold solve's pivots on the study's datasets at m = 200 and 400, W and cokernel forms; one at
#: (V, |S_j|, m) = (20, 10, 400) ran past 54,000 against 25,000, where dual simplex from its basis took 1,800)
STALL_FRACTION = 0.25


class BlockLP:
    """A HiGHS model whose columns come in blocks of ``width``, one per level in ``levels`` (subclasses add rows).

    Rows flagged in ``lazy`` (inequality rows, most of them inactive at an optimum) enter the model only when a
    solution violates them (row generation): :meth:`run` solves with the rows in the model, adds, per group in
    ``groups``, the :data:`ROWS_PER_ROUND` most violated of the rest, and re-solves by dual simplex (the basis stays
    dual feasible when rows are added), until no row is violated by more than :data:`ROW_TOL`. The final solution is
    then optimal for the whole LP, and its duals, zero on the rows never added, are the whole LP's duals.
    """

    def __init__(self, A: sp.csc_matrix, levels: range, width: int, row_lower: np.ndarray, row_upper: np.ndarray,
                 weights: dict[int, float], lazy: np.ndarray | None = None, groups: np.ndarray | None = None):
        self.A, self.levels, self.width = A, levels, width
        lazy = np.zeros(A.shape[0], bool) if lazy is None else lazy
        self.rows, self.lower, self.upper, self.lazy, self.groups = A.tocsr(), row_lower, row_upper, lazy, groups
        # the core class: the Python wrapper's callbacks print a banner to stdout when it is constructed
        h = highspy._core._Highs()
        for key, value in HIGHS_OPTIONS.items():
            h.setOptionValue(key, value)
        n = A.shape[1]
        h.addCols(n, np.zeros(n), np.full(n, -_INF), np.full(n, _INF), 0, np.zeros(n, np.int32),
                  np.zeros(0, np.int32), np.zeros(0))
        self.h, self.n, self.runs, self.iterations = h, n, 0, 0
        self.active = np.zeros(0, np.int64)  # the rows in the model, in model order
        self.minus: dict[int, np.ndarray] = {}  # level -> columns of its negative part
        self.mirrored = np.zeros(0, np.int64)  # the base column of every negative-part column, in column order
        self._add_rows(np.flatnonzero(~lazy))
        for t in weights:
            self._split(t)
        self._costs(weights)

    def _add_rows(self, rows: np.ndarray) -> None:
        """Put the LP's ``rows`` into the model (their entries on the negative parts too)."""
        if len(rows) == 0:
            return
        M = self.rows[rows]
        M = sp.hstack([M, -M[:, self.mirrored]], format="csr") if len(self.mirrored) else M
        self.h.addRows(len(rows), self.lower[rows], self.upper[rows], M.nnz, M.indptr[:-1].astype(np.int32),
                       M.indices.astype(np.int32), M.data)
        self.active = np.concatenate([self.active, rows])

    def _plus(self, t: int) -> np.ndarray:
        return (t - self.levels.start) * self.width + np.arange(self.width)

    def _split(self, t: int) -> None:
        """Give level t a negative part (its positive part gets lower bound 0)."""
        plus = self._plus(t)
        self.h.changeColsBounds(self.width, plus.astype(np.int32), np.zeros(self.width), np.full(self.width, _INF))
        block = -self.A[self.active][:, plus].tocsc()
        self.h.addCols(self.width, np.zeros(self.width), np.zeros(self.width), np.full(self.width, _INF), block.nnz,
                       block.indptr.astype(np.int32), block.indices.astype(np.int32), block.data)
        self.minus[t] = self.n + np.arange(self.width)
        self.mirrored = np.concatenate([self.mirrored, plus])
        self.n += self.width

    def _columns(self, t: int) -> np.ndarray:
        return np.concatenate([self._plus(t), self.minus.get(t, np.zeros(0, np.int64))]).astype(np.int32)

    def _costs(self, weights: dict[int, float]) -> None:
        cost = np.zeros(self.n)
        for t, w in weights.items():
            cost[self._columns(t)] = w
        self.h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), cost)

    def only(self, t: int, fixed: range) -> None:
        """Fix the levels in ``fixed`` at zero and make ||block t||_1 the only cost (a cost and bound change: the
        last basis stays primal feasible, and primal simplex continues from it)."""
        if t not in self.minus:
            self._split(t)
        if len(fixed):
            idx = np.concatenate([self._columns(s) for s in fixed])
            self.h.changeColsBounds(len(idx), idx, np.zeros(len(idx)), np.zeros(len(idx)))
        self._costs({t: 1.0})

    def run(self, *, dual: bool) -> bool:
        """Solve from the current basis by dual (or primal) simplex, adding violated rows until none is left; True
        at an optimum of the whole LP (False: the rows in the model, so the whole LP, have none).

        A primal re-solve that takes more than STALL_FRACTION of the pivots of every run so far has stalled
        (degenerate pivots): it goes on by dual simplex from where it stopped."""
        while True:
            limit = max(1, int(STALL_FRACTION * self.iterations)) if not dual and self.iterations else _UNLIMITED
            self.h.setOptionValue("simplex_strategy", 1 if dual else 4)
            self.h.setOptionValue("simplex_iteration_limit", limit)
            self.h.run()
            self.runs += 1
            self.iterations += int(self.h.getInfo().simplex_iteration_count)
            status = self.h.getModelStatus()
            if status == highspy.HighsModelStatus.kIterationLimit:
                dual = True
                continue
            if status != highspy.HighsModelStatus.kOptimal:
                return False
            violated = self._most_violated()
            if len(violated) == 0:
                return True
            self._add_rows(violated)
            dual = True

    def _most_violated(self) -> np.ndarray:
        """Per group, the ROWS_PER_ROUND rows outside the model most violated by the current solution."""
        out = np.ones(len(self.lower), bool)
        out[self.active] = False
        out &= self.lazy
        rows = np.flatnonzero(out)
        if len(rows) == 0:
            return rows
        Ax = self.rows[rows] @ self.blocks().ravel()
        excess = np.maximum(self.lower[rows] - Ax, Ax - self.upper[rows])
        keep = excess > ROW_TOL
        rows, excess, group = rows[keep], excess[keep], self.groups[rows[keep]]
        order = np.lexsort((-excess, group))
        group = group[order]
        first = np.r_[True, group[1:] != group[:-1]]
        rank = np.arange(len(order)) - np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        return rows[order[rank < ROWS_PER_ROUND]]

    def blocks(self) -> np.ndarray:
        """The primal solution, one row per level: (len(levels), width)."""
        x = np.asarray(self.h.getSolution().col_value)
        X = x[:len(self.levels) * self.width].copy()
        for t, cols in self.minus.items():
            X[self._plus(t)] -= x[cols]
        return X.reshape(len(self.levels), self.width)

    def used(self) -> np.ndarray:
        """The levels whose block is nonzero (entries below ZERO_TOL x the largest count as zero)."""
        size = np.abs(self.blocks()).max(axis=1)
        return np.asarray(self.levels)[size > ZERO_TOL * size.max()]

    def duals(self) -> np.ndarray:
        """The duals of every row of the LP (HiGHS's sign: >= 0 on a row at its lower bound, <= 0 at its upper
        bound; 0 on the rows never put into the model)."""
        y = np.zeros(len(self.lower))
        y[self.active] = np.asarray(self.h.getSolution().row_dual)
        return y


def geometric(levels: range, ratio: float) -> dict[int, float]:
    """Weights ratio^0, ratio^1, ... along ``levels`` (in its order)."""
    return {t: ratio ** i for i, t in enumerate(levels)}


class WForm(BlockLP):
    """The W form at ``top`` coordinates, the coordinates in ``window`` weighted by ``weights``."""

    def __init__(self, data: NTPData, cons: NTPConstraints, top: int, weights: dict[int, float]):
        self.V, self.n_in, self.dtype = data.V, len(cons.ineq), data.H.dtype
        H = to_numpy(data.H[:, :top]).astype(np.float64)
        a, j, b = (np.concatenate([to_numpy(getattr(cons.ineq, f)), to_numpy(getattr(cons.eq, f))]).astype(np.int64)
                   for f in "ajb")
        n_eq = len(cons.eq)
        super().__init__(gap_columns(H, a, j, b, data.V), range(top), data.V - 1,
                         np.concatenate([np.ones(self.n_in), np.zeros(n_eq)]),
                         np.concatenate([np.full(self.n_in, _INF), np.zeros(n_eq)]), weights)

    def W(self, end: int) -> torch.Tensor:
        """W (V, end): the first ``end`` coordinates, token V - 1's row zero."""
        X = self.blocks()[:end].T
        return torch.as_tensor(np.vstack([X, np.zeros((1, end))]), dtype=self.dtype)

    def gordan(self) -> tuple[np.ndarray, np.ndarray]:
        """(y, μ): the duals of the ineq rows (>= 0) and of the eq rows."""
        y = self.duals()
        return y[:self.n_in], y[self.n_in:]


class CokernelForm(BlockLP):
    """The cokernel form over the directions ``lo``, ..., m - 1 of the nested basis Q (m x m), the directions in
    ``weights`` weighted; ``out`` = (j, v) of the out-of-support cells, in the order of the ineq constraints."""

    def __init__(self, Q: np.ndarray, out: tuple[np.ndarray, np.ndarray], V: int, lo: int,
                 weights: dict[int, float]):
        m = Q.shape[0]
        j, v = out
        r = m - lo
        n_out = len(j)
        # column (i, u) = lo + i-th direction, token u: its entries Q[j, lo + i] on the sign rows (j, u)
        rows_of_cell = np.arange(n_out)
        col = (np.arange(r)[None, :] * V + v[:, None]).ravel()
        sign = sp.csc_matrix((Q[j, lo:].ravel(), (np.repeat(rows_of_cell, r), col)), shape=(n_out, r * V))
        normalization = sp.csr_matrix(np.asarray(sign.sum(axis=0)))
        sums = sp.csr_matrix((np.ones(r * V), (np.repeat(np.arange(r), V), np.arange(r * V))), shape=(r, r * V))
        A = sp.vstack([sign, normalization, sums], format="csc")
        lower = np.concatenate([np.full(n_out, -_INF), [-1.0], np.zeros(r)])
        upper = np.concatenate([np.zeros(n_out), [-1.0], np.zeros(r)])
        self.Q, self.n_out, self.cells = Q, n_out, out
        lazy = np.arange(len(lower)) < (n_out if n_out >= LAZY_SIGN_ROWS else 0)
        super().__init__(A, range(lo, m), V, lower, upper, weights, lazy,
                         np.concatenate([j, np.zeros(1 + r, np.int64)]))

    def U(self) -> np.ndarray:
        """U = Q_{:, lo:} C (m, V): its out-of-support entries are -y, its in-support entries -μ and the anchors'."""
        return self.Q[:, self.levels.start:] @ self.blocks()

    def multipliers(self) -> np.ndarray:
        """Λ (m, V): minus the duals of the sign rows plus the normalization row's, on the out-of-support cells (>= the
        optimal value there), zero elsewhere; Q_{:, t}^T Λ is constant across tokens for every free direction t."""
        y = self.duals()
        Lam = np.zeros((self.Q.shape[0], self.blocks().shape[1]))
        Lam[self.cells] = -(y[:self.n_out] + y[self.n_out])
        return Lam


def gap_columns(H: np.ndarray, a: np.ndarray, j: np.ndarray, b: np.ndarray, V: int) -> sp.csc_matrix:
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
