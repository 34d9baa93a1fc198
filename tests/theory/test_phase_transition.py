"""The NTP-separability phase transition: Cover's function counting theorem exactly, Cover's threshold 1/2,
bisection against a full scan, the counting bound for compatibility, the statistics helpers, the group."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from ntpbias.api import save_run
from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.experiments import separability as sep
from ntpbias.experiments.base import RunContext
from ntpbias.experiments.separability import read_trials
from ntpbias.geometry.linear.subspace import subspace
from ntpbias.geometry.separability.verdict import ntp_separability
from ntpbias.stats import cover_cdf, cover_median_ratios, dkw_bound, fraction_curve, median_ci, wilson


def test_cover_function_counting_theorem_exactly():
    """All 2^m labelings of m = 7 Gaussian points in R^3: exactly C(7, 3) = 2 Σ_{i<3} binom(6, i) = 44 are
    homogeneously separable, as decided by the NTP-separability LP on one-hot binary data (V = 2, |S_j| = 1)."""
    m, d = 7, 3
    H = torch.randn(m, d, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    count = 0
    for labels in itertools.product((0, 1), repeat=m):
        P = torch.zeros(m, 2, dtype=torch.float64)
        P[torch.arange(m), torch.tensor(labels)] = 1.0
        result = ntp_separability(NTPData.from_arrays(H, P))
        assert result.certified
        count += result.separable
    assert count == 2 * sum(math.comb(m - 1, i) for i in range(d)) == 44
    assert math.isclose(float(cover_cdf(m, np.array(d))), 44 / 2**m)


def test_one_hot_binary_threshold_near_one_half():
    """d* - 1 ~ Bin(m-1, 1/2) (Cover), so the median critical ratio is near 1/2 on a small grid."""
    m = 24
    results = sep.run_trials(sep.SeparabilityConfig(V=2, support_size=1, m=m, trials=150, scan=0, seed=11))
    d_star = np.array([r.d_sep for r in results])
    d, frac = fraction_curve(d_star, m)
    assert np.max(np.abs(frac - cover_cdf(m, d))) <= dkw_bound(len(d_star), 1e-3)
    med, lo, hi = median_ci(d_star / m, level=0.99)
    assert lo <= (1 + stats.binom.median(m - 1, 0.5)) / m <= hi
    assert abs(med - 0.5) <= 0.1
    assert all(r.certified == r.solves for r in results)
    # the checks of the experiment agree
    checks = {c.name.split(": ")[1]: c for c in sep.config_checks("cover", results)}
    assert checks["Cover's law"].passed and checks["Cover threshold"].passed and checks["certificates"].passed


@pytest.mark.parametrize(("V", "k"), [(5, 2), (4, 1)])
def test_bisection_equals_a_full_scan_over_d(V, k):
    """Verdicts at every d = 1..m are monotone (padding argument) and switch at the bisection's d*."""
    m = 10
    for t in range(3):
        task = sep.Trial(V, k, m, seed=5, trial=t)
        res = sep.critical_dimensions(task)
        full = sep.trial_dataset(task)
        verdict_sep, verdict_comp = [], []
        for d in range(1, m + 1):
            data = NTPData.from_arrays(full.H[:, :d], full.P, full.pi)
            verdict_sep.append(ntp_separability(data).separable)
            verdict_comp.append(subspace(data).compatible)
        assert verdict_sep == [d >= res.d_sep for d in range(1, m + 1)]
        assert verdict_comp == [d >= res.d_comp for d in range(1, m + 1)]
        assert verdict_sep[-1] and verdict_comp[-1]  # Lemma 1: d = m suffices
        assert res.d_comp >= math.ceil(m * (k - 1) / (V - 1))  # counting bound dim F <= (V-1) d


def test_trial_datasets_are_nested_and_seeded():
    task = sep.Trial(6, 2, 9, seed=1, trial=4)
    a, b = sep.trial_dataset(task), sep.trial_dataset(task, d=5)
    assert torch.equal(a.H[:, :5], b.H) and torch.equal(a.P, b.P)
    other = sep.trial_dataset(sep.Trial(6, 2, 9, seed=1, trial=5))
    assert not torch.equal(a.H, other.H)
    assert (a.support.sum(1) == 2).all()


def test_statistics_helpers_against_independent_computations():
    # fraction curve against a naive loop
    d_star = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    _, frac = fraction_curve(d_star, 9)
    assert frac.tolist() == [sum(x <= d for x in d_star) / 8 for d in range(10)]
    # Wilson interval against scipy's binomtest
    lo, hi = wilson(np.array([0, 7, 20]), 20)
    for k, a, b in zip((0, 7, 20), lo, hi, strict=True):
        ci = stats.binomtest(k, 20).proportion_ci(0.95, method="wilson")
        assert math.isclose(a, ci.low, abs_tol=1e-12) and math.isclose(b, ci.high, abs_tol=1e-12)
    # the median interval covers the median in at least 95% of samples (uniform data; estimated by simulation)
    rng = np.random.default_rng(0)
    covered = np.mean([lo <= 0.5 <= hi for lo, hi in
                       (median_ci(rng.random(41))[1:] for _ in range(400))])
    assert covered >= 0.93
    # Cover's law: C(m, d) / 2^m by the counting formula
    for m, d in ((5, 1), (5, 2), (8, 4), (8, 8), (8, 9)):
        assert math.isclose(float(cover_cdf(m, np.array(d))),
                            min(1.0, 2 * sum(math.comb(m - 1, i) for i in range(d)) / 2**m))


def test_highs_numerical_trouble_is_decided_by_the_gordan_certificate():
    """m = 100, V = 10, |S_j| = 6, d = 50: HiGHS stops with status 4; the Gordan LP certifies infeasibility."""
    full = random_ntp(100, 100, 10, 6, seed=1)
    result = ntp_separability(NTPData.from_arrays(full.H[:, :50], full.P))
    assert not result.separable and result.certified and result.residual < 1e-10


def test_reproduce_group_at_smoke_scale(tmp_path):
    result = sep.run_group(RunContext(out=tmp_path, scale="smoke"))
    save_run(tmp_path, result)
    section = result.section
    rows = read_trials(tmp_path / "data" / "trials.csv")
    assert len(rows) == 48 + 24 + 24 and {(r["V"], r["k"], r["m"]) for r in rows} == {(2, 1, 12), (5, 1, 12),
                                                                                        (5, 2, 12)}
    for fig in ("separability-transition", "separability-thresholds", "separability-cover"):
        assert (tmp_path / "figures" / f"{fig}.png").stat().st_size > 1000
    names = [c.name for c in section.checks]
    assert "V=2, |S|=1, m=12: Cover's law" in names and "V=5, |S|=2, m=12: counting bound" in names
    assert all(c.passed for c in section.checks if "certificates" in c.name or "monotone" in c.name)
    assert section.facts["certified verdicts"] == section.facts["separability verdicts (LPs)"]
    assert (tmp_path / "report.html").exists() and (tmp_path / "summary.json").exists()


def test_train_command_runs_one_configuration(tmp_path, cli):
    import json

    code, out, err = cli("train", "--preset", "separability-ntp", "--set", "m=10", "--set", "trials=8",
                         "--out", tmp_path, "--json", "--quiet")
    assert code == 0, err
    summary = json.loads(out)
    rows = read_trials(tmp_path / "trials.csv")
    assert len(rows) == 8 and summary["final"]["lp_solves"] == sum(r["solves"] for r in rows)
    assert summary["final"]["threshold"] == float(np.median([r["d_sep"] / 10 for r in rows]))
    assert (tmp_path / "figures" / "separability-transition.png").exists()


@pytest.mark.parametrize("m", range(2, 40))
def test_cover_medians_are_every_value_with_half_the_mass_on_each_side(m):
    """x is a median of d* iff P(d* <= x) >= 1/2 and P(d* >= x) >= 1/2 (exact fractions from the binomial pmf)."""
    pmf = [math.comb(m - 1, i) / 2 ** (m - 1) for i in range(m)]  # P(d* = i + 1)
    medians = [x for x in range(1, m + 1) if sum(pmf[:x]) >= 0.5 - 1e-15 and sum(pmf[x - 1:]) >= 0.5 - 1e-15]
    assert cover_median_ratios(m) == (medians[0] / m, medians[-1] / m)
    assert len(medians) == (2 if m % 2 == 0 else 1)


def test_cover_threshold_check_accepts_either_median_of_an_even_m():
    """At m = 100 both 0.50 and 0.51 are medians of d*/m: a sample median at either end passes, one beyond fails."""
    def check(values):
        rows = [sep.TrialResult(2, 1, 100, t, int(v), 0, 0, 1, 1, math.nan, math.nan, False, True, 0.0)
                for t, v in enumerate(values)]
        return {c.name.split(": ", 1)[1]: c for c in sep.config_checks("x", rows)}["Cover threshold"]
    assert check([50] * 600 + [60] * 400).passed and check([51] * 600 + [40] * 400).passed
    assert not check([53] * 600 + [60] * 400).passed


def test_a_rank_test_that_always_says_compatible_fails_both_bound_checks(monkeypatch):
    """The mutation of issue 37: with the rank test of eq. (4) broken to call every d compatible, the counting-bound and
    support-count-bound checks fail (the search alone starts at the bound, so d*_comp >= bound would still hold); with
    the real rank test both pass, and both record that their control (that broken test) fails them."""
    from ntpbias.experiments.separability import runs

    cfg = sep.SeparabilityConfig(V=5, support_size=3, m=16, trials=5, scan=2, seed=3)

    def bound_checks(results):
        return {c.name.split(": ")[1]: c for c in sep.config_checks("c", results)
                if c.name.endswith(("counting bound", "support-count bound"))}

    good = bound_checks(sep.run_trials(cfg))
    assert set(good) == {"counting bound", "support-count bound"}
    for c in good.values():
        assert c.verdict == "pass" and c.kind == "theorem" and c.control_passed is False
    monkeypatch.setattr(runs, "dim_F", lambda data: int(data.support.sum()) - data.m)  # "compatible" at every d
    broken = sep.run_trials(cfg)
    assert all(r.d_comp == r.d_comp_bound for r in broken)  # the search alone cannot tell
    for c in bound_checks(broken).values():
        assert c.verdict == "fail", c.name


def test_every_graded_check_of_a_configuration_fails_on_its_control():
    """Cover's law, Cover's threshold and the exact finite-m law fail when every d* moves by one standard deviation of
    the law (the control each records), and pass on the trials themselves; the consistency scan is a sanity check."""
    from ntpbias.results import GRADED_KINDS

    for V, k, m, trials in ((2, 1, 30, 120), (3, 2, 20, 60)):
        cfg = sep.SeparabilityConfig(V=V, support_size=k, m=m, trials=trials, scan=2, seed=7)
        checks = sep.config_checks("c", sep.run_trials(cfg))
        graded = [c for c in checks if c.kind in GRADED_KINDS]
        assert graded and all(c.control and c.control_passed is False for c in graded), [c.name for c in graded]
        assert all(c.verdict == "pass" for c in graded), [(c.name, c.measured) for c in graded]
        assert next(c for c in checks if "monotone verdicts" in c.name).kind == "sanity"
    shifted = [c for c in checks if "law" in c.name]
    assert shifted and all(c.control_measured > float(c.threshold.split()[-1]) for c in shifted)
