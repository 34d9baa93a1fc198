"""``ntpbias lm compare``: the final checkpoints of several ``lm analyze`` runs side by side, across context lengths T,
widths d and seeds (docs/lm.md#across-t-and-d).

Each ``analysis.json`` gives one row: its text and vocabulary size V, its T, the model's width d and seed, and the
quantities of its last checkpoint. Rows with the same (V, d, T) are seeds of one setting: the table gives their mean and
sample standard deviation, and the figure draws each quantity against T, one line per d (error bars: one standard
deviation over the seeds), beside the count baselines of the same contexts (dotted: add-1 smoothed counts; dashed: the
unigram model).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...errors import DataError
from ...io import input_file
from ...results import FigureSpec, Section, Table

#: the quantities compared (each also measured on the baselines where it needs no model)
KEYS = ("loss_gap", "finite_rel_error_weighted", "logit_perp_share", "logit_cos_perp_S", "cos_context_gram_S",
        "sub_collapse_mean_ratio", "separated_fraction", "prefix_mass")
#: the baselines drawn beside the models
BASELINES = ("add_1", "unigram")


def read_record(path: str | Path) -> dict:
    """One row of the comparison from an ``lm analyze`` output folder or its ``analysis.json``."""
    path = Path(path)
    file = input_file(path / "analysis.json" if path.is_dir() else path, "an lm analyze output")
    record = json.loads(file.read_text(encoding="utf-8"))
    if "lm" not in record:
        raise DataError(f"{file}: not an `ntpbias lm analyze` record (no 'lm' entry)")
    lm = record["lm"]
    return {"source": str(file.parent), "V": record["V"], "d": record["d"], "T": lm["context_length"],
            "m": record["m"], "seed": lm.get("seed"), "step": lm["final"]["step"],
            **{k: lm["final"].get(k) for k in KEYS}, "baselines": lm["reference"]["baselines"]}


def _stats(values: list) -> tuple[float | None, float | None]:
    v = np.array([x for x in values if x is not None], dtype=float)
    if not v.size:
        return None, None
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else None


def compare(rows: list[dict]) -> tuple[list[dict], Section]:
    """Group ``rows`` (:func:`read_record`) by (V, d, T) and summarize each group over its seeds.

    Returns (one summary per group: V, d, T, m, seeds, each key's mean and sd, the baselines' values), and the report
    section with the table and the figure ``lm-across``.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["V"], r["d"], r["T"]), []).append(r)
    summary = []
    for (V, d, T), members in sorted(groups.items()):
        entry = {"V": V, "d": d, "T": T, "m": members[0]["m"], "runs": len(members),
                 "seeds": [r["seed"] for r in members], "sources": [r["source"] for r in members]}
        for key in KEYS:
            entry[key], entry[key + "_sd"] = _stats([r[key] for r in members])
        entry["baselines"] = {name: {k: members[0]["baselines"].get(name, {}).get(k) for k in KEYS}
                              for name in BASELINES}
        summary.append(entry)
    header = ("V", "d", "T", "m", "runs", *KEYS)

    def cell(entry, key):
        mean, sd = entry[key], entry[key + "_sd"]
        return "-" if mean is None else f"{mean:.3g}" + ("" if sd is None else f" ± {sd:.2g}")

    table = Table("Final checkpoints (mean ± sd over the runs of each setting)", header,
                  tuple((e["V"], e["d"], e["T"], e["m"], e["runs"], *(cell(e, k) for k in KEYS)) for e in summary))
    base = Table("Baselines on the same contexts (no trained model)", ("V", "T", "logits", *KEYS), tuple(
        (e["V"], e["T"], name, *("-" if e["baselines"][name][k] is None else float(f"{e['baselines'][name][k]:.3g}")
                                 for k in KEYS))
        for e in {(x["V"], x["T"]): x for x in summary}.values() for name in BASELINES))
    section = Section("lm-compare", "Language models across context lengths and widths",
                      description="The last checkpoint of each `lm analyze` run; runs with the same V, d and T are "
                                  "seeds of one setting (docs/lm.md#across-t-and-d).",
                      facts={"runs": len(rows), "settings": len(summary)}, tables=[table, base])
    section.plots.append(FigureSpec("lm-across", "The geometry across T and d",
                                    "Each quantity at the last checkpoint against the context length T, one line per "
                                    "(V, d), error bars one standard deviation over seeds; dotted: add-1 smoothed "
                                    "counts, dashed: the unigram model, on the same contexts.", "lm.across",
                                    {"summary": summary, "keys": list(KEYS)}))
    return summary, section


__all__ = ["BASELINES", "KEYS", "compare", "read_record"]
