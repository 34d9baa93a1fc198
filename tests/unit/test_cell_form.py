"""The cell layout of the grouped dual (geometry/solvers/dual_forms.py: CellForm) used by the accelerated gradient of
the workset method on NTP programs with every row.

References are independent: the grouped form's padded layout (GroupForm) and its sort-based projection, the generic
constraint operators (LogitGaps.adjoint), autograd of the dual objective written from scratch, and the previous path
(the grouped layout in the accelerated gradient) for whole solves.
"""

import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.constraints import LogitGaps, constraints
from ntpbias.geometry.margins.program import MarginProgram
from ntpbias.geometry.solvers import apg as apg_mod
from ntpbias.geometry.solvers.apg import apg
from ntpbias.geometry.solvers.dual_forms import CellForm, GroupForm, dual_form
from ntpbias.geometry.solvers.gram import ConstraintOps

F64 = torch.float64


def onehot_data(m, d, V, *, seed):
    """The benchmark's one-hot instances (h_j ~ N(0, I/d), one label per context)."""
    return random_ntp(m, d, V, 1, embedding_scale=d ** -0.5, seed=seed)


def program_of(data):
    cons = constraints(data)
    return MarginProgram(cons.ineq, cons.eq)


def rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


DATA = {"onehot": lambda: onehot_data(30, 6, 7, seed=25),
        "support": lambda: random_ntp(30, 5, 9, 3, seed=10)}  # |S_j| = 3: equality rows, three free cells a column


def forms(kind):
    cons = constraints(DATA[kind]())
    ops = ConstraintOps.build(cons.ineq, cons.eq, "cpu", F64)
    return cons, ops, CellForm.detect(ops), dual_form(ops, "grouped", ops.row_sq_norms())


def to_grouped(X, G: GroupForm):
    """A cell-layout X (p, m) in the grouped form's padded layout (zeros at padding)."""
    return torch.where(G.valid, X.reshape(-1)[G.cell.reshape(-1)].view(G.shape), 0)


def test_detected_on_every_ntp_program_with_all_rows_and_nothing_else():
    for kind in DATA:
        assert isinstance(forms(kind)[2], CellForm)
    cons = constraints(DATA["onehot"]())
    rows = cons.ineq.subset(torch.arange(len(cons.ineq)) % 3 > 0)  # a working set: not every cell
    assert CellForm.detect(ConstraintOps.build(rows, None, "cpu", F64)) is None
    H = torch.randn(4, 3, dtype=F64)  # paper B's token selection: one row of W, rows across columns
    sel = LogitGaps(H, 1, *(torch.tensor(v) for v in ([0, 0, 0], [0, 0, 2], [0, 0, 0], [1, 3, 3])))
    assert CellForm.detect(ConstraintOps.build(sel, None, "cpu", F64)) is None
    E = torch.randn(cons.ineq.rows, cons.ineq.rows, dtype=F64)  # a left factor
    left = LogitGaps(cons.ineq.H, cons.ineq.rows, cons.ineq.a, cons.ineq.j, cons.ineq.b, cons.ineq.k, left=E)
    assert CellForm.detect(ConstraintOps.build(left, None, "cpu", F64)) is None


@pytest.mark.parametrize("kind", list(DATA))
def test_layout_equals_the_grouped_form(kind):
    cons, ops, C, G = forms(kind)
    g = torch.Generator().manual_seed(0)
    lam = torch.rand(ops.n_in, generator=g, dtype=F64)
    mu = torch.randn(ops.R - ops.n_in, generator=g, dtype=F64)
    X = C.from_duals(lam, mu)
    assert torch.equal(C.scatter(X), G.scatter(G.from_duals(lam, mu)))  # the same Λ
    assert all(torch.equal(a, b) for a, b in zip(C.duals(X), (lam, mu), strict=True))
    assert torch.equal(to_grouped(X, G), G.from_duals(lam, mu))
    L = torch.randn(C.shape, generator=g, dtype=F64)
    assert torch.equal(to_grouped(C.grad(L), G), G.grad(L))
    assert torch.allclose(to_grouped(C.scale.expand(C.shape), G), torch.where(G.valid, G.scale, 0), rtol=1e-14)
    assert C.row_norm == pytest.approx(float(ops.row_sq_norms().max().sqrt()), rel=1e-14)


@pytest.mark.parametrize("kind", list(DATA))
def test_gradient_is_autograd_of_the_dual(kind):
    """-(D) in cell coordinates is ½||Λ H||² + Σ_ineq Λ[b_i] (λ_i = -Λ[b_i]); at feasible X it equals
    ½||A^T y||² - Σλ through the generic operators, and its gradient is L + c."""
    cons, ops, C, _ = forms(kind)
    g = torch.Generator().manual_seed(1)
    X = C.project(torch.randn(C.shape, generator=g, dtype=F64)).requires_grad_(True)
    lam, mu = C.duals(X.detach())
    f = 0.5 * (X @ cons.ineq.H).square().sum() + (X * C.c).sum()
    AtY = cons.ineq.adjoint(lam) + (cons.eq.adjoint(mu) if len(cons.eq) else 0)
    assert float(f.detach()) == pytest.approx(float(0.5 * AtY.square().sum() - lam.sum()), rel=1e-12)
    f.backward()
    _, L = ops.primal(C.scatter(X.detach()))
    assert torch.allclose(C.grad(L), X.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", list(DATA))
def test_newton_projection_equals_the_sorting_projection(kind):
    _, _, C, G = forms(kind)
    g = torch.Generator().manual_seed(2)
    for X in (torch.randn(C.shape, generator=g, dtype=F64), torch.zeros(C.shape, dtype=F64),
              torch.randint(-2, 3, C.shape, generator=g).to(F64)):  # integer entries: ties at the breakpoints
        ref = G.project(to_grouped(X, G))
        for tau in (None, torch.randn(1, C.shape[1], generator=g, dtype=F64), torch.full((1, C.shape[1]), 50.0)):
            Y, root = C.project_from(X, tau)
            assert float((to_grouped(Y, G) - ref).abs().max()) <= 1e-12
            assert float(Y.sum(0).abs().max()) <= 1e-12 and bool((Y * C.c <= 0).all())  # feasible
            shift = torch.where(C.c > 0, (X - Y).clamp(max=root), X - Y)  # x - τ, or clipped to 0 where x > τ
            assert torch.allclose(shift, root.expand(C.shape), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("data", [onehot_data(30, 20, 6, seed=0), random_ntp(20, 25, 9, 3, seed=3)],
                         ids=["onehot", "support"])
def test_accelerated_gradient_matches_the_grouped_layout(data, monkeypatch):
    prog = program_of(data)
    runs = [apg(prog, tol=1e-9, max_iter=5000)]
    monkeypatch.setattr(apg_mod.CellForm, "detect", classmethod(lambda cls, ops: None))
    runs.append(apg(prog, tol=1e-9, max_iter=5000))
    assert all(r.converged and r.form == "grouped" for r in runs)
    W = [prog._stack(r.lam, r.mu) for r in runs]
    assert rel(W[0], W[1]) < 1e-7


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_workset_solutions_equal_the_previous_path(seed, monkeypatch):
    """Whole solves (float32 accelerated gradient, float64 refinement) with and without the cell layout."""
    data = onehot_data(400, 200, 12, seed=seed) if seed < 2 else random_ntp(100, 150, 10, 4, seed=seed)
    prog = program_of(data)
    assert isinstance(CellForm.detect(ConstraintOps.build(prog.ineq, prog.eq, "cpu", torch.float32)), CellForm)
    new = prog.solve("workset", tol=1e-8)
    monkeypatch.setattr(apg_mod.CellForm, "detect", classmethod(lambda cls, ops: None))
    old = MarginProgram(prog.ineq, prog.eq).solve("workset", tol=1e-8)
    assert new.certified and old.certified
    assert rel(new.W, old.W) < 1e-7 and abs(new.norm - old.norm) / old.norm < 1e-8
