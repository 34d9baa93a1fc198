"""The norm-constrained regularization path Ŵ_B = argmin_{||W|| <= B} CE(W) (eq. (8) and Thm 1 of paper A;
check A-C10 of docs/paper-a-linear-ntp.md#theory-checks).

Checked against an independent cvxpy model (exponential cones, Clarabel) on a small instance, against KKT
conditions recomputed with autograd on a loss written here, and against Theorem 1's predictions (alignment with
W^mm, P_F(Ŵ_B) -> W*) on a Fig. 4-type instance, with W* and P_F from dense numpy linear algebra.
"""

from __future__ import annotations

import itertools
import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry import ntp_svm
from ntpbias.geometry.linear.regpath import PATH_TOL, regularization_path

B_GRID = [2.0, 5.0, 10.0, 20.0]


def own_ce(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    """CE(W) = Σ_j π_j (logsumexp(W h_j) - p_j^T W h_j), written independently of ntpbias.geometry.linear.loss."""
    L = W @ data.H.T  # (V, m)
    return (data.pi * (torch.logsumexp(L, dim=0) - (data.P.T * L).sum(0))).sum()


def own_grad(W: torch.Tensor, data: NTPData) -> torch.Tensor:
    Wr = W.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(own_ce(Wr, data), Wr)
    return g


def dense_F(data: NTPData):
    """Orthonormal basis of F from the full-pair rows vec((e_z - e_z') h_j^T), and W* by min-norm lstsq."""
    H, P = data.H.numpy(), data.P.numpy()
    V, d = P.shape[1], H.shape[1]
    eye = np.eye(V)
    rows, b = [], []
    for j in range(len(H)):
        for z, z2 in itertools.combinations(np.flatnonzero(P[j] > 0), 2):
            rows.append(np.kron(eye[z] - eye[z2], H[j]))
            b.append(math.log(P[j, z] / P[j, z2]))
    A = np.array(rows)
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    Q = Vt[: int((s > 1e-10 * s[0]).sum())]
    W_star = np.linalg.lstsq(A, np.array(b), rcond=None)[0].reshape(V, d)
    return Q, W_star


@pytest.fixture(scope="module")
def fig4_path():
    data = random_ntp(seed=0)  # m = 50, d = 60, V = 10, |S_j| = 6, h ~ N(0, I)
    return data, regularization_path(data, B_GRID), ntp_svm(data).W


def test_path_points_lie_on_the_sphere_and_satisfy_kkt(fig4_path):
    data, points, _ = fig4_path
    assert [p.B for p in points] == B_GRID
    for p in points:
        assert p.attained, p.note
        assert p.norm == pytest.approx(p.B, rel=PATH_TOL)
        g = own_grad(p.W, data)
        lam = -float((g * p.W).sum()) / p.norm**2  # the multiplier of ||W|| <= B, from ∇CE(Ŵ_B) + λ Ŵ_B = 0
        assert lam > 0
        assert float(torch.linalg.vector_norm(g + lam * p.W)) <= 1e-6 * lam * p.B
        assert p.lam == pytest.approx(lam, rel=1e-6)
        assert p.loss == pytest.approx(float(own_ce(p.W, data)), rel=1e-12)
    lams = [p.lam for p in points]
    assert all(a > b for a, b in itertools.pairwise(lams))  # λ(B) decreases to 0


def test_path_aligns_with_W_mm_and_its_F_part_converges_to_W_star(fig4_path):
    """Theorem 1: cos(Ŵ_B, W^mm) -> 1 and P_F(Ŵ_B) -> W* (the independent values of A-C10, 0.51, 0.74,
    0.88, 0.96 and 0.76, 0.48, 0.23, 0.056, came from another draw of this ensemble)."""
    data, points, W_mm = fig4_path
    Q, W_star = dense_F(data)
    cos, dist = [], []
    for p in points:
        W = p.W.numpy()
        cos.append(float((W * W_mm.numpy()).sum()) / (p.norm * float(torch.linalg.vector_norm(W_mm))))
        PF_W = (Q.T @ (Q @ W.reshape(-1))).reshape(W.shape)
        dist.append(np.linalg.norm(PF_W - W_star) / np.linalg.norm(W_star))
    assert all(b >= a for a, b in itertools.pairwise(cos)), cos
    assert cos[-1] >= 0.95, cos
    assert all(b < a for a, b in itertools.pairwise(dist)), dist
    assert dist[-1] <= 0.1, dist


def test_path_beats_the_genie_point(fig4_path):
    """Ŵ_B minimizes CE on the ball, so CE(Ŵ_B) <= CE(W* + R W^mm) with R = sqrt(B² - ||W*||²)/||W^mm|| (Sec. 4 of paper
    A), which itself is at most H + C e^{-R}, C = V e^{M ||W*||}."""
    data, points, W_mm = fig4_path
    _, W_star = dense_F(data)
    W_star = torch.as_tensor(W_star)
    nstar, nmm = float(torch.linalg.vector_norm(W_star)), float(torch.linalg.vector_norm(W_mm))
    C = data.V * math.exp(data.embedding_bound * nstar)
    for p in points:
        if p.B <= nstar:
            continue
        R = math.sqrt(p.B**2 - nstar**2) / nmm
        genie = W_star + R * W_mm
        assert float(torch.linalg.vector_norm(genie)) == pytest.approx(p.B, rel=1e-9)  # W* ⟂ W^mm
        ce_genie = float(own_ce(genie, data))
        assert p.loss <= ce_genie + 1e-12
        assert ce_genie <= data.entropy + C * math.exp(-R)
        assert p.loss > data.entropy  # H is never attained at finite W


def small_data(full_support: bool = False) -> NTPData:
    rng = np.random.default_rng(0)
    m, d, V = 4, 5, 4
    H = rng.standard_normal((m, d))
    if full_support:
        return NTPData.from_arrays(H, rng.dirichlet(np.ones(V), size=m))
    P = np.zeros((m, V))
    for j in range(m):
        s = rng.choice(V, 2, replace=False)
        P[j, s] = rng.dirichlet(np.ones(2))
    return NTPData.from_arrays(H, P, rng.dirichlet(np.ones(m)))


def test_path_matches_an_independent_conic_solve():
    data = small_data()
    H, P, pi = data.H.numpy(), data.P.numpy(), data.pi.numpy()
    Bs = [1.0, 3.0, 6.0]
    points = regularization_path(data, Bs)
    for B, p in zip(Bs, points, strict=True):
        W = cp.Variable((data.V, data.d))
        L = H @ W.T  # (m, V)
        ce = sum(pi[j] * (cp.log_sum_exp(L[j]) - P[j] @ L[j]) for j in range(data.m))
        prob = cp.Problem(cp.Minimize(ce), [cp.norm(W, "fro") <= B])
        with warnings.catch_warnings():  # at these tolerances Clarabel ends "almost solved" (accurate to ~1e-10)
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        assert prob.status in ("optimal", "optimal_inaccurate")
        assert p.attained
        assert np.linalg.norm(p.W.numpy() - W.value) <= 1e-6 * B
        assert p.loss == pytest.approx(prob.value, rel=1e-9)


def test_unsorted_grid_is_returned_in_the_given_order():
    data = small_data()
    pts = regularization_path(data, [3.0, 1.0])
    assert [p.B for p in pts] == [3.0, 1.0]
    assert pts[0].norm == pytest.approx(3.0, rel=PATH_TOL) and pts[1].norm == pytest.approx(1.0, rel=PATH_TOL)


def test_interior_minimum_is_reported_not_attained():
    """Full supports: CE attains H at W* (finite), so for B > ||W*|| the minimizer lies inside the ball."""
    data = small_data(full_support=True)
    nstar = float(np.linalg.norm(dense_F(data)[1]))
    inside, outside = regularization_path(data, [0.5 * nstar, 2 * nstar])
    assert inside.attained and inside.norm == pytest.approx(0.5 * nstar, rel=PATH_TOL)
    assert not outside.attained and outside.note
    assert outside.norm <= 2 * nstar
    assert outside.loss == pytest.approx(data.entropy, abs=1e-10)
