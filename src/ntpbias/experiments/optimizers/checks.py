"""The norms study's checks and findings: pure functions of the histories, the data and the NTP-SVMs
(docs/optimizers.md#checks).

* One-hot data (where the known results apply), for every optimizer with a known limit:

  - a ``theorem`` check of *which* norm its margin approaches (:func:`approach`): at the last step its gap
    1 - margin ratio is smallest in the predicted norm (on a log scale: by how many decades it leads the next norm),
    and over the last decade of steps that gap falls faster than in every other norm (its log-log slope). Its negative
    control is the trajectory of every optimizer whose known limit is another norm, graded as if it converged to this
    norm's margin: each must fail;
  - a ``calibrated`` level of the final margin ratio in the predicted norm, set on other one-hot datasets
    (``calibration/optimizers.py``, data seeds :data:`CALIBRATION_SEEDS`; the graded dataset, data seed 0, is held out)
    and graded only at the calibration's schedule (:data:`CALIBRATED_STEPS`); its control is the highest final ratio
    in that norm among the optimizers with another known limit (a level they also reach does not discriminate).

* NTP data: the same measurements are findings, each stated as the conjecture it supports or not ("sign descent
  converges to the linf NTP-SVM"), in a table, never graded.
* Every dataset (``sanity``): the NTP-SVMs are certified, no margin ratio exceeds 1 (the maximum is the maximum), and
  for every optimizer that reaches the entropy ||P_F(W_k) - W*|| obeys the bound of
  :mod:`ntpbias.geometry.linear.fbound` (an inequality that holds for every W: it checks our derivation and its code,
  not the optimizers).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...data.ntp import NTPData
from ...geometry.linear.fbound import f_error_bound
from ...geometry.linear.loss import smoothness_bound
from ...results import Check, Table, check_at_least, check_at_most, with_control
from ...training.history import History
from ..claims import cite
from .config import MEMBERS, STEPS, NormsConfig
from .runs import NormsReference

#: The calibration (calibration/optimizers.py, quick scale): one-hot data seeds and, per optimizer, the smallest final
#: margin ratio in its norm over them.
CALIBRATION_SEEDS = range(1, 6)
CALIBRATION_WORST: dict[str, float] = {
    "gd": 0.7797,
    "ngd": 0.986,
    "sign": 0.9647,
    "nsd-l1": 0.8618,
    "nsd-spectral": 0.9797,
    "nsd-nuclear": 0.9713,
    "muon": 0.8494,
    "muon-svd": 0.9793,
    "adam": 0.8568,
    "adam-eq": 0.9552,
}
#: The level is the calibration's worst value minus this.
CALIBRATION_SLACK = 0.02
#: the number of steps the levels were calibrated at (quick scale): a run of another length is not graded by them
CALIBRATED_STEPS = STEPS["quick"]
#: An optimizer "reaches the entropy" when CE - H is below this at the last step (the F-bound check applies to it).
REACHES_ENTROPY = 1e-3
#: NTP findings: a conjecture is supported when the ratio is at least this and still rising (or above 0.98); it is
#: contradicted when the ratio falls over the last decade, or when another norm's ratio is at least this while the
#: conjectured norm's is more than 0.1 below it.
SUPPORT_LEVEL = 0.9
#: a margin ratio's distance to 1 is not resolved below this (the NTP-SVMs are certified to 1e-6): gaps are floored
#: here before their logarithm is taken
GAP_FLOOR = 1e-6


#: the sentence of each norm's known result (GD: paper A's Theorem 2, of which one-hot data are a case)
CLAIM = {"l2": "docs:nsd", "linf": "docs:sign-adam", "spectral": "docs:spectral-muon", "l1": "docs:nsd",
         "nuclear": "docs:nsd"}


def _source(member: str) -> str:
    return MEMBERS[member].source


def calibrated(member: str, data_seed: int | None) -> tuple[float | None, str]:
    """(level, threshold_source) of an optimizer's one-hot check; level None when not calibrated."""
    worst = CALIBRATION_WORST.get(member)
    where = (f"calibrated on one-hot data seeds {CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1} "
             f"(calibration/optimizers.json, quick scale: {CALIBRATED_STEPS} steps)")
    if worst is None:
        return None, where + ": no value for this optimizer"
    held = ("this run's dataset is one of them (not held out)" if data_seed in CALIBRATION_SEEDS
            else "the graded dataset is held out")
    return worst - CALIBRATION_SLACK, f"{where}: worst value {worst:.3g} minus {CALIBRATION_SLACK:g}; {held}"


def premise(member: str, cfg: NormsConfig, data: NTPData, separable: bool) -> tuple[str, bool]:
    """The hypotheses of the known result for ``member`` in words, and whether this run meets them."""
    opt = cfg.optimizer
    if member == "gd":
        bound = 1 / (2 * smoothness_bound(data))
        return (f"separable one-hot data; constant step η <= 1/(2L) = {bound:.3g} (this run: η = {opt.lr:g})",
                separable and opt.lr <= bound and not opt.lr_power)
    text = f"separable one-hot data; decaying step η_t = η0 (t+1)^-a with 0 < a <= 1 (this run: a = {opt.lr_power:g})"
    met = separable and 0 < opt.lr_power <= 1
    if opt.name == "adam":
        b1, b2 = opt.betas
        text += f"; β1 <= β2 (this run: {b1:g}, {b2:g}); ε -> 0 (this run: {opt.eps:g})"
        met = met and b1 <= b2
    if MEMBERS[member].norm == "spectral" and opt.name in ("muon", "nsd"):
        exact = opt.polar != "quintic"
        text += ("; the step is the spectral steepest direction, the polar factor U V^T of the (momentum) gradient "
                 f"(this run: {opt.polar}" + ("" if exact else ", which maps the singular values into about "
                                              "[0.7, 1.2] instead of 1: not the steepest direction") + ")")
        met = met and exact
    return text, bool(met)


def _ratio(history: History, norm: str) -> np.ndarray:
    return history[f"margin_ratio_{norm}"]  # (n_steps, n_seeds)


def _decade_index(history: History) -> int:
    """The logged step closest to a tenth of the last one."""
    steps = history.steps
    return int(np.argmin(np.abs(steps - steps[-1] / 10)))


# ------------------------------------------------------------------------------------------------ which norm
@dataclass(frozen=True)
class Approach:
    """How a trajectory's margin approaches the maximum in ``norm``, against its other norms
    (docs/optimizers.md#checks).

    With gap_n = 1 - margin ratio in norm n (floored at :data:`GAP_FLOOR`) on a log10 scale, so that the distance to
    each norm's maximum is compared in decades whatever the norm:

    * ``lead``: log10 gap_n - log10 gap_norm at the last step for the other norm n with the smallest gap
      (``runner_up``): > 0 when ``norm`` is the norm whose maximum the direction is closest to;
    * ``slope``: the least-squares slope of log10 gap_norm against log10 step over the last decade of logged steps
      (< 0: the gap is closing, like a power of the step);
    * ``slope_lead``: the smallest slope_n - slope over the other norms (``fastest_other`` attains it): > 0 when the gap
      in ``norm`` closes faster than in every other norm, the trend of a direction converging to that norm's maximum
      (the other gaps level off at a positive value).

    Every value is the worst over the seeds. ``passed``: all three say ``norm``.
    """

    norm: str
    lead: float
    runner_up: str
    slope: float
    slope_lead: float
    fastest_other: str
    window: tuple[int, int]

    @property
    def passed(self) -> bool:
        return bool(self.lead > 0 and self.slope_lead > 0 and self.slope < 0)

    @property
    def score(self) -> float:
        """The smaller of the two leads (how clearly the trajectory points at ``norm``; > 0 when both do)."""
        return min(self.lead, self.slope_lead)

    def describe(self) -> str:
        return (f"lead {self.lead:+.3f} decades over {self.runner_up}; gap slope {self.slope:+.3f}, "
                f"{self.slope_lead:+.3f} steeper than {self.fastest_other}'s")


def log_gaps(history: History, norms) -> np.ndarray:
    """(n_steps, n_seeds, n_norms) log10(1 - margin ratio) in each of ``norms``, floored at :data:`GAP_FLOOR`."""
    ratios = np.stack([_ratio(history, n) for n in norms], axis=-1)
    return np.log10(np.maximum(1 - ratios, GAP_FLOOR))


def approach(history: History, norm: str, norms) -> Approach:
    """How ``history``'s margin approaches the maximum in ``norm`` rather than in the other ``norms``
    (:class:`Approach`; over the last decade of logged steps)."""
    norms = list(norms)
    k = norms.index(norm)
    others = [j for j in range(len(norms)) if j != k]
    i = _decade_index(history)
    steps = history.steps[i:]
    y = log_gaps(history, norms)[i:]  # (steps, seeds, norms)
    x = np.log10(np.maximum(steps, 1).astype(float))
    x = x - x.mean()
    slopes = np.einsum("t,tsn->sn", x, y - y.mean(0)) / max(float(x @ x), 1e-300)  # (seeds, norms)
    lead = y[-1][:, others] - y[-1][:, [k]]  # (seeds, others)
    slope_lead = slopes[:, others] - slopes[:, [k]]
    worst = int(np.argmin(lead.min(1)))
    slow = int(np.argmin(slope_lead.min(1)))
    return Approach(norm, float(lead.min()), norms[others[int(np.argmin(lead[worst]))]], float(slopes[:, k].max()),
                    float(slope_lead.min()), norms[others[int(np.argmin(slope_lead[slow]))]],
                    (int(steps[0]), int(steps[-1])))


def approached(history: History, norms) -> str | None:
    """The norm whose maximum ``history``'s margin approaches (:func:`approach` passes for it), or None."""
    return next((n for n in norms if approach(history, n, norms).passed), None)


def _member(history: History) -> str:
    return history.run.split("-", 1)[1]


def _approach_check(name: str, claim: str, a: Approach, **fields) -> Check:
    return Check(name, claim, a.describe(), "lead > 0, slope lead > 0, slope < 0", a.passed, **fields)


def onehot_checks(dataset: str, histories: list[History], configs: dict[str, NormsConfig], data: NTPData,
                  ref: NormsReference, data_seed: int | None) -> list[Check]:
    """The known results on one-hot data (module docstring): per optimizer with a known limit, the ``theorem`` check of
    which norm its margin approaches and the ``calibrated`` level of its final ratio, each with its negative control
    (the optimizers whose known limit is another norm)."""
    norms = [n for n in ref.W_mm if all(f"margin_ratio_{n}" in h for h in histories)]
    by_member = {_member(h): h for h in histories}
    premises = {m: premise(m, configs[h.run], data, MEMBERS[m].norm in ref.W_mm)
                for m, h in by_member.items() if MEMBERS[m].norm in norms}
    out = []
    for member, (text, met) in premises.items():
        h, norm = by_member[member], MEMBERS[member].norm
        wrong = [m for m, (_, ok) in premises.items() if ok and MEMBERS[m].norm != norm]
        label = MEMBERS[member].label
        claim = (f"{label} converges in direction to the {norm} max-margin solution: its margin approaches the {norm} "
                 f"maximum, not another norm's")
        claim_key = "A:thm2" if member == "gd" else CLAIM.get(norm, "docs:nsd")
        a = approach(h, norm, norms)
        fields = {"source": _source(member), "kind": "theorem", "premise": text, "premise_met": met, **cite(claim_key),
                  "threshold_source": "the limit's signature, no level: the predicted norm's gap is the smallest at "
                                      "the last step and closes fastest over the last decade",
                  "metric": f"log10(1 - margin ratio) in each of {', '.join(norms)} (worst seed): the lead of "
                            f"{norm} over the next norm at step {a.window[1]} (decades) and the slopes against log10 "
                            f"step from step {a.window[0]} to {a.window[1]}"}
        check = _approach_check(f"{dataset}: {member} -> {norm} margin", claim, a, **fields)
        if wrong:
            rivals = {m: approach(by_member[m], norm, norms) for m in wrong}
            rival = max(rivals, key=lambda m: (rivals[m].passed, rivals[m].score))
            on_control = _approach_check(check.name, claim, rivals[rival], **fields)
            check = with_control(check, f"the trajectories of the optimizers whose known limit is another norm "
                                 f"({', '.join(wrong)}) graded as if they converged to the {norm} margin; shown: the "
                                 f"closest, {rival}", replace(on_control, measured=f"{rival}: {on_control.measured}"))
        out.append(check)
        level, source = calibrated(member, data_seed)
        if level is None:
            continue
        final = float(_ratio(h, norm)[-1].min())
        graded = int(h.steps[-1]) == CALIBRATED_STEPS
        level_fields = {"kind": "calibrated", "threshold_source": source, "graded": graded,
                        "ungraded_reason": "" if graded else f"the level was calibrated at {CALIBRATED_STEPS} steps; "
                        f"this run stops at {int(h.steps[-1])}",
                        "metric": f"margin ratio in {norm} at step {int(h.steps[-1])} (worst seed)"}
        lclaim = (f"{label}: margin ratio in {norm} / its maximum at step {int(h.steps[-1])} (worst seed) reaches the "
                  "level calibrated on other one-hot datasets")
        check = check_at_least(f"{dataset}: {member} {norm} margin level", lclaim, final, round(level, 4),
                               _source(member), **level_fields)
        if wrong:
            rivals = {m: float(_ratio(by_member[m], norm)[-1].max()) for m in wrong}
            rival = max(rivals, key=rivals.get)
            check = with_control(check, f"the highest final {norm} margin ratio among the optimizers whose known limit "
                                 f"is another norm ({', '.join(wrong)}): {rival}",
                                 check_at_least(check.name, lclaim, rivals[rival], round(level, 4)))
        out.append(check)
    return out


def approach_table(dataset: str, histories: list[History], ref: NormsReference) -> Table:
    """For each optimizer: log10(1 - margin ratio) at the last step and its slope over the last decade in every norm,
    and the norm its margin approaches (:func:`approached`), beside the known limit (one-hot data)."""
    norms = [n for n in ref.W_mm if all(f"margin_ratio_{n}" in h for h in histories)]
    rows = []
    for h in histories:
        member = _member(h)
        cells = []
        for n in norms:
            a = approach(h, n, norms)
            cells.append(f"{float(log_gaps(h, [n])[-1].max()):.2f} ({a.slope:+.2f})")
        rows.append((MEMBERS[member].label, MEMBERS[member].norm or "-", approached(h, norms) or "none", *cells))
    return Table(f"Which norm's maximum each optimizer's margin approaches: {dataset} (log10(1 - margin ratio) at the "
                 "last step, worst seed, and in brackets its slope against log10 step over the last decade; "
                 "'approaches': the norm whose gap is the smallest and closes fastest)",
                 ("optimizer", "known limit (one-hot)", "approaches", *norms), tuple(rows))


def mismatches(dataset: str, histories: list[History], ref: NormsReference) -> list[str]:
    """Findings: the optimizers with a known limit whose margin does not approach that norm's maximum, with the norm
    it approaches instead (Muon with its quintic Newton-Schulz on the one-hot data, docs/optimizers.md#muon)."""
    norms = [n for n in ref.W_mm if all(f"margin_ratio_{n}" in h for h in histories)]
    notes = []
    for h in histories:
        member = _member(h)
        norm = MEMBERS[member].norm
        if norm not in norms:
            continue
        own = approach(h, norm, norms)
        if own.passed:
            continue
        found = approached(h, norms)
        where = (f"approaches the {found} maximum instead ({approach(h, found, norms).describe()})" if found else
                 "approaches no norm's maximum clearly")
        ratios = ", ".join(f"{n} {float(_ratio(h, n)[-1].mean()):.3f}" for n in norms)
        notes.append(f"{dataset}: {MEMBERS[member].label} (known limit: {norm}) {where}; in {norm}: {own.describe()}. "
                     f"Margin ratios at step {int(h.steps[-1])}: {ratios}")
    return notes


# ------------------------------------------------------------------------------------------------ sanity
def sanity_checks(dataset: str, histories: list[History], ref: NormsReference) -> list[Check]:
    """The NTP-SVMs are certified, and no iterate beats a norm's maximum margin."""
    solved = {n: r for n, r in ref.svm.items() if r is not None}
    worst = max((r.certificate.worst for r in solved.values()), default=float("nan"))
    out = [Check(f"{dataset}: NTP-SVMs certified", f"the NTP-SVM of each norm ({', '.join(solved)}) is certified by "
                 "its recomputed certificate (KKT for l2; primal feasibility, dual-norm bound and duality gap "
                 "otherwise)",
                 worst, f"<= tolerance, {len(solved)}/{len(ref.svm)} solved",
                 bool(solved and all(r.certified for r in solved.values()) and len(solved) == len(ref.svm)),
                 "docs/optimizers.md#the-max-margin-programs", kind="sanity",
                 threshold_source="the solvers' certification tolerance (1e-6)")]
    ratios = [float(np.nanmax(h[f"margin_ratio_{n}"])) for h in histories for n in solved if f"margin_ratio_{n}" in h]
    if ratios:
        out.append(check_at_most(f"{dataset}: margin ratios <= 1", "no iterate's normalized margin in a norm exceeds "
                                 "that norm's maximum 1/||W^mm|| (every norm, optimizer, seed and logged step)",
                                 max(ratios), 1 + 1e-7, "definition of W^mm", kind="sanity",
                                 threshold_source="the solver's tolerance (ours)"))
    return out


def f_bound_check(dataset: str, histories: list[History], data: NTPData, ref: NormsReference) -> list[Check]:
    """||P_F(W_k) - W*|| <= the bound (B1)-(B2) for every optimizer that reaches the entropy: a ``sanity`` check of our
    derivation and its code (the bound holds for every W, so no optimizer can fail it; module docstring)."""
    if ref.F.dim == 0 or not ref.F.compatible:
        return []
    reached, worst, informative = [], 0.0, True
    for h in histories:
        if float(h.last("loss_gap").max()) > REACHES_ENTROPY:
            continue
        W = h.params["W"]
        bound = f_error_bound(W, data)
        if bound is None:
            return []
        err = ref.F.project(W) - ref.F.W_star
        err = np.sqrt((err.reshape(err.shape[0], -1) ** 2).sum(1).cpu().numpy())
        worst = max(worst, float(np.max(err / bound)))
        informative &= bool(np.all(bound < h["F_error"][0]))  # the bound says more than the start
        reached.append(_member(h))
    if not reached:
        return []
    return [Check(f"{dataset}: F-bound (B1)-(B2)", "for every optimizer that reaches the entropy (CE - H <= "
                  f"{REACHES_ENTROPY:g}: {', '.join(reached)}), ||P_F(W_k) - W*|| <= the bound from the per-context "
                  "excess loss at the last step (largest ratio to the bound). The bound holds for every W, so this "
                  "checks our derivation and its code; " + ("the bound is below every starting distance" if informative
                                                            else "the bound exceeds a starting distance here"),
                  worst, "<= 1", bool(worst <= 1 + 1e-9), "docs/optimizers.md#f-bound (our derivation)",
                  kind="sanity", threshold_source="the bound (B1)-(B2), derived: an inequality valid for every W")]


def findings(dataset: str, histories: list[History], ref: NormsReference) -> Table:
    """NTP data: for every optimizer, the conjecture that it converges to its norm's NTP-SVM (Adagrad: to the norm
    where its ratio is highest), with the measured ratio, its trend and the verdict."""
    rows = []
    for h in histories:
        member = _member(h)
        norms = [n for n in ref.W_mm if f"margin_ratio_{n}" in h]
        if not norms:
            continue
        norm = MEMBERS[member].norm or max(norms, key=lambda n: float(_ratio(h, n)[-1].mean()))
        if norm not in norms:
            continue
        r = _ratio(h, norm)
        i = _decade_index(h)
        final, before = float(r[-1].mean()), float(r[i].mean())
        dist = h.last(f"dist_{norm}").mean() if f"dist_{norm}" in h else None
        best = max(norms, key=lambda n: float(_ratio(h, n)[-1].mean()))
        top = float(_ratio(h, best)[-1].mean())
        if final >= 0.98 or (final >= SUPPORT_LEVEL and final > before):
            verdict = "supports"
        elif final < before:
            verdict = "against (falling over the last decade)"
        elif top >= SUPPORT_LEVEL and final < top - 0.1:
            verdict = f"against (the {best} ratio is {top:.2f})"
        else:
            verdict = f"inconclusive at {h.steps[-1]} steps (rising, {final:.2f})"
        rows.append((f"{MEMBERS[member].label} converges to the {norm} NTP-SVM", final, before,
                     None if dist is None else float(dist), best, verdict))
    return Table(f"Conjectures on {dataset} (findings, not graded)",
                 ("conjecture", "margin ratio at the end", "a decade earlier", "distance to W^mm (if unique)",
                  "norm with the highest ratio", "verdict"), tuple(rows))
