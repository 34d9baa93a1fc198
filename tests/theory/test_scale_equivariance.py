"""Scale equivariance of the NTP geometry (docs/errors-and-limits.md#scale-the-same-answer-for-h-and-ch): with the
embeddings multiplied by c, separability, compatibility and dim F are unchanged, W* and W^mm scale as 1/c, the maximum
margin 1/||W^mm|| as c, every certificate holds, and a wrong answer is never certified, for c anywhere in 1e-12..1e12
(and beyond, up to what float64 can represent)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import DataError
from ntpbias.geometry.analysis import analyze
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.margins.program import KKT_TOL, MarginProgram, ntp_svm
from ntpbias.geometry.scaling import data_scale, stable_norm

SMALL = {"solver": "clarabel", "separability_method": "lp", "subspace_method": "exact"}
LARGE = {"solver": "dual", "separability_method": "dual", "subspace_method": "iterative"}
#: (m, d, V, |S_j|, seed): separable (d > m) and not separable (m >> d) data
SEPARABLE = (10, 15, 5, 3, 1)
NOT_SEPARABLE = (30, 4, 5, 3, 0)
_REFERENCE: dict = {}


def scaled(data: NTPData, c: float) -> NTPData:
    return NTPData.from_arrays(data.H * c, data.P, data.pi)


def reference(shape, path):
    key = (shape, tuple(path.values()))
    if key not in _REFERENCE:
        data = random_ntp(*shape[:4], seed=shape[4])
        _REFERENCE[key] = (data, analyze(data, **path))
    return _REFERENCE[key]


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@settings(max_examples=12, deadline=None)
@given(exponent=st.floats(-12, 12), shape=st.sampled_from([SEPARABLE, NOT_SEPARABLE]),
       path=st.sampled_from([SMALL, LARGE]))
def test_analyze_is_scale_equivariant(exponent, shape, path):
    data, base = reference(shape, path)
    c = 10.0**exponent
    got = analyze(scaled(data, c), **path)
    a, b = got.to_dict(), base.to_dict()
    for key in ("separable", "compatible", "dim_F", "n_equalities", "n_inequalities"):
        assert a[key] == b[key], key
    # the certificate's residual is relative to the data's scale: the same verdict on its validity at every c (the
    # dual method's Gordan multipliers of non-separable data stop at a finite iterate: small, not always certified)
    sa, sb = a["separability_certificate"], b["separability_certificate"]
    assert sa["certified"] == sb["certified"] and (sa["certified"] or path is LARGE)
    assert sa["residual"] <= max(10 * sb["residual"], 1e-9)
    assert rel(stable_norm(got.W_star) * c, stable_norm(base.W_star)) < 1e-8
    assert float(torch.linalg.vector_norm(got.W_star * c - base.W_star)) < 1e-7 * stable_norm(base.W_star)
    assert math.isclose(a["compatibility_residual"], b["compatibility_residual"], rel_tol=1e-6, abs_tol=1e-10)
    if b["separable"]:
        assert a["certified"] and max(a["kkt"].values()) <= KKT_TOL
        assert rel(a["margin"], c * b["margin"]) < 1e-7
        assert rel(a["norm_W_mm"] * c, b["norm_W_mm"]) < 1e-7
        assert float(torch.linalg.vector_norm(got.svm.W * c - base.svm.W)) < 1e-6 * base.svm.norm
        assert math.isclose(a["min_logit_gap_W_mm"], 1.0, rel_tol=1e-6)  # the logit gaps are unitless
    else:
        assert a["margin"] is None and a["kkt"] is None


@settings(max_examples=12, deadline=None)
@given(exponent=st.floats(-12, 12), error=st.sampled_from([1e-3, -1e-3, 1e-2]))
def test_a_wrong_answer_is_never_certified(exponent, error):
    """A perturbed W^mm (or multipliers) misses the relative KKT tolerance at every scale (the old absolute residuals
    certified a margin 33x too small at c = 1e8)."""
    c = 10.0**exponent
    data = scaled(random_ntp(*SEPARABLE[:4], seed=SEPARABLE[4]), c)
    res = ntp_svm(data)
    assert res.certified
    cons = constraints(data)
    program = MarginProgram(cons.ineq, cons.eq)
    assert program.certificate(res.W, res.dual_ineq, res.dual_eq).worst <= KKT_TOL  # in the user's units
    assert program.certificate(res.W * (1 + error), res.dual_ineq, res.dual_eq).worst > KKT_TOL
    assert program.certificate(res.W, res.dual_ineq * (1 + error), res.dual_eq * (1 + error)).worst > KKT_TOL


def test_multipliers_scale_as_one_over_c_squared():
    data = random_ntp(*SEPARABLE[:4], seed=SEPARABLE[4])
    base, big = ntp_svm(data), ntp_svm(scaled(data, 1e6))
    assert torch.allclose(big.dual_ineq * 1e12, base.dual_ineq, rtol=1e-6, atol=1e-9 * float(base.dual_ineq.max()))


def test_powers_of_two_give_the_same_answer_to_the_last_bit():
    data = random_ntp(*SEPARABLE[:4], seed=SEPARABLE[4])
    a, b = analyze(scaled(data, 2.0**40)), analyze(scaled(data, 2.0**-30))
    assert torch.equal(a.svm.W * 2.0**40, b.svm.W * 2.0**-30)
    assert torch.equal(a.W_star * 2.0**40, b.W_star * 2.0**-30)


@pytest.mark.parametrize("c", [1e-200, 1e200])
def test_extreme_scales_are_answered_or_refused_clearly(c):
    data = scaled(random_ntp(*SEPARABLE[:4], seed=SEPARABLE[4]), c)
    if c > 1:  # W^mm ~ 1e-200 and the margin ~ 1e200 are representable
        rec = analyze(data).to_dict()
        assert rec["separable"] and rec["certified"] and rec["data_scale"] > 1e199
        assert 1e199 < rec["margin"] < 1e201
    else:  # the multipliers (∝ 1/c²) would be 1e400: refused, saying how to rescale
        with pytest.raises(DataError, match="too extreme: .* would overflow float64.*multiply H by a constant"):
            analyze(data)


def test_data_of_usual_scale_are_used_as_given():
    assert data_scale(torch.eye(3, dtype=torch.float64)) == 1.0
    assert data_scale(torch.full((2, 2), 10.0)) == 1.0
    assert data_scale(torch.full((2, 2), 1e6)) == 2.0**20
    assert data_scale(torch.zeros(2, 2)) == 1.0


@pytest.mark.parametrize("norm", ["linf", "nuclear"])
@pytest.mark.parametrize("c", [1e-9, 1e9])
def test_the_max_margin_in_other_norms_is_scale_equivariant(norm, c):
    """The linf / nuclear NTP-SVM of cH is W^mm / c with multipliers / c (the optimal value Σλ = ||W^mm||), and its
    relative certificate holds at every scale."""
    data = random_ntp(*SEPARABLE[:4], seed=SEPARABLE[4])
    base, got = ntp_svm(data, norm=norm), ntp_svm(scaled(data, c), norm=norm)
    assert got.certified and base.certified
    assert rel(got.norm * c, base.norm) < 1e-7
    assert rel(float(got.dual_ineq.sum()) * c, float(base.dual_ineq.sum())) < 1e-7
