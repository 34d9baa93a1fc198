"""The interior-point method of geometry.separability.interior against independent computations: its structured
products and normal matrix against the explicit constraint matrix, and its optimal value, in W coordinates and in
cokernel coordinates, against the elastic LP solved by scipy's HiGHS."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.scaling import normalized
from ntpbias.geometry.separability import interior
from ntpbias.geometry.separability.nested import _restricted


def _groups(V, k, m, d, seed):
    unit, _ = normalized(random_ntp(m, m, V, k, seed=seed))
    return _restricted(constraints(unit), d)


def _matrix(group, V, d):
    """A constraint group as a dense matrix on the first V - 1 token rows of W (row-major vec(W), token V - 1
    dropped)."""
    return group.to_sparse().toarray()[:, :(V - 1) * d] if len(group) else np.zeros((0, (V - 1) * d))


def _explicit(ineq, eq, V, d):
    """[A_in; A_eq]."""
    return np.vstack([_matrix(ineq, V, d), _matrix(eq, V, d)])


@pytest.mark.parametrize(("V", "k", "m", "d"), [(2, 1, 20, 7), (4, 1, 24, 9), (5, 2, 24, 10), (6, 4, 20, 15)])
def test_products_and_normal_matrix_match_the_explicit_constraint_matrix(V, k, m, d):
    ineq, eq = _groups(V, k, m, d, seed=0)
    G = interior._Gaps(ineq, eq)
    A = _explicit(ineq, eq, V, d)
    rng = np.random.default_rng(1)
    x, y, theta = rng.standard_normal(A.shape[1]), rng.standard_normal(A.shape[0]), rng.random(A.shape[0])
    np.testing.assert_allclose(G.product(x), A @ x, atol=1e-12)
    np.testing.assert_allclose(G.adjoint(y), A.T @ y, atol=1e-12)
    np.testing.assert_allclose(G.gram(theta), A.T @ (theta[:, None] * A), atol=1e-11)


def _elastic_value(ineq, eq, V, d) -> float:
    """min Σ s + Σ t subject to A_in W + s >= 1, -t <= A_eq W <= t, s, t >= 0, by scipy's HiGHS."""
    A_in, A_eq = _matrix(ineq, V, d), _matrix(eq, V, d)
    n, r, e = A_in.shape[1], A_in.shape[0], A_eq.shape[0]
    c = np.r_[np.zeros(n), np.ones(r + e)]
    A_ub = np.block([[-A_in, -np.eye(r), np.zeros((r, e))],
                     [A_eq, np.zeros((e, r)), -np.eye(e)],
                     [-A_eq, np.zeros((e, r)), -np.eye(e)]])
    b_ub = np.r_[-np.ones(r), np.zeros(2 * e)]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * n + [(0, None)] * (r + e), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize(("V", "k", "m"), [(3, 1, 30), (5, 2, 30), (4, 3, 24)])
def test_the_optimal_value_is_the_elastic_lps_on_both_sides_of_d_star(V, k, m):
    unit, _ = normalized(random_ntp(m, m, V, k, seed=2))
    Q = np.linalg.qr(unit.H.numpy().astype(np.float64), mode="complete")[0]
    values = []
    for d in range(2, m + 1, 3):
        ineq, eq = _restricted(constraints(unit), d)
        expected = _elastic_value(ineq, eq, V, d)
        assert interior.elastic_solve(ineq, eq).value == pytest.approx(expected, rel=1e-7, abs=1e-7)
        cells = [(g.j.numpy(), g.b.numpy()) for g in (ineq, eq)]
        assert interior.cokernel_solve(Q[:, d:], *cells, V).value == pytest.approx(expected, rel=1e-7, abs=1e-7)
        values.append(expected)
    assert min(values) < 1e-7 < max(values)  # separable and not separable dimensions both met


def test_a_failed_factorization_is_no_answer(monkeypatch):
    """A Cholesky factorization that fails (a normal matrix not positive definite in floating point) ends the method
    without an answer, so that the caller takes the LP verdict, instead of raising."""
    ineq, eq = _groups(4, 2, 24, 10, seed=0)

    def fail(self, theta):
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(interior._Gaps, "factor", fail)
    assert interior.elastic_solve(ineq, eq) is None
