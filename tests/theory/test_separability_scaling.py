"""The large-m separability study: the cokernel LP against the margin LP, the search from a guess, the finite-size
fit on data with a known limit, the scale grid, the study's tables, checks, figures and resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import ntpbias.report  # noqa: F401  (registers the plots)
from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.errors import ConfigError
from ntpbias.experiments import separability as sep
from ntpbias.experiments.separability import group, scaling
from ntpbias.experiments.separability.checks import study_checks, study_tables
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.margins.program import MarginProgram
from ntpbias.geometry.separability.cokernel import cokernel_lp, cokernel_nnz
from ntpbias.geometry.separability.verdict import ntp_separability, smallest_true_from
from ntpbias.report.figures import save_to
from ntpbias.report.plots import PLOTS
from ntpbias.stats import finite_size_fit


# ------------------------------------------------------------------------------------------------ cokernel LP
@pytest.mark.parametrize(("V", "k", "m"), [(2, 1, 16), (3, 2, 14), (5, 4, 14), (6, 3, 12), (10, 9, 10)])
def test_cokernel_lp_agrees_with_the_margin_lp_and_certifies_itself(V, k, m):
    full = random_ntp(m, m + 3, V, k, seed=V + k)
    for d in range(1, m + 4):
        data = NTPData.from_arrays(full.H[:, :d], full.P)
        cons = constraints(data)
        margin = ntp_separability(data, method="lp", lp_form="margin")
        cok = ntp_separability(data, method="lp", lp_form="cokernel")
        assert cok.separable == margin.separable and cok.certified and margin.certified
        raw = cokernel_lp(data, cons)  # its own certificate, before any fallback
        assert raw.separable == margin.separable
        if raw.separable:
            gaps = cons.ineq.apply(torch.as_tensor(raw.W))
            assert float(gaps.min()) > 0.5  # out-of-support logits at least about σ = 1 below the support
        else:
            assert np.all(raw.y >= 0) and math.isclose(raw.y.sum(), 1.0)
            resid = cons.ineq.adjoint(torch.as_tensor(raw.y)) + (cons.eq.adjoint(torch.as_tensor(raw.mu))
                                                                   if len(cons.eq) else 0)
            assert float(torch.linalg.vector_norm(resid)) < 1e-9


def test_cokernel_lp_on_repeated_contexts():
    """H without full rank: a context repeated with another label is never separable; with its own label it is."""
    H = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    H = torch.cat([H, H[:2]])
    P = torch.zeros(8, 3, dtype=torch.float64)
    P[torch.arange(8), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])] = 1.0  # repeats keep their labels
    assert ntp_separability(NTPData.from_arrays(H, P), method="lp", lp_form="cokernel").separable
    P[6] = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)  # context 0 again, another label
    result = ntp_separability(NTPData.from_arrays(H, P), method="lp", lp_form="cokernel")
    assert not result.separable and result.certified


def test_auto_form_takes_the_smaller_lp():
    data = random_ntp(40, 38, 10, 9, seed=0)  # large supports, d near m: the cokernel LP is tiny
    cons = constraints(data)
    assert cokernel_nnz(data, cons) < MarginProgram(cons.ineq, cons.eq).nnz / 50
    auto = ntp_separability(data, method="lp")
    assert auto.certified and auto.separable == ntp_separability(data, method="lp", lp_form="margin").separable


def test_a_stalled_lp_attempt_falls_back_to_the_other_algorithm(monkeypatch):
    from ntpbias.geometry.solvers import lp
    calls = []
    real = lp.linprog

    def fake(c, *, method, options, **problem):
        calls.append((method, options.get("time_limit")))
        if len(calls) == 1:  # the first attempt "stalls"
            return type("Stalled", (), {"status": lp.LIMIT_STATUS})()
        return real(c, method=method, options=options, **problem)

    monkeypatch.setattr(lp, "linprog", fake)
    data = random_ntp(12, 8, 4, 2, seed=0)
    result = ntp_separability(data, method="lp", lp_form="margin")
    assert result.certified and result.separable == ntp_separability(data, method="lp", lp_form="cokernel").separable
    assert calls[0][0] != calls[1][0] and calls[0][1] == calls[1][1] == lp.LP_ATTEMPT_SECONDS


# ------------------------------------------------------------------------------------------------ search
def test_search_from_a_guess_finds_every_threshold_with_few_evaluations():
    for answer in range(1, 42):
        for guess in (1, 7, 20, 40):
            for step in (1, 3, 8):
                calls: list[int] = []
                found = smallest_true_from(lambda d, a=answer, c=calls: c.append(d) or d >= a, guess, 40, step=step)
                assert found == answer and len(set(calls)) == len(calls) and all(1 <= d <= 40 for d in calls)
                assert len(calls) <= 2 * math.log2(40) + 3


def test_trials_give_the_same_critical_dimensions_from_any_guess():
    task = sep.Trial(5, 2, 16, seed=3, trial=1)
    plain = sep.critical_dimensions(task)
    for g, step in ((1, 1), (9, 2), (16, 5)):
        guided = sep.critical_dimensions(sep.Trial(5, 2, 16, seed=3, trial=1, guess_sep=g, guess_comp=g, step=step))
        assert (guided.d_sep, guided.d_comp) == (plain.d_sep, plain.d_comp)


# ------------------------------------------------------------------------------------------------ finite-size fit
def test_finite_size_fit_recovers_a_known_limit_with_honest_errors():
    m = np.array([50, 100, 200, 400])
    se = 0.4 / np.sqrt(m)
    rng = np.random.default_rng(0)
    z = []
    for _ in range(400):
        t = 0.3 + 2.0 / m + se * rng.standard_normal(len(m))
        fit = finite_size_fit(m, t, se)
        z.append((fit.t_inf - 0.3) / fit.se)
    covered = np.mean(np.abs(z) <= 1.96)
    assert 0.93 <= covered <= 1.0  # the Birge inflation only widens
    exact = finite_size_fit(m, 0.3 + 2.0 / m, se)
    assert math.isclose(exact.t_inf, 0.3, abs_tol=1e-12) and math.isclose(exact.slope, 2.0, abs_tol=1e-9)


def test_finite_size_fit_tells_the_forms_apart():
    m = np.array([50, 100, 200, 400, 800])
    se = np.full(len(m), 1e-3)
    sqrt_data = 0.4 + 1.0 / np.sqrt(m)
    assert finite_size_fit(m, sqrt_data, se, "1/sqrt(m)").chi2 < 1e-12
    assert finite_size_fit(m, sqrt_data, se, "1/m").p_value < 1e-6
    with pytest.raises(ValueError):
        finite_size_fit([10, 10], [0.5, 0.5], [0.1, 0.1])


def test_cover_medians_extrapolate_to_one_half():
    """The exact finite-m medians of Cover's law, (1 + median Bin(m-1, 1/2))/m, lie on 1/2 + a/m."""
    m = np.array([50, 100, 200, 400, 800])
    t = (1 + stats.binom.median(m - 1, 0.5)) / m
    fit = finite_size_fit(m, t, 0.5 / m)
    assert abs(fit.t_inf - 0.5) < 0.5 / 800 and fit.p_value > 0.05


# ------------------------------------------------------------------------------------------------ grid
def test_paper_grid_covers_the_study():
    points = group.grid_points("paper")
    assert [p[2] for p in points] == sorted(p[2] for p in points)  # smaller sizes first
    pairs = {(V, k) for V, k, _, _ in points}
    for V in (2, 3, 5, 10, 20):
        assert {k for k in (1, 2, V // 2, V - 1) if 1 <= k < V} <= {k for VV, k in pairs if VV == V}
    for V, k in pairs:
        sizes = {m for VV, kk, m, _ in points if (VV, kk) == (V, k)}
        assert {50, 100, 200, 400} <= sizes
    assert all(n >= 1 for *_, n in points)
    assert group.group_configs("paper")[0].m == 50


@pytest.mark.parametrize("bad", [
    {"configs": ((3, 3),)},
    {"configs": ((2, 1), (2, 1))},
    {"m": (1, 10)},
    {"trials": {10: 5}},
    {"extra": {(4, 1): {50: 3}}},
    {"limits": {(2, 1, 99): 3}},
    {"cover_trials": 0},
])
def test_malformed_grids_are_refused(bad):
    grid = {"configs": ((2, 1), (5, 2)), "m": (10, 20), "trials": {10: 4, 20: 2}, "cover_trials": 8, **bad}
    with pytest.raises(ConfigError):
        group.check_grid(grid)


# ------------------------------------------------------------------------------------------------ study
def _cover_rows(sizes=(50, 100, 200, 400), n=400, seed=0):
    """Rows of trials.csv for V = 2, |S_j| = 1 drawn from Cover's exact law d* - 1 ~ Bin(m-1, 1/2)."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in sizes:
        for t, d in enumerate(1 + rng.binomial(m - 1, 0.5, n)):
            rows.append({"V": 2, "k": 1, "m": m, "trial": t, "d_sep": int(d), "d_comp": 0, "d_comp_bound": 0})
    return rows


def _support_rows(V=5, k=2, sizes=(50, 100, 200, 400), n=60, seed=1):
    """Synthetic rows near the prediction with a 1/m correction (shape tests, not physics)."""
    rng = np.random.default_rng(seed)
    t_sep, t_comp = scaling.predicted(V, k), scaling.predicted(V, k, "d_comp")
    rows = []
    for m in sizes:
        for t in range(n):
            d_comp = int(math.ceil(t_comp * m) + rng.integers(0, 2))
            rows.append({"V": V, "k": k, "m": m, "trial": t,
                         "d_sep": int(min(m, round(t_sep * m + 2 + rng.normal(0, 0.3 * math.sqrt(m))))),
                         "d_comp": d_comp, "d_comp_bound": d_comp - int(t % 4 == 0)})
    return rows


def test_study_tables_checks_and_guesses_on_cover_rows():
    rows = _cover_rows() + _support_rows()
    sep_table, comp_table, excess_table = study_tables(rows, limit_sizes=(2000,))
    assert [r[:2] for r in sep_table.rows] == [(2, 1), (5, 2)] and [r[:2] for r in comp_table.rows] == [(5, 2)]
    assert comp_table.rows[0][-2] == "180/240"  # d*_comp = the bound on 3 trials in 4 (_support_rows)
    assert 0 <= comp_table.rows[0][-1] < 2  # the support-count bound at m = 2000: within dimensions of (k-1)m/(V-1)
    assert [r[:3] for r in excess_table.rows] == [(2, 1, "separable"), (5, 2, "separable"), (5, 2, "compatible"),
                                                  (5, 2, "support-count bound")]
    assert len(excess_table.rows[0]) == 3 + 4  # one column per size
    (check,) = study_checks(rows)
    assert check.kind == "theorem" and check.passed and abs(check.measured - 0.5) < 0.02
    c = scaling.compare(rows, 2, 1)
    assert c.agrees and c.fit.dof == 2 and len(c.points) == 4
    guess = scaling.next_guess(rows, 2, 1, 800)
    assert abs(guess.sep - 400) <= 6 and 8 <= guess.step <= 20  # sd of d* at 800 is sqrt(799)/2 ≈ 14
    assert scaling.next_guess([], 5, 2, 100) == sep.runs.predicted_guess(5, 2, 100)


def test_a_size_at_the_ceiling_is_left_out_of_the_fit():
    rows = [{"V": 3, "k": 2, "m": 10, "trial": t, "d_sep": 10, "d_comp": 6, "d_comp_bound": 6} for t in range(9)]
    rows += _support_rows(3, 2, (40, 80, 160), n=30)
    c = scaling.compare(rows, 3, 2)
    assert c.points[0].at_ceiling and list(c.fit.m) == [40, 80, 160]


def test_study_figures_draw(tmp_path):
    rows = _cover_rows(n=60) + _support_rows() + _support_rows(5, 4, seed=3)
    for name in ("separability.phase", "separability.extrapolation"):
        path = tmp_path / f"{name}.png"
        save_to(PLOTS[name](rows=rows), [path])
        assert path.stat().st_size > 5000


def test_resume_keeps_whole_configurations(tmp_path):
    cfgs = [sep.SeparabilityConfig(V=2, support_size=1, m=8, trials=3, scan=0),
            sep.SeparabilityConfig(V=3, support_size=2, m=8, trials=2, scan=0)]
    done = sep.run_trials(cfgs[0])
    path = tmp_path / "trials.csv"
    path.write_text(sep.trials_csv(done + sep.run_trials(cfgs[1])[:1]), encoding="utf-8")  # second one cut short
    saved = group._saved_results(path, cfgs)
    assert list(saved) == [(2, 1, 8)]
    key = [(r.trial, r.d_sep, r.d_comp, r.solves, r.certified, r.seconds) for r in done]
    assert [(r.trial, r.d_sep, r.d_comp, r.solves, r.certified, r.seconds) for r in saved[(2, 1, 8)]] == key


def test_resume_refuses_a_table_from_an_older_version(tmp_path):
    cfg = sep.SeparabilityConfig(V=2, support_size=1, m=8, trials=2, scan=0)
    text = sep.trials_csv(sep.run_trials(cfg)).splitlines()
    drop = text[0].split(",").index("d_comp_bound")
    path = tmp_path / "trials.csv"
    path.write_text("\n".join(",".join(c for i, c in enumerate(line.split(",")) if i != drop) for line in text),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match="d_comp_bound"):
        group._saved_results(path, [cfg])
