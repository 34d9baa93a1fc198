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
from ...results import FigureSpec, RunResult, Section, Table
from ...training.history import History
from ...training.lm import EVAL_WINDOWS, LMProblem, TokenWindows
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
    device = resolve_device(cfg.device)  # --device cuda without a GPU: refused before anything is written
    out = ensure_dir(ctx.out if folder is None else folder)
    tok, windows, facts = tokenize(cfg)
    write_text(out / "config.toml", to_toml(cfg))
    write_json(out / TOKENIZER_FILE, tok.to_dict())
    problem = LMProblem(windows, tok.V, cfg.model.kwargs(), batch_size=cfg.train.batch_size,
                        dtype=DTYPES[cfg.dtype], device=device)
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


def summary(cfg: LMConfig, history: History, facts: dict) -> str:
    """What was trained, in one paragraph: the model, the text, the optimizer, the steps and the loss they reached."""
    opt = cfg.optimizer
    loss = history["loss"]
    first, last = loss[0], loss[-1]
    spread = f" ± {last.std(ddof=1):.4f} (sd over {len(last)} seeds)" if len(last) > 1 else ""
    decay = f", x{opt.lr_decay:g} at steps {', '.join(map(str, opt.milestones))}" if opt.milestones else ""
    return (f"A {cfg.model.layers}-block decoder (d = {cfg.model.d}, {cfg.model.heads} heads, context "
            f"{cfg.model.context}, {facts['parameters']:,} parameters) trained on {cfg.data.text} "
            f"({facts['tokens']:,} tokens, V = {facts['vocabulary V']:,}) for {history.step:,} steps of {opt.name} "
            f"(η = {opt.lr:g}{decay}, {cfg.train.batch_size} windows a step, {cfg.dtype}): the loss on "
            f"{EVAL_WINDOWS:,} fixed training windows went from {first.mean():.4f} at step 0 to {last.mean():.4f}"
            f"{spread}, in {facts['training CPU seconds']:.0f} s CPU ({facts['training wall seconds']:.0f} s wall).")


def training_table(history: History) -> Table:
    """Per seed: the loss at step 0 and at the last step, and ||W|| at the last step."""
    loss, norm = history["loss"], history["unembedding_norm"]
    return Table("Training", ("seed", "loss at step 0", f"loss at step {history.step}", "||W|| at the end"),
                 tuple((seed, float(f"{loss[0, b]:.5g}"), float(f"{loss[-1, b]:.5g}"), float(f"{norm[-1, b]:.4g}"))
                       for b, seed in enumerate(history.seeds)))


def train_lm(cfg: LMConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` / ``ntpbias lm train``: one run directory with the loss curve and the checkpoints that
    ``ntpbias lm analyze`` reads."""
    history, _, facts = train_model(cfg, ctx)
    blocks = f"{cfg.model.layers} block{'s' if cfg.model.layers != 1 else ''}"
    section = Section("train", f"Language model on {cfg.data.text}: {blocks}, d = {cfg.model.d}",
                      description=summary(cfg, history, facts), facts=facts, seconds=history.seconds)
    section.tables.append(training_table(history))
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

