"""NTP-separability at one dimension by an interior-point method on the elastic LP pair, with the normal matrix
built from its Kronecker structure.

Separability (Def. 2 of paper A, eqs. (6a)-(6b)) asks for W with A_in(W) >= 1 and A_eq(W) = 0. The *elastic* LP
and its dual,

    (E)  minimize  Σ_i s_i + Σ_k |A_eq(W)_k|   subject to  A_in(W) + s >= 1,  s >= 0          (W free),
    (D)  maximize  Σ_i y_i                    subject to  A_in^T y + A_eq^T μ = 0,  0 <= y <= 1,  -1 <= μ <= 1,

are both feasible (W = 0, s = 1; y = 0, μ = 0), and their common optimal value is 0 exactly when the data separate:
then W (from s = 0) separates with margin 1, and otherwise an optimal (y, μ) of (D) has Σy > 0 and is a Gordan
certificate (y >= 0, A_in^T y + A_eq^T μ = 0: no W has A_in(W) > 0 with A_eq(W) = 0).

(D) is solved by Mehrotra's predictor-corrector method (:class:`_BoxLP`: x = (y, μ) in a box and in a subspace S)
in one of two coordinate systems, whichever has fewer unknowns (the caller decides):

* **W coordinates** (:func:`elastic_solve`): S = {x: G^T x = 0}, G the rows of A_in and A_eq stacked, with multiplier
  -W. A row is (e_a - e_b) ⊗ h_j, so the normal matrix of an iteration is

      G^T Θ G = Σ_j M_j ⊗ h_j h_j^T,      M_j = Σ_{rows i of context j} θ_i (e_a - e_b)(e_a - e_b)^T     (V x V),

  and with W ordered token-major the block of tokens (u, v) is H^T diag(M_{:, u, v}) H: one matrix product over
  contexts for all token pairs u <= v; no constraint matrix is formed. Token V - 1's row of W is fixed at zero (every
  row is a logit difference), which leaves (V - 1) d unknowns and a dense Cholesky factorization of that size.
* **Cokernel coordinates** (:func:`cokernel_solve`): A_in^T y + A_eq^T μ = U^T H for the matrix U (m x V) with -y on
  the out-of-support cells, -μ on the tied ones and rows that sum to zero
  (:mod:`~ntpbias.geometry.separability.cokernel`), so S = {x = (N C) on the cells: C 1 = 0} with N an orthonormal
  basis (m x r) of the cokernel of the first d columns of H. The Newton system in C (r x V) is block diagonal across
  tokens, K_v = N^T diag(θ_{:, v}^{-1}) N (r x r), closed by the r x r Schur complement of C 1 = 0; the cells'
  multipliers Λ give the separating W as in the cokernel LP (W^T = -H^+ Λ).

25-50 iterations a verdict; on the study's datasets at m = 400 this is 4-5x faster than the simplex method in W
coordinates and up to 80x in cokernel coordinates (the simplex method's cost is thousands of dense pivots). The caller
checks both certificates in float64 on the data's own constraints; this module only computes them. The Gordan (y, μ)
of the W coordinates is polished by a few projections onto A_in^T y + A_eq^T μ = 0 weighted by y (which keeps
y >= 0); in cokernel coordinates U = N C satisfies it by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sl
import torch

from ..._tensor import to_numpy
from ..constraints import LogitGaps

#: stop when the primal residual is below TOL (relative to 1 + |objective|), the dual residual below TOL and the
#: duality gap below GAP_TOL relative; or when the complementarity measure has fallen below MU_FLOOR
TOL, GAP_TOL, MU_FLOOR = 1e-9, 1e-8, 1e-14
#: iterations before giving up (the caller then decides by an LP)
MAX_ITER = 100
#: fraction of the step to the boundary; the centering exponent of Mehrotra's heuristic
BOUNDARY, CENTERING = 0.995, 3
#: diagonal added to the normal matrix, relative to its largest entry (keeps the Cholesky factorization defined where
#: the scaling Θ is near zero on many rows); refinement steps on the normal equations
REGULARIZATION, REFINE = 1e-12, 2
#: Newton steps of the Gordan candidate's polish, and the residual ||A_in^T y + A_eq^T μ|| (Σy = 1) where it stops
#: (measured at (V, |S_j|, m, d) = (20, 2, 400, 98): 3.4e-7 from the iterate, then 2.0e-6, 2.7e-8, 6.2e-10, 7.8e-12
#: after one to four steps; on the other datasets timed one step took 1e-9 to 1e-16)
POLISH, POLISH_TOL = 6, 1e-12


class _Gaps:
    """The stacked rows G = [A_in; A_eq] on the first V - 1 tokens' rows of W, token-major, and G^T Θ G."""

    def __init__(self, ineq: LogitGaps, eq: LogitGaps):
        self.groups = (ineq, eq)
        self.n_in = len(ineq)
        self.V, self.d = ineq.var_shape
        self.H = to_numpy(ineq.H).astype(np.float64)
        self.a, self.j, self.b = (np.concatenate([to_numpy(getattr(g, f)) for g in self.groups]).astype(np.int64)
                                  for f in "ajb")
        # the off-diagonal token blocks: the rows between two of the first V - 1 tokens, grouped by token pair
        # (min, max) and padded to the largest group; slot = (pair, position) of each such row, so that each block is
        # one product over its own rows' contexts
        K = self.V - 1
        both = np.flatnonzero((self.a < K) & (self.b < K))
        lo_tok, hi_tok = np.minimum(self.a[both], self.b[both]), np.maximum(self.a[both], self.b[both])
        order = np.argsort(lo_tok * K + hi_tok, kind="stable")
        self.paired, key = both[order], (lo_tok * K + hi_tok)[order]
        self.pairs, start, count = np.unique(key, return_index=True, return_counts=True)
        position = np.arange(len(key)) - np.repeat(start, count)
        self.slot = (np.repeat(np.arange(len(self.pairs)), count), position)
        self.H_pairs = np.zeros((len(self.pairs), count.max(initial=0), self.d))
        self.H_pairs[self.slot] = self.H[self.j[self.paired]]

    def product(self, x: np.ndarray) -> np.ndarray:
        """G x for x the (V - 1) d unknowns."""
        W = torch.zeros(self.V, self.d, dtype=torch.float64)
        W[:-1] = torch.from_numpy(x.reshape(self.V - 1, self.d))
        return np.concatenate([to_numpy(g.apply(W)) for g in self.groups if len(g)])

    def adjoint(self, y: np.ndarray) -> np.ndarray:
        """G^T y (token V - 1's row dropped), flattened."""
        parts = (y[:self.n_in], y[self.n_in:])
        out = sum(g.adjoint(torch.from_numpy(np.ascontiguousarray(p)))
                  for g, p in zip(self.groups, parts, strict=True) if len(g))
        return to_numpy(out[:-1]).reshape(-1)

    def gram(self, theta: np.ndarray) -> np.ndarray:
        """G^T diag(θ) G ((V - 1) d square) by token blocks: block (u, u) = H^T diag(c_u) H with c_ju the θ of the
        rows of context j that involve u; block (u, v) = -H^T diag(θ_uv) H over the rows between u and v only (about
        2 m / V contexts each for small supports, so the V^2 / 2 blocks cost about as much as the V diagonal ones)."""
        V, m, d, K = self.V, self.H.shape[0], self.d, self.V - 1
        c = np.bincount(np.concatenate([self.j * V + self.a, self.j * V + self.b]), np.concatenate([theta, theta]),
                        minlength=m * V).reshape(m, V)[:, :K]
        N = np.zeros((K, K, d, d))
        diagonal = ((self.H[:, None, :] * c[:, :, None]).reshape(m, -1).T @ self.H).reshape(K, d, d)
        N[np.arange(K), np.arange(K)] = diagonal
        if len(self.pairs):
            weights = np.zeros(self.H_pairs.shape[:2])
            weights[self.slot] = theta[self.paired]
            blocks = -np.matmul((self.H_pairs * weights[:, :, None]).transpose(0, 2, 1), self.H_pairs)
            u, v = np.divmod(self.pairs, K)
            N[u, v] = blocks
            N[v, u] = blocks
        return N.transpose(0, 2, 1, 3).reshape(K * d, K * d)

    def factor(self, theta: np.ndarray):
        """The Cholesky factor of G^T diag(θ) G, regularized (:data:`REGULARIZATION`)."""
        N = self.gram(theta)
        N[np.diag_indices_from(N)] += REGULARIZATION * N.diagonal().max()
        return sl.cho_factor(N, lower=True, check_finite=False)


@dataclass(frozen=True, eq=False)
class ElasticSolution:
    """An optimal pair of (E) and (D) at the tolerances above.

    Attributes
    ----------
    W : ndarray (V, d)
        The separating candidate: minus (D)'s equality multiplier (token V - 1's row zero).
    value : float
        Optimal value Σy of (D) (0 when the data separate).
    iterations : int
        Interior-point iterations.
    """

    W: np.ndarray
    value: float
    iterations: int
    x: np.ndarray
    gaps: _Gaps

    def gordan(self) -> tuple[np.ndarray, np.ndarray]:
        """The Gordan candidate (y, μ) with y >= 0 and Σy = 1: (D)'s solution normalized, then up to POLISH Newton
        steps of the projection onto G^T x = 0 weighted by y, x <- x - D G (G^T D G)^{-1} G^T x with D = diag(y, 1)
        (it moves y only where it is positive), until ||G^T x|| <= POLISH_TOL."""
        G, n_in = self.gaps, self.gaps.n_in
        x = np.r_[np.maximum(self.x[:n_in], 0), self.x[n_in:]]
        x /= x[:n_in].sum()
        for _ in range(POLISH):
            r = G.adjoint(x)
            if np.linalg.norm(r) <= POLISH_TOL:
                break
            weight = np.r_[x[:n_in], np.ones(len(x) - n_in)]
            try:
                F = G.factor(weight)
            except np.linalg.LinAlgError:  # the caller's check then refuses the candidate
                break
            x = x - weight * G.product(sl.cho_solve(F, r, check_finite=False))
            x[:n_in] = np.maximum(x[:n_in], 0)
            x /= x[:n_in].sum()
        return x[:n_in], x[n_in:]


def elastic_solve(ineq: LogitGaps, eq: LogitGaps) -> ElasticSolution | None:
    """Solve (D) (module docstring) for the constraints ``ineq``, ``eq`` (float64, unit scale; ``ineq`` not empty);
    None when the method does not converge within :data:`MAX_ITER` iterations."""
    G = _Gaps(ineq, eq)
    n, n_in = G.n_in + len(eq), G.n_in
    lp = _NullSpace(G, np.r_[-np.ones(n_in), np.zeros(n - n_in)], np.r_[np.zeros(n_in), -np.ones(n - n_in)],
                    np.ones(n))
    count = lp.run()
    if count is None:
        return None
    W = np.vstack([-lp.w.reshape(G.V - 1, G.d), np.zeros((1, G.d))])
    return ElasticSolution(W, float(lp.x[:n_in].sum()), count, lp.x, G)


class _BoxLP:
    """Mehrotra's predictor-corrector method for  minimize c^T x  subject to  lo <= x <= hi,  x in a subspace S
    (the subclass says which and defines ``residuals()``, ``factor()``, ``newton(r_lo, r_hi)`` and
    ``shift(primal, dual, a_p, a_d)`` for its own variables). x has slacks s_lo = x - lo, s_hi = hi - x, kept as
    variables so that they stay positive to the last digit, and bound multipliers z_lo, z_hi."""

    def __init__(self, c: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        self.c, self.lo, self.hi = c, lo, hi
        self.x = (lo + hi) / 2
        self.s_lo, self.s_hi = self.x - lo, hi - self.x
        self.z_lo, self.z_hi = np.ones(len(c)), np.ones(len(c))

    def run(self) -> int | None:
        """Iterate to the tolerances; the number of iterations, or None without convergence (or where a
        factorization fails)."""
        n = len(self.c)
        for count in range(MAX_ITER + 1):
            primal_res, dual_res = self.residuals()
            mu = (self.s_lo @ self.z_lo + self.s_hi @ self.z_hi) / (2 * n)
            primal, dual = self.c @ self.x, self.lo @ self.z_lo - self.hi @ self.z_hi
            scale = 1 + abs(primal)
            if not np.isfinite(mu) or count == MAX_ITER:
                return None
            if mu < MU_FLOOR or (self._worst(primal_res) < TOL * scale and self._worst(dual_res) < TOL
                                 and abs(primal - dual) < GAP_TOL * scale):
                return count
            try:
                self.factor()
            except np.linalg.LinAlgError:
                return None
            affine = self._direction(-self.s_lo * self.z_lo, -self.s_hi * self.z_hi)
            a_p, a_d = self._longest(affine)
            dx, dz_lo, dz_hi = affine[:3]
            mu_aff = ((self.s_lo + a_p * dx) @ (self.z_lo + a_d * dz_lo)
                      + (self.s_hi - a_p * dx) @ (self.z_hi + a_d * dz_hi)) / (2 * n)
            sigma_mu = (mu_aff / mu) ** CENTERING * mu  # corrector: centering plus the affine step's 2nd-order term
            self._move(self._direction(sigma_mu - self.s_lo * self.z_lo - dx * dz_lo,
                                       sigma_mu - self.s_hi * self.z_hi + dx * dz_hi))
        return None

    def _barrier(self) -> np.ndarray:
        """The barrier's diagonal z_lo / s_lo + z_hi / s_hi (Θ^{-1} of the Newton system)."""
        return self.z_lo / self.s_lo + self.z_hi / self.s_hi

    @staticmethod
    def _worst(residuals) -> float:
        return max((float(np.abs(r).max()) for r in residuals if r.size), default=0.0)

    def _direction(self, r_lo: np.ndarray, r_hi: np.ndarray):
        """(dx, dz_lo, dz_hi, primal extra, dual extra) for the complementarity residuals r_lo, r_hi."""
        dx, primal, dual = self.newton(r_lo, r_hi)
        return dx, (r_lo - self.z_lo * dx) / self.s_lo, (r_hi + self.z_hi * dx) / self.s_hi, primal, dual

    def _longest(self, direction) -> tuple[float, float]:
        """The longest primal and dual steps (at most 1) that keep the slacks and bound multipliers nonnegative."""
        dx, dz_lo, dz_hi = direction[:3]
        return (min(_to_boundary(self.s_lo, dx), _to_boundary(self.s_hi, -dx)),
                min(_to_boundary(self.z_lo, dz_lo), _to_boundary(self.z_hi, dz_hi)))

    def _move(self, direction) -> None:
        """A step of BOUNDARY x the longest along ``direction``."""
        a_p, a_d = (BOUNDARY * a for a in self._longest(direction))
        dx, dz_lo, dz_hi, primal, dual = direction
        self.x, self.s_lo, self.s_hi = self.x + a_p * dx, self.s_lo + a_p * dx, self.s_hi - a_p * dx
        self.z_lo, self.z_hi = self.z_lo + a_d * dz_lo, self.z_hi + a_d * dz_hi
        self.shift(primal, dual, a_p, a_d)


class _NullSpace(_BoxLP):
    """S = {x: G^T x = 0}, with the multiplier w of G^T x = 0 (dual residual c - G w - z_lo + z_hi) and the normal
    matrix G^T Θ G, Θ = (z_lo / s_lo + z_hi / s_hi)^{-1}."""

    def __init__(self, G: _Gaps, c, lo, hi):
        super().__init__(c, lo, hi)
        self.G, self.w = G, np.zeros((G.V - 1) * G.d)

    def residuals(self):
        self.r_p = -self.G.adjoint(self.x)
        self.r_d = self.c - self.G.product(self.w) - self.z_lo + self.z_hi
        return (self.r_p,), (self.r_d,)

    def factor(self) -> None:
        self.theta = 1 / self._barrier()
        self.F = self.G.factor(self.theta)

    def newton(self, r_lo, r_hi):
        """dx = Θ (q + G dw) with (G^T Θ G) dw = r_p - G^T Θ q (REFINE steps of iterative refinement)."""
        G, theta = self.G, self.theta
        q = -self.r_d + r_lo / self.s_lo - r_hi / self.s_hi
        rhs = self.r_p - G.adjoint(theta * q)
        dw = sl.cho_solve(self.F, rhs, check_finite=False)
        for _ in range(REFINE):
            dw += sl.cho_solve(self.F, rhs - G.adjoint(theta * G.product(dw)), check_finite=False)
        return theta * (q + G.product(dw)), None, dw

    def shift(self, primal, dw, a_p, a_d) -> None:
        self.w = self.w + a_d * dw


def _to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0


@dataclass(frozen=True, eq=False)
class CellSolution:
    """An optimal pair of (D) in cokernel coordinates (:func:`cokernel_solve`).

    Attributes
    ----------
    U : ndarray (m, V)
        N C: its rows sum to zero and its columns lie in the cokernel of H; (y, μ) = -U on the out-of-support and
        tied cells (the Gordan candidate, exact in A_in^T y + A_eq^T μ = U^T H = 0 up to rounding).
    Lam : ndarray (m, V)
        The multipliers λ of the cells (zero on the anchor cells): N^T Λ = β 1^T at the optimum, so
        Z = -(I - N N^T) Λ is a logit matrix in range(H) that ties each support and puts every out-of-support logit
        λ >= 1 below it when the value is 0.
    value : float
        Optimal value Σy of (D) (0 when the data separate).
    iterations : int
        Interior-point iterations.
    """

    U: np.ndarray
    Lam: np.ndarray
    value: float
    iterations: int


def cokernel_solve(N: np.ndarray, out: tuple[np.ndarray, np.ndarray], tied: tuple[np.ndarray, np.ndarray],
                   V: int) -> CellSolution | None:
    """Solve (D) over U = N C (N: an orthonormal basis (m, r) of the cokernel of the first d columns of H) by the same
    predictor-corrector method; None when it does not converge within :data:`MAX_ITER` iterations.

    In these coordinates (D) reads: minimize Σ_out x subject to x = (N C) on the ``out`` cells (j, v) in [-1, 0] and
    on the ``tied`` cells in [-1, 1], and C 1 = 0 (rows of U sum to zero; the anchor cells are free). The Newton
    system in C is block diagonal across tokens, K_v = N^T diag(θ_{:, v}^{-1}) N (r x r, one per token), and
    C 1 = 0 is imposed through the r x r Schur complement Σ_v K_v^{-1}: an iteration costs O(m V r^2) where the W form
    costs O(m V^2 d^2 + V^3 d^3)."""
    j, v = (np.concatenate(x).astype(np.int64) for x in zip(out, tied, strict=True))
    n, n_out = len(j), len(out[0])
    if N.shape[1] == 0:  # H square and invertible: U = 0 only; Λ = 1 on the out-of-support cells separates
        Lam = np.zeros((N.shape[0], V))
        Lam[out] = 1.0
        return CellSolution(np.zeros((N.shape[0], V)), Lam, 0.0, 0)
    lp = _CellRange(N, j, v, V, np.r_[np.ones(n_out), np.zeros(n - n_out)], -np.ones(n),
                    np.r_[np.zeros(n_out), np.ones(n - n_out)])
    count = lp.run()
    if count is None:
        return None
    return CellSolution(N @ lp.C, lp.cell_matrix(lp.lam), float(-(lp.c @ lp.x)), count)


class _CellRange(_BoxLP):
    """S = {x = (N C) on the cells (j, v): C 1 = 0}, with C (r, V) kept as a primal variable (residuals x - (N C)_cells
    and C 1), the cells' multipliers λ and the multiplier β of C 1 = 0 (dual residuals c - λ - z_lo + z_hi and
    N^T Λ - β 1^T); the Newton system in C is block diagonal across tokens, closed by a Schur complement."""

    def __init__(self, N: np.ndarray, j: np.ndarray, v: np.ndarray, V: int, c, lo, hi):
        super().__init__(c, lo, hi)
        self.N, self.j, self.v, self.V = N, j, v, V
        self.C, self.lam, self.beta = np.zeros((N.shape[1], V)), np.zeros(len(j)), np.zeros(N.shape[1])

    def cell_matrix(self, values: np.ndarray) -> np.ndarray:
        """(m, V) with ``values`` on the cells, zero elsewhere."""
        out = np.zeros((self.N.shape[0], self.V))
        out[self.j, self.v] = values
        return out

    def cells(self, C: np.ndarray) -> np.ndarray:
        return (self.N @ C)[self.j, self.v]

    def residuals(self):
        self.r_1, self.r_2 = self.x - self.cells(self.C), self.C.sum(axis=1)
        self.r_3 = self.c - self.lam - self.z_lo + self.z_hi
        self.r_4 = self.N.T @ self.cell_matrix(self.lam) - self.beta[:, None]
        return (self.r_1, self.r_2), (self.r_3, self.r_4)

    def factor(self) -> None:
        """D = z_lo / s_lo + z_hi / s_hi, the token blocks K_v = N^T diag(D_{:, v}) N inverted, S = Σ_v K_v^{-1}."""
        N, (m, r) = self.N, self.N.shape
        self.D = self._barrier()
        K = ((N[:, None, :] * self.cell_matrix(self.D)[:, :, None]).reshape(m, -1).T @ N).reshape(self.V, r, r)
        K[:, np.arange(r), np.arange(r)] += REGULARIZATION * K.diagonal(axis1=1, axis2=2).max()
        self.Kinv = np.linalg.inv(K)
        self.S = self.Kinv.sum(axis=0)

    def _kkt(self, h: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dC, dβ) with K_v dC_v - dβ = h_v for every token v and Σ_v dC_v = e (the regularized K_v)."""
        Kh = np.einsum("vab,bv->av", self.Kinv, h)
        dbeta = np.linalg.solve(self.S, e - Kh.sum(axis=1))
        return Kh + np.einsum("vab,b->av", self.Kinv, dbeta), dbeta

    def newton(self, r_lo, r_hi):
        """K dC - dβ 1^T = h (per token), Σ_v dC_v = -r_2 (REFINE steps of iterative refinement against the
        unregularized K), then dx = (N dC)_cells - r_1 and dλ = g + D dx."""
        g = self.r_3 - r_lo / self.s_lo + r_hi / self.s_hi
        h = -self.r_4 - self.N.T @ self.cell_matrix(g - self.D * self.r_1)
        dC, dbeta = self._kkt(h, -self.r_2)
        for _ in range(REFINE):
            KdC = self.N.T @ self.cell_matrix(self.D * self.cells(dC))
            ddC, ddbeta = self._kkt(h - KdC + dbeta[:, None], -self.r_2 - dC.sum(axis=1))
            dC, dbeta = dC + ddC, dbeta + ddbeta
        dx = self.cells(dC) - self.r_1
        return dx, dC, (g + self.D * dx, dbeta)

    def shift(self, dC, dual, a_p, a_d) -> None:
        dlam, dbeta = dual
        self.C = self.C + a_p * dC
        self.lam, self.beta = self.lam + a_d * dlam, self.beta + a_d * dbeta
