"""``ntpbias analyze``: the geometry of linear next-token prediction for one dataset."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import __version__
from ..config import INT64_MAX
from ._common import cli, load_ntp_data, overwrite_option, resource_options


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


@cli.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--context-length", type=click.IntRange(1, INT64_MAX), default=None,
              help="Sequences file: contexts are windows of K tokens.")
@click.option("--autoregressive", is_flag=True, help="Sequences file: every prefix of every line is a context.")
@click.option("--max-context", type=click.IntRange(1, INT64_MAX), default=None,
              help="With --autoregressive: longest prefix used.")
@click.option("--embedding", default="onehot", show_default=True,
              help="Sequences file: onehot | gaussian[:d=60,scale=1,seed=0] | file.npy (m x d).")
@click.option("--solver", type=click.Choice(["auto", "clarabel", "dual", "workset", "ipm"]), default="auto",
              show_default=True,
              help="Backend of the NTP-SVM: Clarabel (small problems), the matrix-free dual solver, the workset "
                   "method (float32 active-set search, float64 refinement), or the interior-point method (ill-"
                   "conditioned features such as a trained model's: its cost does not depend on cond(H)); auto picks "
                   "by size.")
@click.option("--float32", "float32", is_flag=True,
              help="Run the dual solver in float32 (its certificate is still checked, and refined, in float64).")
@click.option("--max-iter", type=click.IntRange(1, INT64_MAX), default=None,
              help="Iteration cap of the dual solver (default 20000).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the matrix-free computations run.")
@click.option("--ufm", "with_ufm", is_flag=True,
              help="Also the log-bilinear model's logit-space objects (docs/ufm.md): the nuclear-norm NTP-SVM with its "
                   "certificate and the centred support matrix's singular values, under `ufm` in analysis.json.")
@click.option("--norms", default="", metavar="LIST",
              help="Also the max-margin solution in each of these norms (comma-separated: l2, linf, l1, spectral, "
                   "nuclear), certified, into the max_margin object of analysis.json and W_mm_<norm> of geometry.npz.")
@overwrite_option
@click.option("--json", "as_json", is_flag=True, help="Print analysis.json to stdout instead of a table.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@resource_options
def analyze(data, out, context_length, autoregressive, max_context, embedding, solver, float32, max_iter, device,
            with_ufm, norms, overwrite, as_json, quiet):
    """Compute the theory's objects for NTP data: H, F, W*, separability, W^mm.

    DATA is an NTP dataset .npz (H: m x d, P: m x V, optional pi, vocab, contexts) or a sequences .txt
    file (one sequence per line). Writes OUT/analysis.json and OUT/geometry.npz (W_star, and W_mm when the
    data are NTP-separable; non-separable data are a finding, not an error).

    \b
    Examples:
      ntpbias analyze data.npz --out runs/a
      ntpbias analyze text.txt --context-length 1 --out runs/bigram
      ntpbias analyze text.txt --autoregressive --embedding gaussian:d=200,seed=1 --out runs/ar --json
      ntpbias analyze big.npz --solver dual --float32 --device cuda --out runs/big
      ntpbias analyze data.npz --ufm --out runs/a     # + the log-bilinear model's nuclear-norm SVM
      ntpbias analyze data.npz --norms l2,linf,l1,spectral,nuclear --out runs/norms
    """
    from ..io import input_file

    input_file(data)  # a missing file is refused before numpy and torch are loaded (seconds)
    if embedding.endswith(".npy"):
        input_file(embedding, "--embedding")

    import torch

    from .._tensor import resolve_device
    from ..geometry.analysis import analyze as run_analysis
    from ..geometry.norms import parse_norms
    from ..io import check_output_dir, sha256_file, write_json, write_npz
    from ..progress import task
    from ..results import check_earlier_run, claim_run_dir

    norm_list = parse_norms(norms) if norms else ()  # a bad list fails before any work
    dev = resolve_device(device)
    out = check_output_dir(out, ("analysis.json", "geometry.npz"))
    check_earlier_run(out, overwrite=overwrite)
    with task("analyze: reading data", enabled=not quiet) as status:
        ntp = load_ntp_data(data, context_length=context_length, autoregressive=autoregressive,
                            max_context=max_context, embedding=embedding)
        if dev.type != "cpu":
            ntp = ntp.to(dev)
        options = {"dtype": "float32"} if float32 else {}
        if max_iter is not None:
            options["max_iter"] = max_iter
        status.update(description="analyze")
        result = run_analysis(ntp, solver=solver, progress=lambda msg: status.update(description=f"analyze: {msg}"),
                              solver_options=options, norms=norm_list)
        record = result.to_dict()
        arrays = result.arrays()
        if with_ufm:
            from ..geometry.ufm.logit_svm import ufm_summary

            status.update(description="analyze: log-bilinear model: nuclear-norm NTP-SVM")
            ufm_record, ufm_arrays = ufm_summary(ntp.to(device="cpu", dtype=torch.float64),
                                                 "auto" if solver == "auto" else ("admm" if solver == "dual"
                                                                                  else "clarabel"))
            record["ufm"] = ufm_record
            arrays.update(ufm_arrays)
            if not ufm_record["svm"]["certified"]:
                record["notes"].append(f"the nuclear-norm NTP-SVM missed its tolerance: relative duality gap "
                                       f"{ufm_record['svm']['gap_rel']:.2e}")
    record["input"] = {
        "path": str(data), "sha256": sha256_file(data), "context_length": context_length,
        "autoregressive": autoregressive, "max_context": max_context,
        "embedding": None if Path(data).suffix == ".npz" else embedding,
    }
    record["ntpbias_version"] = __version__
    with claim_run_dir(out, overwrite=overwrite):  # only once the results exist: a failed run leaves nothing behind
        write_npz(out / "geometry.npz", **arrays)
        write_json(out / "analysis.json", record)
    if as_json:
        click.echo(json.dumps(record, indent=2))
    else:
        _print_analysis(record, out)


def _print_analysis(rec: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="NTP geometry", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("contexts m / vocabulary V / dim d", f"{rec['m']} / {rec['V']} / {rec['d']}"),
        ("entropy H (nats)", _fmt(rec["entropy"])),
        ("dim F (of Vd)", f"{rec['dim_F']} (of {rec['ambient_dim']}; {rec['subspace_method']} method)"),
        ("equalities / inequalities", f"{rec['n_equalities']} / {rec['n_inequalities']}"),
        ("NTP_H-compatible", f"{_fmt(rec['compatible'])} (residual {rec['compatibility_residual']:.2e})"),
        ("NTP-separable", f"{_fmt(rec['separable'])} (decided by {rec['separability_method']}, certificate "
                          f"residual {rec['separability_certificate']['residual']:.2e})"),
        ("||W*||", _fmt(rec["norm_W_star"])),
        ("||W^mm||", _fmt(rec["norm_W_mm"])),
        ("max normalized margin 1/||W^mm||", _fmt(rec["margin"])),
    ]
    if rec["kkt"] is not None:
        extra = rec["solver_details"] or {}
        how = ", ".join(f"{extra[k]}" for k in ("form", "precision") if k in extra)
        iters = f", {rec['solver_iterations']} iterations" if rec["solver_iterations"] is not None else ""
        rows.append(("solver", f"{rec['solver']}{' (' + how + ')' if how else ''}: {rec['solve_seconds']:.2f} s"
                               f"{iters}, {rec['status']}"))
        rows.append(("KKT worst residual", f"{max(rec['kkt'].values()):.2e}"))
    if rec.get("ufm"):
        u = rec["ufm"]
        rows.append(("log-bilinear: ||L^mm||_* (nuclear-norm SVM)", f"{u['svm']['value']:.6g} ({u['svm']['solver']}, "
                     f"gap {u['svm']['gap_rel']:.1e}, rank {u['svm']['rank']})"))
        rows.append(("log-bilinear: singular values of S̃", ", ".join(f"{x:.4g}" for x in
                                                                    u["support_matrix_singular_values"][:8])))
    for norm, e in (rec.get("max_margin") or {}).items():
        if e["norm_W_mm"] is None:
            rows.append((f"max margin, {norm} norm", e["status"]))
            continue
        unique = {True: "unique", False: "not unique", None: "uniqueness undecided"}[e["unique"]]
        rows.append((f"max margin, {norm} norm", f"{_fmt(e['margin'])} (||W^mm|| = {_fmt(e['norm_W_mm'])}; "
                     f"{'certified' if e['certified'] else 'NOT certified'}, {unique}; {e['seconds']:.2f} s)"))
    for k, v in rows:
        table.add_row(k, v)
    console = Console()
    console.print(table)
    for note in rec["notes"]:
        console.print(f"note: {note}", style="yellow", highlight=False)
    console.print(f"wrote {out / 'analysis.json'} and {out / 'geometry.npz'}", highlight=False)
