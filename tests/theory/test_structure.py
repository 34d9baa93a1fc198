"""Separability, compatibility and dim F decided by structure (geometry/separability/structure.py and decide.py,
docs/lm.md#decided-by-structure) against independent computations: the separability LP, the exact subspace method,
an explicit basis of F (every pair generator (e_z - e_z') h_j^T written out) and a brute-force search over prefixes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.geometry.linear.subspace import subspace
from ntpbias.geometry.separability.decide import decide, separable_prefix, subset
from ntpbias.geometry.separability.structure import CERT_TOL, ntp_structure
from ntpbias.geometry.separability.verdict import ntp_separability


def _random(seed: int, *, m=(3, 30), V=(2, 8), d=(1, 16), sizes=(1, 4), rank=None) -> NTPData:
    """Random supports of sizes in ``sizes``, Dirichlet probabilities and Gaussian features of rank ``rank`` (random
    below d when None), π̂ random."""
    rng = np.random.default_rng(seed)
    m, V, d = (int(rng.integers(lo, hi)) for lo, hi in (m, V, d))
    r = int(rng.integers(1, d + 1)) if rank is None else min(rank, d)
    H = rng.normal(size=(m, r)) @ rng.normal(size=(r, d))
    P = np.zeros((m, V))
    for j in range(m):
        S = rng.choice(V, size=min(int(rng.integers(*sizes)), V), replace=False)
        P[j, S] = rng.dirichlet(np.ones(len(S)))
    return NTPData.from_arrays(H, P, rng.dirichlet(np.ones(m)))


def _in_span(A: np.ndarray, x: np.ndarray) -> float:
    """Relative distance of x from the row space of A."""
    if not len(A):
        return 1.0
    coef = np.linalg.lstsq(A.T, x, rcond=None)[0]
    return float(np.linalg.norm(A.T @ coef - x) / np.linalg.norm(x))


@pytest.mark.parametrize("seed", range(40))
def test_structure_agrees_with_the_lp_and_the_subspace(seed):
    data = _random(seed)
    s = ntp_structure(data)
    lp = ntp_separability(data, method="lp")
    F = subspace(data, "exact")
    if s.separable is not None:
        assert s.separable == lp.separable
        assert s.separability.get("certified", True)
    if s.compatible is not None:
        assert s.compatible == F.compatible
    lo, hi = s.dim_F_bounds
    assert lo <= F.dim <= hi
    if s.dim_F is not None:
        assert s.dim_F == F.dim


def test_structure_decides_most_random_cases():
    """The comparison above is not vacuous: on these cases structure decides separability both ways (and leaves some
    open, for the LP)."""
    verdicts = [ntp_structure(_random(seed)).separable for seed in range(40)]
    assert verdicts.count(True) >= 3 and verdicts.count(False) >= 15 and verdicts.count(None) >= 3


def _shared_pairs(rank: int) -> NTPData:
    """Four tokens, 60 contexts in R^3 with features of rank ``rank`` (seeded by it), supports of 2 and 3 tokens: every
    token pair is shared by many contexts, so the support graph is connected."""
    rng = np.random.default_rng(rank)
    V, d, m = 4, 3, 60
    H = rng.normal(size=(m, rank)) @ rng.normal(size=(rank, d))
    P = np.zeros((m, V))
    for j in range(m):
        S = rng.choice(V, size=2 + (j % 2), replace=False)
        P[j, S] = rng.dirichlet(np.ones(len(S)))
    return NTPData.from_arrays(H, P)


@pytest.mark.parametrize("rank", [3, 2])
def test_connected_support_graph(rank, pair_generators):
    """Four tokens, every pair shared by many contexts whose features span the row space (rank 3 of d = 3, or rank 2
    of d = 3): one component, dim F = (V - 1) r, not separable, and the tied context's pair (e_z - e_v) h_j^T lies in F
    (checked on the explicit basis of F)."""
    V, d = 4, 3
    data = _shared_pairs(rank)
    H, P = data.H.numpy(), data.P.numpy()
    s = ntp_structure(data)
    A, b = pair_generators(data)
    assert s.rank == rank and s.graph.n_components == 1
    assert s.dim_F == np.linalg.matrix_rank(A) == (V - 1) * rank
    assert s.separable is False and s.separability["residual"] <= CERT_TOL
    assert not ntp_separability(data, method="lp").separable
    j, (z, v) = s.separability["context"], s.separability["tokens"]
    assert P[j, z] > 0 and P[j, v] == 0
    E = np.zeros((V, d))
    E[z] += H[j]
    E[v] -= H[j]
    assert _in_span(A, E.ravel()) < 1e-9  # the tied pair is a combination of F's generators: the Gordan certificate
    assert s.compatible is False  # the log-odds are generic: some dependency contradicts them
    lstsq_residual = np.linalg.norm(A @ np.linalg.lstsq(A, b, rcond=None)[0] - b)
    assert s.compatibility["residual_lower_bound"] <= lstsq_residual * (1 + 1e-9) + 1e-12


def test_disconnected_support_graph_is_separable_where_the_lp_says_so(pair_generators):
    """Tokens {0, 1} and {2, 3} never share a support: two components, no context tied, dim F = (V - 2) r exactly
    (the co-support components are the same), and the LP decides (separable: the groups' mean directions differ)."""
    rng = np.random.default_rng(0)
    V, d, m = 4, 2, 40
    H = np.concatenate([rng.normal(size=(m // 2, d)) + [5, 0], rng.normal(size=(m // 2, d)) - [5, 0]])
    P = np.zeros((m, V))
    P[: m // 2, :2] = rng.dirichlet(np.ones(2), size=m // 2)
    P[m // 2:, 2:] = rng.dirichlet(np.ones(2), size=m // 2)
    data = NTPData.from_arrays(H, P)
    s = ntp_structure(data)
    assert s.graph.n_components == 2 and s.graph.co_support_components == 2
    assert not bool(s.tied.any()) and s.separable is None
    assert s.dim_F == np.linalg.matrix_rank(pair_generators(data)[0]) == (V - 2) * d
    verdict = decide(data)
    assert verdict.method == "lp" and verdict.separable is True and verdict.certified


def test_full_row_rank_is_separable_and_compatible():
    """m <= d and rank H = m (cond H about 1e5): separable with W = S̃ H^{+T}, compatible, dim F = Σ(|S_j| - 1); the
    LP and the exact subspace agree."""
    rng = np.random.default_rng(1)
    m, V, d = 12, 6, 16
    U, _, Vt = np.linalg.svd(rng.normal(size=(m, d)), full_matrices=False)
    H = U @ np.diag(np.logspace(0, -5, m)) @ Vt
    P = np.zeros((m, V))
    for j in range(m):
        S = rng.choice(V, size=int(rng.integers(1, 4)), replace=False)
        P[j, S] = rng.dirichlet(np.ones(len(S)))
    data = NTPData.from_arrays(H, P)
    s = ntp_structure(data)
    assert s.rank == m and s.separable is True and s.compatible is True
    assert s.separability["certified"]
    assert s.dim_F == int((data.support_sizes - 1).sum()) == subspace(data, "exact").dim
    assert ntp_separability(data, method="lp").separable and subspace(data, "exact").compatible


def test_undecided_beyond_the_lp_limit_says_how_to_shrink():
    data = NTPData.from_arrays(torch.tensor([[1.0, 0], [0, 1], [1, 1]]), [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    verdict = decide(data, max_lp_nnz=0)
    assert verdict.separable is None and verdict.method == "undecided" and "--max-contexts" in verdict.reason
    assert decide(data).separable is True  # the control: with the LP it is decided


@pytest.mark.parametrize("seed", range(12))
def test_separable_prefix_against_brute_force(seed):
    """The longest separable prefix by π̂ equals the one found by deciding every prefix with the LP (a prefix of full
    supports only counts as separable)."""
    data = _random(seed, m=(4, 22), V=(2, 6), d=(1, 5), sizes=(1, 3), rank=10)
    p = separable_prefix(data)
    truth = 0
    for k in range(1, data.m + 1):
        r = ntp_separability(subset(data, p.order[:k]), method="lp")
        if not (r.separable or r.method == "trivial"):
            break
        truth = k
    assert p.k == truth
    assert p.k_fail == (truth + 1 if truth < data.m else None)
    assert p.mass == pytest.approx(float(data.pi[p.order[:truth]].sum()) if truth else 0.0)


def test_separable_prefix_stops_at_the_first_contradiction():
    """h_3 = h_1 + h_2 with label 1 while h_1, h_2 have label 0: the prefix of the two most frequent is maximal."""
    H = torch.tensor([[1.0, 0], [0, 1], [1, 1], [2, 1]])
    data = NTPData.from_arrays(H, [[1.0, 0], [1.0, 0], [0, 1.0], [1.0, 0]], [0.4, 0.3, 0.2, 0.1])
    p = separable_prefix(data)
    assert (p.k, p.k_fail, p.exact) == (2, 3, True)


def test_ntp_separability_takes_the_support_graph_before_the_dual_solver():
    """Above the LP's size the automatic verdict asks the support graph first (no dual iterations), and says so."""
    data = _random(0, m=(3000, 3001), V=(20, 21), d=(6, 7), sizes=(2, 5), rank=6)
    verdict = ntp_separability(data)
    assert verdict.method == "structure" and verdict.separable is False and verdict.certified


def test_a_structural_verdict_whose_certificate_misses_its_tolerance_is_no_verdict(monkeypatch):
    """A structural "not separable" whose recomputed Gordan certificate misses its tolerance (a rank test at the edge
    of its cutoff) is not reported as found: the LP decides it, or, beyond the LP's limit, it is undecided."""
    from dataclasses import replace

    data = _shared_pairs(3)
    st = ntp_structure(data)
    assert st.separable is False and st.separability["certified"]
    assert decide(data, structure=st).method == "structure"  # the control: a certified structural verdict stands
    shaky = replace(st, separability={**st.separability, "certified": False, "residual": 0.1})
    by_lp = decide(data, structure=shaky)
    assert by_lp.method == "lp" and by_lp.separable is False and by_lp.certified
    open_question = decide(data, structure=shaky, max_lp_nnz=0)
    assert open_question.separable is None and "missed its tolerance (relative residual 1.0e-01" in open_question.reason
    # ntp_separability (ntpbias analyze) likewise: above the LP's size it asks the structure first, and an uncertified
    # structural verdict sends it on to its other methods
    from ntpbias.geometry.separability.verdict import _structural_verdict

    assert _structural_verdict(data).method == "structure"
    monkeypatch.setattr("ntpbias.geometry.separability.structure.ntp_structure", lambda data: shaky)
    assert _structural_verdict(data) is None
