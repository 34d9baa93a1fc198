"""The norms study's checks and findings: pure functions of the histories, the data and the NTP-SVMs
(docs/optimizers.md#what-the-measurements-show).

* One-hot data (where the known results apply): for every optimizer with a known limit, its normalized margin in that
  norm relative to the norm's maximum at the last step is held to a level calibrated on other one-hot datasets
  (``calibration/optimizers.py``, data seeds :data:`CALIBRATION_SEEDS`; the graded dataset, data seed 0, is held out),
  and must still be rising over the last decade of steps (the theorem's trend). Both are ``theorem`` checks whose
  finite-step threshold is calibrated (the theorems give rates with unspecified constants).
* NTP data: the same measurements are findings, each stated as the conjecture it supports or not ("sign descent
  converges to the linf NTP-SVM"), in a table, never graded.
* Every dataset: the NTP-SVMs are certified, no margin ratio exceeds 1 (the maximum is the maximum), and for every
  optimizer that reaches the entropy ||P_F(W_k) - W*|| obeys the bound of :mod:`ntpbias.geometry.linear.fbound`.
"""

from __future__ import annotations

import numpy as np

from ...data.ntp import NTPData
from ...geometry.linear.fbound import f_error_bound
from ...geometry.linear.loss import smoothness_bound
from ...results import Check, Table, check_at_least, check_at_most
from ...training.history import History
from ..claims import cite
from .config import MEMBERS, NormsConfig
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
#: An optimizer "reaches the entropy" when CE - H is below this at the last step (the F-part check applies to it).
REACHES_ENTROPY = 1e-3
#: NTP findings: a conjecture is supported when the ratio is at least this and still rising (or above 0.98); it is
#: contradicted when the ratio falls over the last decade, or when another norm's ratio is at least this while the
#: conjectured norm's is more than 0.1 below it.
SUPPORT_LEVEL = 0.9


#: the sentence of each norm's known result (GD: paper A's Theorem 2, of which one-hot data are a case)
CLAIM = {"l2": "docs:nsd", "linf": "docs:sign-adam", "spectral": "docs:spectral-muon", "l1": "docs:nsd",
         "nuclear": "docs:nsd"}


def _source(member: str) -> str:
    return MEMBERS[member].source


def calibrated(member: str, data_seed: int | None) -> tuple[float | None, str]:
    """(level, threshold_source) of an optimizer's one-hot check; level None when not calibrated."""
    worst = CALIBRATION_WORST.get(member)
    where = (f"calibrated on one-hot data seeds {CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1} "
             f"(calibration/optimizers.json, quick scale)")
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
    return text, bool(met)


def _ratio(history: History, norm: str) -> np.ndarray:
    return history[f"margin_ratio_{norm}"]  # (n_steps, n_seeds)


def _decade_index(history: History) -> int:
    """The logged step closest to a tenth of the last one."""
    steps = history.steps
    return int(np.argmin(np.abs(steps - steps[-1] / 10)))


def onehot_checks(dataset: str, histories: list[History], configs: dict[str, NormsConfig], data: NTPData,
                  ref: NormsReference, data_seed: int | None) -> list[Check]:
    """The known results as theorem checks (module docstring)."""
    out = []
    for h in histories:
        member = h.run.split("-", 1)[1]
        norm = MEMBERS[member].norm
        if norm is None or f"margin_ratio_{norm}" not in h:
            continue
        text, met = premise(member, configs[h.run], data, norm in ref.W_mm)
        final = float(_ratio(h, norm)[-1].min())
        level, source = calibrated(member, data_seed)
        claim = (f"{MEMBERS[member].label} converges in direction to the {norm} max-margin solution: normalized margin "
                 f"in {norm} / maximum -> 1 (worst seed, step {h.steps[-1]})")
        claim_key = "A:thm2" if member == "gd" else CLAIM.get(norm, "docs:nsd")
        fields = {"kind": "theorem", "premise": text, "premise_met": met, **cite(claim_key),
                  "metric": f"normalized margin in {norm} / its maximum at step {h.steps[-1]} (worst seed)"}
        if level is not None:
            out.append(check_at_least(f"{dataset}: {member} -> {norm} margin", claim, final, round(level, 4),
                                      _source(member), threshold_source=source, **fields))
        i = _decade_index(h)
        rise = float((_ratio(h, norm)[-1] - _ratio(h, norm)[i]).min())
        out.append(Check(f"{dataset}: {member} {norm} margin rising", f"{claim}: still increasing over the last decade "
                         f"(step {h.steps[i]} to {h.steps[-1]})", rise, "> 0", bool(rise > 0), _source(member),
                         threshold_source="the theorem's trend (any increase over the last decade of steps)",
                         **{**fields, "metric": f"rise of the {norm} margin ratio from step {h.steps[i]} to "
                            f"{h.steps[-1]} (worst seed)"}))
    return out


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


def f_part_check(dataset: str, histories: list[History], data: NTPData, ref: NormsReference) -> list[Check]:
    """||P_F(W_k) - W*|| <= the bound (B1)-(B2) for every optimizer that reaches the entropy (module docstring)."""
    if ref.F.dim == 0 or not ref.F.compatible:
        return []
    reached, worst, informative = [], 0.0, False
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
        informative |= bool(np.all(bound < h["F_error"][0]))  # the bound says more than the start
        reached.append(h.run.split("-", 1)[1])
    if not reached:
        return []
    return [Check(f"{dataset}: P_F(W_k) -> W*", "for every optimizer that reaches the entropy (CE - H <= "
                  f"{REACHES_ENTROPY:g}: {', '.join(reached)}), ||P_F(W_k) - W*|| <= the bound from the per-context "
                  "excess loss (the log-odds only see the F-component); measured: the largest ratio to the bound",
                  worst, "<= 1", bool(worst <= 1 + 1e-9), "docs/optimizers.md#f-bound (our derivation)",
                  kind="theorem" if informative else "vacuous", **cite("docs:fbound"),
                  metric="largest ||P_F(W_k) - W*|| / bound at the last step over those optimizers and seeds",
                  premise="NTP_H-compatible data", premise_met=bool(ref.F.compatible),
                  threshold_source="the bound (B1)-(B2), derived; vacuous when it exceeds the initial distance")]


def findings(dataset: str, histories: list[History], ref: NormsReference) -> Table:
    """NTP data: for every optimizer, the conjecture that it converges to its norm's NTP-SVM (Adagrad: to the norm
    where its ratio is highest), with the measured ratio, its trend and the verdict."""
    rows = []
    for h in histories:
        member = h.run.split("-", 1)[1]
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
