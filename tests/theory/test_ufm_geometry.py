"""The log-bilinear model's theory objects (docs/ufm.md) against independent computations: autograd for the gradients,
independent cvxpy formulations (Clarabel) for the nuclear-norm NTP-SVM, the projection and the regularized problem,
and the identities U-1 ... U-5."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.planted import planted_supports
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.linear.loss import cross_entropy, cross_entropy_grad, logit_cross_entropy_grad
from ntpbias.geometry.ufm.logit_svm import (
    certify,
    nuclear_svm,
    project_constraints,
    same_support_spread,
    svm_vs_centred_support,
    ufm_summary,
)
from ntpbias.geometry.ufm.logits import (
    balanced_factors,
    centred_support,
    collapse,
    convex_dual_value,
    finite_logits,
    mode_strengths,
    nuclear_norm,
    optimality_certificate,
    project_F,
    project_perp,
    psd_sqrt,
    support_groups,
    support_svd,
    ufm_loss_grad,
)

pytestmark = pytest.mark.filterwarnings("ignore:Solution may be inaccurate")

OVERLAP = ((0, 1, 2), (2, 3, 4, 5), (5, 6), (7, 8, 9, 10, 11), (0, 7))


def _datasets():
    """Support patterns of every kind: disjoint planted sets, overlapping sets, random supports (with a full-support
    context), one-hot."""
    P = random_ntp(7, 3, 5, 3, seed=4).P.clone()
    P[0] = 0.2  # a context whose support is the whole vocabulary (no off-support entry)
    return {
        "planted": planted_supports(10, (2, 3, 4), (3, 2, 2), seed=1),
        "overlap": planted_supports(12, contexts=2, sets=OVERLAP, seed=0),
        "random": NTPData.from_arrays(torch.eye(7), P),
        "one-hot": planted_supports(4, (1, 1, 1, 1), (2, 1, 3, 1), seed=2),
    }


DATASETS = _datasets()


# ============================================================================ gradients
def test_logit_cross_entropy_and_its_gradient_match_autograd_and_the_linear_kernel():
    data = random_ntp(6, 4, 5, 3, seed=0, pi="dirichlet")
    L = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)  # batch of 3
    loss, G = logit_cross_entropy_grad(L, data)
    ref = -(data.pi * (data.P.T * torch.log_softmax(L, dim=-2)).sum(-2)).sum(-1)
    ref.sum().backward()
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(G, L.grad, rtol=1e-12, atol=1e-14)
    W = torch.randn(2, 5, 4, dtype=torch.float64)
    loss_W, _ = cross_entropy_grad(W, data)  # the linear kernel now goes through the logit kernel
    torch.testing.assert_close(loss_W, cross_entropy(W, data), rtol=1e-13, atol=1e-13)


def test_ufm_objective_and_gradient_match_autograd():
    data = planted_supports(8, (2, 3), (2, 3), seed=3, pi="dirichlet")
    lam = 0.07
    W = torch.randn(4, data.V, 6, dtype=torch.float64, requires_grad=True)
    H = torch.randn(4, data.m, 6, dtype=torch.float64, requires_grad=True)
    f, ce, g = ufm_loss_grad(W, H, data, lam)
    L = W @ H.mT
    ref = -(data.pi * (data.P.T * torch.log_softmax(L, dim=-2)).sum(-2)).sum(-1)
    ref = ref + lam / 2 * (W.pow(2).sum((1, 2)) + H.pow(2).sum((1, 2)))
    ref.sum().backward()
    torch.testing.assert_close(f, ref.detach(), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(g["W"], W.grad, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(g["H"], H.grad, rtol=1e-12, atol=1e-13)


def test_path_hessian_vector_product_matches_autograd():
    from ntpbias.training.ufm_path import _hvp, _objective

    data = planted_supports(6, (2, 3), 2, seed=0)
    lam = 0.05
    X = torch.randn(2, data.V + data.m, 5, dtype=torch.float64)
    dX = torch.randn_like(X)
    _, g, G, probs = _objective(X, data, lam)
    Hv = _hvp(X, G, probs, dX, data, lam, data.pi)
    Xr = X.clone().requires_grad_(True)
    f = _objective(Xr, data, lam)[0].sum()
    (grad,) = torch.autograd.grad(f, Xr, create_graph=True)
    torch.testing.assert_close(g, grad.detach(), rtol=1e-12, atol=1e-13)
    (ref,) = torch.autograd.grad((grad * dX).sum(), Xr)
    torch.testing.assert_close(Hv, ref, rtol=1e-11, atol=1e-12)


# ============================================================================ F, L*, supports
@pytest.mark.parametrize("name", list(DATASETS))
def test_projections_and_finite_part(name):
    data = DATASETS[name]
    L = torch.randn(data.V, data.m, dtype=torch.float64)
    PF, Pp = project_F(L, data), project_perp(L, data)
    torch.testing.assert_close(project_F(PF, data), PF)  # idempotent
    assert abs(float((PF * Pp).sum())) < 1e-12  # orthogonal decomposition
    S = data.support.T
    assert torch.allclose(torch.where(S, PF, 0.0).sum(0), torch.zeros(data.m, dtype=torch.float64), atol=1e-12)
    L_star = finite_logits(data)
    torch.testing.assert_close(project_F(L_star, data), L_star)
    for j in range(data.m):  # the softmax restricted to each support is p̂_j, for any tied shift of the rest
        z = S[:, j]
        torch.testing.assert_close(torch.softmax(L_star[z, j] + 3.0, 0), data.P[j, z], rtol=1e-12, atol=1e-14)


def test_centred_support_and_its_svd():
    data = DATASETS["overlap"]
    St = centred_support(data)
    S = data.support.T.double()
    torch.testing.assert_close(St, S - S.sum(0) / data.V)
    assert float(St.sum(0).abs().max()) < 1e-14
    s = support_svd(data)
    torch.testing.assert_close((s.U * s.sigma) @ s.Vt, St, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(s.polar, s.U @ s.Vt)
    groups, sets = support_groups(data)
    assert groups.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] and len(sets) == 5
    assert torch.equal(sets[groups], data.support)


# ============================================================================ the nuclear-norm SVM
def reference_svm(data: NTPData) -> tuple[float, np.ndarray]:
    """Independent cvxpy model: the explicit PSD block SDP min (tr A + tr B)/2 s.t. [[A, L], [L^T, B]] >= 0, with
    pairwise (not tied) constraints L[z, j] = L[z', j] and L[z, j] - L[v, j] >= 1, solved by Clarabel."""
    S = data.support.T.numpy()
    V, m = S.shape
    Z = cp.Variable((V + m, V + m), PSD=True)
    L = Z[:V, V:]
    eq, ineq = [], []
    for j in range(m):
        ins, outs = np.flatnonzero(S[:, j]), np.flatnonzero(~S[:, j])
        eq += [(z, z2, j) for z, z2 in zip(ins[:-1], ins[1:], strict=True)]
        ineq += [(z, v, j) for z, v in itertools.product(ins, outs)]
    cons = []
    if eq:
        a, b, c = map(np.array, zip(*eq, strict=True))
        cons.append(L[a, c] == L[b, c])
    if ineq:
        a, b, c = map(np.array, zip(*ineq, strict=True))
        cons.append(L[a, c] - L[b, c] >= 1)
    prob = cp.Problem(cp.Minimize(cp.trace(Z) / 2), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value), L.value


def reference_dual(data: NTPData) -> float:
    """The dual (U-2), as its own cvxpy problem: max -Σ_out Λ s.t. ||Λ||_op <= 1, columns sum to 0, Λ_out <= 0."""
    S = data.support.T.numpy()
    Lam = cp.Variable(S.shape)
    io, jo = np.nonzero(~S)
    prob = cp.Problem(cp.Maximize(-cp.sum(Lam[io, jo])), [cp.sum(Lam, axis=0) == 0, Lam[io, jo] <= 0,
                                                          cp.sigma_max(Lam) <= 1])
    prob.solve(solver=cp.CLARABEL)
    return float(prob.value)


@pytest.mark.parametrize("name", ["planted", "overlap", "random", "one-hot"])
@pytest.mark.parametrize("solver", ["clarabel", "admm"])
def test_nuclear_svm_agrees_with_an_independent_sdp(name, solver):
    data = DATASETS[name]
    result = nuclear_svm(data, solver)
    assert result.status == "optimal" and result.certified and result.certificate.duality_gap <= 1e-8
    value, L_ref = reference_svm(data)
    assert result.norm == pytest.approx(value, rel=1e-6)
    assert result.norm == pytest.approx(reference_dual(data), rel=1e-6)
    assert result.min_gap == pytest.approx(1.0, abs=1e-7)
    # the certificate, recomputed here from (L, Λ) alone
    S = data.support.T
    L, Lam = result.L, result.Lam
    assert float(torch.linalg.matrix_norm(Lam, ord=2)) <= 1 + 1e-12
    assert float(Lam.sum(0).abs().max()) <= 1e-12 and float(Lam[~S].max()) <= 0
    dual = float(-Lam[~S].sum())
    assert dual <= result.norm + 1e-9 and (result.norm - dual) / result.norm <= 1e-8
    assert float(torch.linalg.svdvals(L).sum()) == pytest.approx(result.norm, rel=1e-12)
    ties = torch.where(S, L, torch.nan)
    assert float((ties.nan_to_num(0) - torch.nanmean(ties, 0) * S).abs().max()) <= 1e-9  # in-support logits tied


def test_certify_rejects_a_wrong_candidate():
    data = DATASETS["overlap"]
    St = centred_support(data)
    bad = certify(St, support_svd(data).polar, data, solver="test", seconds=0.0)
    c = bad.certificate  # S̃ is not optimal here: its polar factor violates the dual's sign or norm constraints
    assert bad.status == "inaccurate" and c.duality_gap > 1e-3 and max(c.dual_violation, c.dual_norm_violation) > 0


def test_centred_support_solves_the_svm_exactly_when_its_polar_factor_allows_it():
    """U-3: S̃ is feasible with every gap 1; its polar factor is a dual certificate iff it is <= 0 off the supports."""
    for name, data in DATASETS.items():
        s = support_svd(data)
        result = nuclear_svm(data, "admm")
        if s.svm_is_centred_support:
            assert svm_vs_centred_support(result, data) <= 1e-9, name
            assert result.norm == pytest.approx(float(s.sigma.sum()), rel=1e-12)
        else:
            assert result.norm < float(s.sigma.sum()) * (1 - 1e-6), name
    assert support_svd(DATASETS["planted"]).svm_is_centred_support
    assert not support_svd(DATASETS["overlap"]).svm_is_centred_support


def test_same_support_columns_coincide_and_only_supports_matter():
    data = planted_supports(10, (2, 3, 4), (3, 2, 2), seed=1)
    other = planted_supports(10, (2, 3, 4), (3, 2, 2), seed=1, dirichlet=5.0)  # same supports, other probabilities
    a, b = nuclear_svm(data, "admm"), nuclear_svm(other, "admm")
    torch.testing.assert_close(a.L, b.L)
    groups, _ = support_groups(data)
    assert same_support_spread(a.L, groups) <= 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_projection_onto_the_constraint_set_matches_a_qp(seed):
    data = planted_supports(7, (1, 3, 5), 2, seed=seed, disjoint=False)
    A = 2 * torch.randn(data.V, data.m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    L, c = project_constraints(A, data.support.T)
    S = data.support.T.numpy()
    X, cc = cp.Variable(S.shape), cp.Variable(S.shape[1])
    iz, jz = np.nonzero(S)
    io, jo = np.nonzero(~S)
    cp.Problem(cp.Minimize(cp.sum_squares(X - A.numpy())), [X[iz, jz] == cc[jz], X[io, jo] <= cc[jo] - 1]).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    np.testing.assert_allclose(L.numpy(), X.value, atol=1e-7)
    np.testing.assert_allclose(c.numpy(), cc.value, atol=1e-7)


def test_ufm_summary_record():
    data = DATASETS["overlap"]
    record, arrays = ufm_summary(data)
    assert record["svm"]["certified"] and record["support_sets"] == 5
    assert record["svm_is_centred_support"] is False and record["polar_out_max"] > 0
    assert record["support_matrix_singular_values"] == pytest.approx(
        torch.linalg.svdvals(centred_support(data))[:record["support_matrix_rank"]].tolist(), rel=1e-12)
    assert set(arrays) == {"ufm_L_mm", "ufm_Lambda", "ufm_S_tilde", "ufm_L_star"}


def test_full_support_everywhere_is_degenerate():
    data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5], [0.3, 0.7]])
    r = nuclear_svm(data)
    assert r.status == "degenerate" and r.norm == 0.0


# ============================================================================ U-1: variational form, certificates
def test_variational_form_of_the_nuclear_norm():
    gen = torch.Generator().manual_seed(0)
    L = torch.randn(5, 7, dtype=torch.float64, generator=gen)
    W, H = balanced_factors(L, 9)
    torch.testing.assert_close(W @ H.mT, L)
    assert float((W.pow(2).sum() + H.pow(2).sum()) / 2) == pytest.approx(float(nuclear_norm(L)), rel=1e-12)
    for _ in range(20):  # any other factorization costs at least ||L||_*
        R = torch.randn(9, 9, dtype=torch.float64, generator=gen)
        W2, H2 = W @ R, H @ torch.linalg.inv(R).mT
        assert float((W2.pow(2).sum() + H2.pow(2).sum()) / 2) >= float(nuclear_norm(W2 @ H2.mT)) - 1e-9
    W3, H3 = balanced_factors(L, 2)  # d < rank: the best rank-2 part
    assert torch.linalg.matrix_rank(W3 @ H3.mT) == 2


def test_psd_sqrt():
    A = torch.randn(6, 4, dtype=torch.float64)
    R = psd_sqrt(A @ A.T)
    torch.testing.assert_close(R @ R, A @ A.T, rtol=1e-10, atol=1e-10)


def test_weak_duality_of_the_regularized_problem():
    data = planted_supports(6, (2, 3), 2, seed=0)
    for lam in (0.3, 0.03):
        for _ in range(5):
            L = 3 * torch.randn(data.V, data.m, dtype=torch.float64)
            ce, G = logit_cross_entropy_grad(L, data)
            assert float(convex_dual_value(G, data, lam)) <= float(ce + lam * nuclear_norm(L)) + 1e-12


def test_path_point_matches_an_independent_convex_solve():
    """The factored path's logits at λ equal cvxpy's solution of min CE(L) + λ||L||_* (log-sum-exp and nuclear norm,
    Clarabel): U-1."""
    from ntpbias.training.ufm_path import regularization_path

    data = planted_supports(6, (2, 3), (2, 2), seed=5, pi="dirichlet")
    lam = 0.02
    point = regularization_path(data, [lam], seeds=[0, 1], d=8)[-1]
    assert point.certified
    L = cp.Variable((data.V, data.m))
    P, pi = data.P.T.numpy(), data.pi.numpy()
    ce = sum(pi[j] * (cp.log_sum_exp(L[:, j]) - P[:, j] @ L[:, j]) for j in range(data.m))
    prob = cp.Problem(cp.Minimize(ce + lam * cp.normNuc(L)))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    for b in range(2):
        err = np.linalg.norm(point.L[b].numpy() - L.value) / np.linalg.norm(L.value)
        assert err <= 1e-5, err
    cert = point.certificate
    f, ce_val, _ = ufm_loss_grad(point.W, point.H, data, lam)
    assert float(ce_val[0] + lam * nuclear_norm(point.L[0])) == pytest.approx(prob.value, rel=1e-7)
    assert float(cert["gap_rel"].max()) <= 1e-7 and float(cert["op_ratio"].max()) <= 1 + 1e-6
    assert float(cert["variational_gap"].abs().max()) <= 1e-9 and float(cert["balance"].max()) <= 1e-6


def test_a_saddle_is_escaped():
    """The optimum of the d = 1 problem, padded with zero columns, is a stationary point of the d = 6 problem that is
    not a global minimum (||∇CE||_op > λ); the solver leaves it and certifies the global optimum."""
    from ntpbias.training.ufm_path import solve_point

    data = planted_supports(8, (2, 3, 3), 3, seed=0)
    lam = 0.01
    X1 = 0.1 * torch.randn(1, data.V + data.m, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    X1, _ = solve_point(X1, data, lam)
    saddle = torch.nn.functional.pad(X1, (0, 5))
    cert = optimality_certificate(saddle[:, :data.V], saddle[:, data.V:], data, lam)
    assert float(cert["grad_rel"]) <= 1e-8 and float(cert["op_ratio"]) > 1.01  # stationary, not global
    X, stats = solve_point(saddle, data, lam)
    cert = optimality_certificate(X[:, :data.V], X[:, data.V:], data, lam)
    assert stats["escapes"] >= 1
    assert float(cert["op_ratio"].max()) <= 1 + 1e-6 and float(cert["grad_rel"].max()) <= 1e-8


def test_optimality_certificate_flags_a_non_optimal_point():
    data = planted_supports(6, (2, 3), 2, seed=0)
    W = 0.01 * torch.randn(1, data.V, 4, dtype=torch.float64)
    H = 0.01 * torch.randn(1, data.m, 4, dtype=torch.float64)
    cert = optimality_certificate(W, H, data, 1e-3)
    assert float(cert["op_ratio"]) > 1 and float(cert["gap_rel"]) > 1e-3


# ============================================================================ measurements
def test_collapse_and_mode_strengths():
    groups = torch.tensor([0, 0, 1, 1, 1])
    H = torch.tensor([[1.0, 0, 0], [2.0, 0, 0], [0, 1.0, 0], [0, 3.0, 0], [0, 0.5, 0]], dtype=torch.float64)
    c = collapse(H[None], groups)
    assert float(c["within_angle"]) == pytest.approx(0.0, abs=1e-6) and float(c["between_angle"]) == pytest.approx(90)
    H2 = H.clone()
    H2[1] = torch.tensor([1.0, 1.0, 0], dtype=torch.float64)
    assert float(collapse(H2, groups)["within_angle"]) == pytest.approx(45.0)
    U = torch.linalg.qr(torch.randn(5, 3, dtype=torch.float64))[0]
    Vt = torch.linalg.qr(torch.randn(4, 3, dtype=torch.float64))[0].T
    a = torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(mode_strengths((U * a) @ Vt, U, Vt), a)
