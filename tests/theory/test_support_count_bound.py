"""The support-count bound on the critical dimension of NTP_H-compatibility (docs/separability.md): a naive
computation, a lower bound on the rank verdict of eq. (4) (dim F) on random data, and its large-m limit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp, random_supports
from ntpbias.geometry.linear.subspace import counting_bound, dim_F, support_count_bound


def _naive_bound(S: np.ndarray) -> int:
    """The two conditions by plain loops: the smallest d with sum_v max(n_v - d, 0) <= m - d, and the largest count of
    a repeated support of size >= 2."""
    m, V = S.shape
    n = [sum(int(S[j, v]) for j in range(m)) for v in range(V)]
    d_all = next(d for d in range(m + 1) if sum(max(c - d, 0) for c in n) <= m - d)
    counts: dict[tuple, int] = {}
    for row in S:
        if row.sum() >= 2:
            counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    repeats = max(counts.values(), default=0)
    return max(d_all, repeats if repeats >= 2 else 0)


@pytest.mark.parametrize("seed", range(12))
def test_vectorized_bound_matches_the_loops(seed):
    rng = np.random.default_rng(seed)
    m, V = int(rng.integers(2, 40)), int(rng.integers(2, 9))
    S = np.zeros((m, V), bool)
    for j in range(m):  # mixed support sizes, some repeated rows
        S[j, rng.choice(V, int(rng.integers(1, V + 1)), replace=False)] = True
    S[: m // 4] = S[0]
    assert support_count_bound(torch.from_numpy(S)) == _naive_bound(S)


def _critical_comp(data: NTPData) -> int:
    """Smallest d at which eq. (4)'s equations are independent (dim F = Σ_j (|S_j| - 1)), by a scan over d."""
    equations = int(data.support.sum()) - data.m
    for d in range(data.d + 1):
        sub = NTPData.from_arrays(data.H[:, :d], data.P, data.pi) if d else None
        if (equations == 0) if d == 0 else dim_F(sub) == equations:
            return d
    raise AssertionError("not compatible at d = m (Lemma 1)")


@pytest.mark.parametrize("V,k", [(3, 2), (5, 2), (5, 4), (8, 7), (10, 5)])
def test_bound_never_exceeds_the_rank_verdict_and_is_usually_attained(V, k):
    m, trials = 30, 12
    tight = 0
    for seed in range(trials):
        data = random_ntp(m, m, V, k, seed=seed)
        bound, d_star = support_count_bound(data.support), _critical_comp(data)
        assert bound <= d_star  # a necessary condition (our derivation)
        assert bound >= np.ceil(counting_bound(V, k) * m)  # at least the counting bound
        tight += bound == d_star
    assert tight >= trials // 2  # in the study it is attained on almost every dataset (README)


def test_repeated_supports_force_their_count():
    """c contexts with one support {0, 1} need d >= c: the bound is exactly c and so is the rank verdict."""
    c = 6
    P = torch.zeros(c + 4, 5, dtype=torch.float64)
    P[:c, :2] = torch.rand(c, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 0.5 + 0.25
    P[:c, 1] = 1 - P[:c, 0]
    P[c:, 2:] = 1 / 3
    H = torch.randn(c + 4, c + 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    data = NTPData.from_arrays(H, P)
    assert support_count_bound(data.support) == _critical_comp(data) == c


@pytest.mark.parametrize("V,k", [(5, 2), (10, 9), (20, 19)])
def test_bound_tends_to_the_counting_bound(V, k):
    gen = torch.Generator().manual_seed(0)
    gaps = [support_count_bound(random_supports(m, V, k, gen)) / m - counting_bound(V, k) for m in (400, 40_000)]
    assert gaps[1] >= 0 and gaps[1] < max(gaps[0], 1e-3)  # shrinking towards the limit
    assert gaps[1] < 0.006
