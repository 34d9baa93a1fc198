"""critical_dimension (nested-d search from a guess) against a full scan of verdicts over d."""

import math

import pytest

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.separability.verdict import critical_dimension, ntp_separability


@pytest.mark.parametrize(("V", "k", "seed"), [(2, 1, 0), (4, 1, 1), (5, 2, 2), (4, 3, 3)])
def test_search_equals_full_scan_for_every_guess(V, k, seed):
    m = 14
    full = random_ntp(m, m, V, k, seed=seed)
    scan = [ntp_separability(NTPData.from_arrays(full.H[:, :d], full.P), method="lp").separable
            for d in range(1, m + 1)]
    assert scan == sorted(scan)  # monotone in d (padding argument)
    d_star = 1 + scan.index(True)
    for guess in (None, 1, d_star - 1, d_star, d_star + 2, m, 3 * m):
        found, verdicts = critical_dimension(full, guess)
        assert found == d_star
        assert all(r.certified and r.separable == (d >= d_star) for d, r in verdicts.items())
        assert d_star in verdicts and (d_star == 1 or d_star - 1 in verdicts)
        if guess is None:  # plain bisection on (0, m + 1]
            assert len(verdicts) <= math.ceil(math.log2(m + 1))


def test_not_separable_at_full_dimension():
    full = random_ntp(12, 3, 5, 1, seed=0)  # d = 3 << m: far below the threshold
    found, verdicts = critical_dimension(full, 2)
    assert found == 4 and not verdicts[3].separable
