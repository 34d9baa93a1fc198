"""``ntpbias lm train`` and ``ntpbias lm analyze``: a transformer language model's NTP geometry (docs/lm.md).

Heavy libraries (torch, transformers) are imported inside the commands, so ``ntpbias lm --help`` loads none."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import INT64_MAX
from ..errors import ConfigError
from ._common import (
    _console,
    cli,
    command_line,
    overwrite_option,
    refuse_missing_source,
    resource_options,
    run_dir_options,
)

#: the files ``lm analyze`` writes into --out
ANALYSIS_FILES = ("analysis.json", "ntp_data.npz", "lm_geometry.npz", "report.html")


@cli.group()
def lm():
    """A transformer language model's NTP geometry: train one on a text, then measure it at every checkpoint.

    \b
    Examples:
      ntpbias lm train --preset lm-shakespeare --out runs/lm            # the built-in Shakespeare (< 10 min, 1 CPU)
      ntpbias lm train --preset lm-shakespeare-1k --out runs/lm1k       # V = 1024 (< 15 CPU min)
      ntpbias lm train my_text.txt --set model.d=64 --out runs/mine     # any text, one sequence per line
      ntpbias lm analyze runs/lm --context-length 1 --out runs/lm-geo   # every checkpoint on the training text
      ntpbias lm analyze runs/lm --context-length 2 --checkpoints 4 --out runs/lm-t2
      ntpbias lm analyze --hf ./my-gpt2 --text my_text.txt --out runs/hf
    """


@lm.command("train")
@click.argument("text", required=False)
@click.option("--preset", help="An lm preset: lm-shakespeare, lm-shakespeare-1k, lm-planted (see `ntpbias list`).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="A TOML config (e.g. a run's config.toml).")
@click.option("--scale", type=click.Choice(["smoke", "quick", "paper"]), default="paper", show_default=True,
              help="Preset scale (paper: the preset as stated).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a setting, e.g. --set model.d=64 --set train.steps=500 (every key: `ntpbias settings "
                   "lm`).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Where to train (default: the config's).")
@run_dir_options
def train(text, preset, config_path, scale, overrides, device, out, resume, overwrite, as_json, quiet):
    """Train the GPT-style decoder on TEXT (a file, a folder of .txt/.md files, `shakespeare`, `imdb` or `planted`;
    each non-blank line is a sequence) or on a preset's text. Writes config.toml, metrics.csv, summary.json,
    report.html, tokenizer.json and checkpoints/steps/ (the parameters at every logged step, for `ntpbias lm analyze`).

    \b
    Examples:
      ntpbias lm train --preset lm-shakespeare --out runs/lm
      ntpbias lm train --preset lm-shakespeare-1k --device cuda --out runs/lm1k
      ntpbias lm train corpus.txt --set data.tokenizer=char --set model.context=64 --out runs/char
      ntpbias lm train --preset lm-planted --set seeds=3 --out runs/planted
    """
    from ..data.config import TEXTS
    from ..experiments.lm.config import PLANTED

    if text is not None:
        refuse_missing_source(text, (*TEXTS, PLANTED), "TEXT")
    from dataclasses import replace

    from ..api import run_config
    from ..config import apply_overrides, load_toml
    from ..experiments import RunContext
    from ..experiments.catalog import get_preset
    from ..experiments.lm import LMConfig
    from ._common import print_checks

    if preset is not None and config_path is not None:
        raise ConfigError("give at most one of --preset and --config")
    if preset is not None:
        cfg = get_preset(preset).make(scale)
        if not isinstance(cfg, LMConfig):
            raise ConfigError(f"--preset {preset} is not a language-model preset; use lm-shakespeare, "
                              "lm-shakespeare-1k or lm-planted (or `ntpbias train --preset` for the other experiments)")
    else:
        cfg = load_toml(LMConfig, config_path) if config_path else LMConfig()
    if text is None and preset is None and config_path is None:
        raise ConfigError("give the TEXT to train on, --preset or --config (e.g. `ntpbias lm train --preset "
                          "lm-shakespeare --out runs/lm`)")
    if text is not None:
        cfg = replace(cfg, data=replace(cfg.data, text=text))
    cfg = apply_overrides(cfg, list(overrides) + ([f"device={device}"] if device else []))
    console = _console(quiet)
    ctx = RunContext(out=Path(out), progress=not quiet, resume=resume, overwrite=overwrite, device=cfg.device,
                     say=lambda msg: console.log(msg))
    result = run_config(cfg, ctx, command=command_line())
    if as_json:
        click.echo((Path(out) / "summary.json").read_text(encoding="utf-8"))
    else:
        print_checks([result.section])
        facts = result.section.facts
        loss = result.histories[0]["loss"][-1].min()
        click.echo(f"trained {facts['steps']} steps in {facts['training wall seconds']:.0f} s "
                   f"({facts['training CPU seconds']:.0f} s CPU); final loss {loss:.4f}")
        click.echo(f"wrote {out}/ (report.html, checkpoints/steps/); next: ntpbias lm analyze {out} --out DIR")


@lm.command("analyze")
@click.argument("run_dir", required=False, type=click.Path(file_okay=False))
@click.option("--hf", "hf_dirs", multiple=True, type=click.Path(file_okay=False),
              help="A local Hugging Face causal LM folder instead of RUN_DIR (repeat for several checkpoints of one "
                   "model). Needs the hf extra; never downloads.")
@click.option("--text", default=None,
              help="The text to analyze: a file, a folder, shakespeare or imdb (default: the run's training text).")
@click.option("--context-length", type=click.IntRange(1, INT64_MAX), default=1, show_default=True,
              help="T: every window of T tokens inside a line is a context.")
@click.option("--max-tokens", type=click.IntRange(0, INT64_MAX), default=None,
              help="Use the first N tokens of the text (default: the run's data.max_tokens, or all).")
@click.option("--max-contexts", type=click.IntRange(0, INT64_MAX), default=0, show_default=True,
              help="Keep the N most frequent contexts (0 = all; π is renormalized over them).")
@click.option("--vocab", type=click.Choice(["model", "text"]), default="model", show_default=True,
              help="The tokens of the softmax: all the model's, or only those that occur in the text.")
@click.option("--checkpoints", type=click.IntRange(0, INT64_MAX), default=0, show_default=True,
              help="Measure N checkpoints spread over the run (the first and the last included; 0 = all).")
@click.option("--seed-index", type=click.IntRange(0, INT64_MAX), default=0, show_default=True,
              help="Which of the run's seeds to analyze.")
@click.option("--solver", type=click.Choice(["auto", "clarabel", "dual", "workset", "ipm"]), default="auto",
              show_default=True, help="NTP-SVM backend (the nuclear-norm SVM: clarabel or ADMM).")
@click.option("--no-nuclear", is_flag=True, help="Skip the nuclear-norm SVM (the log-bilinear model's L^mm).")
@click.option("--prefix/--no-prefix", default=True, show_default=True,
              help="Where the features are not separable, find the longest separable prefix of the contexts by "
                   "frequency and its W^mm (prefix_*).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the model computes the features (the geometry runs on the CPU in float64).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@overwrite_option
@click.option("--json", "as_json", is_flag=True, help="Print analysis.json to stdout.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@resource_options
def analyze(run_dir, hf_dirs, text, context_length, max_tokens, max_contexts, vocab, checkpoints, seed_index, solver,
            no_nuclear, prefix, device, out, overwrite, as_json, quiet):
    """Measure the NTP geometry of a model at every checkpoint: the text's NTP data at context length T, the model's
    last hidden states on those contexts and its unembedding, read as paper A's linear decoder and as the
    log-bilinear model (docs/lm.md). Writes OUT/analysis.json (curves over checkpoints under `lm`), OUT/ntp_data.npz
    (H, P, pi, W, vocab, contexts of the last checkpoint: `ntpbias analyze OUT/ntp_data.npz` reads it),
    OUT/lm_geometry.npz, OUT/figures/ and OUT/report.html.

    \b
    Examples:
      ntpbias lm analyze runs/lm --out runs/lm-geo
      ntpbias lm analyze runs/lm --context-length 3 --checkpoints 3 --out runs/t3
      ntpbias lm analyze runs/lm1k --context-length 2 --max-contexts 30000 --no-prefix --out runs/t2
      ntpbias lm analyze runs/lm --text other.txt --context-length 2 --max-contexts 2000 --checkpoints 6 --out runs/o
      ntpbias lm analyze --hf ./tiny-gpt2 --text corpus.txt --vocab text --out runs/hf
    """
    from ..data.config import TEXTS

    if (run_dir is None) == (not hf_dirs):
        raise ConfigError("give exactly one of RUN_DIR (a run of `ntpbias lm train`) or --hf FOLDER")
    for folder, what in [(run_dir, "RUN_DIR"), *((d, "--hf") for d in hf_dirs)]:
        if folder is not None:
            refuse_missing_source(folder, (), what)
    if text is not None:
        refuse_missing_source(text, TEXTS, "--text")
    from ..experiments.lm.analysis import HFModels, RunModels, analyze_models, text_contexts
    from ..io import check_output_dir, write_json, write_npz
    from ..report import draw, render
    from ..results import check_earlier_run, claim_run_dir

    outdir = check_output_dir(out, ANALYSIS_FILES, ("figures",))
    check_earlier_run(outdir, overwrite=overwrite)
    console = _console(quiet)
    with console.status("loading the model") as status:
        models = RunModels(run_dir, seed_index=seed_index, device=device) if run_dir else HFModels(list(hf_dirs),
                                                                                                    device=device)
        if text is None:
            lines, limit = models.training_text()
            source = f"the training text ({models.cfg.data.text})"
        else:
            from ..data.lm_text import text_lines

            lines, limit, source = text_lines(text), 0, text
        status.update("the text's NTP data")
        contexts = text_contexts(models, lines, context_length, max_tokens=limit if max_tokens is None else max_tokens,
                                 max_contexts=max_contexts, vocab=vocab, source=source)
        result = analyze_models(models, contexts, solver=solver, nuclear=not no_nuclear, prefix=prefix,
                                checkpoints=checkpoints, say=lambda msg: status.update(msg))
    result.record["input"] = {"models": models.source, "text": source, "context_length": context_length,
                              "max_tokens": limit if max_tokens is None else max_tokens, "max_contexts": max_contexts,
                              "vocab": vocab, "checkpoints": checkpoints, "seed_index": seed_index if run_dir else None,
                              "prefix": prefix, "device": device}
    with claim_run_dir(outdir, overwrite=overwrite):  # only once the results exist: a failed run leaves nothing
        result.data.save(outdir / "ntp_data.npz", W=result.W)
        write_npz(outdir / "lm_geometry.npz", **result.arrays)
        write_json(outdir / "analysis.json", result.record)
        draw(result.section, outdir)
        render(outdir, [result.section], title=result.section.title, command=command_line())
    if as_json:
        click.echo(json.dumps(result.record, indent=2, default=str))
        return
    _print_final(result.record, outdir)


def _print_final(record: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    final = record["lm"]["final"]
    table = Table(title=f"NTP geometry at step {final['step']} (m = {record['m']}, V = {record['V']}, d = "
                  f"{record['d']})", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key in ("loss_gap", "finite_rel_error", "finite_rel_error_weighted", "rank_H", "separable",
                "separability_method", "compatible", "svm_norm", "cos_perp_mm", "margin", "margin_ratio",
                "separated_fraction", "prefix_contexts", "prefix_mass", "logit_cos_perp_S", "logit_cos_perp_mm",
                "cos_word_gram", "cos_context_gram", "collapse_ratio", "sub_collapse_ratio", "cpu_seconds"):
        v = final.get(key)
        table.add_row(key, "-" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v)))
    console = Console()
    console.print(table)
    baselines = record["lm"]["reference"]["baselines"]
    line = ", ".join(f"{name} {b['logit_cos_perp_S']:.3f}" for name, b in baselines.items()
                     if b.get("logit_cos_perp_S") is not None)
    console.print(f"baselines of logit_cos_perp_S: {line}", highlight=False)
    for note in record.get("notes", []):
        console.print(f"note: {note}", highlight=False)
    console.print(f"wrote {out}/ (analysis.json, ntp_data.npz, lm_geometry.npz, report.html)", highlight=False)


@lm.command("compare")
@click.argument("analyses", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@overwrite_option
@click.option("--json", "as_json", is_flag=True, help="Print compare.json to stdout.")
def compare(analyses, out, overwrite, as_json):
    """Compare the last checkpoints of several `lm analyze` outputs (folders or their analysis.json): runs with the same
    V, d and context length T are seeds of one setting (mean ± sd). Writes OUT/compare.json, OUT/figures/lm-across.png
    (each quantity against T, one line per d, beside the add-1 and unigram baselines) and OUT/report.html.

    \b
    Examples:
      ntpbias lm compare runs/geo-t1 runs/geo-t2 runs/geo-t3 --out runs/across-T
      ntpbias lm compare runs/s*/geo-t* runs/d32/geo-t* --out runs/across
    """
    from ..experiments.lm.compare import compare as compare_runs
    from ..experiments.lm.compare import read_record
    from ..io import check_output_dir, write_json
    from ..report import draw, render
    from ..results import check_earlier_run, claim_run_dir

    rows = [read_record(a) for a in analyses]
    outdir = check_output_dir(out, ("compare.json", "report.html"), ("figures",))
    check_earlier_run(outdir, overwrite=overwrite)
    summary, section = compare_runs(rows)
    with claim_run_dir(outdir, overwrite=overwrite):
        write_json(outdir / "compare.json", {"summary": summary, "runs": rows})
        draw(section, outdir)
        render(outdir, [section], title=section.title, command=command_line())
    if as_json:
        click.echo((outdir / "compare.json").read_text(encoding="utf-8"))
    else:
        click.echo(f"compared {len(rows)} runs in {len(summary)} settings; wrote {outdir}/ (compare.json, report.html)")
