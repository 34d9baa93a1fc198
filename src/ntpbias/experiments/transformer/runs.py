"""Paper C's runs: one dataset, embedding and training per seed (Algorithm 1 or joint), the saved arrays, and the
theory curves the figures draw."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..._tensor import resolve_device
from ...data.sentences import NTPSamples
from ...data.structure import DatasetStructure, analyze_structure, orthonormality_residual
from ...errors import DataError
from ...geometry.transformer import bounds as tb
from ...io import ensure_dir, write_json, write_npz, write_text
from ...models.transformer import token_embeddings
from ...parallel import map_values
from ...training.history import History
from ...training.transformer import (
    TransformerTask,
    TwoStageResult,
    train_joint,
    train_stage2,
    train_two_stage,
)
from ..base import (
    RunContext,
)
from .config import TransformerConfig, TransformerDataConfig

#: the negative controls of the stage-2 checks (docs/paper-c-transformer.md#theory-checks), trained on the first seed:
#: stage 2 by plain gradient descent whose first step equals Algorithm 1's (the wrong algorithm), and stage 2 by
#: Algorithm 1 from the negated stage-1 output -W_ov^(T) (a broken stage 1)
CONTROLS = {"gd": "stage 2 by plain gradient descent W <- W - (η/||∇L(0)||) ∇L (first step equal to Algorithm 1's, "
                  "same steps)",
            "negated-ov": "stage 2 by Algorithm 1 from the negated stage-1 output -W_ov^(T) (same steps)"}


@dataclass
class SeedRun:
    """One seed's dataset, theory objects and training histories; ``controls`` holds the stage-2 histories of the
    negative controls (:data:`CONTROLS`, first seed only; never written to metrics.csv)."""

    seed: int
    task: TransformerTask
    eta0: float
    eta: float
    init: str
    two_stage: TwoStageResult | None = None
    joint: History | None = None
    controls: dict[str, History] = field(default_factory=dict)

    @property
    def t0(self) -> int | None:
        """Lemma 7's t_0 = ceil(8 L_max ||W_kq*||²/η) (None without W_kq*)."""
        star = self.task.W_kq_star
        return None if star is None else tb.lemma7_t0(self.eta, self.task.samples.L_max, star.norm)

    @property
    def histories(self) -> list[History]:
        if self.joint is not None:
            return [self.joint]
        return [h for h in (self.two_stage.stage1, self.two_stage.stage2) if h is not None]

    @property
    def rows(self) -> list[dict]:
        return [r for h in self.histories for r in h.rows()]

    @property
    def seconds(self) -> float:
        return sum(h.seconds for h in self.histories)

    @property
    def orthonormal(self) -> bool:
        """Assumption 2 holds for this run's embedding."""
        return orthonormality_residual(self.task.E.cpu()) <= 1e-12


def load_dataset(data: TransformerDataConfig, seed: int) -> tuple[NTPSamples, DatasetStructure]:
    """Build a dataset and check Assumptions 1 and 3; a violation is a DataError unless ``allow_violations``."""
    samples = data.build(seed)
    structure = analyze_structure(samples)
    if not structure.assumptions_hold and not data.allow_violations:
        raise DataError(structure.failure_message() + "; fix the data, or set data.allow_violations = true to "
                        "train anyway")
    return samples, structure


def run_config(cfg: TransformerConfig, ctx: RunContext, prefix: str = "", *, controls: bool = True) -> list[SeedRun]:
    """Train ``cfg`` once per seed (rows carry ``run`` = ``<prefix>stage1|stage2|joint`` and the seed), with the
    negative controls of :data:`CONTROLS` on the first seed unless ``controls`` is False.

    Each seed has its own dataset, so seeds cannot share a batch: they go through ``ctx.executor`` (this process by
    default; ``reproduce --executor local|dask`` spreads them over worker processes or a cluster).
    """
    jobs = [_SeedJob(cfg, cfg.seed + i, prefix, str(ctx.out), ctx.resume,
                     ctx.progress and ctx.executor.kind == "inprocess", controls=controls and i == 0)
            for i in range(cfg.seeds)]
    ctx.say(f"{prefix or 'run '}training {len(jobs)} seed(s) ({ctx.executor.describe()})")
    return map_values(train_seed, jobs, executor=ctx.executor)


@dataclass(frozen=True)
class _SeedJob:
    """Everything one seed's training needs (picklable, for worker processes)."""

    cfg: TransformerConfig
    seed: int
    prefix: str
    out: str
    resume: bool
    progress: bool
    controls: bool = False


def train_seed(job: _SeedJob) -> SeedRun:
    """Build one seed's dataset, embedding, W_ov*, W_kq*, and train it (Algorithm 1 or joint; with
    ``job.controls``, also the negative controls of :data:`CONTROLS` after a completed Algorithm 1)."""
    cfg, seed, prefix = job.cfg, job.seed, job.prefix
    device = resolve_device(cfg.device)
    samples, structure = load_dataset(cfg.data, seed)
    E = token_embeddings(samples.V, kind=cfg.model.embedding, d=cfg.model.d or None, seed=seed, device=device)
    task = TransformerTask.build(samples, E, structure=structure, solver=cfg.model.solver)
    eta0, eta = cfg.step_sizes(task.d)
    run = SeedRun(seed, task, eta0, eta, cfg.model.init)
    common = {"seeds": [seed], "init": cfg.model.init, "prefix": prefix, "progress": job.progress,
              "resume": job.resume, "checkpoint_dir": Path(job.out) / "checkpoints" / f"{prefix}seed{seed}"}
    steps1, steps2 = cfg.stage_steps
    if cfg.model.algorithm == "joint":
        run.joint = train_joint(task, eta=eta0, config=cfg.train_config(steps1 + steps2), **common)
        return run
    if cfg.stage2.past_t0:
        if run.t0 is None:
            raise DataError(f"stage2.past_t0 = {cfg.stage2.past_t0:g} needs W_kq* (Lemma 7's t_0), which this "
                            f"dataset does not have: {task.reference_error}; set stage2.past_t0 = 0")
        steps2 = cfg.stage2_steps(run.t0)
    stage2 = cfg.train_config(steps2)
    run.two_stage = train_two_stage(task, eta0=eta0, eta=eta, stage1=cfg.train_config(steps1), stage2=stage2,
                                    **common)
    if job.controls and run.two_stage.status == "completed" and task.W_kq_star is not None:
        W_ov, h2 = run.two_stage.W_ov, run.two_stage.stage2
        g0 = float(series(h2, "grad_norm")[1][0])
        for name, ov, lr, normalized in (("gd", W_ov, eta / g0 if g0 > 0 else eta, False),
                                         ("negated-ov", -W_ov, eta, True)):
            run.controls[name] = train_stage2(task, ov, eta=lr, config=stage2, seeds=[seed], init=cfg.model.init,
                                              normalized=normalized, run=f"{prefix}control-{name}",
                                              checkpoint_dir=common["checkpoint_dir"], progress=job.progress,
                                              resume=job.resume)
    return run


def seeds_note(runs: list[SeedRun]) -> str:
    """Which seed a check grades: "seed s", or "worst of n seeds"."""
    return f"worst of {len(runs)} seeds" if len(runs) > 1 else f"seed {runs[0].seed}"


def first_failure(runs: list[SeedRun]) -> History | None:
    return next((h for r in runs for h in r.histories if h.status != "completed"), None)


def dataset_facts(run: SeedRun) -> dict:
    """The dataset's sizes, the max-margin norms, and the theory's constants (first seed shown in reports)."""
    t, s = run.task, run.task.samples
    facts = {"dataset": s.source, "|V|": s.V, "d": t.d, "N (distinct samples)": s.N, "|D_0|": s.total,
             "L_max (longest input)": s.L_max, "queries with an order": len(t.structure.queries),
             "Assumptions 1 and 3 hold": t.structure.assumptions_hold, "η₀": run.eta0, "η": run.eta}
    if not t.structure.assumptions_hold:
        facts["no longer applicable"] = ", ".join(t.structure.not_applicable())
    if t.W_ov_star is not None:
        facts["||W_ov*||"] = t.W_ov_star.norm
    if t.W_kq_star is not None:
        facts["||W_kq*||"] = t.W_kq_star.norm
        if t.W_ov_star is not None:
            C0, C1 = tb.thm2_constants(run.eta0, run.eta, t.W_ov_star.norm, t.W_kq_star.norm, s.L_max)
            facts["Theorem 2: C_0, C_1"] = f"{C0:.4g}, {C1:.4g}"
    return facts


def _constants(run: SeedRun) -> dict:
    t = run.task
    return {"seed": run.seed, "V": t.V, "d": t.d, "N": t.samples.N, "L_max": t.samples.L_max, "eta0": run.eta0,
            "eta": run.eta, "n_tokens": int((t.next_token >= 0).sum()),
            "norm_W_ov_star": None if t.W_ov_star is None else t.W_ov_star.norm,
            "norm_W_kq_star": None if t.W_kq_star is None else t.W_kq_star.norm,
            "W_ov_star_certified": None if t.W_ov_star is None else t.W_ov_star.certified,
            "W_kq_star_certified": None if t.W_kq_star is None else t.W_kq_star.certified,
            "orthonormal": run.orthonormal, "assumptions_hold": t.structure.assumptions_hold}


def save_runs(out, prefix: str, runs: list[SeedRun]) -> list[dict]:
    """``data/<prefix>seed<s>.npz`` (E, W_ov*, W_kq*, final W_ov, W_kq), the dataset (.json; .txt sentences when
    prefix-closed) and ``data/<prefix>constants.json``; returns the constants."""
    data_dir = ensure_dir(out / "data")
    consts = [_constants(r) for r in runs]
    for r in runs:
        t = r.task
        finals = {}
        if r.two_stage is not None:
            finals["W_ov"] = r.two_stage.W_ov[0]
            if r.two_stage.stage2 is not None:
                finals["W_kq"] = r.two_stage.W_kq[0]
        else:
            finals = {k: v[0] for k, v in r.joint.params.items()}
        write_npz(data_dir / f"{prefix}seed{r.seed}.npz", E=t.E,
                  W_ov_star=None if t.W_ov_star is None else t.W_ov_star.W,
                  W_kq_star=None if t.W_kq_star is None else t.W_kq_star.W, **finals)
        write_json(data_dir / f"{prefix}seed{r.seed}.json", t.samples.to_dict())
        if t.samples.sentences:
            write_text(data_dir / f"{prefix}seed{r.seed}.txt", "\n".join(t.samples.sentences) + "\n")
    write_json(data_dir / f"{prefix}constants.json", consts)
    return consts


def _steps(runs: list[SeedRun], run: str) -> np.ndarray:
    return np.array(sorted({r["step"] for x in runs for r in x.rows if r.get("run") == run}), dtype=float)


def bound_curves(prefix: str, runs: list[SeedRun], consts: list[dict]) -> dict:
    """Theory curves for the figures from the saved constants: (steps, values (n, seeds)) per bound."""
    out = {}
    t1, t2 = _steps(runs, f"{prefix}stage1"), _steps(runs, f"{prefix}stage2")
    if all(c["norm_W_ov_star"] and c["orthonormal"] for c in consts) and t1.size:
        out["ov_upper"] = (t1, np.stack([t1 * c["eta0"] for c in consts], 1))
        out["ov_lower"] = (t1, np.stack([tb.ngd_norm_bounds(t1, c["eta0"], c["norm_W_ov_star"])[0] for c in consts],
                                        1))
        for key, rate in (("L0_exact", "exact"), ("L0_stated", "stated")):
            out[key] = (t1, np.stack([tb.prop1_loss_upper(t1, c["eta0"], c["norm_W_ov_star"], c["V"], rate=rate)
                                      for c in consts], 1))
    if all(c["norm_W_kq_star"] and c["orthonormal"] for c in consts) and t2.size:
        out["kq_upper"] = (t2, np.stack([t2 * c["eta"] for c in consts], 1))
        out["kq_lower_thm1"] = (t2, np.stack([tb.ngd_norm_bounds(t2, c["eta"], c["norm_W_kq_star"])[0]
                                              for c in consts], 1))
        out["kq_lower_lemma6"] = (t2, np.stack([tb.ngd_norm_bounds(t2, c["eta"], c["norm_W_kq_star"],
                                                                   L_max=c["L_max"])[0] for c in consts], 1))
        out["attn_lemma5"] = (t2, np.stack([np.full(t2.size, 1 / c["L_max"]) for c in consts], 1))
        if all(c["norm_W_ov_star"] for c in consts):
            out["attn_thm2"] = (t2, np.stack([tb.thm2_attention_lower(
                t2, tb.thm2_constants(c["eta0"], c["eta"], c["norm_W_ov_star"], c["norm_W_kq_star"], c["L_max"])[1],
                c["L_max"]) for c in consts], 1))
        phi = np.stack([series(r.two_stage.stage2, "attn_opt_min")[1] for r in runs], 1)
        out["lemma6"] = (t2, tb.lemma6_direction_upper(phi, np.array([c["norm_W_kq_star"] for c in consts])))
    return out


def series(history: History, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of a one-run history (several seeds: step-major, as its rows)."""
    steps = np.repeat(history.steps.astype(float), len(history.seeds))
    values = history.columns.get(metric)
    return steps, (np.full(steps.shape, np.nan) if values is None else values.reshape(-1).astype(float))


def at(history: History, metric: str, step: int) -> float:
    steps, values = series(history, metric)
    hit = np.nonzero(steps == step)[0]
    return float(values[hit[0]]) if hit.size else math.nan
