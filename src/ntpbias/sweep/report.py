"""Mean and spread over seeds of a sweep's results: ``summary.json``, banded figures, ``report.html``.

Drawn from ``results.csv`` only. Seed axes (``seed``, or any key ending in ``.seed``) are replicates: the other
axes define the groups. Each collected metric gets a figure against the first non-seed axis (one line per
combination of the remaining axes): the mean over seeds with a min-max band
(:func:`ntpbias.report.figures.band`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from .. import __version__
from ..io import write_json
from ..results import Section, Table
from .spec import SweepSpec
from .table import DONE, TAIL, SweepResult, as_number, front_columns

#: at most this many metric figures per sweep report
MAX_FIGURES = 12


def is_seed_axis(key: str) -> bool:
    """Axes over seeds are replicates, aggregated into the bands."""
    return key == "seed" or key.endswith(".seed")


def aggregate(rows: list[dict[str, str]], by: tuple[str, ...], metrics: tuple[str, ...]) -> list[dict]:
    """Mean, standard deviation (ddof 1), min and max over the rows sharing the ``by`` values.

    Only finished rows (status completed or diverged) count; non-numeric and NaN values are ignored.
    Returns one dict per group, in first-seen order: ``{**by values, "n": rows, metric: {mean, std, min, max, n}}``.

    >>> rows = [{"m": "1", "x": "1.0", "status": "completed"}, {"m": "1", "x": "3.0", "status": "completed"}]
    >>> aggregate(rows, ("m",), ("x",))[0]["x"]
    {'mean': 2.0, 'std': 1.4142135623730951, 'min': 1.0, 'max': 3.0, 'n': 2}
    """
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("status") in DONE:
            groups.setdefault(tuple(r.get(k, "") for k in by), []).append(r)
    out = []
    for key, members in groups.items():
        entry: dict = dict(zip(by, key, strict=True))
        entry["n"] = len(members)
        for m in metrics:
            vals = np.array([v for v in (as_number(r.get(m, "")) for r in members) if v is not None and
                             math.isfinite(v)])
            entry[m] = ({"mean": float(vals.mean()), "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0,
                         "min": float(vals.min()), "max": float(vals.max()), "n": int(len(vals))}
                        if len(vals) else {"mean": None, "std": None, "min": None, "max": None, "n": 0})
        out.append(entry)
    return out


def numeric_metrics(rows: list[dict[str, str]], front: tuple[str, ...]) -> tuple[str, ...]:
    """Metric columns holding a number in at least one finished row (checks_* included)."""
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols and k not in front and k not in TAIL)
    cols += ["checks_passed"] if any("checks_passed" in r for r in rows) else []
    return tuple(c for c in cols if any(r.get("status") in DONE and as_number(r.get(c, "")) is not None
                                        for r in rows))


def write_report(spec: SweepSpec, result: SweepResult, *, command: str = "") -> Section:
    """Write ``figures/sweep-*.png|svg``, ``summary.json`` and ``report.html`` of a sweep's output directory."""
    from ..report.html import render

    out, rows = result.out, result.rows
    front = front_columns(spec)
    groups = tuple(k for k in spec.axis_keys if not is_seed_axis(k))
    metrics = numeric_metrics(rows, front)
    table_rows = aggregate(rows, groups, metrics)
    section = Section("sweep", f"Sweep over {', '.join(spec.axis_keys) or 'nothing'} of {spec.base_label}",
                      description=f"{len(rows)} cells; mean ± standard deviation over seeds, min-max bands in "
                                  "the figures. Per-cell run directories: cells/.",
                      facts={"cells": len(rows), **{f"cells {k}": v for k, v in result.counts.items()},
                             "executor": spec.executor.describe(), "seconds (this run)": round(result.seconds, 1)},
                      seconds=result.seconds)
    section.tables.append(Table("Mean ± std over seeds [min, max]", (*groups, "n", *metrics), tuple(
        (*(e[g] for g in groups), e["n"], *(_cell_text(e[m]) for m in metrics)) for e in table_rows)))
    failed = [r for r in rows if r.get("status") == "failed"]
    if failed:
        section.notes.append(f"{len(failed)} cell(s) failed (see results.csv, column error; rerun with "
                             f"--retry-failed): first: {failed[0]['cell']}: {failed[0].get('error', '')}")
    for metric in metrics[:MAX_FIGURES]:
        fig = _figure(rows, spec, groups, metric, out)
        if fig is not None:
            section.figures.append(fig)
    write_json(out / "summary.json", {
        "ntpbias_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": command,
        "base": spec.base_label, "axes": {", ".join(a.keys): [list(p) for p in a.points] for a in spec.axes},
        "cells": len(rows), "counts": result.counts, "group_by": list(groups), "aggregate": table_rows,
        "sections": [section.as_dict()],
    })
    render(out, [section], title=section.title, command=command)
    return section


def _cell_text(stats: dict) -> str:
    if stats["mean"] is None:
        return ""
    return f"{stats['mean']:.4g} ± {stats['std']:.2g} [{stats['min']:.4g}, {stats['max']:.4g}]"


def _figure(rows, spec: SweepSpec, groups: tuple[str, ...], metric: str, out: Path):
    from ..report.figures import band, new_figure, save

    done = [r for r in rows if r.get("status") in DONE and as_number(r.get(metric, "")) is not None]
    if not done:
        return None
    fig, axes = new_figure(1, 1, width=4.6, height=3.2)
    ax = axes[0, 0]
    if groups:
        x_key, line_keys = groups[0], groups[1:]
        xs = list(dict.fromkeys(r[x_key] for r in done))
        numeric = all(as_number(x) is not None for x in xs)
        if numeric:
            xs.sort(key=as_number)
        pos = np.array([as_number(x) for x in xs]) if numeric else np.arange(len(xs), dtype=float)
        lines: dict[tuple, list[dict]] = {}
        for r in done:
            lines.setdefault(tuple(r[k] for k in line_keys), []).append(r)
        for label, members in lines.items():
            per_x = [[as_number(r[metric]) for r in members if r[x_key] == x] for x in xs]
            width = max(len(v) for v in per_x)
            values = np.full((len(xs), width), np.nan)
            for i, v in enumerate(per_x):
                values[i, :len(v)] = v
            keep = ~np.all(np.isnan(values), axis=1)
            name = ", ".join(f"{k}={v}" for k, v in zip(line_keys, label, strict=True)) or None
            band(ax, pos[keep], values[keep], label=name, marker="o", ms=3)
        if not numeric:
            ax.set_xticks(pos, xs)
        ax.set_xlabel(x_key)
        if len(lines) > 1:
            ax.legend(fontsize=7)
    else:
        vals = np.array([as_number(r[metric]) for r in done])
        ax.hist(vals, bins=min(30, max(5, len(vals) // 3)))
        ax.set_xlabel(metric)
        ax.set_ylabel("cells")
    seeds = max(1, len(done) // max(1, len({tuple(r.get(k) for k in groups) for r in done})))
    ax.set_ylabel(metric) if groups else None
    ax.set_title(f"mean and min-max over {seeds} seed(s)" if groups else f"{metric} over the cells")
    return save(fig, out, f"sweep-{_safe(metric)}", f"{metric} across the sweep",
                f"{metric} from results.csv: mean over seed axes with a min-max band"
                + (f", against {groups[0]}" if groups else "") + ".")


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in name)
