"""The working-set active-face solver (geometry/solvers/workset.py, geometry/solvers/apg.py) against cvxpy + Clarabel.

References are independent: Clarabel (interior point on the sparse constraint matrix, no polish), dense linear
algebra on ``LogitGaps.to_sparse()``, the dual method's sort-based group projection, a Python loop for the
per-group selection.
"""

import math

import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import NotSeparableError, SolverError
from ntpbias.geometry.constraints import LogitGaps, constraints
from ntpbias.geometry.margins import program as svm_mod
from ntpbias.geometry.margins.program import MarginProgram, ntp_svm
from ntpbias.geometry.solvers import workset as ws_mod
from ntpbias.geometry.solvers.apg import _Projection, apg
from ntpbias.geometry.solvers.dual import DIVERGENCE_TOL
from ntpbias.geometry.solvers.dual_forms import dual_form
from ntpbias.geometry.solvers.gram import ConstraintOps
from ntpbias.geometry.solvers.workset import _top_per_group, solve_workset

F64 = torch.float64


def onehot_data(m, d, V, *, seed):
    """The benchmark's one-hot instances: h_j ~ N(0, I/d), uniform labels (the Crammer-Singer SVM without bias)."""
    return random_ntp(m, d, V, 1, embedding_scale=d ** -0.5, seed=seed)


def uneven_data(m, d, V, *, seed):
    """NTP data with support sizes 1..V-1 varying per context and uneven context norms (|S_j| > 1: equalities)."""
    g = torch.Generator().manual_seed(seed)
    H = torch.randn(m, d, generator=g, dtype=F64) * (0.5 + torch.rand(m, 1, generator=g, dtype=F64))
    sizes = torch.randint(1, V, (m,), generator=g)
    order = torch.argsort(torch.rand(m, V, generator=g), dim=1)
    support = torch.zeros(m, V, dtype=torch.bool).scatter(1, order, torch.arange(V)[None, :] < sizes[:, None])
    P = torch.where(support, torch.rand(m, V, generator=g, dtype=F64) + 0.1, 0)
    return NTPData.from_arrays(H, P / P.sum(1, keepdim=True))


def program_of(data):
    cons = constraints(data)
    return MarginProgram(cons.ineq, cons.eq)


def rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def assert_matches_clarabel(prog, res, *, w_tol=1e-6):
    ref = prog.solve("clarabel", polish=False)
    assert ref.certified and res.certified and res.solver == "workset"
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq) == res.certificate  # recomputed, every row included
    assert rel(res.W, ref.W) < w_tol
    assert abs(res.norm ** 2 - ref.norm ** 2) / ref.norm ** 2 < 1e-6


CASES = [  # (kind, m, d, V, seed)
    ("onehot", 30, 20, 6, 0),
    ("onehot", 50, 15, 8, 1),  # m > 3 d: near the separability threshold, ||W|| about 54
    ("support", 12, 15, 7, 2),  # |S_j| > 1: equality rows, free cells in the groups
    ("support", 20, 25, 9, 3),
]


@pytest.mark.parametrize("kind,m,d,V,seed", CASES)
@pytest.mark.parametrize("working_set", ["all", "restricted"])
def test_workset_matches_clarabel(kind, m, d, V, seed, working_set, monkeypatch):
    data = onehot_data(m, d, V, seed=seed) if kind == "onehot" else uneven_data(m, d, V, seed=seed)
    prog = program_of(data)
    if working_set == "restricted":  # force the working-set rounds on a small problem
        monkeypatch.setattr(ws_mod, "ALL_ROWS_MAX", 0)
        monkeypatch.setattr(ws_mod, "START_PER_GROUP", 1)
        monkeypatch.setattr(ws_mod, "ADD_PER_GROUP", 1)
    res = prog.solve("workset", tol=1e-8)
    assert_matches_clarabel(prog, res)
    if working_set == "restricted":
        sizes = res.details["working_set"]
        assert sizes[0] < len(prog.ineq) and res.details["rounds"] >= 2
    assert res.details["precision"] == "float32+float64"  # float32 inner solves, float64 residuals
    assert res.W.dtype == F64


def test_float64_inner_solves_and_rows_form():
    data = uneven_data(15, 18, 8, seed=4)
    prog = program_of(data)
    res = prog.solve("workset", dtype=torch.float64, form="rows", tol=1e-9)
    assert res.details["precision"] == "float64" and res.details["form"] == "rows"
    assert_matches_clarabel(prog, res)


def test_float32_inner_solve_is_certified_in_float64():
    """At these scales float32 alone stops near 1e-5; the float64 residual rounds reach the tolerance."""
    data = onehot_data(80, 40, 10, seed=5)
    prog = program_of(data)
    res = prog.solve("workset", tol=1e-9)
    assert res.certified and res.certificate.worst <= 1e-9
    assert res.details["refine_rounds"] >= 1 and res.details["pcg_iterations"] > 0
    assert res.details["face_rows"] == res.n_active


def test_ties_duplicate_contexts_and_repeated_labels():
    """Duplicated contexts with the same label make the multipliers non-unique (any split between the copies is
    optimal) and repeated labels make ties in the gaps; W^mm is still unique and certified."""
    base = onehot_data(12, 10, 5, seed=6)
    H = torch.cat([base.H, base.H[:4], base.H[:2]])
    P = torch.cat([base.P, base.P[:4], base.P[:2]])
    data = NTPData.from_arrays(H, P)
    prog = program_of(data)
    res = prog.solve("workset", tol=1e-8)
    assert_matches_clarabel(prog, res)
    one = ntp_svm(base, "workset", tol=1e-8)
    assert rel(res.W, one.W) < 1e-6  # the copies change no constraint


def test_ties_all_contexts_share_one_label():
    H = torch.randn(9, 6, dtype=F64, generator=torch.Generator().manual_seed(7))
    H[:, 0] += 3.0  # a common half-space: separable
    P = torch.zeros(9, 4, dtype=F64)
    P[:, 2] = 1.0
    prog = program_of(NTPData.from_arrays(H, P))
    assert_matches_clarabel(prog, prog.solve("workset", tol=1e-8))


def test_left_factor_and_cross_column_rows():
    """A general program (paper B's token-selection shape): left factor E, rows comparing different columns."""
    g = torch.Generator().manual_seed(7)
    H = torch.randn(6, 8, generator=g, dtype=F64)
    E = torch.randn(5, 4, generator=g, dtype=F64)
    a = torch.zeros(8, dtype=torch.long)
    j = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    b = torch.tensor([1, 2, 3, 2, 4, 3, 4, 4])
    k = torch.tensor([1, 2, 3, 4, 5, 0, 1, 2])
    ineq = LogitGaps(H, 4, a, j, b, k, left=E)
    eq = LogitGaps(H, 4, torch.tensor([0]), torch.tensor([5]), torch.tensor([1]), torch.tensor([5]), left=E)
    prog = MarginProgram(ineq, eq)
    assert_matches_clarabel(prog, prog.solve("workset", tol=1e-9))


def test_not_separable_is_reported_with_gordan_multipliers():
    data = random_ntp(60, 3, 6, 3, seed=0)  # m >> d: not NTP-separable
    prog = program_of(data)
    with pytest.raises(NotSeparableError, match="not separable"):
        prog.solve("workset")
    sol = solve_workset(prog)
    assert sol.diverged and not sol.converged
    assert float(sol.lam.min()) >= 0 and math.isclose(float(sol.lam.sum()), 1.0, rel_tol=1e-9)
    A = np.vstack([prog.ineq.to_sparse().toarray(), prog.eq.to_sparse().toarray()])
    resid = np.linalg.norm(A.T @ np.r_[sol.lam.numpy(), sol.mu.numpy()])
    assert resid <= DIVERGENCE_TOL * np.linalg.norm(A, axis=1).max() * (1 + 1e-6)


def test_not_separable_found_on_a_working_set_is_valid_for_every_row(monkeypatch):
    """Two copies of a context with different labels clash; the restricted problem's Gordan multipliers, padded
    with zeros, certify the full problem."""
    base = onehot_data(20, 8, 6, seed=8)
    H = torch.cat([base.H, base.H[:1]])
    P = torch.cat([base.P, base.P[:1].roll(1, dims=1)])
    prog = program_of(NTPData.from_arrays(H, P))
    monkeypatch.setattr(ws_mod, "ALL_ROWS_MAX", 0)
    monkeypatch.setattr(ws_mod, "START_PER_GROUP", 2)
    sol = solve_workset(prog)
    assert sol.diverged and sol.lam.shape == (len(prog.ineq),)
    W = prog._stack(sol.lam, sol.mu)
    assert float(sol.lam.min()) >= 0 and math.isclose(float(sol.lam.sum()), 1.0, rel_tol=1e-9)
    norms = np.linalg.norm(prog.ineq.to_sparse().toarray(), axis=1)
    assert float(torch.linalg.vector_norm(W)) <= DIVERGENCE_TOL * norms.max() * (1 + 1e-6)
    with pytest.raises(NotSeparableError):
        prog.solve("clarabel")


def test_warm_start_from_a_solution_returns_it():
    data = onehot_data(40, 30, 6, seed=9)
    prog = program_of(data)
    first = prog.solve("workset", tol=1e-8)
    again = prog.solve("workset", tol=1e-8, warm_start=first)
    assert again.certified and again.iterations == 0 and rel(again.W, first.W) < 1e-12
    with pytest.raises(SolverError, match="warm start"):
        program_of(onehot_data(5, 8, 6, seed=0)).solve("workset", warm_start=first)


def test_unknown_working_set_and_dtype_are_solver_errors():
    prog = program_of(onehot_data(5, 8, 4, seed=0))
    with pytest.raises(SolverError, match="working_set"):
        prog.solve("workset", working_set="some")
    with pytest.raises(SolverError, match="float32 or float64"):
        prog.solve("workset", dtype=torch.float16)


def test_float32_overflow_falls_back_to_float64():
    data = random_ntp(10, 14, 6, 3, seed=1)
    prog = program_of(NTPData.from_arrays(data.H * 1e25, data.P))  # H H^T ~ 1e51 overflows float32
    res = prog.solve("workset")
    assert res.details["precision"].startswith("float64") and res.certified
    assert rel(res.W * 1e25, ntp_svm(data, "clarabel").W) < 1e-6


def test_ntp_svm_auto_picks_workset_beyond_clarabel_and_other_programs_keep_the_dual(monkeypatch):
    data = onehot_data(5, 8, 4, seed=0)
    assert ntp_svm(data).solver == "clarabel"
    monkeypatch.setattr(svm_mod, "AUTO_CLARABEL_MAX_NNZ", 0)
    assert ntp_svm(onehot_data(5, 8, 4, seed=0)).solver == "workset"
    assert program_of(data).choose_solver("auto") == "dual"  # MarginProgram (papers B and C): unchanged


def test_newton_projection_equals_the_sorting_projection():
    data = uneven_data(30, 5, 9, seed=10)
    cons = constraints(data)
    ops = ConstraintOps.build(cons.ineq, cons.eq, "cpu", F64)
    P = dual_form(ops, "grouped", ops.row_sq_norms())
    project = _Projection(P)
    g = torch.Generator().manual_seed(0)
    for X in (torch.randn(P.shape, generator=g, dtype=F64), torch.zeros(P.shape, dtype=F64),
              torch.randint(-2, 3, P.shape, generator=g).to(F64)):  # integer entries: ties at the breakpoints
        assert float((project(X) - P.project(X)).abs().max()) <= 1e-12


def test_permuted_scatter_equals_the_grouped_form():
    """One-hot data: every logit cell is a group cell, so the scatter is a gather (apg._Permuted)."""
    from ntpbias.geometry.solvers.apg import _permuted

    cons = constraints(onehot_data(30, 6, 7, seed=25))
    ops = ConstraintOps.build(cons.ineq, cons.eq, "cpu", F64)
    P = dual_form(ops, "grouped", ops.row_sq_norms())
    Q = _permuted(P)
    assert Q is not P and Q.name == "grouped" and Q.shape == P.shape
    g = torch.Generator().manual_seed(2)
    X = P.project(torch.randn(P.shape, generator=g, dtype=F64))
    L = torch.randn(ops.p, 30, generator=g, dtype=F64)
    assert torch.equal(Q.scatter(X), P.scatter(X)) and torch.equal(Q.grad(L), P.grad(L))
    rows = cons.ineq.subset(torch.arange(len(cons.ineq)) % 3 > 0)  # a working set: padded groups, unchanged
    ops2 = ConstraintOps.build(rows, None, "cpu", F64)
    P2 = dual_form(ops2, "grouped", ops2.row_sq_norms())
    assert _permuted(P2) is P2


def test_top_per_group_equals_a_loop():
    g = torch.Generator().manual_seed(1)
    gid = torch.randint(0, 7, (60,), generator=g)
    score = torch.randn(60, generator=g, dtype=F64)
    score[::5] = -math.inf  # excluded
    for k in (1, 3):
        mask = _top_per_group(score, gid, k)
        expect = torch.zeros(60, dtype=torch.bool)
        for group in range(7):
            idx = [i for i in range(60) if gid[i] == group and math.isfinite(score[i])]
            for i in sorted(idx, key=lambda i: -float(score[i]))[:k]:
                expect[i] = True
        assert torch.equal(mask, expect)


def test_adaptive_step_reaches_the_dual_optimum():
    data = onehot_data(50, 30, 8, seed=11)
    prog = program_of(data)
    run = apg(prog, tol=1e-9, max_iter=5000)
    assert run.converged and run.step_constant > 0
    ref = prog.solve("clarabel", polish=False)
    assert rel(prog._stack(run.lam, run.mu), ref.W) < 1e-5


def test_the_library_never_imports_the_benchmark_peer():
    """scikit-learn (liblinear) is a benchmark-only dependency (the ``bench`` extra)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "ntpbias"
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "sklearn" for n in names), path


@pytest.mark.slow
def test_working_set_rounds_at_scale_match_the_dual_method(monkeypatch):
    """V = 200: the working set starts at 16 rows per context and grows by rounds; same W^mm as the dual method on
    every row (100,000 constraints)."""
    data = onehot_data(500, 100, 201, seed=12)
    prog = program_of(data)
    ref = prog.solve("dual", tol=1e-9)
    monkeypatch.setattr(ws_mod, "ALL_ROWS_MAX", 0)
    res = prog.solve("workset", tol=1e-9)
    assert ref.certified and res.certified
    sizes = res.details["working_set"]
    assert sizes[0] == 500 * 16 and max(sizes) < len(prog.ineq) / 2 and res.details["rounds"] >= 2
    assert rel(res.W, ref.W) < 1e-6
    assert prog.certificate(res.W, res.dual_ineq, res.dual_eq) == res.certificate


def test_full_pair_rows_use_the_row_form():
    """All (z ∈ S_j, v ∉ S_j) pairs share second cells, so only the row form applies; same W^mm as Clarabel."""
    data = random_ntp(10, 14, 6, 3, seed=3)
    S = data.support
    jj, zz, vv = torch.nonzero(S[:, :, None] & ~S[:, None, :], as_tuple=True)
    prog = MarginProgram(LogitGaps(data.H, data.V, zz, jj, vv, jj), constraints(data).eq)
    res = prog.solve("workset", tol=1e-9)
    assert res.details["form"] == "rows"
    assert_matches_clarabel(prog, res)


def test_fallback_when_refinement_cannot_finish(monkeypatch):
    """Without refinement rounds the method falls back to the accelerated gradient in float64 (and the caller's
    polish); the result is still certified by the independent certificate, and says which path it took."""
    data = onehot_data(40, 30, 6, seed=13)
    prog = program_of(data)
    monkeypatch.setattr(ws_mod, "REFINE_ROUNDS", 0)
    res = prog.solve("workset", tol=1e-8)
    assert "(fallback)" in res.details["precision"]
    assert_matches_clarabel(prog, res)


@pytest.mark.parametrize("c", [1e-9, 1e9])
def test_workset_is_scale_equivariant(c):
    """H -> cH gives W^mm / c with the same (relative) certificate (ntp_svm solves at unit scale)."""
    data = uneven_data(15, 12, 6, seed=14)
    base = ntp_svm(data, "workset", tol=1e-9)
    got = ntp_svm(NTPData.from_arrays(data.H * c, data.P), "workset", tol=1e-9)
    assert base.certified and got.certified
    assert rel(got.W * c, base.W) < 1e-7


# ------------------------------------------------------------------------------------------------------------------
# bfloat16 increments (geometry/solvers/lowp.py) and face-restricted products (geometry/solvers/face_ops.py), forced on
# small instances whatever the machine would choose.

@pytest.mark.parametrize("kind,m,d,V,seed", CASES)
def test_bfloat16_increments_match_clarabel(kind, m, d, V, seed):
    data = onehot_data(m, d, V, seed=seed) if kind == "onehot" else uneven_data(m, d, V, seed=seed)
    prog = program_of(data)
    res = prog.solve("workset", tol=1e-8, increments="bfloat16")
    assert res.details["products_lowp"] > 0  # the increments ran
    assert_matches_clarabel(prog, res)


@pytest.mark.parametrize("kind,m,d,V,seed", CASES)
def test_face_products_match_clarabel(kind, m, d, V, seed, monkeypatch):
    """The refinement's conjugate gradients through the face's cells only (forced: any density)."""
    from ntpbias.geometry.solvers import face_ops
    monkeypatch.setattr(face_ops, "MAX_DENSITY", 1.0)
    data = onehot_data(m, d, V, seed=seed) if kind == "onehot" else uneven_data(m, d, V, seed=seed)
    prog = program_of(data)
    res = prog.solve("workset", tol=1e-9, increments="bfloat16")
    assert res.details["face_operator"] == "FaceRows" and res.details["pcg_iterations"] > 0
    assert_matches_clarabel(prog, res)


def test_sparse_small_working_set_path_matches_clarabel(monkeypatch):
    """Every new path at once on a small instance: a restricted working set (one row per context to start),
    bfloat16 increments, face-restricted products."""
    from ntpbias.geometry.solvers import face_ops
    monkeypatch.setattr(face_ops, "MAX_DENSITY", 1.0)
    monkeypatch.setattr(face_ops, "SPARSE_W_MAX_DENSITY", 1.0)  # W through the nonzero cells, at any size
    monkeypatch.setattr(face_ops, "SPARSE_W_MIN_WORK", 0)
    monkeypatch.setattr(ws_mod, "ALL_ROWS_MAX", 0)
    monkeypatch.setattr(ws_mod, "START_PER_GROUP", 1)
    monkeypatch.setattr(ws_mod, "ADD_PER_GROUP", 1)
    prog = program_of(onehot_data(60, 30, 9, seed=21))
    res = prog.solve("workset", tol=1e-8, increments="bfloat16")
    assert res.details["working_set"][0] < len(prog.ineq) and res.details["rounds"] >= 2
    assert res.details["face_operator"] == "FaceRows" and res.details["products_lowp"] > 0
    assert_matches_clarabel(prog, res)


def test_new_paths_on_ties_and_duplicates(monkeypatch):
    from ntpbias.geometry.solvers import face_ops
    monkeypatch.setattr(face_ops, "MAX_DENSITY", 1.0)
    base = onehot_data(12, 10, 5, seed=6)
    data = NTPData.from_arrays(torch.cat([base.H, base.H[:4], base.H[:2]]), torch.cat([base.P, base.P[:4], base.P[:2]]))
    prog = program_of(data)
    assert_matches_clarabel(prog, prog.solve("workset", tol=1e-8, increments="bfloat16"))


def test_new_paths_report_not_separable(monkeypatch):
    from ntpbias.geometry.solvers import face_ops
    monkeypatch.setattr(face_ops, "MAX_DENSITY", 1.0)
    prog = program_of(random_ntp(60, 3, 6, 3, seed=0))
    with pytest.raises(NotSeparableError, match="not separable"):
        prog.solve("workset", increments="bfloat16")
    sol = solve_workset(prog, increments="bfloat16")
    assert sol.diverged and math.isclose(float(sol.lam.sum()), 1.0, rel_tol=1e-9)
    A = np.vstack([prog.ineq.to_sparse().toarray(), prog.eq.to_sparse().toarray()])
    resid = np.linalg.norm(A.T @ np.r_[sol.lam.numpy(), sol.mu.numpy()])
    assert resid <= DIVERGENCE_TOL * np.linalg.norm(A, axis=1).max() * (1 + 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_face_rows_equal_the_dense_operator(dtype):
    from ntpbias.geometry.solvers.face_ops import FaceRows, face_operator

    data = uneven_data(40, 12, 9, seed=22)
    cons = constraints(data)
    A = cons.ineq.concat(cons.eq)
    A = LogitGaps(A.H.to(dtype), A.rows, A.a, A.j, A.b, A.k).subset(torch.arange(len(A)) % 3 == 0)
    F = FaceRows(A)
    g = torch.Generator().manual_seed(0)
    W = torch.randn(A.var_shape, generator=g, dtype=F64).to(dtype)
    y = torch.randn(len(A), generator=g, dtype=F64).to(dtype)
    tol = 1e-12 if dtype == F64 else 1e-4
    assert float((F.apply(W) - A.apply(W)).abs().max()) <= tol * float(A.apply(W).abs().max())
    assert float((F.adjoint(y) - A.adjoint(y)).abs().max()) <= tol * float(A.adjoint(y).abs().max())
    assert F.apply(W).dtype == dtype and F.adjoint(y).dtype == dtype
    assert face_operator(A, max_density=0.0) is A  # too dense: the rows themselves
    cross = LogitGaps(A.H, A.rows, A.a, A.j, A.b, (A.k + 1) % A.H.shape[0])
    assert face_operator(cross, max_density=1.0) is cross  # two contexts in a row: not a face of NTP rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cells_times_H_equals_the_dense_product(dtype, monkeypatch):
    from ntpbias.geometry.solvers import face_ops
    g = torch.Generator().manual_seed(3)
    H = torch.randn(30, 8, generator=g, dtype=F64).to(dtype)
    Lam = torch.randn(7, 30, generator=g, dtype=F64).to(dtype) * (torch.rand(7, 30, generator=g) < 0.15)
    monkeypatch.setattr(face_ops, "SPARSE_W_MIN_WORK", 0)
    got = face_ops.cells_times_H(Lam, H, max_density=1.0)
    tol = 1e-12 if dtype == F64 else 1e-5
    assert got.dtype == dtype and float((got - Lam @ H).abs().max()) <= tol * float((Lam @ H).abs().max())
    assert torch.equal(face_ops.cells_times_H(Lam, H, max_density=0.0), Lam @ H)  # too dense: the dense product


def test_increments_choice_and_errors(monkeypatch):
    from ntpbias.geometry.solvers import lowp
    assert lowp.increments_dtype("none", "cpu", torch.float32) is None
    assert lowp.increments_dtype("bfloat16", "cpu", torch.float64) == torch.bfloat16
    assert lowp.increments_dtype("auto", "cpu", torch.float64) is None  # float64 work stays exact
    assert lowp.increments_dtype("auto", "cpu", torch.float32, left=torch.eye(2)) is None
    monkeypatch.setitem(lowp._measured, "cpu", False)
    assert lowp.increments_dtype("auto", "cpu", torch.float32) is None
    monkeypatch.setitem(lowp._measured, "cpu", True)
    assert lowp.increments_dtype("auto", "cpu", torch.float32) == torch.bfloat16
    with pytest.raises(SolverError, match="increments"):
        program_of(onehot_data(5, 8, 4, seed=0)).solve("workset", increments="half")


def test_increments_off_and_dense_products_still_match(monkeypatch):
    """increments="none", face_products=False: the previous method, unchanged."""
    prog = program_of(onehot_data(40, 25, 7, seed=23))
    res = prog.solve("workset", tol=1e-8, increments="none", face_products=False)
    assert res.details["products_lowp"] == 0 and res.details.get("face_operator", "LogitGaps") == "LogitGaps"
    assert_matches_clarabel(prog, res)
