"""``ntpbias train`` of one configuration and the ``reproduce separability`` group."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, fields

import numpy as np

from ...errors import ConfigError
from ...geometry.separability.thresholds import separability_threshold
from ...io import ensure_dir, write_text
from ...parallel import ExecutorConfig
from ...results import FigureSpec, RunResult, Section, Table
from ...stats import cover_median_ratios, fraction_curve, wilson
from ..base import RunContext
from ..catalog import GROUPS
from .checks import config_checks, study_checks, study_tables
from .config import SeparabilityConfig
from .runs import BANDS_UP_TO, TrialResult, read_trials, run_trials, summarize, transition_size, trials_csv
from .scaling import next_guess


# ------------------------------------------------------------------------------------------------ `train` (a cell)
def train_separability(cfg: SeparabilityConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` / a sweep cell: the trials of one (V, |S_j|, m), its transition curve and threshold."""
    out = ensure_dir(ctx.out)
    ctx.say(f"{cfg.trials} datasets, {cfg.label}, m = {cfg.m}")
    results = run_trials(cfg)
    write_text(out / "trials.csv", trials_csv(results))
    s = summarize(results)
    section = Section("separability", f"NTP-separability transition: {cfg.label}, m = {cfg.m}", facts=dict(s),
                      seconds=s["seconds"])
    section.checks.extend(config_checks(cfg.label, results))
    section.plots.append(transition_figure(read_trials(out / "trials.csv")))
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



# ------------------------------------------------------------------------------------------------ `reproduce`
FIGURES = GROUPS["separability"].figures
#: the large-m study's (V, |S_j|): every V in {2, 3, 5, 10, 20} with |S_j| in {1, 2, V/2, V - 1}
PAPER_CONFIGS = ((2, 1), (3, 1), (3, 2), (5, 1), (5, 2), (5, 4), (10, 1), (10, 2), (10, 5), (10, 9),
                 (20, 1), (20, 2), (20, 10), (20, 19))
#: the phase diagram at each scale: (V, |S_j|) pairs, sizes m, datasets per size (an int or {m: datasets}; the
#: one-hot binary case, the reference for Cover's law, gets ``cover_trials``), ``extra`` sizes for some pairs
#: ({(V, k): {m: datasets}}) and ``limits`` on the datasets of the costliest points ({(V, k, m): datasets}). Paper
#: scale: d*/m concentrates like 1/sqrt(m), so fewer datasets at larger m keep the intervals comparable; the extra
#: sizes follow the measured cost per dataset (docs/benchmarks.md). Every pair has the same datasets per size up to
#: m = 400 (the binary one-hot reference more); the limits that V = 10 and 20 had at m = 200 and 400 went when the
#: interior-point search made those points 7-80x cheaper.
SCALE_GRID = {
    "smoke": {"configs": ((2, 1), (5, 1), (5, 2)), "m": (12,), "trials": 24, "cover_trials": 48},
    "quick": {"configs": ((2, 1), (10, 1), (10, 3), (10, 6)), "m": (40,), "trials": 60, "cover_trials": 200},
    "paper": {"configs": PAPER_CONFIGS, "m": (50, 100, 200, 400), "trials": {50: 200, 100: 120, 200: 48, 400: 24},
              "cover_trials": 1000,
              "extra": {(2, 1): {800: 100}, (3, 1): {800: 24}, (3, 2): {800: 24}, (5, 4): {800: 24, 1600: 16},
                        (10, 9): {800: 12, 1600: 12}, (20, 10): {800: 24}, (20, 19): {800: 16, 1600: 16}},
              "limits": {(2, 1, 400): 400}},
}


def check_grid(grid: dict) -> None:
    """Refuse a malformed scale grid (ConfigError naming the entry): 1 <= k < V, m >= 2, datasets >= 1, extra sizes
    and limits only for listed pairs and sizes."""
    configs = tuple(grid["configs"])
    if not configs or len(set(configs)) != len(configs):
        raise ConfigError(f"scale grid: configs must be a non-empty list without repeats, got {configs}")
    for V, k in configs:
        if not 1 <= k < V:
            raise ConfigError(f"scale grid: need 1 <= |S_j| < V, got (V, |S_j|) = ({V}, {k})")
    trials = grid["trials"]
    sizes = set(grid["m"])
    if any(m < 2 for m in sizes) or not sizes:
        raise ConfigError(f"scale grid: sizes m must be >= 2, got {grid['m']}")
    if isinstance(trials, dict) and set(trials) != sizes:
        raise ConfigError(f"scale grid: datasets per size must name every size {sorted(sizes)}, got {sorted(trials)}")
    counts = list(trials.values()) if isinstance(trials, dict) else [trials]
    counts += [grid["cover_trials"]] + [n for ms in grid.get("extra", {}).values() for n in ms.values()]
    counts += list(grid.get("limits", {}).values())
    if any(n < 1 for n in counts):
        raise ConfigError(f"scale grid: every number of datasets must be >= 1, got {counts}")
    for pair, ms in grid.get("extra", {}).items():
        if pair not in configs or any(m < 2 for m in ms):
            raise ConfigError(f"scale grid: extra sizes {ms} for {pair}, which is not a listed pair or has m < 2")
    for V, k, m in grid.get("limits", {}):
        if (V, k) not in configs or m not in sizes | set(grid.get("extra", {}).get((V, k), {})):
            raise ConfigError(f"scale grid: a limit for (V, |S_j|, m) = ({V}, {k}, {m}), which the grid does not run")


def grid_points(scale: str) -> list[tuple[int, int, int, int]]:
    """(V, |S_j|, m, datasets) of ``reproduce separability`` at ``scale``, by increasing m (so a smaller size of a
    pair always runs first, and an interrupted run holds whole sizes)."""
    grid = SCALE_GRID[scale]
    check_grid(grid)
    points = []
    for V, k in grid["configs"]:
        sizes = {m: grid["trials"][m] if isinstance(grid["trials"], dict) else grid["trials"] for m in grid["m"]}
        sizes.update(grid.get("extra", {}).get((V, k), {}))
        for m, n in sizes.items():
            n = grid["cover_trials"] if (V, k) == (2, 1) and m not in grid.get("extra", {}).get((V, k), {}) else n
            points.append((V, k, m, grid.get("limits", {}).get((V, k, m), n)))
    return sorted(points, key=lambda p: (p[2], grid["configs"].index(p[:2])))


def group_configs(scale: str, seeds: int = 1) -> list[SeparabilityConfig]:
    """The configurations of ``reproduce separability`` at ``scale`` (``--seeds N`` multiplies the datasets)."""
    return [SeparabilityConfig(V=V, support_size=k, m=m, scan=_scanned(scale, m), trials=max(1, seeds) * n)
            for V, k, m, n in grid_points(scale)]


def _scanned(scale: str, m: int) -> int:
    """Datasets per configuration whose verdicts are recomputed around d* (the consistency scan): 3 at quick scale;
    at paper scale 10 up to m = 100, 3 at m = 200 and none beyond (each costs about 8 verdicts near d*, several
    minutes at m = 400 for V = 20)."""
    if scale != "paper":
        return 3
    return 10 if m <= 100 else 3 if m <= 200 else 0


def _saved_results(path, configs: list[SeparabilityConfig]) -> dict[tuple[int, int, int], list[TrialResult]]:
    """Trials of an interrupted run (``--resume``): the configurations whose datasets are all in ``path``."""
    if not path.exists():
        return {}
    rows = read_trials(path)
    missing = {f.name for f in fields(TrialResult)} - set(rows[0] if rows else {})
    if rows and missing:
        raise ConfigError(f"{path}: saved trials lack the columns {sorted(missing)} (written by an older ntpbias); "
                          "run without --resume, or into a new --out")
    out = {}
    for cfg in configs:
        got = [r for r in rows if (r["V"], r["k"], r["m"]) == (cfg.V, cfg.support_size, cfg.m)]
        if len(got) == cfg.trials:
            out[(cfg.V, cfg.support_size, cfg.m)] = [TrialResult(**{f.name: r[f.name] for f in fields(TrialResult)})
                                                      for r in sorted(got, key=lambda r: r["trial"])]
    return out


def run_group(ctx: RunContext) -> RunResult:
    """Phase diagram of NTP-separability: all trials, saved per trial, figures from the saved table, checks.

    The trials are saved after every configuration (``data/trials.csv``); ``--resume`` keeps those of an interrupted
    run and computes the rest. The searches of a size start from the thresholds extrapolated from the smaller sizes
    (:func:`~ntpbias.experiments.separability.scaling.next_guess`).
    """
    out = ensure_dir(ctx.out)
    path = ensure_dir(out / "data") / "trials.csv"
    configs = group_configs(ctx.scale, ctx.seeds)
    executor = ctx.executor if ctx.executor.kind != "inprocess" or ctx.scale != "paper" else ExecutorConfig("local")
    section = Section("separability", "NTP-separability phase transition (open question 1 of paper A)",
                      description="Fraction of NTP-separable (Def. 2) and NTP_H-compatible (Def. 1) datasets with "
                                  "Gaussian embeddings and random supports as d/m varies; the one-hot binary case "
                                  "against Cover's threshold d/m = 1/2. Paper A proves d >= m sufficient (Lemma 1).")
    saved = _saved_results(path, configs) if ctx.resume else {}
    results: list[TrialResult] = []
    t0 = time.perf_counter()
    for cfg in configs:
        key = (cfg.V, cfg.support_size, cfg.m)
        if key in saved:
            batch = saved[key]
            ctx.say(f"{cfg.label}, m = {cfg.m}: {cfg.trials} datasets (saved)")
        else:
            ctx.say(f"{cfg.label}, m = {cfg.m}: {cfg.trials} datasets")
            guess = next_guess([asdict(r) for r in results], cfg.V, cfg.support_size, cfg.m)
            batch = run_trials(cfg, executor, guess)
        results.extend(batch)
        section.checks.extend(config_checks(f"{cfg.label}, m={cfg.m}", batch))
        write_text(path, trials_csv(results))
    section.seconds = time.perf_counter() - t0
    rows = read_trials(path)  # figures and tables come from the saved table
    summaries = [(cfg, summarize([r for r in results if (r.V, r.k, r.m) == (cfg.V, cfg.support_size, cfg.m)]))
                 for cfg in configs]
    cover = [(c, s) for c, s in summaries if (c.V, c.support_size) == (2, 1)]
    if cover:
        c, s = max(cover, key=lambda cs: cs[0].m)
        section.tables.append(Table("Paper vs ntpbias", ("quantity", "paper A", "ntpbias", "why they differ"), (
            ("one-hot binary threshold d/m (Cover, recalled in Remark 1)", 0.5,
             f"{_interval(s, 'threshold')} at m = {c.m}",
             "finite m: Cover's exact law puts the median of d*/m at {:.4g} (every value up to {:.4g} for even m), "
             "-> 1/2 as m grows".format(*cover_median_ratios(c.m))),
            ("sufficient dimension for separability and compatibility (Lemma 1)", "d >= m",
             f"{s['consistent']}/{s['scanned']} scanned trials separable and compatible at d = m",
             "a sanity check ('monotone verdicts, Lemma 1'): with nested embeddings and an invertible H at d = m "
             "it cannot fail unless the search or a verdict is broken"))))
    section.tables.append(Table("Thresholds (median critical d/m, 95% interval)", (
        "V", "|S_j|", "m", "trials", "separable: d*/m", "large-m prediction (ours, unproven)", "compatible: d*/m",
        "(k-1)/(V-1)", "verdicts certified", "seconds"), tuple(
        (c.V, c.support_size, c.m, s["trials"], _interval(s, "threshold"),
         round(separability_threshold(c.V, c.support_size), 4), _interval(s, "compatible_threshold"),
         round(s["counting_bound"], 4), f"{s['certified']}/{s['lp_solves']}", round(s["seconds"], 1))
        for c, s in summaries)))
    if len({c.m for c in configs}) > 1:
        section.tables.extend(study_tables(rows))
        section.checks.extend(study_checks(rows))
    section.notes.append("The large-m prediction δ* = (k - 1 + E|A|)/(V - 1) "
                         "(ntpbias.geometry.separability.thresholds) is our derivation (a cone-counting argument at "
                         "the symmetric overlap, not a proof; exact for V = 2 by Cover's theorem). No published "
                         "formula for the exact one-hot threshold with three or more classes was found (Tan and Bellec"
                         " 2023, Sec. 4, list it as open); see docs/paper-a-linear-ntp.md#decisions, A-D19.")
    total, certified = sum(s["lp_solves"] for _, s in summaries), sum(s["certified"] for _, s in summaries)
    section.facts.update({"datasets": len(results), "separability verdicts (LPs)": total,
                          "certified verdicts": certified, "executor": executor.describe(),
                          "CPU seconds in the trials": round(sum(s["seconds"] for _, s in summaries), 1),
                          "largest compatible residual": _finite(max, (s["max_residual_compatible"]
                                                                       for _, s in summaries)),
                          "smallest incompatible residual": _finite(min, (s["min_residual_incompatible"]
                                                                          for _, s in summaries))})
    section.plots.extend(_figures(ctx, rows, multi_size=len({c.m for c in configs}) > 1))
    return RunResult(section, {f"V{c.V}-k{c.support_size}-m{c.m}": c for c in configs},
                     summary={"scale": ctx.scale, "summaries": [{**asdict(c), **s} for c, s in summaries]},
                     rows=[row for cfg in configs for row in _curve_rows(
                         [r for r in results if (r.V, r.k, r.m) == (cfg.V, cfg.support_size, cfg.m)])])


def _figures(ctx: RunContext, rows: list[dict], multi_size: bool) -> list[FigureSpec]:
    """The group's figures that ``ctx`` asks for, drawn from the saved rows."""
    figs = []
    if ctx.wants("separability-transition"):
        figs.append(transition_figure(rows))
    if ctx.wants("separability-thresholds"):
        figs.append(FigureSpec(
            "separability-thresholds", "Empirical thresholds",
            "Median critical ratio d*/m (the d/m at which half the datasets are separable, resp. compatible) "
            "with distribution-free 95% intervals, per (V, |S_j|) and number of contexts m. Dotted: Cover's "
            "asymptotic 1/2 for one-hot binary labels; dashed: the counting bound (k-1)/(V-1) for compatibility.",
            "separability.thresholds", {"rows": rows}))
    if ctx.wants("separability-cover") and any(r["V"] == 2 and r["k"] == 1 for r in rows):
        figs.append(FigureSpec(
            "separability-cover", "One-hot binary: Cover's theorem",
            "For V = 2 and |S_j| = 1 NTP-separability is homogeneous linear separability of m Gaussian points "
            "with random labels; the measured fraction follows Cover's exact finite-m law (dotted) and its "
            "threshold tends to d/m = 1/2.", "separability.cover", {"rows": rows}))
    if multi_size and ctx.wants("separability-phase"):
        figs.append(FigureSpec(
            "separability-phase", "Phase diagram of NTP-separability and compatibility",
            "Left: thresholds of NTP-separability extrapolated to m -> ∞ (t_∞ of t(m) = t_∞ + a/m, 95% bars) "
            "against |S_j|/V, one colour per V; open markers: the median d*/m at the largest m (95% interval); lines: "
            "the prediction δ*(V, k) (our derivation; Cover's 1/2 at V = 2). Right: the same for NTP_H-"
            "compatibility against the counting bound (k-1)/(V-1) (dashed).", "separability.phase", {"rows": rows}))
    if multi_size and ctx.wants("separability-extrapolation"):
        figs.append(FigureSpec(
            "separability-extrapolation", "Finite-size extrapolation",
            "Top: median d*/m (95% intervals) against 1/m per (V, |S_j|), one panel per V, with the weighted fit "
            "t_∞ + a/m (line, extended to 1/m = 0) and the prediction δ* (star at 1/m = 0). Bottom: standardized "
            "residuals of the fit in 1/m (filled) and of the alternative t_∞ + a/sqrt(m) (open).",
            "separability.extrapolation", {"rows": rows}))
    return figs


def transition_figure(rows: list[dict]) -> FigureSpec:
    """Fraction separable and compatible against d/m at :func:`~.runs.transition_size` of ``rows`` (saved trials)."""
    m_max = transition_size(rows)
    return FigureSpec(
        "separability-transition", "NTP-separability and compatibility against d/m",
        f"Fraction of random datasets (Gaussian embeddings, uniformly random supports, m = {m_max}) that are "
        "NTP-separable (left) and NTP_H-compatible (right) as d/m varies, with Wilson 95% bands (for at "
        f"most {BANDS_UP_TO} configurations; the paper-scale grid draws lines only, its intervals are in the tables). "
        "Dotted: "
        "Cover's exact law for one-hot binary labels (threshold d/m -> 1/2, grey dashed). Lemma 1 of paper "
        "A guarantees both at d/m >= 1 (grey).", "separability.transition", {"rows": rows})


def _finite(reduce, values) -> float | None:
    """``reduce`` over the non-NaN values (None when there is none)."""
    values = [v for v in values if not math.isnan(v)]
    return reduce(values) if values else None


def _interval(s: dict, key: str) -> str:
    return f"{s[key]:.3f} [{s[key + '_low']:.3f}, {s[key + '_high']:.3f}]"
