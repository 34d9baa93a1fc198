"""``ntpbias structure``: the dataset structure of the transformer paper (collocation, orders, assumptions)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._common import check_output_file, cli, refuse_missing_source, resource_options

#: Violations shown per check in the table output (the JSON lists all).
SHOWN = 5


def load_sentences(name: str):
    """A sentences file, or a built-in dataset name (``example1``, ``prop2-counterexample``)."""
    from ..data.config import BUILTIN_SENTENCES

    refuse_missing_source(name, BUILTIN_SENTENCES)
    from ..data.sentences import BUILTIN, NTPSamples
    from ..io import input_file

    path = Path(name)
    return NTPSamples.from_file(input_file(path)) if path.exists() else BUILTIN[name]()


@cli.command()
@click.argument("sentences")
@click.option("--query", default=None, help="Show only the token classes under this query token.")
@click.option("--max-margin", is_flag=True,
              help="Also solve W_ov* and W_kq* (one-hot embeddings) and compare Proposition 2 with the QP.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON instead of tables.")
@click.option("--plot", "plot_path", default=None, metavar="OUT.png",
              help="Also draw paper C's Figure 1 for the dataset: the collocation and each query's partial order "
                   "(.png, .svg or .pdf).")
@resource_options
def structure(sentences, query, max_margin, as_json, plot_path):
    """Collocation, query-dependent partial orders, token classes and Assumptions 1 and 3 of a dataset.

    SENTENCES is a text file with one training sentence per line (whitespace-separated tokens; every
    prefix is a training sample labelled by the next token), or a built-in dataset: example1 (the
    paper's S V O P example) or prop2-counterexample. Exits with status 2 after the report when an
    assumption fails, naming the offending sentences and the theory results that no longer apply.

    \b
    Examples:
      ntpbias structure example1
      ntpbias structure sentences.txt --json
      ntpbias structure example1 --query P --max-margin
      ntpbias structure example1 --plot figure1.png
    """
    from ..errors import DataError

    if plot_path is not None and Path(plot_path).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise DataError(f"--plot {plot_path}: give a .png, .svg or .pdf file name")
    if plot_path is not None:
        check_output_file(plot_path, "--plot")
    samples = load_sentences(sentences)
    from ..data.structure import analyze_structure

    st = analyze_structure(samples)
    record = st.to_dict()
    if query is not None:
        classes = st.token_classes(query)  # DataError for an unknown or never-seen query
        record["queries"] = {samples.vocab[classes.query]: record["queries"][samples.vocab[classes.query]]}
    if max_margin:
        record["max_margin"] = _max_margin(st) if st.assumptions_hold else None
        if query is not None and record["max_margin"] is not None:
            prop2 = record["max_margin"]["prop2"]
            record["max_margin"]["prop2"] = {q: c for q, c in prop2.items() if q in record["queries"]}
    if as_json:
        click.echo(json.dumps(record, indent=2))
    else:
        _print(record)
    if plot_path is not None:
        from ..report.figures import save_to
        from ..report.structure import structure_figure

        save_to(structure_figure(st), [plot_path])
    if not st.assumptions_hold:
        raise DataError(st.failure_message())


def _max_margin(st) -> dict:
    """W_ov*, W_kq* with certificates, and Proposition 2 against the QP (one-hot embeddings)."""
    import torch

    from ..geometry.transformer.optimum import compare_prop2, wkq_star, wov_star

    vocab = st.samples.vocab
    E = torch.eye(st.samples.V, dtype=torch.float64)
    ov = wov_star(st.collocation.next_token, E)
    kq = wkq_star(st, E)
    cmp = compare_prop2(st, kq, E)
    return {
        "embedding": "onehot",
        "norm_W_ov_star": ov.norm, "W_ov_certified": ov.certified, "W_ov_kkt": ov.certificate.as_dict(),
        "norm_W_kq_star": kq.norm, "W_kq_certified": kq.certified, "W_kq_kkt": kq.certificate.as_dict(),
        "solver": kq.solver,
        "prop2_holds_everywhere": bool(cmp.agree.all()),
        "prop2": cmp.to_dict(vocab),
    }


def _print(rec: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    ds = rec["dataset"]
    console.print(f"[bold]{ds['source']}[/]: |V| = {ds['V']}, N = {ds['N']} distinct samples "
                  f"(|D_0| = {ds['total']}), L_max = {ds['L_max']}", highlight=False)
    col = rec["collocation_report"]
    pairs = ", ".join(f"{x}->{y if y is not None else '?'}" for x, y in rec["collocation"].items())
    verdict = "a permutation" if col["is_permutation"] else "NOT a permutation"
    console.print(escape(f"collocation ({verdict}): {pairs}"), highlight=False)

    table = Table(title="token classes per query", title_justify="left")
    for name in ("query", "optimal", "non-optimal", "non-comparable", "confused", "order"):
        table.add_column(name)
    for q, c in rec["queries"].items():
        order = ", ".join(f"{u}>{v}" for u, v in c["order"])
        table.add_row(q, *(" ".join(c[k]) or "-" for k in ("optimal", "non_optimal", "non_comparable", "confused")),
                      order or "-")
    console.print(table)

    asm = rec["assumptions"]
    checks = Table(title="assumptions", title_justify="left")
    for name in ("check", "holds", "statement"):
        checks.add_column(name)
    for name, statement in asm["statements"].items():
        checks.add_row(name, "[green]yes[/]" if asm[name] else "[red]NO[/]", escape(statement))
    console.print(checks)
    for name, violations in asm["violations"].items():
        for v in violations[:SHOWN]:
            where = "; ".join(f"sentence {s['sentence']}: {s['text']}" if s["sentence"] else s["text"]
                              for s in v["sentences"])
            console.print(f"[red]{name}[/]: " + escape(v["message"] + (f" [{where}]" if where else "")),
                          highlight=False)
        if len(violations) > SHOWN:
            console.print(f"[red]{name}[/]: ... {len(violations) - SHOWN} more (see --json)", highlight=False)
    if asm["not_applicable"]:
        console.print("no longer applicable: " + ", ".join(asm["not_applicable"]), style="yellow", highlight=False)
    regen = rec["regeneration"]
    console.print("collocation + orders reproduce every label: "
                  + ("yes" if regen["reproduces_labels"] else f"no ({len(regen['mismatches'])} mismatches)"),
                  highlight=False)
    if "max_margin" in rec:
        _print_max_margin(console, rec["max_margin"])


def _print_max_margin(console, mm: dict | None) -> None:
    from rich.table import Table

    if mm is None:
        console.print("max-margin solutions skipped: the assumptions do not hold", style="yellow")
        return
    console.print(f"||W_ov*|| = {mm['norm_W_ov_star']:.6g} (certified: {mm['W_ov_certified']}), "
                  f"||W_kq*|| = {mm['norm_W_kq_star']:.6g} (certified: {mm['W_kq_certified']}, {mm['solver']})",
                  highlight=False)
    table = Table(title="W_kq* column per query: QP vs Proposition 2", title_justify="left")
    for name in ("query", "QP (non-zero entries)", "Prop. 2", "condition", "agree", "||col||² QP / Prop. 2"):
        table.add_column(name)
    for q, c in mm["prop2"].items():
        qp = " ".join(f"{k}:{v:+.4g}" for k, v in c["qp"].items() if abs(v) > 1e-9)
        cf = " ".join(f"{k}:{v:+.4g}" for k, v in c["closed_form"].items() if v != 0)
        table.add_row(q, qp, cf, "holds" if c["condition_holds"] else "fails", "yes" if c["agree"] else "NO",
                      f"{c['norm2_qp']:.6g} / {c['norm2_closed_form']:.6g}")
    console.print(table)
