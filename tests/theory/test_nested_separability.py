"""The nested LP's critical dimension (geometry.separability.nested) against independent computations.

d* is compared with a bisection over margin LPs written here (scipy's HiGHS on max s subject to A_in(W) >= s,
A_eq(W) = 0, s <= 1; nothing shared with the package but the data), and both certificates are checked here in
numpy from their definitions: the separating W on the first d* coordinates (ties within every support, every
out-of-support logit at least 1 below), the Gordan multipliers on the first d* - 1 (y >= 0, Σy = 1, and the
combination Σ_j u_j h_j^T of the logit directions vanishes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.optimize import linprog

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import SolverError
from ntpbias.geometry.separability import nested, nested_lp
from ntpbias.geometry.separability.nested import nested_critical_dimension

# the constraint rows of the independent reference of benchmarks/bench_separability.py (written without ntpbias)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_separability import _gaps, _rows  # noqa: E402


def _separable(H: np.ndarray, P: np.ndarray, d: int) -> bool:
    """max s subject to A_in(W) >= s, A_eq(W) = 0, s <= 1 (always feasible; s* = 1 iff separable)."""
    if d == 0:
        return False
    ineq, eq = _rows(P)
    V = P.shape[1]
    A = _gaps(H[:, :d], ineq, V)
    E = sp.hstack([sp.csr_matrix((len(eq[0]), 1)), _gaps(H[:, :d], eq, V)]) if len(eq[0]) else None
    c = np.zeros(V * d + 1)
    c[0] = -1.0
    res = linprog(c, A_ub=sp.hstack([sp.csr_matrix(np.ones((A.shape[0], 1))), -A]), b_ub=np.zeros(A.shape[0]),
                  A_eq=E, b_eq=None if E is None else np.zeros(E.shape[0]),
                  bounds=[(None, 1.0)] + [(None, None)] * (V * d), method="highs")
    assert res.status == 0
    return res.x[0] > 0.5


def _bisection(H: np.ndarray, P: np.ndarray) -> int:
    lo, hi = 0, H.shape[1]
    assert _separable(H, P, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _separable(H, P, mid) else (mid, hi)
    return hi


def _check_certificates(found, H: np.ndarray, P: np.ndarray) -> None:
    ineq, eq = _rows(P)
    d = found.d_star
    W = found.separating.W.numpy()
    assert W.shape == (P.shape[1], d)
    Z = H[:, :d] @ W.T
    assert (Z[ineq[0], ineq[1]] - Z[ineq[0], ineq[2]]).min() >= 1 - 1e-7
    if len(eq[0]):
        assert np.abs(Z[eq[0], eq[1]] - Z[eq[0], eq[2]]).max() <= 1e-7
    if d == 1:
        assert found.not_separating is None
        return
    y, mu = found.not_separating.farkas_y.numpy(), found.not_separating.farkas_mu.numpy()
    assert y.min() >= 0 and y.sum() == pytest.approx(1.0)
    U = np.zeros(P.shape)
    for (j, a, b), w in ((ineq, y), (eq, mu)):
        np.add.at(U, (j, a), w)
        np.add.at(U, (j, b), -w)
    assert np.linalg.norm(U.T @ H[:, :d - 1]) <= 1e-7


CASES = [(2, 1, 40), (3, 1, 36), (5, 1, 40), (4, 2, 30), (5, 4, 40), (6, 3, 30), (8, 7, 40)]


@pytest.mark.parametrize("form", ["w", "cokernel", "interior"])
@pytest.mark.parametrize(("V", "k", "m"), CASES)
def test_nested_d_star_matches_bisection_with_both_certificates(V, k, m, form):
    for seed in range(2):
        data = random_ntp(m, m, V, k, seed=seed)
        H, P = data.H.numpy().astype(np.float64), data.P.numpy()
        found = nested_critical_dimension(data, guess=m // 2, step=2, form=form)
        assert found.d_star == _bisection(H, P)
        assert found.certified and found.method == ("interior" if form == "interior" else "nested")
        if form == "interior":  # both certificates from the interior-point method itself, no LP verdict
            assert {v.method for v in found.verdicts.values()} == {"interior"}
        _check_certificates(found, H, P)


@pytest.mark.parametrize(("V", "k", "m"), [(5, 4, 40), (6, 3, 30), (4, 2, 30)])
def test_row_generation_finds_the_same_d_star_and_certificates(V, k, m, monkeypatch):
    """The cokernel form with its sign rows generated (every dataset here is below the size where that starts, so it is
    forced): d* as the bisection's, both certificates valid on every row, and rows were left out on the way."""
    monkeypatch.setattr(nested_lp, "LAZY_SIGN_ROWS", 0)
    fewest = []
    run = nested_lp.BlockLP.run

    def counted(self, *, dual):
        fewest.append(len(self.active) / len(self.lower))
        return run(self, dual=dual)

    monkeypatch.setattr(nested_lp.BlockLP, "run", counted)
    for seed in range(2):
        data = random_ntp(m, m, V, k, seed=seed)
        H, P = data.H.numpy().astype(np.float64), data.P.numpy()
        found = nested_critical_dimension(data, guess=m // 2, step=2, form="cokernel")
        assert found.d_star == _bisection(H, P)
        assert found.certified and found.method == "nested"
        _check_certificates(found, H, P)
    assert min(fewest) < 0.5


@pytest.mark.parametrize("form", ["w", "cokernel"])
def test_a_stalled_primal_re_solve_goes_on_by_dual_simplex(form, monkeypatch):
    """With the stall guard at one pivot every warm primal re-solve is cut short and finished by dual simplex from its
    basis: the same d* as the bisection, both certificates, no fallback."""
    monkeypatch.setattr(nested_lp, "STALL_FRACTION", 1e-12)
    for seed in range(2):
        data = random_ntp(36, 36, 4, 2, seed=seed)
        H, P = data.H.numpy().astype(np.float64), data.P.numpy()
        found = nested_critical_dimension(data, guess=18, step=2, form=form)
        assert found.d_star == _bisection(H, P)
        assert found.certified and found.method == "nested"
        _check_certificates(found, H, P)


def test_row_generation_reaches_the_whole_lps_optimum():
    """A BlockLP whose inequality rows are generated ends at the optimal value of the same LP given whole to scipy's
    HiGHS, with every row satisfied and duals that vanish on the rows never added."""
    rng = np.random.default_rng(0)
    rows, levels, width = 120, 6, 2
    G = rng.standard_normal((rows, levels * width))
    A = sp.csc_matrix(G * np.sign(G @ rng.standard_normal(levels * width))[:, None])  # feasible: A x0 > 0 for one x0
    lower, upper = np.ones(rows), np.full(rows, np.inf)
    weights = nested_lp.geometric(range(levels), 3.0)
    lp = nested_lp.BlockLP(A, range(levels), width, lower, upper, weights, np.ones(rows, bool),
                           np.arange(rows) % 10)
    assert lp.run(dual=True)
    x = lp.blocks().ravel()
    assert (A @ x).min() >= 1 - 1e-7
    cost = np.repeat([weights[t] for t in range(levels)], width)
    whole = linprog(np.concatenate([cost, cost]), A_ub=-sp.hstack([A, -A]), b_ub=-lower, bounds=(0, None),
                    method="highs")
    assert whole.status == 0
    assert cost @ np.abs(x) == pytest.approx(whole.fun, rel=1e-9)
    assert len(lp.active) < rows
    duals = lp.duals()
    outside = np.ones(rows, bool)
    outside[lp.active] = False
    assert np.all(duals[outside] == 0)


@pytest.mark.parametrize("guess", [1, 5, 20, 39, 40])
def test_the_guess_changes_the_work_not_d_star(guess):
    data = random_ntp(40, 40, 3, 2, seed=3)
    expected = _bisection(data.H.numpy().astype(np.float64), data.P.numpy())
    for form in ("w", "cokernel", "interior", "auto"):
        assert nested_critical_dimension(data, guess, step=3, form=form).d_star == expected


def test_scaled_embeddings_give_the_same_d_star_and_W_in_user_units():
    data = random_ntp(30, 30, 4, 1, seed=1)
    big = NTPData.from_arrays(data.H * 1e3, data.P)
    a, b = nested_critical_dimension(data, 10, step=2), nested_critical_dimension(big, 10, step=2)
    assert a.d_star == b.d_star
    _check_certificates(b, big.H.numpy().astype(np.float64), big.P.numpy())


def test_a_missed_certificate_falls_back_to_the_verdict_search(monkeypatch):
    data = random_ntp(30, 30, 3, 1, seed=2)
    monkeypatch.setattr(nested, "_separating", lambda cons, W, method="lp": None)
    found = nested_critical_dimension(data, 12, step=2)
    assert found.method == "verdicts" and found.certified
    assert found.d_star == _bisection(data.H.numpy().astype(np.float64), data.P.numpy())


def test_where_the_interior_point_method_does_not_converge_the_lp_decides(monkeypatch):
    data = random_ntp(30, 30, 4, 2, seed=4)
    monkeypatch.setattr(nested, "elastic_solve", lambda ineq, eq: None)
    monkeypatch.setattr(nested, "cokernel_solve", lambda N, out, tied, V: None)
    found = nested_critical_dimension(data, 15, step=2, form="interior")
    assert found.certified and {v.method for v in found.verdicts.values()} == {"lp"}
    assert found.d_star == _bisection(data.H.numpy().astype(np.float64), data.P.numpy())


def test_auto_picks_the_form_with_fewer_variables():
    assert not nested._w_is_smaller(random_ntp(40, 40, 8, 7, seed=0), 36)  # 7 * 36 against 8 * 4
    assert nested._w_is_smaller(random_ntp(40, 40, 5, 1, seed=0), 13)  # 4 * 13 against 5 * 27


def test_auto_takes_the_interior_point_search_from_400_variables():
    assert nested._auto_form(random_ntp(400, 400, 5, 1, seed=0), 132) == "interior"  # W form, 4 x 132 = 528
    assert nested._auto_form(random_ntp(400, 400, 3, 1, seed=0), 165) == "w"  # 2 x 165 = 330
    assert nested._auto_form(random_ntp(400, 400, 20, 10, seed=0), 283) == "interior"  # cokernel, 20 x 117
    assert nested._auto_form(random_ntp(400, 400, 5, 4, seed=0), 344) == "cokernel"  # 5 x 56 = 280


def test_an_unknown_form_is_refused():
    with pytest.raises(SolverError, match="unknown nested form 'simplex'"):
        nested_critical_dimension(random_ntp(20, 20, 3, 1, seed=0), 10, form="simplex")


def test_not_separable_even_at_full_dimension():
    # two contexts with the same embedding and different labels: no W separates at any d
    H = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.5, -1.0]], dtype=torch.float64)
    data = NTPData.from_arrays(H, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    for form in ("w", "cokernel", "interior"):
        found = nested_critical_dimension(data, 1, step=1, form=form)
        assert found.d_star == 3 and found.separating is None and found.not_separating.certified
