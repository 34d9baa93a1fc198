"""The finite-m law of d* for supports of size V - 1 (geometry.separability.kinematic) against independent facts:
Cover's exact law (V = 2), the large-m threshold of geometry.separability.thresholds, a Monte-Carlo evaluation of
the same formula, and critical dimensions measured by the certified LP search."""

import math
from dataclasses import replace

import numpy as np
import pytest

from ntpbias.data.synthetic import random_ntp
from ntpbias.experiments import separability as sep
from ntpbias.geometry.separability.kinematic import critical_law, separable_probability
from ntpbias.geometry.separability.thresholds import separability_threshold
from ntpbias.geometry.separability.verdict import critical_dimension
from ntpbias.stats import cover_cdf, dkw_bound


@pytest.mark.parametrize("m", [1, 2, 3, 7, 20, 41])
def test_two_tokens_is_covers_law(m):
    ds = np.arange(1, m + 1)
    law = np.array([separable_probability(m, 2, d) for d in ds])
    np.testing.assert_allclose(law, cover_cdf(m, ds), atol=1e-12)


def _monte_carlo(m: int, V: int, d: int, draws: int, rng) -> float:
    """The formula of the module docstring by sampling the multinomial cells directly (no Poissonization, no FFT)."""
    n = m - d
    cells = rng.multinomial(m, np.r_[np.full(V, 1 / (2 * V)), 0.5], size=draws)[:, :V]
    k = np.minimum(cells, n).sum(1) - (V - 1) * n
    odd = np.mean((k >= 1) & (k % 2 == 1))
    out = rng.multinomial(m, np.full(V, 1 / V), size=draws)  # the left-out counts N_a, for the subspace terms
    whole = np.where(out >= 1, 1 - _binom_cdf(n - 1, np.maximum(out - 1, 0)), 0.0)  # Wendel
    empty_or_whole = np.where(out >= 1, whole, 1.0)
    return 2 * odd + np.mean(empty_or_whole.prod(1)) - 2 * (n % 2) * np.mean(whole.prod(1))


def _binom_cdf(k: int, N: np.ndarray) -> np.ndarray:
    """P(Bin(N, 1/2) <= k), elementwise, from binomial coefficients (an independent implementation)."""
    table = {x: sum(math.comb(x, i) for i in range(min(k, x) + 1)) / 2 ** x for x in np.unique(N).tolist()}
    return np.vectorize(table.__getitem__, otypes=[float])(N)


@pytest.mark.parametrize(("m", "V", "d"), [(30, 3, 22), (40, 5, 36), (60, 4, 50)])
def test_poissonized_fft_matches_sampling_the_cells(m, V, d):
    rng = np.random.default_rng(0)
    draws = 200_000
    mc = _monte_carlo(m, V, d, draws, rng)
    assert abs(separable_probability(m, V, d) - mc) < 5 / math.sqrt(draws)  # 5 standard errors at most


@pytest.mark.slow
@pytest.mark.parametrize("V", [3, 5, 20])
def test_large_m_threshold_is_delta_star(V):
    m = 800 if V < 20 else 1600  # seconds each (the law's cost grows fast with m at small V: 250 s at V = 3, m = 4000)
    law = critical_law(m, V)
    limit = separability_threshold(V, V - 1)
    assert math.isclose(limit, (V - 1.5) / (V - 1), abs_tol=1e-9)
    assert abs(law.median / m - limit) < 4 * math.sqrt(m) / m  # the median moves by O(1) dimensions


def test_law_is_a_distribution():
    law = critical_law(120, 5)
    assert np.all(np.diff(law.cdf) >= 0) and law.cdf[-1] == 1.0 and law.cdf[0] == 0.0
    assert math.isclose(law.pmf.sum(), 1.0, abs_tol=1e-12)


@pytest.mark.parametrize(("V", "m", "n"), [(3, 14, 160), (4, 16, 120)])
def test_law_matches_certified_critical_dimensions(V, m, n):
    found = np.array([critical_dimension(random_ntp(m, m, V, V - 1, seed=100 + s), round(0.8 * m), step=2)[0]
                      for s in range(n)])
    law = critical_law(m, V)
    empirical = np.array([(found <= d).mean() for d in law.d])
    assert np.abs(empirical - law.cdf).max() <= dkw_bound(n)


def test_study_check_grades_measured_trials_against_the_law():
    """The per-configuration check of the study (experiments.separability.checks) passes on certified trials of
    (V, V - 1) and fails when their d* are moved by two dimensions."""
    results = sep.run_trials(sep.SeparabilityConfig(V=3, support_size=2, m=16, trials=120, scan=0))

    def law_check(rows):
        return {c.name.split(": ", 1)[1]: c for c in sep.config_checks("x", rows)}["exact finite-m law"]

    good = law_check(results)
    assert good.passed and good.kind == "theorem"
    assert not law_check([replace(r, d_sep=min(r.d_sep + 2, r.m)) for r in results]).passed
