"""The one-LP (capped margin) separability verdict against the two-LP path and an independent Clarabel program."""

import cvxpy as cp
import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import SolverError
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.separability.verdict import CERT_TOL, ntp_separability


def _check_certificate(result, data):
    """Recompute the certificate with the matrix-free operators (not the sparse matrices the LP saw)."""
    cons = constraints(data)
    if result.separable:
        W = result.W
        assert float(cons.ineq.apply(W).min()) >= 1 - CERT_TOL
        if len(cons.eq):
            assert float(cons.eq.apply(W).abs().max()) <= CERT_TOL
    else:
        y, mu = result.farkas_y, result.farkas_mu
        assert float(y.min()) >= 0 and abs(float(y.sum()) - 1) < 1e-12
        r = cons.ineq.adjoint(y) + (cons.eq.adjoint(mu) if len(cons.eq) else 0)
        assert float(torch.linalg.vector_norm(r)) <= CERT_TOL


def _clarabel_margin(data) -> float:
    """Independent program: the largest s with A_in W >= s, A_eq W = 0, ||W||_F <= 1 (SOCP, cvxpy + Clarabel);
    separable iff s > 0."""
    cons = constraints(data)
    A_in = cons.ineq.to_sparse()
    W, s = cp.Variable(A_in.shape[1]), cp.Variable()
    rows = [A_in @ W >= s, cp.norm(W) <= 1]
    if len(cons.eq):
        rows.append(cons.eq.to_sparse() @ W == 0)
    cp.Problem(cp.Maximize(s), rows).solve(solver=cp.CLARABEL)
    return float(s.value)


@pytest.mark.parametrize(("V", "k", "m"), [(2, 1, 30), (5, 1, 30), (5, 2, 24), (6, 3, 20)])
def test_margin_lp_agrees_with_feasibility_lp_and_clarabel(V, k, m):
    full = random_ntp(m, m, V, k, seed=V + k)
    seen = set()
    for d in range(2, m, 2):
        data = NTPData.from_arrays(full.H[:, :d], full.P)
        new = ntp_separability(data, method="lp")
        old = ntp_separability(NTPData.from_arrays(full.H[:, :d], full.P), method="lp", lp_form="feasibility")
        assert new.certified and new.method == "lp"
        _check_certificate(new, data)
        assert new.separable == old.separable
        margin = _clarabel_margin(data)  # 0 (to Clarabel's accuracy) iff not separable
        assert margin > 1e-6 if new.separable else abs(margin) < 1e-6
        seen.add(new.separable)
    assert seen == {True, False}  # the scan crosses the threshold


def test_margin_lp_at_highs_trouble_point():
    """The point where the feasibility LP stops with HiGHS status 4 (m = 100, V = 10, |S_j| = 6, d = 50)."""
    full = random_ntp(100, 100, 10, 6, seed=1)
    data = NTPData.from_arrays(full.H[:, :50], full.P)
    result = ntp_separability(data, method="lp")
    assert not result.separable and result.certified
    _check_certificate(result, data)


def test_unknown_lp_form_raises():
    data = NTPData.from_arrays(torch.eye(2, dtype=torch.float64), np.array([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(SolverError):
        ntp_separability(data, method="lp", lp_form="simplex")


@pytest.mark.parametrize("ipm_from", [0, 10**9])
def test_interior_point_and_simplex_give_the_same_certified_verdicts(monkeypatch, ipm_from):
    """Every LP solved by HiGHS's IPM (ipm_from = 0) or by dual simplex (10**9): same verdicts as the two-LP path."""
    from ntpbias.geometry.separability import verdict as separability
    monkeypatch.setattr(separability, "IPM_MIN_COLUMNS", ipm_from)
    monkeypatch.setattr(separability, "IPM_MIN_ROWS", ipm_from)
    full = random_ntp(24, 24, 6, 2, seed=7)
    verdicts = []
    for d in range(3, 24, 3):
        data = NTPData.from_arrays(full.H[:, :d], full.P)
        new = ntp_separability(data, method="lp")
        _check_certificate(new, data)
        assert new.certified
        assert new.separable == ntp_separability(data, method="lp", lp_form="feasibility").separable
        verdicts.append(new.separable)
    assert verdicts == sorted(verdicts) and True in verdicts and False in verdicts


def test_large_lp_uses_interior_point_and_agrees():
    """V = 20, |S_j| = 10, m = 70: m (V - 1) rows and V d columns reach the IPM's thresholds; verdicts agree."""
    from ntpbias.geometry.separability.verdict import IPM_MIN_COLUMNS, IPM_MIN_ROWS

    full = random_ntp(70, 70, 20, 10, seed=2)
    seen = set()
    for d in (40, 48, 56):
        assert 20 * d >= IPM_MIN_COLUMNS and 70 * 19 >= IPM_MIN_ROWS
        data = NTPData.from_arrays(full.H[:, :d], full.P)
        new = ntp_separability(data, method="lp")
        _check_certificate(new, data)
        assert new.certified and new.separable == ntp_separability(data, method="lp", lp_form="feasibility").separable
        seen.add(new.separable)
    assert seen == {True, False}
