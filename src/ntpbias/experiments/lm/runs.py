"""Training the language model (``ntpbias lm train``, ``ntpbias train`` of an ``lm`` config) into a run directory
whose ``checkpoints/steps/`` keep the parameters at every logged step and whose ``tokenizer.json`` keeps the
vocabulary, so that ``ntpbias lm analyze`` can measure any text at any checkpoint (docs/lm.md#training)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ..._tensor import DTYPES, resolve_device
from ...config import to_toml
from ...data.lm_text import TextTokenizer
from ...io import ensure_dir, write_json, write_text
from ...results import FigureSpec, RunResult, Section
from ...training.history import History
from ...training.lm import LMProblem, TokenWindows
from ...training.loop import Trainer
from ...training.optimizers import Optimizer
from ...training.snapshots import snapshot_writer
from ..base import RunContext
from .config import LMConfig

#: the run directory's vocabulary file and its snapshot folder
TOKENIZER_FILE = "tokenizer.json"
SNAPSHOT_DIR = Path("checkpoints") / "steps"


def prepare(cfg: LMConfig, ctx: RunContext) -> LMConfig:
    """Apply the invocation's seeds/device to a preset config."""
    resolve_device(ctx.device)
    return replace(cfg, seeds=max(cfg.seeds, ctx.seeds), device=ctx.device)


def tokenize(cfg: LMConfig) -> tuple[TextTokenizer, TokenWindows, dict]:
    """The config's text, its vocabulary and training windows, and facts about them."""
    d = cfg.data
    lines = d.read_lines()
    tok, ids, lengths = TextTokenizer.fit(lines, d.tokenizer, max_vocab=d.max_vocab, max_tokens=d.max_tokens,
                                          lowercase=d.lowercase, punctuation=d.punctuation, source=d.text)
    windows = TokenWindows(ids, lengths, cfg.model.context)
    facts = {"text": d.text, "tokenizer": d.tokenizer, "lines": len(lengths), "tokens": int(ids.size),
             "vocabulary V": tok.V, "<unk> share of tokens": float((ids == tok.unk).mean()) if tok.unk is not None
             else 0.0, "training windows": windows.n_windows, "(context, next token) pairs": windows.n_targets,
             "parameters": cfg.model.parameters(tok.V)}
    return tok, windows, facts


def train_model(cfg: LMConfig, ctx: RunContext, run: str = "train", folder: Path | None = None
                ) -> tuple[History, TextTokenizer, dict]:
    """Train ``cfg`` into ``folder`` (default ``ctx.out``): ``config.toml``, ``tokenizer.json`` and ``checkpoints/``,
    what :class:`~ntpbias.experiments.lm.analysis.RunModels` reads. Returns (history, tokenizer, facts with the wall
    and CPU seconds)."""
    out = ensure_dir(ctx.out if folder is None else folder)
    tok, windows, facts = tokenize(cfg)
    write_text(out / "config.toml", to_toml(cfg))
    write_json(out / TOKENIZER_FILE, tok.to_dict())
    problem = LMProblem(windows, tok.V, cfg.model.kwargs(), batch_size=cfg.train.batch_size,
                        dtype=DTYPES[cfg.dtype], device=resolve_device(cfg.device))
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    trainer = Trainer(problem, Optimizer(cfg.optimizer, fused=True), cfg.train, seeds=seeds,
                      checkpoint_dir=out / "checkpoints", progress=ctx.progress, description=run,
                      on_snapshot=snapshot_writer(out / SNAPSHOT_DIR, seeds))
    wall, cpu = time.perf_counter(), time.process_time()
    history = trainer.run(resume=ctx.resume)
    history.run = run
    facts.update({"training wall seconds": time.perf_counter() - wall,
                  "training CPU seconds": time.process_time() - cpu, "steps": history.step})
    return history, tok, facts


def train_lm(cfg: LMConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` / ``ntpbias lm train``: one run directory with the loss curve and the checkpoints that
    ``ntpbias lm analyze`` reads."""
    history, _, facts = train_model(cfg, ctx)
    section = Section("train", f"Language model on {cfg.data.text}: {cfg.model.layers} blocks, d = {cfg.model.d}",
                      facts=facts, seconds=history.seconds)
    section.plots.append(FigureSpec("training", "Training loss", "Mean cross-entropy over a fixed set of training "
                                    "windows, per logged step (each logged step is a checkpoint for `ntpbias lm "
                                    "analyze`).", "lm.training", {"rows": history.rows(), "run": history.run}))
    section.notes.append("measure the NTP geometry at every checkpoint with `ntpbias lm analyze RUN_DIR --out DIR`")
    if history.status != "completed":
        section.notes.append(history.message)
    return RunResult(section, cfg, [history], {"status": history.status, "message": history.message,
                                               "final": history.at(), "timing": {
                                                   "wall_seconds": facts["training wall seconds"],
                                                   "cpu_seconds": facts["training CPU seconds"]}}, failure=history)

