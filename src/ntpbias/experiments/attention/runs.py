"""Paper B's runs: joint training of model (1) or (17), stage 2 after one stage-1 step, the Lemma 4.1 sweep, and
``ntpbias train`` for both trainers."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..._tensor import DTYPES, resolve_device, to_numpy
from ...data.tokens import TokenSequences, relevant_tokens, token_statistics
from ...errors import DataError
from ...geometry.attention import selection as gs
from ...geometry.attention import stage_one as ga
from ...limits import check_memory
from ...stats import pearson, spearman
from ...training.attention import (
    ClassifierProblem,
    StageTwoProblem,
    classifier_optimizer,
    stage_two_optimizer,
)
from ...training.config import TrainConfig
from ...training.history import History
from ...training.loop import Trainer
from ...training.optimizers import Optimizer
from ..base import RunContext
from .config import AttentionConfig, Lemma41Config, StageTwoConfig
from .data import TokenData


def train_classifier(cfg: AttentionConfig, data: TokenData, ctx: RunContext, run: str
                     ) -> tuple[History, ClassifierProblem]:
    """Train ``cfg`` on ``data`` (all runs in one Trainer); rows carry ``run``. The memory estimate is checked again
    with the data's own sizes (a text's longest review makes model (17)'s T x T attention)."""
    device = resolve_device(cfg.device)
    check_memory(cfg.footprint((data.ds.num_tokens, data.ds.n, data.ds.T)), f"{run} ({cfg.seeds} seed(s))",
                 hint="cap the sequences (data.preprocess.max_length), or use a smaller d or batch", device=device)
    problem = ClassifierProblem(data.ds, model=cfg.model.kind, d=cfg.model.d, train_v=cfg.model.train_v,
                                layer_norm_affine=cfg.model.layer_norm_affine, batch_size=cfg.train.batch_size,
                                dtype=DTYPES[cfg.dtype], device=device, mixed_precision=cfg.train.mixed_precision)
    spe = problem.steps_per_epoch
    optimizer = Optimizer(classifier_optimizer(cfg.optimizer, steps_per_epoch=spe,
                                               decay_epochs=cfg.train.decay_epochs), fused=True)
    epochs = cfg.train.epochs
    train = TrainConfig(steps=cfg.train.steps or epochs * spe, log_points=cfg.train.log_points,
                        log_every=cfg.train.log_every or spe * (1 if cfg.model.kind == "one_layer" else
                                                                max(1, epochs // 10)),
                        checkpoint_every=cfg.train.checkpoint_every)
    trainer = Trainer(problem, optimizer, train, seeds=[cfg.seed + b for b in range(cfg.seeds)],
                      checkpoint_dir=ctx.out / "checkpoints" / run, progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    history.columns["epoch"] = np.repeat(history.steps[:, None] / spe, len(history.seeds), axis=1)
    return history, problem


def token_table(data: TokenData, problem: ClassifierProblem, history: History) -> dict[str, np.ndarray]:
    """The per-token table of Figures 1-3 for every run (long format, present tokens only): ``seed, token_id,
    token, count, alpha, pd, e_dot_p, e_dot_v`` (+ ``level, polarity`` for K-level data)."""
    stats = token_statistics(data.ds)
    present = to_numpy(stats.present)
    ids = np.nonzero(present)[0]
    scores = problem.scores(history.params)
    seeds = sorted({r["seed"] for r in history.rows()})
    vocab = data.ds.vocab or tuple(str(i) for i in range(data.ds.num_tokens))
    per_seed = {
        "seed": np.repeat(seeds, len(ids)),
        "token_id": np.tile(ids, len(seeds)),
        "token": np.tile(np.array([vocab[i] for i in ids], dtype=object), len(seeds)),
        "count": np.tile(to_numpy(stats.count)[ids], len(seeds)),
        "alpha": np.tile(to_numpy(stats.alpha)[ids], len(seeds)),
        "pd": np.tile(to_numpy(stats.posterior_difference)[ids], len(seeds)),
        "e_dot_p": to_numpy(scores.e_dot_p.double())[:, ids].reshape(-1),
        "e_dot_v": to_numpy(scores.e_dot_v.double())[:, ids].reshape(-1),
    }
    if data.level is not None:
        per_seed["level"] = np.tile(to_numpy(data.level)[ids], len(seeds))
        per_seed["polarity"] = np.tile(to_numpy(data.polarity)[ids], len(seeds))
    return per_seed


TEXT_COLUMNS = ("token",)
INT_COLUMNS = ("seed", "token_id", "count", "level", "polarity")


def token_table_csv(table: dict[str, np.ndarray]) -> str:
    """CSV text of a per-token table (columns in the dict's order; floats with full precision)."""
    cols = list(table)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    values = [table[c].tolist() for c in cols]
    writer.writerows(zip(*[[repr(x) if isinstance(x, float) else x for x in v] for v in values], strict=True))
    return buf.getvalue()


def read_token_table(path: str | Path) -> dict[str, np.ndarray]:
    """A per-token CSV back as column arrays (``token`` as str, counts/ids/levels as int, the rest float)."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    out = {}
    for name, values in zip(header, cols, strict=True):
        if name in TEXT_COLUMNS:
            out[name] = np.array(values, dtype=object)
        elif name in INT_COLUMNS:
            out[name] = np.array(values, dtype=np.int64)
        else:
            out[name] = np.array(values, dtype=float)
    return out


def correlations(table: dict[str, np.ndarray]) -> dict[int, dict[str, float]]:
    """Per seed: Pearson and Spearman of <E_s, v> with PD(s) and of <E_s, p> with |PD(s)| (and with log count),
    by :func:`ntpbias.stats.pearson` and :func:`ntpbias.stats.spearman`."""
    out = {}
    for seed in np.unique(table["seed"]).tolist():
        m = table["seed"] == seed
        pd, zp, zv = table["pd"][m], table["e_dot_p"][m], table["e_dot_v"][m]
        out[seed] = {
            "pearson_v_pd": float(pearson(zv, pd)),
            "spearman_v_pd": float(spearman(zv, pd)),
            "pearson_p_abs_pd": float(pearson(zp, np.abs(pd))),
            "spearman_p_abs_pd": float(spearman(zp, np.abs(pd))),
            "spearman_p_log_count": float(spearman(zp, np.log(table["count"][m]))),
        }
    return out


def permuted_scores(table: dict[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """The per-token table with <E_s, v> and <E_s, p> permuted over the tokens of each seed (a seeded permutation):
    the learned values decoupled from the tokens, the negative control of the figures' statistics when no control
    training is at hand (the same values, distribution and token statistics)."""
    rng = np.random.default_rng(seed)
    out = {k: v.copy() for k, v in table.items()}
    for s in np.unique(table["seed"]).tolist():  # loop over seeds
        idx = np.flatnonzero(table["seed"] == s)
        perm = rng.permutation(idx)
        out["e_dot_v"][idx], out["e_dot_p"][idx] = table["e_dot_v"][perm], table["e_dot_p"][perm]
    return out


def level_means(table: dict[str, np.ndarray], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K-level data, one seed: signed levels (-K..K, 0 = irrelevant; sign = polarity) and the mean <E_s, v> and
    <E_s, p> over each signed level's tokens."""
    m = table["seed"] == seed
    signed = (table["level"] * table["polarity"])[m]
    keys = np.unique(signed)
    mean_v = np.array([table["e_dot_v"][m][signed == k].mean() for k in keys])  # loop over the 2K + 1 levels
    mean_p = np.array([table["e_dot_p"][m][signed == k].mean() for k in keys])
    return keys, mean_v, mean_p


@dataclass(frozen=True, eq=False)
class StageTwoControls:
    """The inputs the stage-2 checks are computed on as negative controls (docs/paper-b-attention.md#theory-checks).

    Attributes
    ----------
    early : the same run stopped at step ``early.step`` (1% of its steps): ``params["p"]`` per seed, metrics at
        that step.
    frozen : the same optimizer for the same steps (first seed) on the sequences reduced to their relevant token
        s*_X: the loss does not depend on p, nothing drives ||p_t||.
    competitors : per seed, a competing max-margin direction (:class:`~ntpbias.geometry.attention.selection.
        SelectionSVM`): Lemma 4.5's nearest one-token alternative, or in the Lemma 4.4 case the partial tie of
        erratum B-E9 (docs/paper-b-attention.md#errata); ``competitor`` says which, in words.
    """

    early: History
    frozen: History | None
    competitors: list
    competitor: str


@dataclass(frozen=True, eq=False)
class StageTwoRun:
    """A stage-2 training and what it is compared with: stage-1 results, Lemma 4.5's SVM, s*_X per sequence, and
    the negative controls of its checks."""

    config: StageTwoConfig
    data: TokenData
    stages: list
    history: History
    references: list | None  # SelectionSVM per run (Assumption 1), else None
    relevant: torch.Tensor | None
    assumption1: str  # "" when the data satisfy Assumption 1, else why not
    own: list  # DirectionalConvergence per run: the final p against (12) for its own selection
    problem: StageTwoProblem | None = None  # the trained problem (its ``metrics`` evaluate any p)
    controls: StageTwoControls | None = None


def run_stage_two(cfg: StageTwoConfig, ctx: RunContext, run: str, data: TokenData | None = None,
                  reference: str = "important") -> StageTwoRun:
    """Stage 1 for every seed, the reference max-margin direction, then stage 2 on the engine.

    ``reference``: "important" (Lemma 4.5's SVM, which selects only s*_X) or "one_irrelevant" (the Lemma 4.4
    corollary's limit, which is the same program with a check that the vocabulary has one irrelevant token).
    """
    data = cfg.data.build() if data is None else data
    device = resolve_device(cfg.device)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    stages = [ga.stage_one(data.ds, d=cfg.model.d, eta0=cfg.stage1.eta0, seed=s, device=device) for s in seeds]
    try:
        relevant, why = relevant_tokens(data.ds), ""
    except DataError as exc:
        relevant, why = None, str(exc)
    refs = None
    if relevant is not None:
        solve = gs.one_irrelevant_limit if reference == "one_irrelevant" else gs.important_svm
        refs = [solve(st.E1, data.ds, solver=cfg.model.solver) for st in stages]
    problem = StageTwoProblem(stages, data.ds, references=None if refs is None or not all(r.feasible for r in refs)
                              else [r.p_hat for r in refs], relevant=relevant, grad_floor=cfg.train.grad_floor)
    trainer = Trainer(problem, Optimizer(stage_two_optimizer(cfg.optimizer.name, cfg.optimizer.lr)),
                      TrainConfig(steps=cfg.train.steps, log_points=cfg.train.log_points), seeds=seeds,
                      checkpoint_dir=ctx.out / "checkpoints" / run, progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    own = [gs.directional_convergence(st.E1, p, data.ds, solver=cfg.model.solver)
           for st, p in zip(stages, history.params["p"], strict=True)]
    controls = _stage_two_controls(cfg, data, stages, problem, relevant, refs, reference)
    return StageTwoRun(cfg, data, stages, history, refs, relevant, why, own, problem, controls)


#: the fraction of its steps at which a stage-2 run is stopped early for the negative controls
EARLY_FRACTION = 0.01


def _stage_two_controls(cfg: StageTwoConfig, data: TokenData, stages: list, problem: StageTwoProblem,
                        relevant: torch.Tensor | None, refs: list | None, reference: str) -> StageTwoControls:
    """The negative controls of a stage-2 run (:class:`StageTwoControls`): the run stopped at 1% of its steps, the
    same optimizer on data where the loss does not depend on p, and a competing max-margin direction per seed."""
    optimizer = Optimizer(stage_two_optimizer(cfg.optimizer.name, cfg.optimizer.lr))
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    early_steps = max(1, round(EARLY_FRACTION * cfg.train.steps))
    early = Trainer(problem, optimizer, TrainConfig(steps=early_steps, log_points=2), seeds=seeds).run()
    frozen = None
    if relevant is not None:  # every sequence reduced to its relevant token: the attention has nothing to choose
        ds = data.ds
        only = TokenSequences.from_arrays(relevant[:, None].expand(ds.n, ds.T), ds.y, mask=ds.mask,
                                          num_tokens=ds.num_tokens, source="s*_X only")
        frozen = Trainer(StageTwoProblem(stages[:1], only, grad_floor=cfg.train.grad_floor),
                         Optimizer(stage_two_optimizer(cfg.optimizer.name, cfg.optimizer.lr)),
                         TrainConfig(steps=cfg.train.steps, log_points=2), seeds=seeds[:1]).run()
    competitors, competitor = [], ""
    if refs is not None and all(r.feasible for r in refs):
        if reference == "one_irrelevant":
            competitor = ("the partial tie of erratum B-E9: the irrelevant token tied with s*_X wherever s*_X is "
                          "token 0, solved by (12) (a self-consistent max-margin direction)")
            competitors = [gs.partial_tie(st.E1, data.ds, relevant == 0, solver=cfg.model.solver).svm
                           for st in stages]
        else:
            competitor = ("the nearest alternative of Lemma 4.5: the one-token alternative selection (s*_X tied with "
                          "one irrelevant token in one sequence) with the largest margin, solved by (12)")
            competitors = [gs.lemma45_gap(st.E1, data.ds, solver=cfg.model.solver).nearest for st in stages]
        if any(c is None or not c.feasible for c in competitors):
            competitors, competitor = [], ""
    return StageTwoControls(early, frozen, competitors, competitor)


def theorem_gap_facts(cfg: StageTwoConfig, ds: TokenSequences) -> dict[str, str]:
    """Theorem 4.3's requirements (13) against the values used (docs/paper-b-attention.md#decisions: far outside
    numerical reach)."""
    eta_req = 4 * ds.n ** 2 * ds.T ** 2
    eta0 = cfg.stage1.eta0
    d_req = (88 * eta0 ** 2 + 111 * eta0 + 2) ** 8
    return {"η₀ used / required (4n²T²)": f"{eta0:g} / {eta_req:g}",
            "d used / required ((88η₀² + 111η₀ + 2)^8)": f"{cfg.model.d} / {d_req:.3g}"}


def lemma41_sweep(cfg: Lemma41Config, device=None) -> dict[str, np.ndarray]:
    """Stage 1 at every (η₀, d, seed): error, bound, correlation, slope ratio; the init event (22) once per draw
    (d, seed: the η₀ axis repeats the same initialisation); scatter arrays at the smallest and largest d (first seed,
    largest η₀). And the negative controls of the checks (docs/paper-b-attention.md#theory-checks, B-C5): the error
    with the whole (η₀/2) α_s v term of (6) deleted (``error_unshifted``), the correlation of the shift with the α_s
    of the labels permuted (``correlation_permuted``), and the event (22) at draws N(0, I_d) instead of N(0, I_d/d)
    (``init_event_unscaled``)."""
    ds = cfg.data.build().ds
    alpha_permuted = token_statistics(TokenSequences.from_arrays(
        ds.X, ds.y[torch.randperm(ds.n, generator=torch.Generator().manual_seed(cfg.seed))], mask=ds.mask,
        num_tokens=ds.num_tokens)).alpha
    shape = (len(cfg.eta0s), len(cfg.dims), cfg.seeds)
    err, unshifted, corr, corr_permuted, slope = (np.zeros(shape) for _ in range(5))
    event, event_unscaled = np.zeros(shape[1:]), np.zeros(shape[1:])
    scatter = {}
    for i, eta0 in enumerate(cfg.eta0s):  # loop over the sweep's configurations
        for j, d in enumerate(cfg.dims):
            for k in range(cfg.seeds):
                st = ga.stage_one(ds, d=d, eta0=eta0, seed=cfg.seed + k, device=device)
                err[i, j, k], corr[i, j, k], slope[i, j, k] = st.max_error, st.correlation, st.slope_ratio
                unshifted[i, j, k] = max(float(torch.linalg.vector_norm(st.E1 - st.E0, dim=1).max()),
                                         float(torch.linalg.vector_norm(st.err_p)))
                shift = ((st.E1 - st.E0) @ st.v)[st.present]
                corr_permuted[i, j, k] = float(pearson(alpha_permuted.to(shift)[st.present], shift))
                if i == 0:  # one initialisation per (d, seed)
                    event[j, k] = ga.init_event(st.E0, st.p0, st.v, delta=cfg.delta).holds
                    event_unscaled[j, k] = ga.init_event(st.E0 * d ** 0.5, st.p0 * d ** 0.5, st.v,
                                                         delta=cfg.delta).holds
                if k == 0 and i == len(cfg.eta0s) - 1 and j in (0, len(cfg.dims) - 1):
                    tag = "small" if j == 0 else "large"
                    scatter[f"alpha_{tag}"] = 0.5 * eta0 * st.alpha[st.present]
                    scatter[f"shift_{tag}"] = ((st.E1 - st.E0) @ st.v)[st.present]
    S = ds.num_tokens
    return {"dims": np.array(cfg.dims, dtype=float), "eta0s": np.array(cfg.eta0s), "error": err,
            "bound": 11 * np.array(cfg.eta0s)[:, None] * np.array(cfg.dims, dtype=float)[None, :] ** -0.25,
            "correlation": corr, "slope_ratio": slope, "init_event": event, "error_unshifted": unshifted,
            "correlation_permuted": corr_permuted, "init_event_unscaled": event_unscaled,
            "d_condition": np.array(max(256.0, (2 * math.log(S * S / cfg.delta)) ** 2)),
            **{k: to_numpy(v) for k, v in scatter.items()}}
