"""``ntpbias train``: one training run from a config file or a preset."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import ConfigError
from ..experiments.base import SCALES
from ._common import _console, cli, command_line, print_checks, run_dir_options


@cli.command()
@click.argument("config", required=False, type=click.Path(dir_okay=False))
@click.option("--preset", help="Name of a preset (see `ntpbias list`).")
@click.option("--scale", type=click.Choice(SCALES), default="paper", show_default=True,
              help="Preset scale.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set optimizer.lr=0.1 (repeatable; every key, its type and "
                   "range: `ntpbias settings`).")
@run_dir_options
def train(config, preset, scale, overrides, out, resume, overwrite, as_json, quiet):
    """Train one model; writes config.toml, metrics.csv, summary.json, figures/, report.html, checkpoints/.

    CONFIG is a TOML file (its `experiment` key picks the paper; `config.toml` of an earlier run works), or
    use --preset. Every value can be overridden with --set. Every key with its type, allowed range and default:
    `ntpbias settings EXPERIMENT|PRESET` (also docs/settings.md); a value outside them is refused before any work.
    The run's theory checks are reported, not turned into an exit status (a configuration of your own need not meet
    levels set for the papers' runs; `reproduce` exits 3 on a failing check).

    \b
    Examples:
      ntpbias train --preset linear-fig4-gd --out runs/gd
      ntpbias train --preset linear-fig4-gd --set optimizer.name=adam --set optimizer.lr=0.01 --out runs/adam
      ntpbias train runs/gd/config.toml --set train.steps=100000 --out runs/gd-long
      ntpbias train --preset linear-fig4-gd --set seeds=8 --out runs/gd8     # 8 seeds, batched
    """
    from ..config import apply_overrides
    from ..experiments.catalog import get_preset, load_run_config

    if (config is None) == (preset is None):
        raise ConfigError("give exactly one of CONFIG.toml or --preset NAME")
    cfg = get_preset(preset).make(scale) if preset is not None else load_run_config(config)
    cfg = apply_overrides(cfg, list(overrides))

    from ..api import run_config  # the training code, once the config is known to be valid
    from ..experiments import RunContext

    console = _console(quiet)
    ctx = RunContext(out=Path(out), scale=scale, progress=not quiet, resume=resume, overwrite=overwrite,
                     device=cfg.device, say=lambda msg: console.log(msg))
    result = run_config(cfg, ctx, command=command_line())
    summary_path = Path(out) / "summary.json"
    if as_json:
        click.echo(summary_path.read_text(encoding="utf-8"))
    else:
        print_checks([result.section])
        click.echo(f"wrote {out}/ (report.html, metrics.csv, summary.json)")

