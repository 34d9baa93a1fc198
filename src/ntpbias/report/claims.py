"""``docs/claims.md``: every sentence of the papers a check grades, with the checks, what they measure, their setting
and their verdicts at quick and paper scale.

The sentences come from the code (:data:`ntpbias.experiments.claims.CLAIMS`); the verdicts from the check records of
runs, kept in ``docs/results/checks-<scale>.json`` (``--collect`` writes them from run directories). Rendering needs no
run, so a test regenerates the page and compares it with the committed one.

Usage::

    python -m ntpbias.report.claims --collect quick runs/all            # records of a reproduce run (any groups)
    python -m ntpbias.report.claims --collect paper runs/linear runs/tf  # one-group runs too
    python -m ntpbias.report.claims                                      # write docs/claims.md
    python -m ntpbias.report.claims --check                              # exit 1 if docs/claims.md is stale
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from ..experiments.claims import CLAIMS, PAPERS
from ..results import QUOTED_KINDS, VERDICTS

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
SCALES = ("quick", "paper")
#: the order verdicts are counted in: the graded ones first, each apart, then the ones never counted
ORDER = ("pass", "consistent", "inconsistent", "fail", "not graded", "control passed") + tuple(
    v for v in VERDICTS if v not in ("pass", "consistent", "inconsistent", "fail", "not graded", "control passed"))
#: the fields of a check record kept in docs/results/checks-<scale>.json
FIELDS = ("group", "name", "kind", "verdict", "measured", "threshold", "metric", "quote", "where", "premise",
          "premise_met", "control", "control_measured", "control_passed", "ungraded_reason")


def collect(run_dirs: list[str | Path]) -> list[dict]:
    """The check records of run directories (a combined ``reproduce`` summary or a one-group run)."""
    records = []
    for run in run_dirs:
        summary = json.loads((Path(run) / "summary.json").read_text(encoding="utf-8"))
        sections = summary.get("sections", [])
        group = sections[0]["id"] if len(sections) == 1 else None
        for c in summary.get("checks", []):
            records.append({k: (c.get("section") or group) if k == "group" else c.get(k, "") for k in FIELDS})
    return records


def records_path(scale: str, docs: Path = DOCS) -> Path:
    return docs / "results" / f"checks-{scale}.json"


def load_records(scale: str, docs: Path = DOCS) -> dict:
    path = records_path(scale, docs)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"runs": {}, "checks": []}


def update_records(scale: str, run_dirs: list[str | Path], docs: Path = DOCS) -> Path:
    """Replace the records of the groups ``run_dirs`` hold in ``docs/results/checks-<scale>.json``."""
    new = collect(run_dirs)
    groups = {r["group"] for r in new}
    old = load_records(scale, docs)
    commands = {}
    for run in run_dirs:
        summary = json.loads((Path(run) / "summary.json").read_text(encoding="utf-8"))
        for g in {r["group"] for r in collect([run])}:
            commands[g] = _command(summary.get("command", ""))
    data = {"runs": {**{g: c for g, c in old["runs"].items() if g not in groups}, **commands},
            "notes": {g: n for g, n in old.get("notes", {}).items() if g not in groups},
            "checks": [r for r in old["checks"] if r["group"] not in groups] + new}
    path = records_path(scale, docs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _command(command: str) -> str:
    """A recorded command without its output path (where a run was written is no part of its result)."""
    return re.sub(r"--out \S+", "--out DIR", command)


def _escape(text: str) -> str:
    """``text`` as Markdown that renders as written: the characters Markdown reads (emphasis, code, links, HTML, math,
    table cells) escaped."""
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    return re.sub(r"([`*_\[\]$|])", r"\\\1", text)


def _text(value) -> str:
    """A value of a record as one escaped line (floats to 4 significant digits)."""
    return _escape(f"{value:.4g}" if isinstance(value, float) else " ".join(str(value).split()))


def _quote(quote: str) -> str:
    """A paper's sentence, verbatim: its ``$...$`` and ``$$...$$`` formulas (the text extraction's TeX, the docs'
    formulas) typeset as inline math, the rest escaped; a sentence with an unpaired ``$`` is escaped whole."""
    quote = " ".join(quote.split())
    parts = re.split(r"(\$\$[^$]+\$\$|\$[^$]+\$)", quote)
    if "$" in "".join(parts[0::2]):
        return _escape(quote)
    return "".join(f"${_inline(p.strip('$').strip())}$" if i % 2 else _escape(p) for i, p in enumerate(parts))


def _inline(tex: str) -> str:
    """A display formula's TeX as inline math: an equation number ``\\tag{12}`` written ``(12)`` beside it."""
    return re.sub(r"\\tag\{([^}]*)\}", r"\\qquad (\1)", tex)


def _split(name: str) -> tuple[str, str]:
    """A check's name as (configuration, what is checked): "V=2, |S|=1, m=40: Cover's law" -> ("V=2, |S|=1, m=40",
    "Cover's law"); a name without a configuration has ""."""
    config, sep, check = name.rpartition(": ")
    return (config, check) if sep else ("", name)


def _configurations(configs: list[str]) -> str:
    """The configurations of one check, summarized: each key's values when every configuration is a list of
    ``key=value`` (``V = 2, 3, 5; m = 40, 100``), else the names (the first five and a count)."""
    configs = [c for c in dict.fromkeys(configs) if c]
    if not configs:
        return ""
    pairs = [[item.split("=", 1) for item in c.split(", ")] for c in configs]
    if len(configs) > 1 and all(len(kv) == 2 for p in pairs for kv in p):
        values: dict[str, list[str]] = {}
        for p in pairs:
            for k, v in p:
                values.setdefault(k.strip(), []).append(v.strip())

        def order(v):
            return (0, float(v), v) if re.fullmatch(r"-?[\d.]+(e-?\d+)?", v) else (1, 0.0, v)

        keys = "; ".join(f"{k} = {', '.join(sorted(dict.fromkeys(v), key=order))}" for k, v in values.items())
        return f"{len(configs)}: {_text(keys)}"
    shown = ", ".join(configs[:5]) + (f" and {len(configs) - 5} more" if len(configs) > 5 else "")
    return _text(shown) if len(configs) == 1 else f"{len(configs)}: {_text(shown)}"


def _values(values: list) -> str:
    """One measured value, or the range of several numbers ("0.86 to 0.97"); several texts: the first, "..."."""
    values = [v for v in values if v not in ("", None)]
    if not values:
        return ""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values) and min(numbers) != max(numbers):
        return f"{_text(float(min(numbers)))} to {_text(float(max(numbers)))}"
    return _text(values[0]) + (", ..." if len(set(map(str, values))) > 1 else "")


def _verdicts(records: list[dict]) -> str:
    """The verdicts of one check's configurations at one scale, each verdict counted apart (pass, consistent,
    inconsistent, fail, not graded, control passed, ...), with the measured values, the negative control's values and
    why a check was not graded."""
    if not records:
        return "not run"
    verdicts = [r["verdict"] for r in records]
    counts = {v: verdicts.count(v) for v in ORDER if v in verdicts}
    if len(records) == 1:
        text = f"**{verdicts[0]}**"
    else:
        text = ", ".join((f"**{n} {v}**" if v in ("pass", "fail") else f"{n} {v}") for v, n in counts.items())
    details = [_values([r["measured"] for r in records])]
    control = _values([r.get("control_measured") for r in records])
    if control:
        details.append(f"control {control}")
    reasons = [r["ungraded_reason"] for r in records if r.get("ungraded_reason")]
    if reasons:
        details.append("not graded: " + _text("; ".join(dict.fromkeys(reasons))))
    details = [d for d in details if d]
    return text + (f" ({'; '.join(details)})" if details else "")


def _setting(records: list[dict]) -> str:
    """The premises of one check's configurations and how many of them met them; premises that differ only in their
    end (``... (this run: gd, η = 0.5)``) are written once, with the ends that differ."""
    premises = list(dict.fromkeys(" ".join(r["premise"].split()) for r in records if r.get("premise")))
    if not premises:
        return "no premise"
    met = [r.get("premise_met") for r in records]
    n = len(met)
    summary = ("met" if met.count(True) == n else "not met" if met.count(False) == n else "n/a" if met.count(None) == n
               else f"met in {met.count(True)} of {n}")
    shown = premises[0]
    if len(premises) > 1:
        common = os.path.commonprefix(premises)
        cut = common.rfind(" (") if " (" in common else common.rfind("; ")
        head = common[:cut + 1] if cut > 0 else ""
        ends = [p[len(head):].strip() for p in premises]
        shown = head + " / ".join(ends[:4]) + (f" / {len(ends) - 4} more" if len(ends) > 4 else "")
    return f"{_text(shown)} ({summary})"


def _control(records: list[dict]) -> str:
    controls = list(dict.fromkeys(r["control"] for r in records if r.get("control")))
    return _text("; ".join(controls))


def _rows(keys: list[tuple[str, str]], by_key: dict[tuple[str, str], dict[str, dict]]) -> list[str]:
    """One row per check of a sentence: its configurations (the part of the check's name before ": ") gathered."""
    rows: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for group, name in keys:
        r = next(iter(by_key[(group, name)].values()))
        rows.setdefault((group, _split(name)[1], r["kind"]), []).append((group, name))
    lines = ["| check (kind) | what it measures; its negative control | setting; configurations | quick | paper |",
             "|---|---|---|---|---|"]
    for (group, check, kind), members in rows.items():
        per_scale = {s: [by_key[k][s] for k in members if s in by_key[k]] for s in SCALES}
        every = per_scale["paper"] + per_scale["quick"]
        metric = _text(next((r["metric"] for r in every if r.get("metric")), "")) or "—"
        control = _control(every)
        configs = _configurations([_split(n)[0] for _, n in members])
        lines.append(f"| {_text(group)}: {_text(check)} ({kind}) | {metric}"
                     f"{f'; *control:* {control}' if control else ''} | {_setting(every)}"
                     f"{f'; *runs:* {configs}' if configs else ''} | "
                     f"{_verdicts(per_scale['quick'])} | {_verdicts(per_scale['paper'])} |")
    return lines + [""]


def _tally(records: list[dict]) -> str:
    verdicts = [r["verdict"] for r in records]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in ORDER if v in verdicts) or "none"


def render(docs: Path = DOCS) -> str:
    """The text of docs/claims.md from :data:`CLAIMS` and the committed check records."""
    records = {scale: load_records(scale, docs) for scale in SCALES}
    by_key: dict[tuple[str, str], dict[str, dict]] = {}
    for scale, data in records.items():
        for r in data["checks"]:
            by_key.setdefault((r["group"], r["name"]), {})[scale] = r
    by_quote: dict[str, list[tuple[str, str]]] = {}
    unquoted = []
    for key, scales in by_key.items():
        r = next(iter(scales.values()))
        if r.get("quote"):
            by_quote.setdefault(" ".join(r["quote"].split()), []).append(key)
        elif r["kind"] in QUOTED_KINDS:
            unquoted.append(key)
    known = {" ".join(c.quote.split()) for c in CLAIMS.values()}
    stale = sorted(q for q in by_quote if q not in known)
    if stale:
        raise ValueError(f"{len(stale)} recorded quote(s) are no claim of the code (rerun the runs and --collect): "
                         f"{stale[0][:80]}")
    quoted = {scale: [r for r in data["checks"] if r.get("quote")] for scale, data in records.items()}
    lines = [
        "---",
        "hide: [navigation]",
        "---",
        "",
        "# Claims: the papers' sentences and the checks that grade them",
        "",
        "<!-- generated by `python -m ntpbias.report.claims` from the code's claims and docs/results/checks-*.json; "
        "do not edit -->",
        "",
        "Every `theorem`, `paper-number` and `erratum` check of ntpbias grades one sentence of a paper, quoted "
        "verbatim (search it in the paper's text; formulas as the text extraction gives them), or, for a statement we "
        "derive or take from the literature beyond the three papers, the sentence of the docs page that states it. "
        "Below, per sentence: where it stands, and one row per check that grades it: what it measures, the "
        "configurations it runs on (the runs and settings of the same check, gathered), its setting (the premises and "
        "whether the runs met them), its negative control (the input on which it must fail, "
        "[checks.md](checks.md#a-negative-control-for-every-graded-check)), and its verdicts at quick and at paper "
        "scale, each verdict counted apart, with the measured values (a range over the configurations) and the "
        'control\'s. A premise not met turns pass/fail into consistent/inconsistent; "control passed" means the '
        "control passed too, so the pass shows nothing; `by-construction` and `erratum` checks are never counted as "
        "matches ([checks.md](checks.md)).",
        "",
        "Runs: " + "; ".join(f"{scale} scale: " + (", ".join(f"`{c}`" for c in sorted({_command(c) for c in
                                                                                       data["runs"].values()}))
                                                   or "none recorded") for scale, data in records.items()) + ".",
        "",
        *[f"Note on the {scale}-scale records of `{group}`: {note}\n" for scale, data in records.items()
          for group, note in sorted(data.get("notes", {}).items())],
        "Checks of a sentence, by verdict: " + "; ".join(f"{scale} scale: {_tally(quoted[scale])}" for scale in SCALES)
        + ".",
        "",
    ]
    sections = [("A", f"Paper A: {PAPERS['A']}"), ("B", f"Paper B: {PAPERS['B']}"), ("C", f"Paper C: {PAPERS['C']}"),
                ("docs", "Statements beyond the papers (our derivations and the literature, quoted from the docs)")]
    for prefix, title in sections:
        lines += [f"## {title}", ""]
        places: dict[str, list] = {}
        for key, claim in CLAIMS.items():
            if key.startswith(prefix + ":"):
                places.setdefault(claim.where, []).append(claim)
        for where, claims in places.items():
            lines += [f"### {_text(where)}", ""]
            for claim in claims:
                checks = by_quote.get(" ".join(claim.quote.split()), [])
                lines += [f"> {_quote(claim.quote)}", ""]
                lines += _rows(checks, by_key) if checks else ["No check of a recorded run grades it.", ""]
    if unquoted:
        counts = {g: sum(1 for x, _ in unquoted if x == g) for g in sorted({g for g, _ in unquoted})}
        lines += ["## Checks still without a quoted sentence", "",
                  "; ".join(f"{g}: {n} checks" for g, n in counts.items()) + ".", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--collect"]:
        if len(argv) < 3 or argv[1] not in SCALES:
            print("usage: python -m ntpbias.report.claims --collect quick|paper RUN_DIR [RUN_DIR ...]")
            return 2
        print(update_records(argv[1], argv[2:]))
        return 0
    text = render()
    path = DOCS / "claims.md"
    if argv[:1] == ["--check"]:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            print(f"{path} is stale: run python -m ntpbias.report.claims")
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
