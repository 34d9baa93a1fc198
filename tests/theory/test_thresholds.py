"""Predicted NTP-separability thresholds (ntpbias.geometry.separability.thresholds) against identities and
independent computations."""

import math

import cvxpy as cp
import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from ntpbias.errors import ConfigError
from ntpbias.geometry.separability.thresholds import (
    expected_ties,
    project_support_cone,
    separability_threshold,
    separability_threshold_mc,
    tie_probability,
)


def test_cover_binary_is_one_half():
    assert separability_threshold(2, 1) == pytest.approx(0.5, abs=1e-10)


@pytest.mark.parametrize("V", [3, 5, 10, 20])
def test_one_out_of_support_token(V):
    # k = V - 1: the single out-of-support token is tied iff g_v > mean of the support: probability 1/2
    assert separability_threshold(V, V - 1) == pytest.approx((V - 1.5) / (V - 1), abs=1e-10)


@pytest.mark.parametrize("V,k", [(3, 1), (4, 2), (5, 3)])
def test_tie_probability_against_2d_quadrature(V, k):
    # one other out-of-support token: P(v in A) = E Φ((k u - (o - u)_+)/√k) over u, o ~ N(0, 1) i.i.d.
    assert V - k - 1 == 1

    # split at o = u: for o < u the other token is below u and the condition is √k N < k u
    below, _ = integrate.quad(lambda u: norm.pdf(u) * norm.cdf(u) * norm.cdf(math.sqrt(k) * u), -9, 9,
                              epsabs=1e-12)
    above, _ = integrate.dblquad(lambda o, u: norm.pdf(u) * norm.pdf(o) * norm.cdf((k * u - (o - u)) / math.sqrt(k)),
                                 -9, 9, lambda u: u, 9, epsabs=1e-11)
    ref = below + above
    assert tie_probability(V, k) == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize("V,k", [(5, 1), (10, 1), (10, 3), (10, 6), (20, 1), (20, 10), (50, 1)])
def test_formula_against_monte_carlo_projection(V, k):
    mc, se = separability_threshold_mc(V, k, samples=200_000, seed=V * 100 + k)
    assert abs(separability_threshold(V, k) - mc) < 4.5 * se


def test_expected_ties_against_counted_ties():
    g = np.random.default_rng(3).standard_normal((200_000, 10))
    _, ties = project_support_cone(g, 2)
    assert abs(expected_ties(10, 2) - ties.mean()) < 4.5 * ties.std() / math.sqrt(len(ties))


@pytest.mark.parametrize("k", [1, 3])
def test_projection_against_clarabel(k):
    V = 6
    g = np.random.default_rng(k).standard_normal((5, V))
    z, ties = project_support_cone(g, k)
    for i in range(len(g)):
        x = cp.Variable(V)
        cons = [x[a] == x[0] for a in range(1, k)] + [x[v] <= x[0] for v in range(k, V)]
        cp.Problem(cp.Minimize(cp.sum_squares(x - g[i])), cons).solve(solver=cp.CLARABEL, tol_gap_abs=1e-12,
                                                                       tol_gap_rel=1e-12, tol_feas=1e-12)
        assert np.allclose(z[i], x.value, atol=1e-6)
        assert ties[i] == int(np.sum(g[i, k:] > z[i, 0] + 1e-9))


def test_one_hot_bounds_and_monotone_in_V():
    values = [separability_threshold(V, 1) for V in range(2, 17)]
    assert np.all(np.diff(values) < 0)
    for V, t in zip(range(2, 17), values, strict=True):
        assert 1 / V - 1e-12 <= t <= 0.5 + 1e-12


@pytest.mark.parametrize("V", [5, 10, 20])
def test_support_bounds_and_monotone_in_k(V):
    values = [separability_threshold(V, k) for k in range(1, V)]
    assert np.all(np.diff(values) > 0)
    for k, t in zip(range(1, V), values, strict=True):
        assert (k - 1) / (V - 1) < t <= (k - 1 + (V - k) / 2) / (V - 1) + 1e-12


@pytest.mark.parametrize("V,k", [(2, 2), (3, 0), (1, 1)])
def test_invalid_sizes_raise(V, k):
    with pytest.raises(ConfigError):
        separability_threshold(V, k)
