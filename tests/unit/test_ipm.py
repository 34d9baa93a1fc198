"""The interior-point NTP-SVM solver (geometry/solvers/ipm.py) against cvxpy + Clarabel on ill-conditioned features.

References are independent: Clarabel (an interior-point method on the sparse constraint matrix of the anchor form, in
cvxpy, without our polish) on the same problems; the certificate is recomputed from (W, λ, μ) on every row. Features:
synthetic ones whose singular values are log-spaced from 1 down to 1/cond (a controlled spectrum, cond up to 1e6), and
a trained model's last hidden states (tests/fixtures/lm_features_*.npz, written by `ntpbias lm analyze`; see
tests/fixtures/README.md).
"""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.errors import LimitError, NotSeparableError, SolverError
from ntpbias.geometry.constraints import LogitGaps, constraints
from ntpbias.geometry.margins.program import MarginProgram, ntp_margin, ntp_svm
from ntpbias.geometry.solvers import ipm as ipm_mod
from ntpbias.geometry.solvers.ipm import solve_ipm
from ntpbias.limits import memory_budget

F64 = torch.float64
FIXTURES = Path(__file__).parent.parent / "fixtures"


def spectrum_data(m, d, V, max_support, cond, *, seed, onehot_planted=False):
    """NTP data whose H (m, d) has singular values log-spaced from 1 to 1/cond (times sqrt(d)), random supports of
    sizes 1..max_support, or (``onehot_planted``) the one label argmax_v (W0 h_j)_v of a random W0 (separable for any
    m, also m > d)."""
    g = torch.Generator().manual_seed(seed)
    r = min(m, d)
    U, _ = torch.linalg.qr(torch.randn(m, r, generator=g, dtype=F64))
    Q, _ = torch.linalg.qr(torch.randn(d, r, generator=g, dtype=F64))
    H = (U * torch.logspace(0, -math.log10(cond), r, dtype=F64)) @ Q.T * math.sqrt(d)
    if onehot_planted:
        label = (H @ torch.randn(V, d, generator=g, dtype=F64).T).argmax(1)
        support = torch.nn.functional.one_hot(label, V).bool()
    else:
        sizes = torch.randint(1, max_support + 1, (m,), generator=g)
        order = torch.argsort(torch.rand(m, V, generator=g), dim=1)
        support = torch.zeros(m, V, dtype=torch.bool).scatter(1, order, torch.arange(V)[None, :] < sizes[:, None])
    P = torch.where(support, torch.rand(m, V, generator=g, dtype=F64) + 0.1, 0)
    return NTPData.from_arrays(H, P / P.sum(1, keepdim=True))


def fixture(name):
    z = np.load(FIXTURES / name, allow_pickle=False)
    return NTPData.from_arrays(torch.as_tensor(z["H"]), torch.as_tensor(z["P"]),
                               torch.as_tensor(z["pi"]) if "pi" in z else None)


def program_of(data):
    cons = constraints(data)
    return MarginProgram(cons.ineq, cons.eq)


def rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def cond(H):
    s = torch.linalg.svdvals(H)
    return float(s[0] / s[s > 1e-12 * s[0]][-1])


CASES = [  # (m, d, V, max |S_j|, cond, seed, one-hot planted)
    (12, 16, 8, 3, 1e2, 0, False),
    (16, 16, 10, 4, 1e4, 1, False),
    (20, 24, 9, 3, 1e6, 2, False),
    (30, 12, 6, 1, 1e5, 3, True),  # m > d: H has rank d < m
    (16, 24, 16, 12, 1e5, 4, False),  # many in-support ties, as a text's (where the workset method does not certify)
]


@pytest.mark.parametrize("m,d,V,k,c,seed,planted", CASES)
def test_ipm_matches_clarabel_on_ill_conditioned_features(m, d, V, k, c, seed, planted):
    data = spectrum_data(m, d, V, k, c, seed=seed, onehot_planted=planted)
    assert cond(data.H) == pytest.approx(c, rel=1e-6)
    prog = program_of(data)
    ref = prog.solve("clarabel", polish=False)
    assert ref.certified
    res = prog.solve("ipm", tol=1e-9)
    assert res.solver == "ipm" and res.certified and res.certificate.worst <= 1e-9
    assert abs(res.norm ** 2 - ref.norm ** 2) / ref.norm ** 2 < 1e-6
    assert rel(res.W, ref.W) < 1e-6
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq) == res.certificate  # the independent certificate
    assert res.details["ipm_iterations"] <= 40


def test_ipm_matches_clarabel_on_a_trained_models_features():
    """The lm-shakespeare preset's features (T = 1, its 32 most frequent contexts; fixtures README): cond(H) 3e3."""
    data = fixture("lm_features_small.npz")
    assert cond(data.H) > 1e3
    prog = program_of(data)
    ref = prog.solve("clarabel", polish=False)
    res = prog.solve("ipm", tol=1e-8)
    assert ref.certified and res.certified
    assert abs(res.norm ** 2 - ref.norm ** 2) / ref.norm ** 2 < 1e-6
    assert rel(res.W, ref.W) < 1e-5


@pytest.mark.slow
def test_ipm_certifies_a_trained_models_features_at_1e5_variables():
    """A model trained with V = 1024 (fixtures README): m = 96 contexts, d = 128, V d = 131,072 variables, cond(H) =
    1.2e4. Certified to the default tolerance; the margin and the ties recomputed from W and H directly (not through
    the constraint operators the certificate uses) agree with it."""
    data = fixture("lm_features_v1024.npz")
    assert data.V * data.d >= 1e5 and cond(data.H) > 1e4
    res = ntp_svm(data, "ipm")
    assert res.certified and res.certificate.worst <= 1e-6
    assert float(ntp_margin(res.W, data)) == pytest.approx(1.0, abs=1e-6)
    L = data.H @ res.W.T  # (m, V): in-support logits tied per context
    inf = torch.tensor(math.inf, dtype=F64)
    spread = torch.where(data.support, L, -inf).amax(1) - torch.where(data.support, L, inf).amin(1)
    assert float(spread.max()) <= 1e-6


def test_ipm_ties_full_supports_and_duplicate_contexts():
    data = spectrum_data(10, 12, 6, 3, 1e3, seed=5)
    H = torch.cat([data.H, data.H[:3]])  # three contexts twice: K is singular
    P = torch.cat([data.P, data.P[:3]])
    P[5] = 1.0 / data.V  # a context with full support (no margin row)
    twice = NTPData.from_arrays(H, P)
    ref = ntp_svm(twice, "clarabel")
    res = ntp_svm(twice, "ipm", tol=1e-9)
    assert res.certified and rel(res.W, ref.W) < 1e-6


def test_ipm_is_scale_equivariant():
    data = spectrum_data(12, 16, 8, 3, 1e4, seed=6)
    base = ntp_svm(data, "ipm", tol=1e-9)
    big = ntp_svm(NTPData.from_arrays(data.H * 2.0 ** 20, data.P), "ipm", tol=1e-9)
    assert rel(big.W * 2.0 ** 20, base.W) < 1e-7


def test_ipm_reports_not_separable():
    # m = 3 contexts in R^1 with alternating labels: no W separates (paper A's Gordan alternative)
    H = torch.tensor([[1.0], [2.0], [3.0]], dtype=F64)
    P = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=F64)
    with pytest.raises(NotSeparableError):
        ntp_svm(NTPData.from_arrays(H, P), "ipm")
    run = solve_ipm(program_of(NTPData.from_arrays(H, P)))
    assert run.diverged and float(run.lam.sum()) == pytest.approx(1.0) and run.gordan_residual <= 1e-6


def test_ipm_refuses_other_programs_and_float32():
    H = torch.eye(2, dtype=F64)
    cross = LogitGaps(H, 1, *[torch.tensor(v) for v in ([0], [0], [0], [1])])  # one row, two columns: not NTP
    with pytest.raises(SolverError, match="reduced form"):
        MarginProgram(cross).solve("ipm")
    with pytest.raises(SolverError, match="float64"):
        program_of(spectrum_data(6, 8, 4, 2, 10, seed=0)).solve("ipm", dtype="float32")


def test_ipm_memory_preflight():
    data = spectrum_data(12, 16, 8, 3, 1e2, seed=0)
    with memory_budget("10K"), pytest.raises(LimitError, match="interior-point"):
        ntp_svm(data, "ipm")


def test_ipm_newton_blocks_solve_the_newton_system():
    """The block elimination (:class:`ipm._Blocks`) against a dense solve of the same linear system."""
    g = torch.Generator().manual_seed(0)
    V, m = 5, 4
    G = torch.randn(m, 3, generator=g, dtype=F64)
    K = G @ G.T  # rank 3 < m
    D = torch.rand(V, m, generator=g, dtype=F64) + 0.1
    Q = torch.randn(V, m, generator=g, dtype=F64)
    Rc = torch.randn(m, generator=g, dtype=F64)
    dY, dc = ipm_mod._Blocks(K, V).factor(D).solve(Q, Rc)
    # unknowns (vec(ΔY) row-major, Δc): ΔY_v (K + diag D_v) - Δc = Q_v, Σ_v ΔY_v = -Rc
    n = V * m
    A = torch.zeros(n + m, n + m, dtype=F64)
    for v in range(V):  # a loop over tokens to build the reference matrix (test only)
        A[v * m:(v + 1) * m, v * m:(v + 1) * m] = K + torch.diag(D[v])
        A[v * m:(v + 1) * m, n:] = -torch.eye(m, dtype=F64)
        A[n:, v * m:(v + 1) * m] = torch.eye(m, dtype=F64)
    x = torch.linalg.solve(A, torch.cat([Q.reshape(-1), -Rc]))
    assert rel(dY.reshape(-1), x[:n]) < 1e-10 and rel(dc, x[n:]) < 1e-10


def test_lm_geometry_routes_the_ntp_svm_to_the_ipm():
    """`lm analyze`'s geometry (geometry/lm/paper_a.py) solves a model's NTP-SVM, and the separable prefix's, by the
    interior-point method where it fits, and passes an explicit backend through."""
    from ntpbias.geometry.lm import logit_reference, model_geometry
    from ntpbias.geometry.separability.decide import subset

    data = spectrum_data(12, 16, 8, 6, 1e4, seed=8)
    ref = logit_reference(data, nuclear=False)
    W = torch.randn(data.V, data.d, generator=torch.Generator().manual_seed(0), dtype=F64)
    auto = model_geometry(data, W, ref)
    assert ipm_mod.fits(data.V, data.m) and auto.paper_a.svm.solver == "ipm" and auto.values["svm_certified"]
    assert model_geometry(data, W, ref, solver="clarabel").paper_a.svm.solver == "clarabel"
    assert auto.values["svm_norm"] == pytest.approx(ntp_svm(data, "clarabel").norm, rel=1e-6)
    # not separable (d = 1 < m): the two most frequent contexts are the longest separable prefix, with their own W^mm
    tied = NTPData.from_arrays([[1.0], [-2.0], [-1.0]], [[0.3, 0.7, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
                               [0.5, 0.3, 0.2])
    g = model_geometry(tied, torch.tensor([[1.0], [0.5], [-1.0]], dtype=F64), logit_reference(tied, nuclear=False))
    assert g.values["separable"] is False and g.values["prefix_contexts"] == 2
    assert g.prefix_svm.solver == "ipm" and g.values["prefix_svm_certified"]
    first_two = subset(tied, torch.tensor([0, 1]))
    assert g.values["prefix_svm_norm"] == pytest.approx(ntp_svm(first_two, "clarabel").norm, rel=1e-6)
