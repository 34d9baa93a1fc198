"""The NTP-separability phase transition (open question 1 of paper A; spec linear_ntp.md §2.4, §2.6, §2.7, §11.1).

For Gaussian context embeddings h̄_j ~ N(0, I_d) and uniformly random supports S_j of size k = |S_j| in a
vocabulary of V tokens (Dirichlet(1) probabilities on them), how does the probability that the data are
NTP-separable (Def. 2, eqs. (6a)-(6b)) and NTP_H-compatible (Def. 1, eq. (4)) depend on d/m? Paper A proves only
the sufficient condition d >= m (Lemma 1) and recalls Cover's threshold d/m = 1/2 for one-hot binary labels
(Remark 1: k = 1, V = 2, where NTP-separability is homogeneous linear separability); exact thresholds are open.

Design (decisions where the paper is silent):

* **Nested dimensions.** Trial t draws one dataset with d = m (``random_ntp(m, m, V, k)``) and uses its first d
  embedding coordinates for every d. Both properties are monotone in d along a trial (pad W with zero columns),
  so each trial has a critical dimension d*: separable iff d >= d*_sep, compatible iff d >= d*_comp, found by
  bisection on 0..m (about log2(m) verdicts instead of m). d = 0 is not separable (all logits are 0) and
  compatible only when k = 1 (no equations); d = m is both (Lemma 1: H is square and invertible almost surely),
  checked on the scanned trials. For every d the first d coordinates are an i.i.d. Gaussian m x d matrix, so
  the fraction of trials with d* <= d estimates the probability at d without bias (the curve over d is an
  empirical CDF, its points correlated).
* **Verdicts.** Separability by :func:`ntpbias.geometry.separability.ntp_separability` (an LP with a certificate
  either way: a separating W checked to margin 1, or Gordan multipliers); compatibility by
  :func:`ntpbias.geometry.subspace.subspace` (residual of the minimum-norm solution of eq. (4)). The number of
  certified separability verdicts is reported; compatibility residuals of the two verdict classes are reported
  side by side (a wide gap means the tolerance decides nothing).
* **Threshold.** The empirical threshold is the median of the critical ratios r* = d*/m (the d/m at which half
  the datasets are separable), with a distribution-free confidence interval from binomial order statistics;
  pointwise bands use Wilson score intervals.
* **Consistency scan.** On the first ``scan`` trials of each configuration, verdicts are also computed at every
  d within 3 of d* and at d = m: they must switch exactly once, at d*.
* **Exact reference.** For k = 1, V = 2, Cover (1965): m Gaussian points with random ±1 labels are homogeneously
  separable in R^d with probability C(m, d) / 2^m = P(Bin(m-1, 1/2) <= d-1); hence d* - 1 ~ Bin(m-1, 1/2), a
  finite-m law the measured d* are tested against (Dvoretzky-Kiefer-Wolfowitz bound), with median threshold
  -> 1/2.
* **Counting bound [derived].** Every generator (e_z - e_z') h̄^T of F has zero column sums, so
  dim F <= (V - 1) d, while compatibility with generic probabilities needs dim F = m (k - 1): d*_comp/m >=
  (k - 1)/(V - 1). It is drawn on the figures and checked on every trial.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from ..config import require_choice
from ..data.ntp import NTPData
from ..data.synthetic import random_ntp
from ..geometry.separability import ntp_separability
from ..geometry.subspace import subspace
from ..io import ensure_dir, write_text
from ..parallel import ExecutorConfig, map_tasks
from ..report import separability as figs
from ..report.separability import counting_bound, cover_cdf, dkw_bound, fraction_curve, median_ci, wilson
from ..results import Check, RunResult, Section, Table, check_at_least
from .base import Group, Preset, RunContext, register_group, register_preset, register_trainer

METHODS = ("lp", "auto", "dual")
#: verdicts within this many dimensions of d* are recomputed on the scanned trials
SCAN_WIDTH = 3


@dataclass(frozen=True)
class SeparabilityConfig:
    """One point (V, |S_j|, m) of the phase diagram: ``trials`` random datasets and their critical dimensions.

    Attributes
    ----------
    experiment : always "separability"
    seed : seeds every dataset (trial t of (V, k, m) uses ``SeedSequence([seed, V, k, m, t])``)
    V, support_size, m : vocabulary size, support size k = |S_j| (1 = one-hot), number of contexts
    trials : random datasets
    dirichlet : concentration of the in-support probabilities (compatibility needs them generic, not equal)
    method : separability decision, ``"lp"`` (HiGHS + certificate), ``"dual"`` or ``"auto"``
    scan : trials whose verdicts are also computed around d* and at d = m (consistency check)
    device : accepted for the ``train`` command's contract; the verdicts are LPs solved on the CPU (HiGHS)
    """

    experiment: str = "separability"
    seed: int = 0
    V: int = 10
    support_size: int = 6
    m: int = 40
    trials: int = 100
    dirichlet: float = 1.0
    method: str = "lp"
    scan: int = 3
    device: str = "cpu"

    def __post_init__(self):
        require_choice("experiment", self.experiment, ("separability",))
        if not (1 <= self.support_size < self.V):
            raise ValueError(f"need 1 <= support_size < V (some token out of every support), got support_size="
                             f"{self.support_size}, V={self.V}")
        if self.m < 2 or self.trials < 1 or self.scan < 0:
            raise ValueError(f"need m >= 2, trials >= 1, scan >= 0; got m={self.m}, trials={self.trials}, "
                             f"scan={self.scan}")
        require_choice("method", self.method, METHODS)
        if self.dirichlet <= 0:
            raise ValueError(f"dirichlet must be > 0, got {self.dirichlet}")

    @property
    def label(self) -> str:
        return f"V={self.V}, |S|={self.support_size}"


# ------------------------------------------------------------------------------------------------ one trial
@dataclass(frozen=True)
class Trial:
    """One dataset of a configuration (picklable: a task for the executors)."""

    V: int
    k: int
    m: int
    seed: int
    trial: int
    dirichlet: float = 1.0
    method: str = "lp"
    scan: bool = False


@dataclass(frozen=True)
class TrialResult:
    """Critical dimensions of one dataset and what it took to find them.

    Attributes
    ----------
    d_sep, d_comp : smallest d with NTP-separable / NTP_H-compatible data (d_comp = 0 for one-hot supports)
    solves, certified : separability verdicts computed and how many carried a certificate within tolerance
    residual_compatible, residual_incompatible : largest compatibility residual among compatible verdicts and
        smallest among incompatible ones (NaN when none)
    scanned, consistent : whether the consistency scan ran, and whether its verdicts switched exactly at d*
    seconds : time of the trial
    """

    V: int
    k: int
    m: int
    trial: int
    d_sep: int
    d_comp: int
    solves: int
    certified: int
    residual_compatible: float
    residual_incompatible: float
    scanned: bool
    consistent: bool
    seconds: float


def trial_seed(seed: int, V: int, k: int, m: int, trial: int) -> int:
    """The dataset seed of a trial: independent streams for every (seed, V, k, m, trial)."""
    return int(np.random.SeedSequence([seed, V, k, m, trial]).generate_state(1)[0])


def trial_dataset(task: Trial, d: int | None = None) -> NTPData:
    """The trial's dataset restricted to its first ``d`` embedding coordinates (all m by default)."""
    full = random_ntp(task.m, task.m, task.V, task.k, seed=trial_seed(task.seed, task.V, task.k, task.m, task.trial),
                      dirichlet=task.dirichlet)
    return full if d is None or d == task.m else NTPData.from_arrays(full.H[:, :d], full.P, full.pi)


def critical_dimensions(task: Trial) -> TrialResult:
    """Bisect on d for the trial's critical dimensions (module docstring); optionally scan around them."""
    t0 = time.perf_counter()
    full = trial_dataset(task)
    cache: dict[int, NTPData] = {}
    sep: dict[int, bool] = {0: False}
    comp: dict[int, bool] = {0: task.k == 1}
    counts = {"solves": 0, "certified": 0}
    residuals: dict[bool, list[float]] = {True: [], False: []}

    def data_at(d: int) -> NTPData:
        if d not in cache:
            cache[d] = full if d == task.m else NTPData.from_arrays(full.H[:, :d], full.P, full.pi)
        return cache[d]

    def separable(d: int) -> bool:
        if d not in sep:
            result = ntp_separability(data_at(d), method=task.method)
            sep[d] = result.separable
            counts["solves"] += 1
            counts["certified"] += bool(result.certified)
        return sep[d]

    def compatible(d: int) -> bool:
        if d not in comp:
            F = subspace(data_at(d))
            comp[d] = F.compatible
            residuals[F.compatible].append(F.compatibility_residual)
        return comp[d]

    d_sep = _smallest_true(separable, 0, task.m)
    d_comp = 0 if task.k == 1 else _smallest_true(compatible, 0, task.m)
    consistent = True
    if task.scan:
        for pred, d_star in ((separable, d_sep), (compatible, d_comp)):
            ds = set(range(max(1, d_star - SCAN_WIDTH), min(task.m, d_star + SCAN_WIDTH) + 1)) | {task.m}
            for d in sorted(ds):
                consistent &= pred(d) == (d >= d_star)
    return TrialResult(task.V, task.k, task.m, task.trial, d_sep, d_comp, counts["solves"], counts["certified"],
                       max(residuals[True], default=math.nan), min(residuals[False], default=math.nan),
                       task.scan, bool(consistent), time.perf_counter() - t0)


def _smallest_true(pred, lo: int, hi: int) -> int:
    """Smallest d in (lo, hi] with pred(d), for pred monotone, pred(lo) false and pred(hi) assumed true."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def run_trials(cfg: SeparabilityConfig, executor: ExecutorConfig | str = "inprocess") -> list[TrialResult]:
    """Every trial of ``cfg`` on ``executor``, in trial order (a failed trial raises SolverError)."""
    from ..errors import SolverError

    tasks = [Trial(cfg.V, cfg.support_size, cfg.m, cfg.seed, t, cfg.dirichlet, cfg.method, t < cfg.scan)
             for t in range(cfg.trials)]
    results: list[TrialResult | None] = [None] * len(tasks)
    for outcome in map_tasks(critical_dimensions, tasks, executor=executor):
        if not outcome.ok:
            raise SolverError(f"separability trial {outcome.index} of {cfg.label}, m={cfg.m} failed: {outcome.error}")
        results[outcome.index] = outcome.value
    return results  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------ statistics
def summarize(results: list[TrialResult]) -> dict:
    """Threshold estimates and solver counts of one configuration's trials."""
    m = results[0].m
    r_sep = np.array([r.d_sep for r in results]) / m
    r_comp = np.array([r.d_comp for r in results]) / m
    med, lo, hi = median_ci(r_sep)
    cmed, clo, chi = median_ci(r_comp)
    solves = sum(r.solves for r in results)
    scanned = [r for r in results if r.scanned]
    res_c = [r.residual_compatible for r in results if not math.isnan(r.residual_compatible)]
    res_i = [r.residual_incompatible for r in results if not math.isnan(r.residual_incompatible)]
    return {
        "trials": len(results), "threshold": med, "threshold_low": lo, "threshold_high": hi,
        "threshold_mean": float(r_sep.mean()), "threshold_std": float(r_sep.std(ddof=1)) if len(results) > 1 else 0.0,
        "compatible_threshold": cmed, "compatible_threshold_low": clo, "compatible_threshold_high": chi,
        "counting_bound": counting_bound(results[0].V, results[0].k),
        "lp_solves": solves, "certified": sum(r.certified for r in results),
        "certified_fraction": sum(r.certified for r in results) / max(solves, 1),
        "scanned": len(scanned), "consistent": sum(r.consistent for r in scanned),
        "max_residual_compatible": max(res_c, default=math.nan),
        "min_residual_incompatible": min(res_i, default=math.nan),
        "seconds": sum(r.seconds for r in results),
    }


# ------------------------------------------------------------------------------------------------ checks
def config_checks(name: str, results: list[TrialResult]) -> list[Check]:
    """Checks of one configuration: certificates, consistency (and Lemma 1 at d = m), counting bound, Cover."""
    s = summarize(results)
    V, k, m = results[0].V, results[0].k, results[0].m
    out = [
        Check(f"{name}: certificates", "every separability verdict carries a certificate (separating W at margin 1, "
              "or Gordan multipliers) within 1e-7", f"{s['certified']}/{s['lp_solves']}", "all",
              s["certified"] == s["lp_solves"], "spec 2.4"),
    ]
    if s["scanned"]:
        out.append(Check(f"{name}: monotone verdicts, Lemma 1", "verdicts around d* switch once, at d*, and d = m is "
                         "separable and compatible (scanned trials)", f"{s['consistent']}/{s['scanned']}", "all",
                         s["consistent"] == s["scanned"], "Lemma 1 of paper A; spec 2.6"))
    if k > 1:
        bound = counting_bound(V, k)
        worst = min(r.d_comp for r in results) / m
        out.append(check_at_least(f"{name}: counting bound", f"d*_comp / m >= (k-1)/(V-1) = {bound:.3g} on every "
                                  "trial (dim F <= (V-1) d)", worst, bound - 1e-12, "spec 2.2 [derived]"))
    if k == 1 and V == 2:
        d, frac = fraction_curve(np.array([r.d_sep for r in results]), m)
        gap = float(np.max(np.abs(frac - cover_cdf(m, d))))
        eps = dkw_bound(len(results))
        out.append(Check(f"{name}: Cover's law", f"d* - 1 ~ Bin(m-1, 1/2) (Cover 1965): sup_d |F̂(d) - F(d)| within "
                         f"the DKW band (α = 0.001, {len(results)} trials)", gap, f"<= {eps:.3g}", bool(gap <= eps),
                         "Remark 1 of paper A; spec 2.7"))
        med, lo, hi = median_ci(np.array([r.d_sep for r in results]) / m, level=0.99)
        exact = (1 + stats.binom.median(m - 1, 0.5)) / m
        out.append(Check(f"{name}: Cover threshold", f"the median critical ratio (99% interval [{lo:.3g}, {hi:.3g}]) "
                         f"contains Cover's finite-m value {exact:.4g} (-> 1/2 as m -> ∞)", med,
                         f"{exact:.4g} in the interval", bool(lo <= exact <= hi), "Remark 1 of paper A; spec 2.7"))
    return out


# ------------------------------------------------------------------------------------------------ `train` (a cell)
def train_separability(cfg: SeparabilityConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` / a sweep cell: the trials of one (V, |S_j|, m), its transition curve and threshold."""
    out = ensure_dir(ctx.out)
    ctx.say(f"{cfg.trials} datasets, {cfg.label}, m = {cfg.m}")
    results = run_trials(cfg)
    write_text(out / "trials.csv", figs.trials_csv(results))
    s = summarize(results)
    section = Section("separability", f"NTP-separability transition: {cfg.label}, m = {cfg.m}", facts=dict(s),
                      seconds=s["seconds"])
    section.checks.extend(config_checks(cfg.label, results))
    section.figures.append(figs.transition_figure(out, figs.read_trials(out / "trials.csv")))
    return RunResult(section, cfg, summary={"status": "completed", "final": s}, rows=_curve_rows(results))


def _curve_rows(results: list[TrialResult]) -> list[dict]:
    """metrics.csv rows: per d, the fractions separable / compatible with Wilson 95% intervals."""
    m, n = results[0].m, len(results)
    d, sep = fraction_curve(np.array([r.d_sep for r in results]), m)
    _, comp = fraction_curve(np.array([r.d_comp for r in results]), m)
    lo, hi = wilson(np.round(sep * n), n)
    run = f"V={results[0].V},k={results[0].k},m={m}"
    return [{"run": run, "d": int(di), "ratio": float(di / m), "fraction_separable": float(f), "wilson_low": float(a),
             "wilson_high": float(b), "fraction_compatible": float(c)}
            for di, f, a, b, c in zip(d, sep, lo, hi, comp, strict=True)]


register_trainer("separability", SeparabilityConfig, train_separability)
register_preset(Preset("separability-cover", "one-hot binary (V=2, |S_j|=1): Cover's d/m = 1/2, m = 40, 200 datasets",
                       lambda s: SeparabilityConfig(V=2, support_size=1, m=40, trials=200)))
register_preset(Preset("separability-ntp", "NTP-separability of paper A's support pattern (V=10, |S_j|=6), m = 40, "
                       "100 datasets", lambda s: SeparabilityConfig(V=10, support_size=6, m=40, trials=100)))


# ------------------------------------------------------------------------------------------------ `reproduce`
FIGURES = {
    "separability-transition": "fraction of NTP-separable and NTP_H-compatible datasets against d/m",
    "separability-thresholds": "empirical thresholds (median d*/m, 95% interval) per (V, |S_j|) and m",
    "separability-cover": "one-hot binary: distribution of the critical d against Cover's exact law",
}
#: the phase diagram at each scale: (V, |S_j|) pairs, m values, datasets per configuration (the one-hot binary
#: case, the reference for Cover's law, is cheap and gets more)
SCALE_GRID = {
    "smoke": {"configs": ((2, 1), (5, 1), (5, 2)), "m": (12,), "trials": 24, "cover_trials": 48},
    "quick": {"configs": ((2, 1), (10, 1), (10, 3), (10, 6)), "m": (40,), "trials": 60, "cover_trials": 200},
    "paper": {"configs": ((2, 1), (10, 1), (10, 2), (10, 3), (10, 6), (20, 1), (20, 5)), "m": (25, 50, 100),
              "trials": 400, "cover_trials": 1000},
}


def group_configs(scale: str, seeds: int = 1) -> list[SeparabilityConfig]:
    """The configurations of ``reproduce separability`` at ``scale`` (``--seeds N`` multiplies the datasets)."""
    grid = SCALE_GRID[scale]
    return [SeparabilityConfig(V=V, support_size=k, m=m, scan=10 if scale == "paper" else 3,
                               trials=max(1, seeds) * grid["cover_trials" if (V, k) == (2, 1) else "trials"])
            for m in grid["m"] for V, k in grid["configs"]]


def run_group(ctx: RunContext) -> RunResult:
    """Phase diagram of NTP-separability: all trials, saved per trial, figures from the saved table, checks."""
    out = ensure_dir(ctx.out)
    configs = group_configs(ctx.scale, ctx.seeds)
    executor = ExecutorConfig("local") if ctx.scale == "paper" else ExecutorConfig("inprocess")
    section = Section("separability", "NTP-separability phase transition (open question 1 of paper A)",
                      description="Fraction of NTP-separable (Def. 2) and NTP_H-compatible (Def. 1) datasets with "
                                  "Gaussian embeddings and random supports as d/m varies; the one-hot binary case "
                                  "against Cover's threshold d/m = 1/2. Paper A proves d >= m sufficient (Lemma 1).")
    results: list[TrialResult] = []
    t0 = time.perf_counter()
    for cfg in configs:
        ctx.say(f"{cfg.label}, m = {cfg.m}: {cfg.trials} datasets")
        batch = run_trials(cfg, executor)
        results.extend(batch)
        section.checks.extend(config_checks(f"{cfg.label}, m={cfg.m}", batch))
    section.seconds = time.perf_counter() - t0
    ensure_dir(out / "data")
    write_text(out / "data" / "trials.csv", figs.trials_csv(results))
    saved = figs.read_trials(out / "data" / "trials.csv")  # figures and tables come from the saved table
    summaries = [(cfg, summarize([r for r in results if (r.V, r.k, r.m) == (cfg.V, cfg.support_size, cfg.m)]))
                 for cfg in configs]
    section.tables.append(Table("Thresholds (median critical d/m, 95% interval)", (
        "V", "|S_j|", "m", "trials", "separable: d*/m", "compatible: d*/m", "(k-1)/(V-1)", "verdicts certified",
        "seconds"), tuple(
        (c.V, c.support_size, c.m, s["trials"], _interval(s, "threshold"), _interval(s, "compatible_threshold"),
         round(s["counting_bound"], 4), f"{s['certified']}/{s['lp_solves']}", round(s["seconds"], 1))
        for c, s in summaries)))
    total, certified = sum(s["lp_solves"] for _, s in summaries), sum(s["certified"] for _, s in summaries)
    section.facts.update({"datasets": len(results), "separability verdicts (LPs)": total,
                          "certified verdicts": certified, "executor": executor.describe(),
                          "largest compatible residual": _finite(max, (s["max_residual_compatible"]
                                                                       for _, s in summaries)),
                          "smallest incompatible residual": _finite(min, (s["min_residual_incompatible"]
                                                                          for _, s in summaries))})
    if ctx.wants("separability-transition"):
        section.figures.append(figs.transition_figure(out, saved))
    if ctx.wants("separability-thresholds"):
        section.figures.append(figs.thresholds_figure(out, saved))
    if ctx.wants("separability-cover") and any(r["V"] == 2 and r["k"] == 1 for r in saved):
        section.figures.append(figs.cover_figure(out, saved))
    return RunResult(section, {f"V{c.V}-k{c.support_size}-m{c.m}": c for c in configs},
                     summary={"scale": ctx.scale, "summaries": [{**asdict(c), **s} for c, s in summaries]},
                     rows=[row for cfg in configs for row in _curve_rows(
                         [r for r in results if (r.V, r.k, r.m) == (cfg.V, cfg.support_size, cfg.m)])])


def _finite(reduce, values) -> float | None:
    """``reduce`` over the non-NaN values (None when there is none)."""
    values = [v for v in values if not math.isnan(v)]
    return reduce(values) if values else None


def _interval(s: dict, key: str) -> str:
    return f"{s[key]:.3f} [{s[key + '_low']:.3f}, {s[key + '_high']:.3f}]"


register_group(Group("separability", "NTP-separability phase transition (paper A, open question 1)", FIGURES,
                     run_group))
