"""Theory checks of the linear-NTP geometry (checks A-C1 to A-C9 and A-C18 to A-C20 of
docs/paper-a-linear-ntp.md#theory-checks).

Every quantity of ``ntpbias.geometry`` is compared with an independent computation: autograd and central finite
differences for the loss, dense numpy linear algebra on the *full-pair* systems (all pairs z ≠ z' in S_j,
row-major vec(u h^T) = kron(u, h)) for F and W*, and a separate cvxpy + Clarabel model of each max-margin program
written in the natural form (``W @ H.T`` logits, every in/out pair and every in-support pair).
"""

from __future__ import annotations

import itertools
import math

import cvxpy as cp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from scipy.special import logsumexp
from scipy.stats import entropy as scipy_kl

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import TWO_D_SUPPORTS, random_ntp, two_d_example
from ntpbias.errors import NotSeparableError
from ntpbias.geometry import ntp_separability, ntp_svm, subspace
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.linear.loss import (
    cross_entropy,
    cross_entropy_F,
    cross_entropy_grad,
    kl_terms,
    per_sample_cross_entropy,
)
from ntpbias.geometry.margins.program import ntp_margin

ID = 1e-9  # tolerance of the exact identities (A-C1 to A-C7)


# ============================================================================ independent references (numpy)
def make_data(m: int, d: int, V: int, sizes, *, seed: int, random_pi: bool = True, scale: float = 1.0) -> NTPData:
    """Gaussian embeddings, random supports of the given sizes, Dirichlet(1) probabilities (and π)."""
    rng = np.random.default_rng(seed)
    H = scale * rng.standard_normal((m, d))
    P = np.zeros((m, V))
    for j, s in enumerate(np.broadcast_to(sizes, (m,))):
        supp = rng.choice(V, size=int(s), replace=False)
        P[j, supp] = rng.dirichlet(np.ones(int(s)))
    return NTPData.from_arrays(H, P, rng.dirichlet(np.ones(m)) if random_pi else None)


def arrays(data: NTPData):
    return data.H.numpy(), data.P.numpy(), data.pi.numpy()


def supports(P: np.ndarray) -> list[np.ndarray]:
    return [np.flatnonzero(row > 0) for row in P]


def full_pair_system(data: NTPData):
    """Rows vec((e_z - e_z') h_j^T) for ALL pairs z < z' in S_j and right-hand sides log(p_z / p_z')."""
    H, P, _ = arrays(data)
    V, d = P.shape[1], H.shape[1]
    eye = np.eye(V)
    rows, b = [], []
    for j, S in enumerate(supports(P)):
        for z, z2 in itertools.combinations(S, 2):
            rows.append(np.kron(eye[z] - eye[z2], H[j]))
            b.append(math.log(P[j, z]) - math.log(P[j, z2]))
    return np.array(rows).reshape(-1, V * d), np.array(b)


def anchor_system(data: NTPData):
    """The anchor form documented by ``NTPConstraints`` (anchor = smallest token of S_j; rows by j, then token):
    equality rows vec((e_a - e_z') h_j^T), z' ∈ S_j \\ {a}, their log-odds, and inequality rows vec((e_a - e_v) h_j^T),
    v ∉ S_j."""
    H, P, _ = arrays(data)
    V, d = P.shape[1], H.shape[1]
    eye = np.eye(V)
    eq, b, ineq = [], [], []
    for j, S in enumerate(supports(P)):
        a = S[0]
        for z in S[1:]:
            eq.append(np.kron(eye[a] - eye[z], H[j]))
            b.append(math.log(P[j, a] / P[j, z]))
        for v in np.setdiff1d(np.arange(V), S):
            ineq.append(np.kron(eye[a] - eye[v], H[j]))
    return np.array(eq).reshape(-1, V * d), np.array(b), np.array(ineq).reshape(-1, V * d)


def dense_projector(A: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """Orthogonal projector onto row(A) from an SVD basis, and its rank."""
    if A.shape[0] == 0:
        return np.zeros((n, n)), 0
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    r = int((s > 1e-10 * s[0]).sum())
    return Vt[:r].T @ Vt[:r], r


def logit_gaps(W: np.ndarray, data: NTPData):
    """All in/out gaps ℓ_z - ℓ_v (z ∈ S_j, v ∉ S_j) and all in-support differences ℓ_z - ℓ_z' (z < z')."""
    H, P, _ = arrays(data)
    L = H @ W.T
    S = P > 0
    j, z, v = np.nonzero(S[:, :, None] & ~S[:, None, :])
    jp, za, zb = np.nonzero(S[:, :, None] & S[:, None, :] & np.triu(np.ones((P.shape[1],) * 2, bool), 1))
    return L[j, z] - L[j, v], L[jp, za] - L[jp, zb]


def natural_svm(H: np.ndarray, S: np.ndarray):
    """min ½||W||² s.t. every in/out logit gap >= 1 and every in-support pair tied, W: (V, d) natural form."""
    V = S.shape[1]
    jo, zo, vo = np.nonzero(S[:, :, None] & ~S[:, None, :])
    jp, za, zb = np.nonzero(S[:, :, None] & S[:, None, :] & np.triu(np.ones((V, V), bool), 1))
    W = cp.Variable((V, H.shape[1]))
    L = W @ H.T  # (V, m)
    cons = [L[zo, jo] - L[vo, jo] >= 1]
    if len(jp):
        cons.append(L[za, jp] == L[zb, jp])
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return prob.status, W.value


def max_gap_lp(data: NTPData) -> float:
    """max t s.t. every in/out gap >= t, in-support pairs tied, |W_ij| <= 1: > 0 iff NTP-separable (own LP)."""
    H, P, _ = arrays(data)
    V, d = P.shape[1], H.shape[1]
    eye = np.eye(V)
    S = P > 0
    j, z, v = np.nonzero(S[:, :, None] & ~S[:, None, :])
    A_in = np.stack([np.kron(eye[a] - eye[b], H[c]) for a, b, c in zip(z, v, j, strict=True)])
    A_eq, _ = full_pair_system(data)
    n = V * d
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.hstack([-A_in, np.ones((len(A_in), 1))]), b_ub=np.zeros(len(A_in)),
                  A_eq=np.hstack([A_eq, np.zeros((len(A_eq), 1))]) if len(A_eq) else None,
                  b_eq=np.zeros(len(A_eq)) if len(A_eq) else None,
                  bounds=[(-1, 1)] * n + [(None, 1)], method="highs")
    assert res.status == 0
    return -res.fun


def ref_distinct_ce(W: np.ndarray, data: NTPData) -> float:
    """-Σ_j π_j Σ_{z∈S_j} p_{j,z} log softmax_z(W h_j), an explicit loop over contexts and tokens."""
    H, P, pi = arrays(data)
    total = 0.0
    for j in range(len(H)):
        ell = W @ H[j]
        lse = logsumexp(ell)
        total -= pi[j] * sum(P[j, z] * (ell[z] - lse) for z in np.flatnonzero(P[j]))
    return total


def ref_entropy(data: NTPData) -> float:
    _, P, pi = arrays(data)
    return float(-sum(pi[j] * sum(p * math.log(p) for p in P[j] if p > 0) for j in range(len(P))))


# ======================================================================= A-C1 to A-C3: loss identities
@pytest.fixture(scope="module")
def raw():
    """n = 80 raw samples over m = 5 contexts (repeated), V = 7 tokens, d = 8 > m."""
    rng = np.random.default_rng(11)
    m, d, V, n = 5, 8, 7, 80
    ctx = np.concatenate([np.arange(m), rng.integers(0, m, n - m)])
    tok = rng.integers(0, V - 1, n)  # token V-1 never occurs: an all-zero column of P
    H = rng.standard_normal((m, d))
    return ctx, tok, H, NTPData.from_samples(ctx, tok, H, V=V)


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_per_sample_ce_equals_distinct_context_ce_with_equal_gradients(raw, scale):
    ctx, tok, H, data = raw
    W0 = scale * torch.randn(data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    Wn = W0.numpy()
    L = H[ctx] @ Wn.T
    ref = float(np.mean(logsumexp(L, axis=1) - L[np.arange(len(tok)), tok]))  # (1/n) Σ_i -log q(z_i | x_i)

    W1 = W0.clone().requires_grad_(True)
    ce = cross_entropy(W1, data)
    (g_distinct,) = torch.autograd.grad(ce, W1)
    W2 = W0.clone().requires_grad_(True)
    ce_samples = per_sample_cross_entropy(W2, torch.as_tensor(H[ctx]), torch.as_tensor(tok))
    (g_samples,) = torch.autograd.grad(ce_samples, W2)

    assert ce.item() == pytest.approx(ref, rel=ID, abs=ID)
    assert ce_samples.item() == pytest.approx(ref, rel=ID, abs=ID)
    assert ce.item() == pytest.approx(ref_distinct_ce(Wn, data), rel=ID)
    torch.testing.assert_close(g_distinct, g_samples, rtol=ID, atol=ID)


@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_closed_form_gradient_vs_autograd_and_finite_differences(raw, scale):
    *_, data = raw
    W = scale * torch.randn(data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    loss, grad = cross_entropy_grad(W, data)
    Wa = W.clone().requires_grad_(True)
    (g_auto,) = torch.autograd.grad(cross_entropy(Wa, data), Wa)
    assert float(loss) == pytest.approx(ref_distinct_ce(W.numpy(), data), rel=ID)
    torch.testing.assert_close(grad, g_auto, rtol=ID, atol=ID)

    h = 1e-5
    Wn = W.numpy()
    fd = np.zeros_like(Wn)
    for idx in np.ndindex(*Wn.shape):  # central differences of the independent loop implementation
        E = np.zeros_like(Wn)
        E[idx] = h
        fd[idx] = (ref_distinct_ce(Wn + E, data) - ref_distinct_ce(Wn - E, data)) / (2 * h)
    assert np.linalg.norm(grad.numpy() - fd) <= 1e-6 * np.linalg.norm(fd)

    # 1^T ∇CE = 0 (column sums are invariant under GD), and the rows of ∇CE lie in span{h̄_j} (d > m here)
    assert float(grad.sum(0).abs().max()) <= 1e-14 * max(1.0, float(grad.abs().max()))
    H = data.H.numpy()
    off_span = grad.numpy() - grad.numpy() @ np.linalg.pinv(H) @ H
    assert np.abs(off_span).max() <= 1e-12


def test_loss_functions_accept_a_batch_of_W(raw):
    *_, data = raw
    Ws = torch.randn(3, 2, data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    ce = cross_entropy(Ws, data)
    loss, grad = cross_entropy_grad(Ws, data)
    assert ce.shape == (3, 2) and grad.shape == Ws.shape
    for a, b in np.ndindex(3, 2):
        assert float(ce[a, b]) == pytest.approx(ref_distinct_ce(Ws[a, b].numpy(), data), rel=ID)
        torch.testing.assert_close(grad[a, b], cross_entropy_grad(Ws[a, b], data)[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_ce_equals_entropy_plus_kl_and_bounds_ce_F(scale):
    data = make_data(6, 4, 7, [1, 2, 3, 7, 4, 5], seed=2)
    W = scale * torch.randn(data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    H, P, pi = arrays(data)
    L = H @ W.numpy().T
    Q = np.exp(L - logsumexp(L, axis=1, keepdims=True))
    kl = np.array([scipy_kl(P[j], Q[j]) for j in range(len(P))])  # scipy: Σ p log(p/q)
    H_ent = ref_entropy(data)
    assert data.entropy == pytest.approx(H_ent, rel=ID)
    torch.testing.assert_close(kl_terms(W, data), torch.as_tensor(kl), rtol=1e-8, atol=ID)
    assert float(cross_entropy(W, data)) == pytest.approx(H_ent + float(pi @ kl), rel=ID, abs=ID)

    # CE_F: the loss of the softmax restricted to each support, in the logit-difference form of eq. (12)
    ce_F = 0.0
    for j, S in enumerate(supports(P)):
        for z in S:
            others = [z2 for z2 in S if z2 != z]
            ce_F += pi[j] * P[j, z] * math.log1p(sum(math.exp(-(L[j, z] - L[j, z2])) for z2 in others))
    assert float(cross_entropy_F(W, data)) == pytest.approx(ce_F, rel=ID, abs=1e-12)
    assert float(cross_entropy(W, data)) >= ce_F >= H_ent - 1e-12


# ============================================================================= A-C4: the subspace F
SUBSPACE_CASES = {
    # name: (m, d, V, support sizes, full column rank of H̄)
    "full-rank": (4, 7, 5, [3, 2, 5, 1], True),
    "full-rank-square": (5, 5, 6, [2, 3, 4, 6, 3], True),
    "rank-deficient": (6, 3, 5, 3, False),
    "two-d": (5, 2, 4, [2, 3, 2, 3, 2], False),
}


@pytest.mark.parametrize("case", SUBSPACE_CASES)
def test_projection_matches_dense_full_pair_projector(case):
    m, d, V, sizes, full_rank = SUBSPACE_CASES[case]
    data = make_data(m, d, V, sizes, seed=7)
    A, _ = full_pair_system(data)
    PF, rank = dense_projector(A, V * d)
    F = subspace(data)
    n_anchor = int((data.support_sizes - 1).sum())
    assert F.dim == rank
    if full_rank:
        assert F.dim == n_anchor
    else:
        assert F.dim < n_anchor  # the anchor rows are dependent when H̄ is rank-deficient

    gen = torch.Generator().manual_seed(0)
    X, Y = (torch.randn(4, V, d, dtype=torch.float64, generator=gen) for _ in range(2))
    PX, PY = F.project(X), F.project(Y)
    ref = (X.reshape(4, -1).numpy() @ PF).reshape(4, V, d)  # PF is symmetric
    np.testing.assert_allclose(PX.numpy(), ref, atol=1e-10 * float(X.abs().max()))
    torch.testing.assert_close(F.project_perp(X), X - PX, rtol=0, atol=1e-14)
    torch.testing.assert_close(F.project(PX), PX, rtol=0, atol=1e-10)  # idempotent
    np.testing.assert_allclose((PX * Y).sum((-2, -1)), (X * PY).sum((-2, -1)), atol=1e-10)  # symmetric
    assert F.ambient_dim == V * d


def test_one_hot_labels_have_trivial_F_and_zero_entropy():
    """Remark 1: S_j = 1 for all j gives H = 0, F = {0}, W* = 0; NTP-SVM = multiclass hard-margin SVM (below)."""
    data = one_hot_data()
    F = subspace(data)
    assert data.entropy == 0.0
    assert F.dim == 0 and F.compatible and F.compatibility_residual == 0.0
    assert float(F.W_star.abs().max()) == 0.0
    X = torch.randn(data.V, data.d, dtype=torch.float64)
    assert float(F.project(X).abs().max()) == 0.0
    assert len(constraints(data).eq) == 0


# ============================================================================= A-C5: W*
@pytest.mark.parametrize("case", ["full-rank", "full-rank-square", "fig4"])
def test_W_star_is_the_min_norm_solution_of_the_full_pair_system(case):
    data = random_ntp(seed=0) if case == "fig4" else make_data(*SUBSPACE_CASES[case][:4], seed=7)
    H, P, _ = arrays(data)
    V, d = data.V, data.d
    A, b = full_pair_system(data)
    w_ref = np.linalg.lstsq(A, b, rcond=None)[0]
    PF, _ = dense_projector(A, V * d)
    F = subspace(data)
    W = F.W_star.numpy()
    scale = np.linalg.norm(w_ref)
    assert np.linalg.norm(W.reshape(-1) - w_ref) <= ID * scale
    assert F.norm_W_star == pytest.approx(scale, rel=ID)
    assert F.compatible and F.compatibility_residual <= 1e-9 * max(1.0, np.linalg.norm(b))
    assert np.linalg.norm(W.reshape(-1) - PF @ W.reshape(-1)) <= ID * scale  # W* ∈ F (P_⊥ W* ≈ 0)
    assert float(torch.linalg.vector_norm(F.project_perp(F.W_star))) <= ID * scale

    # in-support softmax at W* reproduces p̂_j exactly (eq. (3a) of paper A)
    L = np.where(P > 0, H @ W.T, -np.inf)
    np.testing.assert_allclose(np.exp(L - logsumexp(L, axis=1, keepdims=True)), P, atol=1e-10)
    assert float(cross_entropy_F(F.W_star, data)) == pytest.approx(ref_entropy(data), rel=ID)

    # W* = P_F(U H̄^†) with U the centred log-probabilities (A-C5; H̄ = H^T has full column rank here)
    logP = np.log(np.where(P > 0, P, 1.0))
    U = np.where(P > 0, logP - logP.sum(1, keepdims=True) / (P > 0).sum(1, keepdims=True), 0.0).T  # (V, m)
    Wp = U @ np.linalg.pinv(H.T)
    np.testing.assert_allclose((A @ Wp.reshape(-1)), b, atol=1e-9)  # W^p solves (4)
    np.testing.assert_allclose(F.project(torch.as_tensor(Wp)).numpy(), W, atol=ID * scale)


def test_incompatible_data_report_the_least_squares_residual():
    # d = 1: (w_0 - w_1) h_j = log(p_{j,0}/p_{j,1}) for h = 1, 2 is contradictory unless a_2 = 2 a_1
    P = np.array([[0.6, 0.4, 0.0], [0.3, 0.7, 0.0]])
    data = NTPData.from_arrays(np.array([[1.0], [2.0]]), P)
    a1, a2 = math.log(0.6 / 0.4), math.log(0.3 / 0.7)
    F = subspace(data)
    assert not F.compatible
    assert F.compatibility_residual == pytest.approx(abs(2 * a1 - a2) / math.sqrt(5), rel=1e-12)

    # generic small-d data: compare with numpy lstsq on the anchor system (the library's W* is its min-norm LS solution)
    data = make_data(7, 2, 5, 3, seed=4)
    A_eq, b, _ = anchor_system(data)
    w, *_ = np.linalg.lstsq(A_eq, b, rcond=None)
    F = subspace(data)
    assert not F.compatible
    assert F.compatibility_residual == pytest.approx(np.linalg.norm(A_eq @ w - b), rel=1e-9)
    np.testing.assert_allclose(F.W_star.numpy().reshape(-1), w, atol=1e-9 * np.linalg.norm(w))


# ======================================================================= A-C6, A-C7: W^mm
SVM_CASES = {
    "small": lambda: make_data(8, 10, 6, 3, seed=1),
    "mixed-supports": lambda: make_data(7, 9, 6, [1, 2, 3, 4, 5, 2, 3], seed=3),
    "fig4": lambda: random_ntp(seed=0),
    "two-d": lambda: two_d_example(seed=0),
}


@pytest.fixture(scope="module", params=list(SVM_CASES))
def svm_case(request):
    data = SVM_CASES[request.param]()
    status, W_ref = natural_svm(data.H.numpy(), data.P.numpy() > 0)
    assert status == "optimal"
    return request.param, data, ntp_svm(data), W_ref


def test_ntp_svm_matches_independent_natural_form_solve(svm_case):
    name, data, res, W_ref = svm_case
    W = res.W.numpy()
    assert res.status == "optimal" and res.certified and res.solver == "clarabel"
    assert np.linalg.norm(W - W_ref) <= 1e-6 * np.linalg.norm(W_ref)
    assert res.norm == pytest.approx(np.linalg.norm(W_ref), rel=1e-6)

    gaps, ties = logit_gaps(W, data)
    assert gaps.min() == pytest.approx(1.0, abs=1e-8)  # margin exactly 1, attained
    assert res.min_gap == pytest.approx(gaps.min(), abs=1e-12)
    assert float(ntp_margin(res.W, data)) == pytest.approx(gaps.min(), abs=1e-12)
    assert np.abs(ties).max() <= 1e-8  # (6a): in-support logits tied

    # W^mm ∈ F^⊥ and ⟂ W*
    A, _ = full_pair_system(data)
    PF, _ = dense_projector(A, data.V * data.d)
    assert np.linalg.norm(PF @ W.reshape(-1)) <= 1e-8 * res.norm
    W_star = subspace(data).W_star.numpy()
    assert abs(float((W_star * W).sum())) <= 1e-8 * res.norm * max(1.0, np.linalg.norm(W_star))


def test_ntp_svm_kkt_certificate_holds_on_own_dense_constraints(svm_case):
    name, data, res, _ = svm_case
    assert res.certificate.worst <= 1e-6
    A_eq, _, A_in = anchor_system(data)
    assert len(res.dual_ineq) == len(A_in) == data.m * data.V - int(data.support_sizes.sum())
    assert len(res.dual_eq) == len(A_eq) == int(data.support_sizes.sum()) - data.m
    lam, mu = res.dual_ineq.numpy(), res.dual_eq.numpy()
    w = res.W.numpy().reshape(-1)
    g = A_in @ w
    assert lam.min() >= -1e-10  # dual feasibility
    assert np.abs(lam * (g - 1)).max() <= 1e-8  # complementary slackness
    assert g.min() >= 1 - 1e-9 and (np.abs(A_eq @ w).max() if len(A_eq) else 0.0) <= 1e-9  # primal
    stationarity = w - A_in.T @ lam - (A_eq.T @ mu if len(A_eq) else 0.0)
    assert np.linalg.norm(stationarity) <= 1e-8 * max(1.0, np.linalg.norm(w))
    assert lam.sum() == pytest.approx(float(w @ w), rel=1e-8)  # strong duality: Σλ = ||W||²
    assert 1 <= res.n_active <= len(lam)
    assert np.abs(g[lam > 1e-6 * lam.max()] - 1).max() <= 1e-9  # support vectors sit on the margin


def test_constraint_counts_match_the_paper():
    for data in (random_ntp(seed=0), two_d_example(), make_data(5, 3, 6, [1, 6, 2, 3, 4], seed=0)):
        S = data.P.numpy() > 0
        cons = constraints(data)
        assert len(cons.eq) == S.sum() - data.m
        assert len(cons.ineq) == data.m * data.V - S.sum()
    cons = constraints(random_ntp(seed=0))
    assert (len(cons.eq), len(cons.ineq)) == (250, 200)  # the Fig. 4 setup (A-C7)


def test_tokens_with_identical_support_patterns_get_identical_rows():
    rng = np.random.default_rng(5)
    m, d, V = 6, 8, 7
    S = rng.random((m, V)) < 0.5
    S[:, 0] = True
    S[:, 6] = S[:, 5]  # tokens 5 and 6 share their support pattern
    S[0, 1:] = [True, False, False, False, True, True]
    S[1, 1:] = [False, True, False, False, False, False]
    P = np.where(S, rng.random((m, V)) + 0.1, 0.0)
    P /= P.sum(1, keepdims=True)
    data = NTPData.from_arrays(rng.standard_normal((m, d)), P)
    W = ntp_svm(data).W.numpy()
    assert np.linalg.norm(W[5] - W[6]) <= 1e-7 * np.linalg.norm(W)
    # ... but W* depends on the probabilities, so its rows differ
    Ws = subspace(data).W_star.numpy()
    assert np.linalg.norm(Ws[5] - Ws[6]) > 1e-3


def test_non_separable_data_make_the_svm_raise():
    data = duplicate_embedding_data()
    with pytest.raises(NotSeparableError):
        ntp_svm(data)
    full = NTPData.from_arrays(np.eye(2), [[0.5, 0.5], [0.2, 0.8]])  # every support is all of [V]
    assert not ntp_separability(full).separable
    with pytest.raises(NotSeparableError):
        ntp_svm(full)


# ========================================================================== A-C8, A-C9: convergence along W* + γ W^mm
@pytest.mark.parametrize("case", ["small", "fig4"])
def test_ce_gap_decays_like_exp_minus_gamma(case):
    data = SVM_CASES[case]()
    H, P, pi = arrays(data)
    F = subspace(data)
    res = ntp_svm(data)
    Ws, Wm = F.W_star.numpy(), res.W.numpy()
    gammas = np.linspace(5, 20, 16)
    gap_lib = np.array([float(cross_entropy(F.W_star + g * res.W, data)) - data.entropy for g in gammas])

    # independent: at a compatible W* the in-support term is exactly 1/p̂_z, so by eq. (10)
    # CE - H = Σ_j π_j Σ_{z∈S_j} p_z log(1 + p_z Σ_{v∉S_j} e^{ℓ_v - ℓ_z}), evaluated with log1p
    S = P > 0
    gap_ref = []
    for g in gammas:
        L = H @ (Ws + g * Wm).T
        out = np.where(S, -np.inf, L)
        mass = np.exp(logsumexp(out[:, None, :], axis=2) - L)  # (m, V): Σ_{v∉S_j} e^{ℓ_v - ℓ_z}
        gap_ref.append(float((pi[:, None] * np.where(S, P * np.log1p(np.where(S, P, 0) * mass), 0)).sum()))
    gap_ref = np.array(gap_ref)
    np.testing.assert_allclose(gap_lib, gap_ref, rtol=1e-4)  # CE - H ~ 1e-9 at γ = 20: float64 cancellation
    slope = np.polyfit(gammas, np.log(gap_ref), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.01)
    assert np.polyfit(gammas, np.log(gap_lib), 1)[0] == pytest.approx(-1.0, abs=0.01)

    # Prop. 1 bound CE ≤ H + C e^{-γ}, C = V e^{M ||W*||}, and the softmax decay (7)
    C = data.V * math.exp(data.embedding_bound * F.norm_W_star)
    assert np.all(gap_ref <= C * np.exp(-gammas))
    for g in gammas:
        L = H @ (g * Wm).T
        Q = np.exp(L - logsumexp(L, axis=1, keepdims=True))
        assert Q[~S].max() <= math.exp(-g) * (1 + 1e-12)


# ============================================================================= A-C19: one-hot = multiclass SVM
def one_hot_data() -> NTPData:
    """m = 9 points in d = 2, three classes clustered around 120°-spaced centres (separable, d < m)."""
    rng = np.random.default_rng(0)
    y = np.arange(9) % 3
    centres = np.array([[math.cos(a), math.sin(a)] for a in (0.3, 0.3 + 2 * math.pi / 3, 0.3 + 4 * math.pi / 3)])
    H = centres[y] + 0.15 * rng.standard_normal((9, 2))
    return NTPData.from_arrays(H, np.eye(3)[y])


def test_one_hot_ntp_svm_is_the_multiclass_hard_margin_svm():
    data = one_hot_data()
    H, P, _ = arrays(data)
    y = P.argmax(1)
    W = cp.Variable((3, 2))
    L = W @ H.T
    j, v = np.nonzero(P == 0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), [L[y[j], j] - L[v, j] >= 1])  # (e_y - e_v)^T W h_j >= 1
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert prob.status == "optimal"
    res = ntp_svm(data)
    assert res.certified
    np.testing.assert_allclose(res.W.numpy(), W.value, atol=1e-6 * np.linalg.norm(W.value))
    assert ntp_separability(data).separable


# ====================================================================== A-D8 / A-C20: the 2D example
def test_two_d_example_reproduces_fig_1_and_2():
    """Exact W^mm of the 2D example (A, B, C at 90°, 210°, 330°; A = {2,3,4}, B = {1,2,5}, C = {1,4,5}).

    Derivation: the reflection x -> -x swaps B <-> C and tokens 2 <-> 4, and tokens 1, 5 share a support pattern,
    so by uniqueness w1 = w5 = (0, p), w3 = (0, q), w2 = (-a, r), w4 = (a, r). Ties at A give r = q; ties at B give
    a√3 = r - p =: s. The gaps at B are s/2 (vs token 3) and s (vs token 4), at A they are s, so s >= 2.
    Then ||W||² = 2p² + 3q² + 2a² with q = p + 2, a = 2/√3, minimized at p = -6/5, q = 4/5: ||W^mm||² = 112/15.
    """
    assert TWO_D_SUPPORTS == ((2, 3, 4), (1, 2, 5), (1, 4, 5))
    data = two_d_example(seed=0)
    assert (data.m, data.d, data.V) == (3, 2, 5)
    assert ntp_separability(data).separable
    F = subspace(data)
    assert F.dim == 6 and F.compatible
    cons = constraints(data)
    assert (len(cons.eq), len(cons.ineq)) == (6, 6)
    res = ntp_svm(data)
    a = 2 / math.sqrt(3)
    expected = np.array([[0, -1.2], [-a, 0.8], [0, 0.8], [a, 0.8], [0, -1.2]])
    np.testing.assert_allclose(res.W.numpy(), expected, atol=1e-6)
    assert res.norm == pytest.approx(math.sqrt(112 / 15), abs=1e-6)
    assert res.norm == pytest.approx(2.7325, abs=5e-5)
    # W^mm depends only on the supports; W* on the probabilities (Fig. 2: w1 = w5 for W^mm, not for W*)
    np.testing.assert_allclose(ntp_svm(two_d_example(seed=1)).W.numpy(), expected, atol=1e-6)
    Ws = F.W_star.numpy()
    assert np.linalg.norm(Ws[0] - Ws[4]) > 1e-3


# ============================================================= Def. 2 of paper A / A-C18: separability LP
def duplicate_embedding_data() -> NTPData:
    """h̄_1 = h̄_2 with supports {0,1} and {1,2}: ties force ℓ_0 = ℓ_1 = ℓ_2, but context 1 needs ℓ_1 > ℓ_2."""
    return NTPData.from_arrays([[1.0, 0.5], [1.0, 0.5]], [[0.5, 0.5, 0.0], [0.0, 0.3, 0.7]])


def random_2d_data(seed: int) -> NTPData:
    """Random Gaussian 2D embeddings with the supports of decision A-D8 (often not separable: m > d)."""
    H = np.random.default_rng(seed).standard_normal((3, 2))
    P = np.zeros((3, 5))
    for j, supp in enumerate(TWO_D_SUPPORTS):
        P[j, [z - 1 for z in supp]] = 1 / 3
    return NTPData.from_arrays(H, P)


def test_separable_gaussian_data_come_with_a_valid_certificate():
    data = make_data(8, 10, 6, [1, 2, 3, 4, 5, 3, 2, 1], seed=8)  # d > m: separable (Lemma 1)
    sep = ntp_separability(data)
    assert sep.separable and sep.certified and sep.W is not None
    gaps, ties = logit_gaps(sep.W.numpy(), data)
    assert gaps.min() >= 1 - 1e-7
    assert np.abs(ties).max() <= 1e-9 * max(1.0, float(sep.W.abs().max()))
    assert max_gap_lp(data) > 0


@pytest.mark.parametrize("kind", ["duplicate", "one-hot", "random-2d-seed1", "random-2d-seed2"])
def test_non_separable_data_come_with_a_gordan_certificate(kind):
    if kind == "one-hot":  # same embedding, different labels; no equality rows at all
        data = NTPData.from_arrays([[1.0], [1.0]], [[0.0, 1.0], [1.0, 0.0]])
    else:
        data = duplicate_embedding_data() if kind == "duplicate" else random_2d_data(int(kind[-1]))
    assert max_gap_lp(data) <= 1e-9  # own LP: no W in F^⊥ with positive in/out gaps
    sep = ntp_separability(data)
    assert not sep.separable and sep.certified and sep.W is None
    A_eq, _, A_in = anchor_system(data)
    y, mu = sep.farkas_y.numpy(), sep.farkas_mu.numpy()
    assert y.shape == (len(A_in),) and mu.shape == (len(A_eq),)
    assert y.min() >= -1e-12 and y.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.linalg.norm(A_in.T @ y + A_eq.T @ mu) <= 1e-7


@settings(max_examples=20)
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(2, 4)),
    data=st.data(),
)
def test_separability_verdict_agrees_with_svm_feasibility(shape, data):
    m, d, V = shape
    H = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=m * d, max_size=m * d)), float).reshape(m, d)
    rows = st.lists(st.booleans(), min_size=V, max_size=V).filter(any)
    S = np.array(data.draw(st.lists(rows, min_size=m, max_size=m)))
    if S.all():
        S[0, -1], S[0, 0] = False, True  # at least one out-of-support token (the paper's standing assumption)
    ntp = NTPData.from_arrays(H, S / S.sum(1, keepdims=True))
    status, _ = natural_svm(H, S)
    assert status in ("optimal", "infeasible")
    assert ntp_separability(ntp).separable == (status == "optimal")
