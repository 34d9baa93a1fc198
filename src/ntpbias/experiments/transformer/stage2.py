"""Paper C's stage-2 checks (Theorems 1-3, Lemmas 5-7), each computed on the trained runs and on a negative control.

Every graded check is one measurement of a stage-2 trajectory (:mod:`~ntpbias.experiments.transformer.trajectory`),
applied to every seed (worst seed graded) and to the control the check names
(:data:`~ntpbias.experiments.transformer.runs.CONTROLS`, first seed): the wrong algorithm (plain gradient descent) or
a broken stage 1 (stage 2 from -W_ov^(T)). docs/paper-c-transformer.md#theory-checks says what each one grades, and
where it is not graded:

* asymptotic statements (Theorem 1's rate, Theorem 3's growth) on the window [t_0, T] past Lemma 7's start, graded
  only when T >= 2 t_0, by the interval of the local exponents over six log-equal sub-windows;
* Theorem 2's attention bound where it says more than Lemma 5 (t >= t_c, the first step at which it exceeds 1/L_max).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...geometry.transformer import bounds as tb
from ...geometry.transformer import optimum as th
from ...results import Check, check_at_least, check_at_most, with_control
from ..claims import cite
from .runs import CONTROLS, SeedRun, seeds_note
from .trajectory import (
    GRADIENT_FLOOR,
    WINDOW,
    Trajectory,
    lemma5,
    lemma6_direction,
    lemma6_lower,
    lemma7,
    lemma7_content_norm,
    linear_rate,
    norm_upper,
    power_fit,
    thm1_lower,
    thm1_rate,
    thm2_attention,
    thm2_loss,
    thm3_bound,
    thm3_growth,
)

#: Largest loss increase per step accepted as round-off, relative to the loss (late Example-1 losses are ~1e-22,
#: where one ulp is ~1e-38).
ROUNDOFF = 1e-14
#: "L > L*" up to round-off: L - L* >= -FLOOR_ULPS ulps of L* (from t ≈ 2178 on Example 1 L and the separately
#: computed L* agree to an ulp; on the Prop. 2 counterexample L falls one ulp below L*)
FLOOR_ULPS = 4
#: Theorem 1: 1 - cos decays at least like a power 1 of log²t/t; the interval's lower end must reach this
RATE_POWER = 1.0
#: Theorem 3's linear growth: the interval of the gap's local growth exponents must stay at or above this (ours:
#: linear growth is 1, √t is 1/2, log t tends to 0)
GROWTH_EXPONENT = 0.9
#: Theorems 2 and 3's "probability 1 - O(ε₀)", "with high probability": 1 - p(expected) at most this many times
#: ε₀ = 1 - p*, the error of stage 1's output with full attention on the intended token (ours)
ERROR_RATIO = 2.0


# ---------------------------------------------------------------------------------------------- premises
def hall_holds(runs: list[SeedRun]) -> bool:
    """Hall's condition (docs/paper-c-transformer.md#errata, C-E1) on every query column of every seed."""
    for r in runs:
        st = r.task.structure
        cond = th.prop2_condition(st)
        if not all(bool(cond[q]) for q in st.queries):
            return False
    return True


def premises(runs: list[SeedRun]) -> dict[str, tuple[str, bool]]:
    """The hypotheses of the lemmas and Theorems 1-3 in words, and whether every seed meets them."""
    base = all(r.orthonormal and r.init == "zeros" and r.task.structure.assumptions_hold for r in runs)
    step_ok = all(tb.thm1_step_ok(r.eta, r.task.W_kq_star.norm) for r in runs)
    t_ok = all(bool(tb.thm2_condition(r.two_stage.stage2.step, r.eta, r.task.samples.N, r.task.samples.L_max,
                                      r.task.W_kq_star.norm)) for r in runs)
    T_ok = all(bool(tb.corollary1_condition(r.two_stage.stage1.step, r.eta0, r.task.W_ov_star.norm, r.task.V))
               for r in runs)
    t_min = min(tb.thm2_condition_start(r.eta, r.task.samples.N, r.task.samples.L_max, r.task.W_kq_star.norm)
                for r in runs)
    hall = hall_holds(runs)
    lemma = "Assumptions 1-3 (orthonormal embeddings) and zero initialization"
    thm1 = lemma + ", η <= ||W_kq*||/e"
    hall_text = ("; Hall's condition on every query column (Lemma 7's proof uses Prop. 2 through 'B₋^(n,*) = 0', "
                 f"false where the condition fails: erratum C-E1){'' if hall else ' (fails here)'}")
    thm2 = (thm1 + "; T >= 384 ||W_ov*||⁵ log(2|V|) log T/η₀ and t >= 1696 N L_max⁴ ||W_kq*||⁶ log²t/η (the "
            f"constants of App. C.6; the t-condition holds from t = {t_min:.3g} on)")
    return {"lemma": (lemma, base), "thm1": (thm1, base and step_ok),
            "rate": (thm1 + hall_text, base and step_ok and hall), "lemma7": (lemma + hall_text, base and hall),
            "thm2": (thm2, base and step_ok and t_ok and T_ok)}


# ---------------------------------------------------------------------------------------------- the checks
def _worst(values, *, largest: bool) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return (max if largest else min)(values) if values else math.nan


def stage2_checks(label: str, runs: list[SeedRun]) -> tuple[list[Check], list[str]]:
    """Theorems 1-3 and Lemmas 5-7 on stage 2 (worst seed), each with its negative control (first seed)."""
    if not all(r.orthonormal and r.init == "zeros" and r.task.W_kq_star is not None and r.task.W_ov_star is not None
               and r.task.structure.assumptions_hold and r.two_stage.stage2 is not None for r in runs):
        return [], [f"{label}: stage-2 theory checks skipped: they need Assumptions 1-3, zero initialization and a "
                    "solvable W_kq* (Theorems 1-3 do not apply)"]
    trajs = [Trajectory(r, r.two_stage.stage2) for r in runs]
    first = runs[0]
    if not first.controls:
        return [], [f"{label}: stage-2 theory checks skipped: the negative controls were not trained"]
    ctrl = {k: Trajectory(first, h) for k, h in first.controls.items()}
    prem = premises(runs)
    T = int(first.two_stage.stage2.step)
    t0 = max(r.t0 for r in runs)
    who = seeds_note(runs)
    every = ("every step" if all(np.array_equal(s.steps, np.arange(T + 1)) for s in trajs)
             else "every logged step (every step early on, then log-spaced)")

    def thm(key: str, claim: str, source: str) -> dict:
        premise, met = prem[key]
        return {"kind": "theorem", "premise": premise, "premise_met": met, **cite(claim), "threshold_source": source}

    def controlled(build, measure, key: str, *, largest: bool) -> Check:
        """``build(value)`` on the worst seed's ``measure``, with the same check on control ``key``."""
        main = build(_worst([measure(s) for s in trajs], largest=largest))
        return with_control(main, f"{CONTROLS[key]} (seed {first.seed})", build(measure(ctrl[key])))

    checks = [
        controlled(lambda v: check_at_least(
            f"{label}: Lemma 6 norm lower bound", "||W_kq^(t)|| >= t η/(2 L_max ||W_kq*||) for t >= 1", v, 1.0,
            "Lemma 6 of paper C", metric=f"smallest ||W_kq^(t)|| / (t η/(2 L_max ||W_kq*||)) over {every} t >= 1 "
            f"({who}; the upper bound t η holds for every normalized step: 'stage 2 norm upper bound')",
            **thm("lemma", "C:lemma6-norm", "the lemma's bound")), lemma6_lower, "gd", largest=False),
        check_at_most(f"{label}: stage 2 norm upper bound", "||W_kq^(t)|| <= t η (Lemma 6's upper bound)",
                      _worst([norm_upper(s) for s in trajs], largest=True), 1 + 1e-12, "Lemma 6 of paper C",
                      kind="by-construction", metric="largest ||W_kq^(t)||/(t η) over t >= 1",
                      construction="every normalized step has length η, so the triangle inequality gives it for any "
                                   "trajectory of normalized GD from 0"),
        controlled(lambda v: check_at_least(
            f"{label}: Theorem 1 norm lower bound", "||W_kq^(t)|| >= t η/(2||W_kq*||) as stated (Lemma 6 proves "
            "only the L_max version, erratum C-E2)", v, 1.0, "Thm 1 of paper C",
            metric=f"smallest ||W_kq^(t)|| / (t η/(2||W_kq*||)) over {every} t >= 1",
            **thm("thm1", "C:thm1-norm", "the theorem's stated bound")), thm1_lower, "gd", largest=False),
        Check(f"{label}: Theorem 1 step size", "η <= ||W_kq*||/e (the proof's 'η < O(1)')", first.eta,
              "<= ||W_kq*||/e", bool(all(tb.thm1_step_ok(r.eta, r.task.W_kq_star.norm) for r in runs)),
              "Thm 1 of paper C", kind="sanity", threshold_source="the proof's step-size condition (a premise, shown)"),
    ]
    checks.append(_thm1_rate_check(label, trajs, ctrl["gd"], thm("rate", "C:thm1-rate", "the stated rate: a power "
                                                                  f"of log²t/t at least {RATE_POWER:g}"), t0, T, who))
    bound = tb.thm1_cos_lower(max(T, 2), first.eta, first.task.samples.N, trajs[0].L_max, trajs[0].star)
    checks.append(check_at_least(
        f"{label}: Theorem 1 cosine bound (vacuous)", "cos(W_kq^(t), W_kq*) >= 1 - 54 N L_max⁴ ||W_kq*||⁴ log²t/(tη) "
        f"(the bound is {float(bound):.3g} at t = {max(T, 2)}: vacuous)",
        _worst([float((s["cos_kq"][s.steps >= 2] - tb.thm1_cos_lower(s.steps[s.steps >= 2], s.eta,
                s.run.task.samples.N, s.L_max, s.star)).min(initial=math.inf)) for s in trajs], largest=False),
        0.0, "Thm 1 of paper C", kind="vacuous", **cite("C:thm1-cos"), metric="smallest cos - bound over t >= 2",
        threshold_source="the theorem's bound (below 0 at this scale: it cannot fail)"))
    inc = _worst([max(s.history.max_loss_increase or [0.0]) / s["loss"].min() for s in trajs], largest=True)
    checks.append(check_at_most(f"{label}: stage 2 loss monotone", "L(θ^(t)) decreases at every step", inc, ROUNDOFF,
                                "flow of normalized GD with a small step", kind="sanity",
                                threshold_source="round-off allowance (ours)",
                                metric="largest increase between steps, relative to the smallest loss"))
    above = _worst([float(np.nanmin(s["loss_excess"] / s["loss_floor"])) for s in trajs], largest=False)
    ulps = FLOOR_ULPS * np.finfo(np.float64).eps
    checks.append(check_at_least(
        f"{label}: loss above its floor", "L(θ^(t)) > L* = L at full attention on optimal tokens, up to round-off",
        above, -ulps, "Thm 2 of paper C", kind="sanity", metric="smallest (L - L*)/L* over every logged step",
        threshold_source=f"L >= L* within {FLOOR_ULPS} float64 ulps of L* (round-off: once the attention on "
                         "non-optimal tokens is below one ulp, L and the separately computed L* agree to an ulp)"))
    checks.append(controlled(lambda v: check_at_least(
        f"{label}: Lemma 5 per position", "φ_l^(n,t) >= φ_l^(n,0) = 1/L^(n) for every sample n, optimal position "
        "l ∈ l(n) and step t", v, -1e-12, "Lemma 5 of paper C",
        metric=f"smallest φ_l^(n,t) - 1/L^(n) over {every}, sample and optimal position",
        **thm("lemma", "C:lemma5", "the lemma's inequality, round-off allowance")), lemma5, "negated-ov",
        largest=False))
    checks.append(controlled(lambda v: check_at_most(
        f"{label}: Lemma 6 direction", "cos(∇L, W_kq*) <= -min_n φ_+/(2||W_kq*||) at every step", v, 1e-12,
        "Lemma 6 of paper C", metric=f"largest cos(∇L, W_kq*) + min_n φ_+^(n,t)/(2||W_kq*||) over {every}",
        **thm("lemma", "C:lemma6-direction", "the proof's bound, round-off allowance")), lemma6_direction,
        "negated-ov", largest=True))
    checks.append(_thm2_attention_check(label, trajs, ctrl["negated-ov"], thm("thm2", "C:thm2-attention",
                                                                              "the theorem's bound"), T))
    checks.append(_thm2_loss_check(label, trajs, ctrl["negated-ov"], thm("thm2", "C:thm2-loss", "the theorem's bound "
                                                                         "(vacuous when it exceeds the initial loss)"),
                                   T))
    rate_fields = thm("thm2", "C:thm2-rate", "the stated rate C_1; R² > 0.95 for 'linear' (ours)")
    checks.append(with_control(_linear_rate(label, [linear_rate(s) for s in trajs], rate_fields),
                               f"{CONTROLS['gd']} (seed {first.seed})",
                               _linear_rate(label, [linear_rate(ctrl["gd"])], rate_fields)))
    checks.append(_lemma7_check(label, trajs, ctrl["negated-ov"], thm("lemma7", "C:lemma7", "the lemma's inequality"),
                                t0, T))
    growth = _thm3_growth_check(label, trajs, ctrl["gd"], thm("thm2", "C:thm3-growth", f"a power of t at least "
                                f"{GROWTH_EXPONENT:g} over the window (ours: linear is 1, √t is 1/2)"), t0, T)
    if growth is not None:
        checks.append(growth)
        checks.append(_thm3_bound_check(label, trajs, ctrl["gd"], thm("thm2", "C:thm3-growth", "the proof's bound"),
                                        T))
    return too_short(runs, checks), []


def not_graded(checks: list[Check], reason: str) -> list[Check]:
    """``checks`` with every check that is not ``sanity`` marked not graded (``reason``: why)."""
    return [c if c.kind == "sanity" or not c.graded else replace(c, graded=False, ungraded_reason=reason)
            for c in checks]


def too_short(runs: list[SeedRun], checks: list[Check]) -> list[Check]:
    """``checks`` of stage 2, not graded when stage 2 has fewer than 2 steps (every statement is then about t = 1,
    where the first normalized step fixes every quantity)."""
    T = int(runs[0].two_stage.stage2.step)
    if T >= 2:
        return checks
    return not_graded(checks, f"the run has {T} stage-2 step(s); the statements need at least 2")


def _at_least(name: str, claim: str, value: float, bound: float, source: str, **fields) -> Check:
    """:func:`check_at_least`, or "not reached" (failing) when the run has no step where it applies (NaN)."""
    if math.isnan(value):
        return Check(name, claim, "not reached", f">= {bound:g}", False, source, **fields)
    return check_at_least(name, claim, value, bound, source, **fields)


def _short_of_window(trajs: list[Trajectory], T: int, t0: int, what: str) -> str:
    """Why an asymptotic statement is not graded: the run, or the float64 range of its gradient, ends before
    WINDOW t_0."""
    short = [s for s in trajs if s.end < WINDOW * s.t0]
    if T < WINDOW * t0:
        return (f"the run stops at T = {T:,}, before {WINDOW:g} t_0 = {WINDOW * t0:,.0f}: {what} is an asymptotic "
                "statement, graded on [t_0, T] past Lemma 7's t_0 only")
    s = short[0]
    return (f"on seed {s.run.seed} the gradient reaches float64's floor (||∇L|| <= {GRADIENT_FLOOR:g}, decision C-D7) "
            f"at t = {s.end:,.0f}, before {WINDOW:g} t_0 = {WINDOW * s.t0:,.0f} ({len(short)} of {len(trajs)} seeds)")


def _thm1_rate_check(label, trajs, gd, fields, t0, T, who) -> Check:
    name = f"{label}: Theorem 1 direction and rate"
    claim = ("W_kq^(t) converges in direction to W_kq* at the rate O(log²t/t): over [t_0, T], 1 - cos(W_kq^(t), "
             f"W_kq*) decays at least like (log²t/t)^{RATE_POWER:g}")
    metric = (f"the power p of log²t/t in 1 - cos, fitted over [t_0, T] (t_0 = ceil(8 L_max ||W_kq*||²/η), Lemma 7's "
              f"start; T the last logged step with ||∇L|| > {GRADIENT_FLOOR:g}, decision C-D7), with its interval: the "
              "smallest and largest local power over six log-equal sub-windows; graded on the interval's lower end "
              f"({who}; the log-log slope of 1 - cos in t is shown)")

    def build(fit, slope_t) -> Check:
        if fit is None:
            return Check(name, claim, "not reached", f"interval >= {RATE_POWER:g}", False, "Thm 1 of paper C",
                         metric=metric, **fields)
        p, lo, hi = fit
        return Check(name, claim, f"p = {p:.3g}, interval [{lo:.3g}, {hi:.3g}] (1 - cos ~ t^{slope_t:.3g})",
                     f"interval >= {RATE_POWER:g}", bool(lo >= RATE_POWER), "Thm 1 of paper C", metric=metric,
                     **fields)

    def measure(s: Trajectory):
        fit = thm1_rate(s)
        slope = None if fit is None else power_fit(s.steps, 1 - s["cos_kq"], s.t0, s.end)[0]
        return fit, slope

    fits = [measure(s) for s in trajs]
    if any(f is None for f, _ in fits):
        main = build(None, None)
        main = replace(main, graded=False, ungraded_reason=_short_of_window(trajs, T, t0, "the rate"))
    else:
        worst = min(range(len(fits)), key=lambda i: fits[i][0][1])
        main = build(*fits[worst])
    c_fit = measure(gd)
    return with_control(main, f"{CONTROLS['gd']} (seed {trajs[0].run.seed})", build(*c_fit))


def _thm2_attention_check(label, trajs, neg, fields, T) -> Check:
    s0 = trajs[0]
    t_c = max(tb.thm2_attention_content_start(s.C[1], s.L_max) for s in trajs)
    name = f"{label}: Theorem 2 attention bound"
    claim = "min_n φ_+^(n,t) >= 1/(1 + L_max e^{-C_1 t}) where the bound exceeds Lemma 5's 1/L_max"
    metric = (f"smallest min_n φ_+^(n,t) - bound over the logged steps t >= t_c = log(L_max/(L_max - 1))/C_1 = "
              f"{t_c:,.0f} (before t_c the bound is below 1/L_max, implied by Lemma 5)")

    def build(v) -> Check:
        return _at_least(name, claim, v, -1e-12, "Thm 2 of paper C", metric=metric, **fields)

    main = build(_worst([thm2_attention(s) for s in trajs], largest=False))
    if t_c > T:
        main = replace(main, graded=False, ungraded_reason=f"the bound says nothing beyond Lemma 5 before t_c = "
                                                           f"{t_c:,.0f}; the run stops at T = {T:,}")
    return with_control(main, f"{CONTROLS['negated-ov']} (seed {s0.run.seed})", build(thm2_attention(neg)))


def _thm2_loss_check(label, trajs, neg, fields, T) -> Check:
    bounds, initial = [], []
    for s in trajs:
        C0, C1 = s.C
        bounds.append(float(tb.thm2_loss_upper(s.steps[-1], int(s.run.two_stage.stage1.step), C0, C1, s.L_max,
                                               s.run.task.V)))
        initial.append(float(s["loss"][0]))
    vacuous = min(bounds) >= min(initial)
    kind = {"kind": "vacuous"} if vacuous else {}

    def build(v) -> Check:
        return check_at_most(f"{label}: Theorem 2 loss bound eq. (4)", "L(θ^(t)) <= |V| exp(-T C_0 (1 - 2L_max/"
                             f"(L_max + e^{{C_1 t}}))) (at t = {T} the bound is {min(bounds):.3g}, vs L(θ^(0)) = "
                             f"{min(initial):.3g})", v, 0.0, "Thm 2 of paper C",
                             metric="largest L - bound over every logged step", **{**fields, **kind})

    main = build(_worst([thm2_loss(s) for s in trajs], largest=True))
    return with_control(main, f"{CONTROLS['negated-ov']} (seed {trajs[0].run.seed})", build(thm2_loss(neg)))


def _linear_rate(label: str, rates: list[tuple[float, float]], fields: dict) -> Check:
    rate = _worst([r for r, _ in rates], largest=False)
    r2 = _worst([q for _, q in rates], largest=False)
    text = "no window (L - L* at round-off)" if math.isnan(rate) else f"{rate:.4g} x C_1 (R² {r2:.4f})"
    return Check(f"{label}: linear rate", "L(θ^(t)) - L* decays linearly in t at least at the rate C_1 = "
                 "η/(4 L_max ||W_kq*||²) of Theorem 2", text, ">= 1, R² > 0.95", bool(rate >= 1 and r2 > 0.95),
                 "Thm 2 / footnote 3 of paper C",
                 metric="least-squares slope of -log(L - L*) over the last two thirds of the steps where L - L* is "
                        "above round-off, in units of C_1; R² of the linear fit", **fields)


def _lemma7_check(label, trajs, neg, fields, t0, T) -> Check:
    vals = [lemma7(s) for s in trajs]
    s0 = trajs[0]
    need = lemma7_content_norm(s0.run.task.samples.N, s0.L_max, s0.star)
    value = _worst([v for v, _ in vals], largest=False)
    content = _worst([c for _, c in vals], largest=False)
    claim = ("<∇L, W^(t)> >= (1 + α_t) <∇L, W*> ||W^(t)||/||W*|| for t >= t_0 = ceil(8 L_max ||W_kq*||²/η)")
    metric = ("smallest cos(∇L, W) - (1 + α_t) cos(∇L, W*) over [t_0, T]; the inequality holds for every W where "
              "(1 + α_t)|cos(∇L, W*)| >= 1")

    def build(v, note: str = "", kind: str = "theorem") -> Check:
        return _at_least(f"{label}: Lemma 7", claim + note, v, 0.0, "Lemma 7 of paper C", metric=metric,
                         **{**fields, "kind": kind})

    if math.isnan(value):
        main = replace(build(value), graded=False, ungraded_reason=f"the run stops at T = {T:,}, before t_0 = {t0:,}")
    elif content >= 1:
        main = build(value, f" (vacuous: (1 + α_t)|cos(∇L, W*)| >= {content:.3g} over the window, so the right side "
                     f"is below -1 for every W; α_t < 1 needs ||W_kq|| >= {need:.3g}, t >= {need / s0.eta:.2g}, where "
                     "the gradient underflows in float64)", "vacuous")
    else:
        main = build(value)
    nv, _ = lemma7(neg)
    return with_control(main, f"{CONTROLS['negated-ov']} (seed {s0.run.seed})", build(nv))


def _thm3_growth_check(label, trajs, gd, fields, t0, T) -> Check | None:
    if not all(np.isfinite(s["order_gap"]).all() for s in trajs):
        return None
    name = f"{label}: Theorem 3 linear growth"
    claim = ("(x_* - x_0)^T W_kq^(t) x^q and (x_0 - x)^T W_kq^(t) x^q grow at least like C_0 t")
    metric = ("the growth exponent of the smallest class gap in t over [t_0, T], with its interval (smallest and "
              "largest local exponent over six log-equal sub-windows), over queries with non-comparable tokens")

    def build(fit) -> Check:
        if fit is None:
            return Check(name, claim, "not reached", f"interval >= {GROWTH_EXPONENT:g}, gap > 0", False,
                         "Thm 3 of paper C", metric=metric, **fields)
        p, lo, hi, gap = fit
        return Check(name, claim, f"exponent {p:.3g}, interval [{lo:.3g}, {hi:.3g}] (smallest gap at T: {gap:.4g})",
                     f"interval >= {GROWTH_EXPONENT:g}, gap > 0", bool(lo >= GROWTH_EXPONENT and gap > 0),
                     "Thm 3 of paper C", metric=metric, **fields)

    fits = [thm3_growth(s) for s in trajs]
    if any(f is None for f in fits):
        main = replace(build(None), graded=False, ungraded_reason=_short_of_window(trajs, T, t0, "the growth"))
    else:
        main = build(min(fits, key=lambda f: f[1]))
    return with_control(main, f"{CONTROLS['gd']} (seed {trajs[0].run.seed})", build(thm3_growth(gd)))


def _thm3_bound_check(label, trajs, gd, fields, T) -> Check:
    vals = [thm3_bound(s) for s in trajs]
    at_T = min(b for _, b in vals)
    vacuous = {"kind": "vacuous"} if at_T <= 0 else {}

    def build(v) -> Check:
        return _at_least(f"{label}: Theorem 3 gap bound", "every class gap of W_kq^(t) under a query is at least "
                         "t η gap*/(2 L_max ||W_kq*||²) - sqrt(108 t η N L_max² ||W_kq*||² log²t) (the proof's bound; "
                         f"{at_T:.3g} at t = {T}{': vacuous' if vacuous else ''})", v, 0.0, "proof of Thm 3 of paper C",
                         metric="smallest (smallest class gap - bound) over every logged step t >= 2, gap* the "
                                "smallest class gap of W_kq*", **{**fields, **vacuous})

    main = build(_worst([v for v, _ in vals], largest=False))
    return with_control(main, f"{CONTROLS['gd']} (seed {trajs[0].run.seed})", build(thm3_bound(gd)[0]))
