"""The trials: one random dataset each, its critical dimensions by bisection, and the saved per-trial table.

``trials.csv`` has one row per dataset: ``V, k, m, trial, d_sep, d_comp`` (critical dimensions), ``d_comp_bound``
(the support-count bound on d_comp), ``solves`` (separability verdicts taken), ``certified`` (those certified),
``lp_runs`` (solver runs behind them: HiGHS runs, or interior-point verdicts), compatibility residuals,
``scanned``, ``consistent``, ``seconds``, and the rank verdicts just below the two lower bounds on d_comp
(``compatible_below_bound``, ``compatible_below_counting``: both must be False).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...data.ntp import NTPData
from ...data.synthetic import random_ntp
from ...geometry.linear.subspace import counting_bound, dim_F, subspace, support_count_bound
from ...geometry.separability.nested import nested_critical_dimension
from ...geometry.separability.thresholds import separability_threshold
from ...geometry.separability.verdict import ntp_separability, smallest_true, smallest_true_from
from ...parallel import ExecutorConfig, map_tasks
from ...stats import median_ci
from .config import SeparabilityConfig

#: verdicts within this many dimensions of d* are recomputed on the scanned trials
SCAN_WIDTH = 3
INT_COLUMNS = ("V", "k", "m", "trial", "d_sep", "d_comp", "d_comp_bound", "solves", "certified", "lp_runs")
BOOL_COLUMNS = ("scanned", "consistent", "compatible_below_bound", "compatible_below_counting")


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
    method: str = "nested"
    scan: bool = False
    guess_sep: int = 0  # first d tried by the search for d*_sep (0: round(δ* m) for "nested", else plain bisection)
    step: int = 1  # first step of the search away from its guess (about the spread of d*)


@dataclass(frozen=True)
class TrialResult:
    """Critical dimensions of one dataset and what it took to find them.

    Attributes
    ----------
    d_sep, d_comp : smallest d with NTP-separable / NTP_H-compatible data (d_comp = 0 for one-hot supports)
    d_comp_bound : the support-count lower bound on d_comp
        (:func:`~ntpbias.geometry.linear.subspace.support_count_bound`)
    solves, certified : separability verdicts taken and how many carried a certificate within tolerance
    residual_compatible, residual_incompatible : largest compatibility residual among compatible verdicts and
        smallest among incompatible ones (NaN when none)
    scanned, consistent : whether the consistency scan ran, and whether its verdicts switched exactly at d*
    seconds : CPU seconds of the trial (process time: the report's "CPU seconds in the trials" adds them up)
    lp_runs : solver runs behind the separability verdicts (the nested LP's HiGHS runs, the interior-point search's
        verdicts, one per single verdict)
    compatible_below_bound, compatible_below_counting : the rank verdict of eq. (4) at d = d_comp_bound - 1 and at
        :func:`below_counting_bound` (False where that d would be 0, and for one-hot supports): the two bounds say
        both are False, and the checks grade that the rank test says so
    """

    V: int
    k: int
    m: int
    trial: int
    d_sep: int
    d_comp: int
    d_comp_bound: int
    solves: int
    certified: int
    residual_compatible: float
    residual_incompatible: float
    scanned: bool
    consistent: bool
    seconds: float
    lp_runs: int = 0
    compatible_below_bound: bool = False
    compatible_below_counting: bool = False


def below_counting_bound(V: int, k: int, m: int) -> int:
    """The largest d with (V - 1) d < m (k - 1): there dim F <= (V - 1) d falls short of the m (k - 1) independent
    equations compatibility needs, whatever the embeddings (0 for one-hot supports).

    >>> below_counting_bound(10, 6, 40), below_counting_bound(5, 3, 40)  # 9 * 22 = 198 < 200; 4 * 19 = 76 < 80
    (22, 19)
    """
    return max(0, (m * (k - 1) - 1) // (V - 1)) if k > 1 else 0


def trial_seed(seed: int, V: int, k: int, m: int, trial: int) -> int:
    """The dataset seed of a trial: independent streams for every (seed, V, k, m, trial)."""
    return int(np.random.SeedSequence([seed, V, k, m, trial]).generate_state(1)[0])


def trial_dataset(task: Trial, d: int | None = None) -> NTPData:
    """The trial's dataset restricted to its first ``d`` embedding coordinates (all m by default)."""
    full = random_ntp(task.m, task.m, task.V, task.k, seed=trial_seed(task.seed, task.V, task.k, task.m, task.trial),
                      dirichlet=task.dirichlet)
    return full if d is None or d == task.m else NTPData.from_arrays(full.H[:, :d], full.P, full.pi)


def critical_dimensions(task: Trial) -> TrialResult:
    """The trial's critical dimensions (module docstring), searched from the trial's guesses; optionally a scan
    around them.

    d*_sep: with ``method="nested"`` by
    :func:`~ntpbias.geometry.separability.nested.nested_critical_dimension` (the nested LP, one LP and a few warm
    re-solves, or for large LPs the interior-point search; a certificate on each side of d*), otherwise by a search
    over single verdicts (:func:`~ntpbias.geometry.separability.verdict.smallest_true_from`; plain bisection
    without a guess). The scan takes single verdicts (the LP of
    :func:`~ntpbias.geometry.separability.verdict.ntp_separability`) around d* and at d = m, independently of the
    search.

    Compatibility is decided by rank: with generic (Dirichlet) probabilities the equations (4) are solvable almost
    surely iff they are independent, dim F = Σ_j (|S_j| - 1) (:func:`~ntpbias.geometry.linear.subspace.dim_F`, no Gram
    matrix). Its search starts at the support-count bound
    (:func:`~ntpbias.geometry.linear.subspace.support_count_bound`, a necessary condition for embeddings in general
    position, which Gaussian ones are almost surely) and walks up from it (:func:`compatible_from`): one rank verdict
    when d*_comp attains the bound, as it does on nearly every dataset. The search never looks below the bound, so
    d*_comp >= bound holds by construction; what tests the bound is the rank verdict just below it, at
    d_comp_bound - 1, and just below the counting bound (:func:`below_counting_bound`), taken on every trial and
    saved (``compatible_below_*``). On scanned trials the residual test of
    :func:`~ntpbias.geometry.linear.subspace.subspace` is computed too and must agree with it (its residuals are the
    ``residual_*`` columns).
    """
    t0 = time.process_time()
    full = trial_dataset(task)
    cache: dict[int, NTPData] = {}
    sep: dict[int, bool] = {0: False}
    comp: dict[int, bool] = {0: task.k == 1}
    counts = {"solves": 0, "certified": 0, "lp_runs": 0}
    verdict_method = "lp" if task.method == "nested" else task.method
    residuals: dict[bool, list[float]] = {True: [], False: []}
    equations = task.m * (task.k - 1)

    def data_at(d: int) -> NTPData:
        if d not in cache:
            cache[d] = full if d == task.m else NTPData.from_arrays(full.H[:, :d], full.P, full.pi)
        return cache[d]

    def separable(d: int) -> bool:
        if d not in sep:
            result = ntp_separability(data_at(d), method=verdict_method)
            sep[d] = result.separable
            counts["solves"] += 1
            counts["certified"] += bool(result.certified)
            counts["lp_runs"] += 1
        return sep[d]

    def compatible(d: int) -> bool:
        if d not in comp:
            comp[d] = dim_F(data_at(d)) == equations
        return comp[d]

    def residual_agrees(d: int) -> bool:
        """The residual test of eq. (4) at d gives the rank verdict (scanned trials)."""
        F = subspace(data_at(d))
        residuals[F.compatible].append(F.compatibility_residual)
        return F.compatible == compatible(d)

    def search(pred, guess: int) -> int:
        return smallest_true_from(pred, guess, task.m, step=task.step) if guess > 0 else smallest_true(pred, 0, task.m)

    if task.method == "nested":
        guess = task.guess_sep or round(separability_threshold(task.V, task.k) * task.m)
        found = nested_critical_dimension(full, guess, step=task.step)
        d_sep = found.d_star
        counts["solves"] += len(found.verdicts)
        counts["certified"] += sum(v.certified for v in found.verdicts.values())
        counts["lp_runs"] += found.solves
    else:
        d_sep = search(separable, task.guess_sep)
    bound = support_count_bound(full.support)
    d_comp = 0 if task.k == 1 else compatible_from(compatible, bound, task.m)
    below_bound = task.k > 1 and bound >= 2 and compatible(bound - 1)
    d_count = below_counting_bound(task.V, task.k, task.m)
    below_counting = d_count >= 1 and compatible(d_count)
    consistent = True
    if task.scan:
        for pred, d_star in ((separable, d_sep), (compatible, d_comp)):
            ds = set(range(max(1, d_star - SCAN_WIDTH), min(task.m, d_star + SCAN_WIDTH) + 1)) | {task.m}
            for d in sorted(ds):
                consistent &= pred(d) == (d >= d_star)
        if task.k > 1:
            for d in sorted({max(1, d_comp - 1), d_comp, task.m}):
                consistent &= residual_agrees(d)
    return TrialResult(task.V, task.k, task.m, task.trial, d_sep, d_comp, bound,
                       counts["solves"], counts["certified"],
                       max(residuals[True], default=math.nan), min(residuals[False], default=math.nan),
                       task.scan, bool(consistent), time.process_time() - t0, counts["lp_runs"], bool(below_bound),
                       bool(below_counting))


def compatible_from(pred, bound: int, m: int) -> int:
    """Smallest d in max(bound, 1)..m with pred(d) (m + 1 if none), for pred monotone in d and false below ``bound``
    (not evaluated there): pred(bound), then steps 1, 2, 4, ... up and bisection
    (:func:`~ntpbias.geometry.separability.verdict.smallest_true`).

    >>> calls = []
    >>> compatible_from(lambda d: calls.append(d) or d >= 12, 10, 40), calls
    (12, [10, 11, 13, 12])
    """
    lo = max(bound, 1)
    if lo > m:
        return m + 1
    if pred(lo):
        return lo
    step, hi = 1, lo + 1
    while hi <= m and not pred(hi):
        lo, step = hi, 2 * step
        hi = min(lo + step, m + 1)
    return smallest_true(pred, lo, hi)


@dataclass(frozen=True)
class Guess:
    """Where the search for d*_sep of a configuration's trials starts, and its first step."""

    sep: int
    step: int


def predicted_guess(V: int, k: int, m: int) -> Guess:
    """The guess from theory alone: round(δ*(V, k) m)
    (:func:`~ntpbias.geometry.separability.thresholds.separability_threshold`), and a first step of about sqrt(m)/4
    (d* spreads like sqrt(m): for one-hot binary labels its standard deviation is sqrt(m - 1)/2, Cover's law)."""
    return Guess(max(1, round(separability_threshold(V, k) * m)), max(1, round(math.sqrt(m) / 4)))


def run_trials(cfg: SeparabilityConfig, executor: ExecutorConfig | str = "inprocess",
               guess: Guess | None = None) -> list[TrialResult]:
    """Every trial of ``cfg`` on ``executor``, in trial order (a failed trial raises SolverError).

    ``guess``: where the searches start (default :func:`predicted_guess`). It changes how many verdicts a trial
    takes, never its critical dimensions (the verdicts are exact and monotone in d).
    """
    from ...errors import SolverError

    g = guess or predicted_guess(cfg.V, cfg.support_size, cfg.m)
    tasks = [Trial(cfg.V, cfg.support_size, cfg.m, cfg.seed, t, cfg.dirichlet, cfg.method, t < cfg.scan,
                   g.sep, g.step) for t in range(cfg.trials)]
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
        "lp_solves": solves, "lp_runs": sum(r.lp_runs for r in results),
        "certified": sum(r.certified for r in results),
        "certified_fraction": sum(r.certified for r in results) / max(solves, 1),
        "scanned": len(scanned), "consistent": sum(r.consistent for r in scanned),
        "max_residual_compatible": max(res_c, default=math.nan),
        "min_residual_incompatible": min(res_i, default=math.nan),
        "seconds": sum(r.seconds for r in results),
    }



# ------------------------------------------------------------------------------------------------ the saved table
def trials_csv(results) -> str:
    """CSV text of per-trial results (dataclass instances)."""
    rows = [dataclasses.asdict(r) for r in results]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def read_trials(path: str | Path) -> list[dict]:
    """Rows of a trials.csv with typed values."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k, v in r.items():
            r[k] = int(v) if k in INT_COLUMNS else (v == "True") if k in BOOL_COLUMNS else float(v)
    return rows


def configurations(rows: list[dict]) -> list[tuple[int, int, int]]:
    """The (V, k, m) present, in first-seen order."""
    return list(dict.fromkeys((r["V"], r["k"], r["m"]) for r in rows))


#: the transition figure draws Wilson bands up to this many configurations (its paper-scale grid: lines only)
BANDS_UP_TO = 8


def transition_size(rows: list[dict]) -> int:
    """The m of the transition figure: the largest m that the most configurations share (every configuration's
    size at quick scale; m = 400 at paper scale, where some pairs also run m = 800)."""
    shared = Counter(m for _, _, m in configurations(rows))
    return max(shared, key=lambda m: (shared[m], m))


def critical(rows: list[dict], V: int, k: int, m: int, which: str = "d_sep") -> np.ndarray:
    """The critical dimensions ``which`` ("d_sep" or "d_comp") of the trials of (V, k, m)."""
    return np.array([r[which] for r in rows if (r["V"], r["k"], r["m"]) == (V, k, m)])
