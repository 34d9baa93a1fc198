"""NTP-separability at one dimension by an interior-point method on the elastic LP pair, with the normal matrix
built from its Kronecker structure.

Separability (Def. 2 of paper A, eqs. (6a)-(6b)) asks for W with A_in(W) >= 1 and A_eq(W) = 0. The *elastic* LP
and its dual,

    (E)  minimize  Σ_i s_i + Σ_k |A_eq(W)_k|   subject to  A_in(W) + s >= 1,  s >= 0          (W free),
    (D)  maximize  Σ_i y_i                    subject to  A_in^T y + A_eq^T μ = 0,  0 <= y <= 1,  -1 <= μ <= 1,

are both feasible (W = 0, s = 1; y = 0, μ = 0), and their common optimal value is 0 exactly when the data separate:
then W (from s = 0) separates with margin 1, and otherwise an optimal (y, μ) of (D) has Σy > 0 and is a Gordan
certificate (y >= 0, A_in^T y + A_eq^T μ = 0: no W has A_in(W) > 0 with A_eq(W) = 0).

(D) is solved by Mehrotra's predictor-corrector method (box bounds, one equality block; the multiplier of the
equality is -W). Each iteration solves the normal equations (G^T Θ G) ΔW = r, G the rows of A_in and A_eq stacked:
a row is (e_a - e_b) ⊗ h_j, so

    G^T Θ G = Σ_j M_j ⊗ h_j h_j^T,      M_j = Σ_{rows i of context j} θ_i (e_a - e_b)(e_a - e_b)^T     (V x V),

and with W ordered token-major the block of tokens (u, v) is H^T diag(M_{:, u, v}) H: one matrix product over
contexts for all token pairs u <= v, and no constraint matrix is formed. Token V - 1's row of W is fixed at zero
(every row is a logit difference), which leaves (V - 1) d unknowns: a dense Cholesky factorization of that size per
iteration, 25-50 iterations per verdict. On the study's small supports at m = 400 this is 4-5x faster than the
simplex LPs (their cost is thousands of dense pivots). The caller checks both certificates in float64 on the data's
own constraints; this module only computes them: the separating W is minus the iterate's multiplier, and the Gordan
(y, μ) is polished by a few projections onto A_in^T y + A_eq^T μ = 0, weighted by y (which keeps y >= 0).
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
        K = self.V - 1
        self.u, self.v = np.triu_indices(K)

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
        """G^T diag(θ) G ((V - 1) d square), from the token blocks H^T diag(M_{:, u, v}) H, u <= v."""
        V, m, d, K = self.V, self.H.shape[0], self.d, self.V - 1
        cells = lambda p, q: self.j * V * V + p * V + q  # noqa: E731
        index = np.concatenate([cells(self.a, self.a), cells(self.b, self.b), cells(self.a, self.b),
                                cells(self.b, self.a)])
        M = np.bincount(index, np.concatenate([theta, theta, -theta, -theta]), minlength=m * V * V)
        M = M.reshape(m, V, V)[:, self.u, self.v]  # (m, pairs)
        blocks = ((M[:, :, None] * self.H[:, None, :]).reshape(m, -1).T @ self.H).reshape(-1, d, d)
        N = np.empty((K, K, d, d))
        N[self.u, self.v] = blocks
        N[self.v, self.u] = blocks.transpose(0, 2, 1)
        return N.transpose(0, 2, 1, 3).reshape(K * d, K * d)

    def factor(self, theta: np.ndarray):
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
            x = x - weight * G.product(sl.cho_solve(G.factor(weight), r, check_finite=False))
            x[:n_in] = np.maximum(x[:n_in], 0)
            x /= x[:n_in].sum()
        return x[:n_in], x[n_in:]


def elastic_solve(ineq: LogitGaps, eq: LogitGaps) -> ElasticSolution | None:
    """Solve (D) (module docstring) for the constraints ``ineq``, ``eq`` (float64, unit scale; ``ineq`` not empty);
    None when the method does not converge within :data:`MAX_ITER` iterations."""
    G = _Gaps(ineq, eq)
    n, n_in = G.n_in + len(eq), G.n_in
    c = np.r_[-np.ones(n_in), np.zeros(n - n_in)]
    lo, hi = np.r_[np.zeros(n_in), -np.ones(n - n_in)], np.ones(n)
    it = _Iterate(G, (lo + hi) / 2, np.zeros((G.V - 1) * G.d), np.ones(n), np.ones(n), lo, hi)
    for count in range(MAX_ITER + 1):
        r_p, r_d = -G.adjoint(it.x), c - G.product(it.w) - it.z_lo + it.z_hi
        mu = (it.s_lo @ it.z_lo + it.s_hi @ it.z_hi) / (2 * n)
        primal, dual = c @ it.x, lo @ it.z_lo - hi @ it.z_hi
        scale = 1 + abs(primal)
        if not np.isfinite(mu) or count == MAX_ITER:
            return None
        if mu < MU_FLOOR or (np.abs(r_p).max() < TOL * scale and np.abs(r_d).max() < TOL
                             and abs(primal - dual) < GAP_TOL * scale):
            break
        it.factor()
        affine = it.newton(r_p, r_d, -it.s_lo * it.z_lo, -it.s_hi * it.z_hi)
        a_p, a_d = it.longest(affine)
        dx, _, dz_lo, dz_hi = affine
        mu_aff = ((it.s_lo + a_p * dx) @ (it.z_lo + a_d * dz_lo)
                  + (it.s_hi - a_p * dx) @ (it.z_hi + a_d * dz_hi)) / (2 * n)
        sigma_mu = (mu_aff / mu) ** CENTERING * mu  # corrector: centering plus the affine step's second-order term
        it.move(it.newton(r_p, r_d, sigma_mu - it.s_lo * it.z_lo - dx * dz_lo,
                          sigma_mu - it.s_hi * it.z_hi + dx * dz_hi))
    W = np.vstack([-it.w.reshape(G.V - 1, G.d), np.zeros((1, G.d))])
    return ElasticSolution(W, float(it.x[:n_in].sum()), count, it.x, G)


class _Iterate:
    """The primal-dual iterate of (D): x in the box [lo, hi] with slacks s_lo = x - lo, s_hi = hi - x (kept as
    variables, so that they stay positive to the last digit), the multiplier w of G^T x = 0 and the bound multipliers
    z_lo, z_hi."""

    def __init__(self, G: _Gaps, x, w, z_lo, z_hi, lo, hi):
        self.G, self.x, self.w, self.z_lo, self.z_hi = G, x, w, z_lo, z_hi
        self.s_lo, self.s_hi = x - lo, hi - x

    def factor(self) -> None:
        """Θ = (z_lo / s_lo + z_hi / s_hi)^{-1} and the Cholesky factor of G^T Θ G."""
        self.theta = 1 / (self.z_lo / self.s_lo + self.z_hi / self.s_hi)
        self.F = self.G.factor(self.theta)

    def newton(self, r_p, r_d, r_lo, r_hi):
        """The Newton direction (dx, dw, dz_lo, dz_hi) for the residuals G^T dx = r_p, dual r_d and complementarity
        r_lo, r_hi, through the normal equations (with REFINE steps of iterative refinement)."""
        G, theta = self.G, self.theta
        q = -r_d + r_lo / self.s_lo - r_hi / self.s_hi
        rhs = r_p - G.adjoint(theta * q)
        dw = sl.cho_solve(self.F, rhs, check_finite=False)
        for _ in range(REFINE):
            dw += sl.cho_solve(self.F, rhs - G.adjoint(theta * G.product(dw)), check_finite=False)
        dx = theta * (q + G.product(dw))
        return dx, dw, (r_lo - self.z_lo * dx) / self.s_lo, (r_hi + self.z_hi * dx) / self.s_hi

    def longest(self, direction) -> tuple[float, float]:
        """The longest primal and dual steps (at most 1) that keep the slacks and bound multipliers nonnegative."""
        dx, _, dz_lo, dz_hi = direction
        return (min(_to_boundary(self.s_lo, dx), _to_boundary(self.s_hi, -dx)),
                min(_to_boundary(self.z_lo, dz_lo), _to_boundary(self.z_hi, dz_hi)))

    def move(self, direction) -> None:
        """A step of BOUNDARY x the longest along ``direction``."""
        a_p, a_d = (BOUNDARY * a for a in self.longest(direction))
        dx, dw, dz_lo, dz_hi = direction
        self.x, self.s_lo, self.s_hi = self.x + a_p * dx, self.s_lo + a_p * dx, self.s_hi - a_p * dx
        self.w, self.z_lo, self.z_hi = self.w + a_d * dw, self.z_lo + a_d * dz_lo, self.z_hi + a_d * dz_hi


def _to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0
