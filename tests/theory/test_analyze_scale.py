"""``analyze`` through its large-problem path (iterative subspace, dual-solver separability and NTP-SVM) against
its small-problem path (Gram eigendecomposition, LP, Clarabel) on moderately sized instances (eqs. (4)-(6b) and Def. 3
of paper A; docs/paper-a-linear-ntp.md#objects)."""

import importlib
import json

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.analysis import analyze
from ntpbias.geometry.linear.subspace import DataSubspace, dim_F

# the modules (``ntpbias.geometry.subspace`` the attribute is the function of the same name)
sub_mod, sep_mod, svm_mod = (importlib.import_module(f"ntpbias.geometry.{name}")
                             for name in ("linear.subspace", "separability.verdict", "margins.program"))
LARGE = {"solver": "dual", "separability_method": "dual", "subspace_method": "iterative"}
SMALL = {"solver": "clarabel", "separability_method": "lp", "subspace_method": "exact"}


def rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def both(data):
    return analyze(data, **LARGE), analyze(NTPData.from_arrays(data.H, data.P, data.pi), **SMALL)


def test_separable_instance_agrees():
    data = random_ntp(50, 60, 14, 4, seed=3, pi="dirichlet")  # 840 variables, 150 equalities, 500 inequalities
    big, small = both(data)
    a, b = big.to_dict(), small.to_dict()
    assert (a["separability_method"], a["subspace_method"], a["solver"]) == ("dual", "iterative", "dual")
    assert (b["separability_method"], b["subspace_method"], b["solver"]) == ("lp", "exact", "clarabel")
    assert a["dim_F"] == b["dim_F"] == 50 * 3
    assert a["compatible"] and b["compatible"]
    assert rel(big.W_star, small.W_star) < 1e-9
    assert a["separable"] and b["separable"]
    assert a["separability_certificate"]["certified"] and a["separability_certificate"]["method"] == "dual"
    assert big.svm.certified and small.svm.certified
    assert rel(big.svm.W, small.svm.W) < 1e-7
    assert abs(a["margin"] - b["margin"]) / b["margin"] < 1e-8
    # the separating certificate of the dual path is W^mm itself (rescaled, projected): in F^⊥ with margin 1
    sep = big.separability
    assert sep.svm is big.svm
    assert rel(sep.W / sep.W.norm(), big.svm.W / big.svm.norm) < 1e-7
    assert float(torch.linalg.vector_norm(DataSubspace(data, "exact").project(sep.W))) < 1e-9 * float(sep.W.norm())
    json.dumps(a)  # serializable, as analysis.json


def test_not_separable_instance_agrees():
    data = random_ntp(120, 6, 8, 3, seed=0)  # m >> d: not NTP-separable, not compatible
    big, small = both(data)
    a, b = big.to_dict(), small.to_dict()
    assert not a["separable"] and not b["separable"]
    assert a["separability_method"] == "dual" and big.svm is None
    y, mu = big.separability.farkas_y, big.separability.farkas_mu
    assert float(y.min()) >= 0 and abs(float(y.sum()) - 1) < 1e-12
    # independent check of the Gordan residual on the dense constraint matrices
    from ntpbias.geometry.constraints import constraints

    cons = constraints(data)
    resid = cons.ineq.to_sparse().T @ y.numpy() + cons.eq.to_sparse().T @ mu.numpy()
    assert np.isclose(np.linalg.norm(resid), big.separability.residual, rtol=1e-6)
    # rank-deficient H (d < m): dim F from the token-wise kernel formula, W* by least squares
    assert a["dim_F"] == b["dim_F"]
    assert not a["compatible"] and not b["compatible"]
    assert rel(big.W_star, small.W_star) < 1e-7
    assert np.isclose(a["compatibility_residual"], b["compatibility_residual"], rtol=1e-7)


@pytest.mark.parametrize("m,d,V,k,seed", [(40, 12, 10, 4, 1), (25, 30, 6, 5, 2), (60, 8, 12, 2, 3)])
def test_dim_F_formula_matches_gram_rank(m, d, V, k, seed):
    data = random_ntp(m, d, V, k, seed=seed)
    assert dim_F(data) == DataSubspace(data, "exact").dim


@pytest.mark.parametrize("shape,rank", [((9, 5), 5), ((5, 9), 5), ((12, 7), 4), ((6, 8), 3), ((4, 3), 0), ((7, 7), 7)])
def test_left_null_basis_against_numpy(shape, rank):
    """An orthonormal basis of the left null space of X, of dimension n - rank X (numpy's SVD rank): the QR path
    at full rank, the SVD path below it, the zero matrix."""
    n, d = shape
    g = np.random.default_rng(n * 100 + d + rank)
    X = g.standard_normal((n, rank)) @ g.standard_normal((rank, d)) if rank else np.zeros(shape)
    B = sub_mod._left_null_basis(torch.from_numpy(X)).numpy()
    assert B.shape == (n, n - np.linalg.matrix_rank(X)) == (n, n - rank)
    assert np.allclose(B.T @ B, np.eye(n - rank), atol=1e-12)
    assert np.abs(B.T @ X).max(initial=0) < 1e-12 * max(1.0, np.abs(X).max())


@pytest.mark.parametrize("m,d,V,k,seed", [(40, 31, 5, 4, 4), (40, 29, 5, 4, 4), (60, 51, 8, 7, 5)])
def test_dim_F_near_the_counting_bound(m, d, V, k, seed):
    """|J_v| a little above d for some tokens (a few null directions each, the QR path), below it for others, on both
    sides of compatibility: the rank of eq. (4) itself."""
    data = random_ntp(m, d, V, k, seed=seed)
    assert dim_F(data) == DataSubspace(data, "exact").dim


def test_dim_F_with_repeated_embeddings():
    H = torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    H = torch.cat([H, H[:3], 2 * H[:1]])  # repeated and collinear contexts
    P = torch.rand(10, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    P[P < 0.5] = 0
    P[:, 0] += 0.2
    data = NTPData.from_arrays(H, P / P.sum(1, keepdim=True))
    exact, it = DataSubspace(data, "exact"), DataSubspace(data, "iterative")
    assert dim_F(data) == exact.dim == it.dim < int(data.support.sum()) - data.m
    assert rel(it.W_star, exact.W_star) < 1e-8
    W = torch.randn(7, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    assert rel(it.project(W), exact.project(W)) < 1e-8


def test_iterative_projection_is_batched_and_idempotent():
    data = random_ntp(50, 60, 10, 6, seed=1)
    F = DataSubspace(data, "iterative")
    W = torch.randn(3, 10, 60, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    P = F.project(W)
    assert rel(F.project(P), P) < 1e-10
    ref = DataSubspace(data, "exact").project(W)
    assert rel(P, ref) < 1e-10
    assert abs(float((P * (W - P)).sum())) < 1e-8 * float((W * W).sum())  # orthogonal projection


def test_auto_switches_to_the_large_path_by_size(monkeypatch):
    # m > d: with d >= m the cokernel form of the separability LP is empty (no rows) and the LP decides for free
    data = random_ntp(40, 36, 10, 4, seed=2)
    monkeypatch.setattr(sub_mod, "EXACT_MAX_ROWS", 10)
    monkeypatch.setattr(sep_mod, "LP_MAX_NNZ", 10)
    monkeypatch.setattr(svm_mod, "AUTO_CLARABEL_MAX_NNZ", 10)
    rec = analyze(data).to_dict()
    assert (rec["subspace_method"], rec["separability_method"], rec["solver"]) == ("iterative", "dual", "dual")
    assert rec["certified"] and rec["separability_certificate"]["certified"]
    ref = analyze(NTPData.from_arrays(data.H, data.P), **SMALL).to_dict()
    assert np.isclose(rec["norm_W_mm"], ref["norm_W_mm"], rtol=1e-8)
    assert np.isclose(rec["norm_W_star"], ref["norm_W_star"], rtol=1e-9)


def test_float32_solver_option_is_certified_in_float64():
    data = random_ntp(40, 50, 12, 4, seed=7)
    a = analyze(data, **LARGE, solver_options={"dtype": "float32"})
    rec = a.to_dict()
    assert rec["certified"] and rec["solver_details"]["precision"] in ("float32", "float32+float64")
    assert a.svm.W.dtype == torch.float64


def test_dim_F_one_hot_shortcut_and_duplicates():
    P = torch.tensor([[0.5, 0.5, 0, 0], [0.2, 0.3, 0.5, 0], [0, 0, 0, 1.0]], dtype=torch.float64)
    distinct = NTPData.from_arrays(3 * torch.eye(3), P)
    repeated = NTPData.from_arrays(torch.eye(3)[[0, 0, 1]], P)  # contexts 1 and 2 share an embedding
    assert dim_F(distinct) == DataSubspace(distinct, "exact").dim == 3
    assert dim_F(repeated) == DataSubspace(repeated, "exact").dim == 2


def test_dual_separability_warm_starts_the_svm():
    data = random_ntp(40, 50, 12, 4, seed=9)
    sep = sep_mod.ntp_separability(data, method="dual")
    again = svm_mod.ntp_svm(data, "dual")
    assert sep.svm.iterations > 10 and again.iterations <= 10  # one residual check from the cached solution
    assert rel(again.W, sep.svm.W) < 1e-9


def test_residual_test_agrees_with_the_rank_at_the_compatibility_threshold():
    """At d = d*_comp the equations (4) are only just independent (cond(G) ~ 1e9 here): without iterative refinement
    the residual of W* was 2e-7 (relative 1e-8, read as inconsistent); found by the large-m study's scan."""
    from ntpbias.experiments.separability.runs import Trial, trial_dataset

    full = trial_dataset(Trial(V=10, k=5, m=50, seed=0, trial=4))
    for d, compatible in ((22, False), (23, True)):
        data = NTPData.from_arrays(full.H[:, :d], full.P, full.pi)
        assert (dim_F(data) == 50 * 4) is compatible
        for method in ("exact", "iterative"):
            F = DataSubspace(data, method)
            assert F.compatible is compatible, (d, method, F.compatibility_residual)
