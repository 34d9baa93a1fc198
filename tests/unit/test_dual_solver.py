"""The matrix-free dual solver (geometry/solvers/dual.py) against cvxpy + Clarabel, and its failure modes.

References are independent: Clarabel (an interior-point method on the sparse constraint matrix, without the
shared active-set polish), dense linear algebra on ``LogitGaps.to_sparse()`` / ``gram()``, and cvxpy for the
group projection.
"""

import math
import warnings

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import NotSeparableError, SolverError
from ntpbias.geometry.constraints import LogitGaps, constraints
from ntpbias.geometry.margins import program as svm_mod
from ntpbias.geometry.margins.program import MarginProgram, ntp_svm
from ntpbias.geometry.separability.verdict import ntp_separability
from ntpbias.geometry.solvers import dual as dual_mod
from ntpbias.geometry.solvers.dual import DIVERGENCE_TOL, solve_dual
from ntpbias.geometry.solvers.dual_forms import dual_form
from ntpbias.geometry.solvers.gram import ConstraintOps, gram_solve, min_norm_lstsq, sq_row_norms

F64 = torch.float64


def uneven_data(m, d, V, *, seed, onehot=False):
    """Random NTP data with support sizes 1..V-1 varying per context, Dirichlet pi, Gaussian or one-hot H."""
    g = torch.Generator().manual_seed(seed)
    H = torch.eye(m, dtype=F64) if onehot else torch.randn(m, d, generator=g, dtype=F64) * (
        0.5 + torch.rand(m, 1, generator=g, dtype=F64))  # uneven context norms
    sizes = torch.randint(1, V, (m,), generator=g)
    order = torch.argsort(torch.rand(m, V, generator=g), dim=1)
    S = torch.arange(V)[None, :] < sizes[:, None]
    support = torch.zeros(m, V, dtype=torch.bool).scatter(1, order, S)
    P = torch.where(support, torch.rand(m, V, generator=g, dtype=F64) + 0.1, 0)
    pi = torch.rand(m, generator=g, dtype=F64) + 0.05
    return NTPData.from_arrays(H, P / P.sum(1, keepdim=True), pi / pi.sum())


def program_of(data):
    cons = constraints(data)
    return MarginProgram(cons.ineq, cons.eq)


def clarabel(program):
    return program.solve("clarabel", polish=False)


def rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


CASES = [  # (m, d, V, seed, onehot)
    (8, 12, 6, 0, False),
    (15, 20, 9, 1, False),
    (5, 9, 12, 2, False),
    (10, 10, 7, 3, True),
    (20, 20, 5, 4, True),
]


@pytest.mark.parametrize("m,d,V,seed,onehot", CASES)
@pytest.mark.parametrize("form", ["grouped", "rows"])
def test_dual_matches_clarabel(m, d, V, seed, onehot, form):
    data = uneven_data(m, d, V, seed=seed, onehot=onehot)
    prog = program_of(data)
    ref = clarabel(prog)
    assert ref.certified
    res = prog.solve("dual", tol=1e-9, polish=False, form=form)
    assert res.solver == "dual" and res.details["form"] == form
    assert res.certified and res.certificate.worst <= 1e-9
    assert rel(res.W, ref.W) < 1e-6
    assert abs(res.norm ** 2 - ref.norm ** 2) / ref.norm ** 2 < 1e-6
    # the certificate is the independent one, recomputed from (W, λ, μ)
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq) == res.certificate


def test_dual_matches_clarabel_with_polish_to_machine_precision():
    data = random_ntp(30, 40, 10, 4, seed=5, pi="dirichlet")
    prog = program_of(data)
    ref, res = clarabel(prog), prog.solve("dual")
    assert res.details["polish"] == "applied" and res.certificate.worst < 1e-10
    assert rel(res.W, ref.W) < 1e-7


def test_general_programs_left_factor_and_cross_columns():
    """Non-NTP LogitGaps: a left factor E (L = E W H^T) and rows comparing different columns (j != k)."""
    g = torch.Generator().manual_seed(7)
    H = torch.randn(6, 8, generator=g, dtype=F64)
    E = torch.randn(5, 4, generator=g, dtype=F64)
    # token-selection-like: L[0, j] - L[b, k] with k != j mostly; second cells distinct and never a first cell
    a = torch.zeros(8, dtype=torch.long)
    j = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    b = torch.tensor([1, 2, 3, 2, 4, 3, 4, 4])
    k = torch.tensor([1, 2, 3, 4, 5, 0, 1, 2])
    ineq = LogitGaps(H, 4, a, j, b, k, left=E)
    eq = LogitGaps(H, 4, torch.tensor([0]), torch.tensor([5]), torch.tensor([1]), torch.tensor([5]), left=E)
    prog = MarginProgram(ineq, eq)
    ref = clarabel(prog)
    for form in ("grouped", "rows"):
        res = prog.solve("dual", tol=1e-9, polish=False, form=form)
        assert res.certified and rel(res.W, ref.W) < 1e-6


def test_full_pair_form_falls_back_to_rows():
    """All (z ∈ S_j, v ∉ S_j) pairs share second cells, so only the row form applies; same optimum (Def. 3, paper A)."""
    data = random_ntp(10, 14, 6, 3, seed=3)
    S = data.support
    jj, zz, vv = torch.nonzero(S[:, :, None] & ~S[:, None, :], as_tuple=True)
    full = LogitGaps(data.H, data.V, zz, jj, vv, jj)
    eq = constraints(data).eq
    prog = MarginProgram(full, eq)
    sol = solve_dual(prog, tol=1e-9)
    assert sol.form == "rows" and sol.converged
    with pytest.raises(SolverError, match="grouped"):
        solve_dual(prog, form="grouped")
    W = prog._stack(sol.lam, sol.mu)
    assert rel(W, ntp_svm(data, "clarabel").W) < 1e-6


def test_group_projection_is_the_euclidean_projection():
    import cvxpy as cp

    data = uneven_data(6, 8, 7, seed=11)
    prog = program_of(data)
    ops = ConstraintOps.build(prog.ineq, prog.eq, "cpu", F64)
    P = dual_form(ops, "grouped", ops.row_sq_norms())
    X = torch.randn(P.shape, dtype=F64, generator=torch.Generator().manual_seed(0)) * 3
    Y = P.project(X)
    valid, ineq = P.valid.numpy(), P.ineq.numpy()
    for g in range(P.shape[0]):
        x = X[g].numpy()
        y = cp.Variable(P.shape[1])
        cons = [cp.sum(y[valid[g]]) == 0]
        if (~valid[g]).any():
            cons.append(y[~valid[g]] == 0)
        if ineq[g].any():
            cons.append(y[ineq[g]] <= 0)
        cp.Problem(cp.Minimize(cp.sum_squares(y - x)), cons).solve(solver=cp.CLARABEL)
        np.testing.assert_allclose(Y[g].numpy(), y.value, atol=1e-7)


def test_not_separable_is_detected():
    data = random_ntp(60, 3, 6, 3, seed=0)  # m >> d: not NTP-separable
    assert not ntp_separability(data, method="lp").separable
    prog = program_of(data)
    with pytest.raises(NotSeparableError, match="not separable") as err:
        prog.solve("dual")
    assert "ntpbias analyze" in str(err.value)
    sol = solve_dual(prog)
    assert sol.diverged and not sol.converged
    # the returned multipliers are a (near) Gordan certificate, checked independently
    assert float(sol.lam.min()) >= 0 and math.isclose(float(sol.lam.sum()), 1.0, rel_tol=1e-12)
    A = np.vstack([prog.ineq.to_sparse().toarray(), prog.eq.to_sparse().toarray()])
    resid = np.linalg.norm(A.T @ np.r_[sol.lam.numpy(), sol.mu.numpy()])
    assert resid <= DIVERGENCE_TOL * np.linalg.norm(A, axis=1).max() * (1 + 1e-9)
    assert math.isclose(sol.gordan_residual * np.linalg.norm(A, axis=1).max(), resid, rel_tol=1e-6)


def test_float32_is_certified_in_float64():
    data = random_ntp(40, 60, 12, 4, seed=2)
    prog = program_of(data)
    ref = prog.solve("dual", polish=False)
    res = prog.solve("dual", dtype=torch.float32, polish=False)
    assert res.W.dtype == F64 and res.dual_ineq.dtype == F64
    assert res.details["precision"] in ("float32", "float32+float64")
    assert res.certified  # the certificate is recomputed in float64
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq).worst <= res.tol
    assert rel(res.W, ref.W) < 1e-5


def test_float32_overflow_falls_back_to_float64():
    data = random_ntp(10, 14, 6, 3, seed=1)
    big = NTPData.from_arrays(data.H * 1e25, data.P)  # H H^T ~ 1e51 overflows float32
    prog = program_of(big)
    with pytest.warns(UserWarning, match="non-finite"):
        res = prog.solve("dual", dtype="float32")
    assert res.details["precision"].startswith("float64") and res.certified
    assert rel(res.W * 1e25, ntp_svm(data).W) < 1e-6


def test_warm_start_reaches_the_same_optimum_faster():
    data = random_ntp(60, 80, 20, 5, seed=4)
    first = ntp_svm(data, "dual", polish=False)
    H2 = data.H + 1e-3 * torch.randn(data.H.shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    data2 = NTPData.from_arrays(H2, data.P, data.pi)  # same supports, nearby embeddings
    cold = ntp_svm(data2, "dual", polish=False, tol=1e-8)
    warm = ntp_svm(data2, "dual", polish=False, tol=1e-8, warm_start=first)
    assert cold.certified and warm.certified
    assert rel(warm.W, cold.W) < 1e-6
    assert warm.iterations < cold.iterations
    with pytest.raises(SolverError, match="warm start"):
        ntp_svm(random_ntp(5, 8, 6, 2, seed=0), "dual", warm_start=first)


def test_iteration_cap_returns_honest_certificate_with_warning():
    data = random_ntp(40, 50, 15, 5, seed=6)
    prog = program_of(data)
    with pytest.warns(UserWarning, match="iteration limit"):
        res = prog.solve("dual", max_iter=5, polish=False, tol=1e-10)
    assert res.status == "inaccurate" and not res.certified
    assert res.iterations == 5
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq) == res.certificate


def test_out_of_memory_is_a_solver_error(monkeypatch):
    def oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(dual_mod, "_run", oom)
    prog = program_of(random_ntp(5, 8, 6, 2, seed=0))
    with pytest.raises(SolverError, match=r"out of GPU memory .* 48 variables and \d+ constraints"):
        prog.solve("dual")


def test_auto_picks_by_size_and_reports(monkeypatch):
    prog = program_of(random_ntp(5, 8, 6, 2, seed=0))
    assert prog.choose_solver("auto") == "clarabel" and prog.solve().solver == "clarabel"
    monkeypatch.setattr(svm_mod, "AUTO_CLARABEL_MAX_NNZ", prog.nnz - 1)
    assert prog.choose_solver("auto") == "dual" and prog.solve().solver == "dual"
    with pytest.raises(SolverError, match="unknown solver"):
        prog.solve("osqp")


def test_matrix_free_polish_equals_dense_polish(monkeypatch):
    data = random_ntp(30, 40, 10, 4, seed=8)
    prog = program_of(data)
    rough = prog.solve("dual", tol=1e-5, polish=False)
    dense = prog.polish(rough)
    monkeypatch.setattr(svm_mod, "POLISH_MAX_ROWS", 0)
    cg = prog.polish(rough)
    assert dense is not None and cg is not None
    assert cg.certificate.worst < 1e-10 and rel(cg.W, dense.W) < 1e-9


def test_explicit_device_cpu_and_cuda_when_available():
    prog = program_of(random_ntp(10, 14, 6, 3, seed=1))
    res = prog.solve("dual", device="cpu")
    assert res.certified and res.W.device.type == "cpu"
    if torch.cuda.is_available():  # pragma: no cover - no GPU in CI
        gpu = prog.solve("dual", device="cuda")
        assert gpu.W.device.type == "cpu" and rel(gpu.W, res.W) < 1e-6


def test_gram_solve_matches_dense_and_is_batched():
    data = uneven_data(12, 15, 8, seed=9)
    A = constraints(data).eq
    G = A.gram()
    rhs = torch.randn(3, len(A), dtype=F64, generator=torch.Generator().manual_seed(2))
    nu, relres, _ = gram_solve(A, rhs)
    assert float(relres.max()) <= 1e-12
    np.testing.assert_allclose(nu.numpy(), torch.linalg.solve(G, rhs.T).T.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_sq_row_norms_are_the_row_dots(dtype):
    M = torch.randn(7, 5, dtype=F64, generator=torch.Generator().manual_seed(4))
    want = torch.einsum("ij,ij->i", M, M)  # in float64 from the float64 matrix
    got = sq_row_norms(M.to(dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got.double().numpy(), want.numpy(), rtol=10 * torch.finfo(dtype).eps)


def test_min_norm_lstsq_matches_pseudoinverse_on_inconsistent_system():
    data = random_ntp(30, 4, 8, 3, seed=1)  # d << m: the compatibility equations are inconsistent
    A = constraints(data).eq
    b = constraints(data).log_odds
    W, _ = min_norm_lstsq(A, b)
    ref = np.linalg.pinv(A.to_sparse().toarray()) @ b.numpy()
    np.testing.assert_allclose(W.reshape(-1).numpy(), ref, rtol=1e-7, atol=1e-9)
    assert float(torch.linalg.vector_norm(A.apply(W) - b)) > 1e-3  # really inconsistent


def test_lanczos_estimate_bounds_the_spectrum():
    data = uneven_data(10, 12, 6, seed=3)
    A = constraints(data).ineq
    G = A.gram()
    est = dual_mod._lanczos_max(lambda v: A.apply(A.adjoint(v)), torch.rand(len(A), dtype=F64), 30)
    top = float(torch.linalg.eigvalsh(G)[-1])
    assert top * (1 - 1e-8) <= est <= top * 1.05


def test_no_warning_on_converged_solve():
    prog = program_of(random_ntp(10, 14, 6, 3, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prog.solve("dual")


def test_divergence_through_an_equality_clash_gives_the_exact_gordan_direction():
    """ineq row 0 and the equality are the same functional: p^T(h_0 - h_1) >= 1 and = 0. The only Gordan
    direction is λ = e_0, μ = -1 (derived by hand); the iterate's own ratio decays like 1/k², the drift's at once."""
    H = torch.randn(4, 5, dtype=F64, generator=torch.Generator().manual_seed(3))
    z = torch.zeros(2, dtype=torch.long)
    ineq = LogitGaps(H, 1, z, torch.tensor([0, 2]), z, torch.tensor([1, 3]))
    eq = LogitGaps(H, 1, z[:1], torch.tensor([0]), z[:1], torch.tensor([1]))
    prog = MarginProgram(ineq, eq)
    with pytest.raises(NotSeparableError):
        prog.solve("clarabel")
    sol = solve_dual(prog)
    assert sol.diverged and sol.iterations < 2000
    np.testing.assert_allclose(sol.lam.numpy(), [1.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(sol.mu.numpy(), [-1.0], atol=1e-5)
