"""Paper A (linear NTP): every experiment and figure, as presets and the ``reproduce linear`` group.

Figures (App. A of paper A; spec linear_ntp.md §8):

* ``linear-fig1``: the 2D example (d=2, m=3, V=5, |S_j|=3): contexts, rows of W^mm and their hyperplanes; GD panels.
* ``linear-fig2``: P as a heatmap (off-support black), rows of W^mm, rows of W*.
* ``linear-fig3``: eight random contexts of the overparameterized dataset and their next-token distributions.
* ``linear-fig4``: GD (η = 0.5) on m=50, d=60, V=10, |S_j|=6, 10^4 iterations.
* ``linear-fig5``: the same panels for normalized GD and Adam (η = 0.01, β = (0.9, 0.99)).
* ``linear-regpath``: the regularization path Ŵ_B (extra figure): cos with W^mm and F-part error against B.

Decisions where the paper is silent (spec §13): embeddings h̄_j ~ N(0, I_d); supports uniform random; Dirichlet(1)
probabilities; π̂ uniform; LeCun normal init N(0, 1/d); NGD divides by the gradient norm; Adam with ε = 1e-8 and
bias correction; log-scaled iteration axis; the lower-right panel shows ||P_F(W_k) - W*|| / ||W*||. The 2D example
uses the support pattern A={2,3,4}, B={1,2,5}, C={1,4,5} at 90°, 210°, 330° (spec §8.1: the paper's captions are
mutually inconsistent), Dirichlet(1) probabilities, and GD with η = 0.5. ``--seeds N`` trains N initializations
(seeds ``seed .. seed+N-1``) on the same dataset (fixed by ``data.seed``), batched.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .._tensor import resolve_device, to_numpy
from ..config import require_choice
from ..data.ntp import NTPData
from ..data.synthetic import random_ntp, two_d_example
from ..geometry.loss import cross_entropy, smoothness_bound
from ..geometry.regpath import regularization_path
from ..geometry.separability import ntp_separability
from ..geometry.subspace import subspace
from ..geometry.svm import ntp_svm
from ..io import ensure_dir, write_npz
from ..metrics import cosine
from ..report import linear as figs
from ..report.figures import new_figure, save
from ..results import Check, RunResult, Section, Table, check_at_least, check_at_most
from ..training.linear import LinearNTPProblem, LinearReference
from ..training.loop import History, TrainConfig, Trainer
from ..training.optimizers import Optimizer, OptimizerConfig
from .base import (
    Group,
    Preset,
    RunContext,
    raise_if_failed,
    register_group,
    register_preset,
    register_trainer,
)

DATA_SOURCES = ("random", "two_d", "file")
DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class LinearDataConfig:
    """Which NTP data to train on.

    Attributes
    ----------
    source : "random" (paper A's generator), "two_d" (the 2D example) or "file" (an .npz or sequences file)
    m, d, V, support_size, embedding_scale, dirichlet, pi : the random generator's settings (defaults: Figs. 3-5)
    seed : the dataset's seed (random supports, probabilities and embeddings; the 2D example's probabilities)
    path, context_length, autoregressive, embedding : for ``source="file"`` (as in ``ntpbias analyze``)
    """

    source: str = "random"
    m: int = 50
    d: int = 60
    V: int = 10
    support_size: int = 6
    embedding_scale: float = 1.0
    dirichlet: float = 1.0
    pi: str = "uniform"
    seed: int = 0
    path: str = ""
    context_length: int = 0
    autoregressive: bool = False
    embedding: str = "onehot"

    def __post_init__(self):
        require_choice("data.source", self.source, DATA_SOURCES)
        if self.source == "file" and not self.path:
            raise ValueError("data.source = 'file' needs data.path")
        if self.source == "random" and not (1 <= self.support_size <= self.V and self.m >= 1 and self.d >= 1):
            raise ValueError(f"need m, d >= 1 and 1 <= support_size <= V; got m={self.m}, d={self.d}, "
                             f"V={self.V}, support_size={self.support_size}")

    def build(self, dtype: torch.dtype = torch.float64) -> NTPData:
        if self.source == "random":
            return random_ntp(self.m, self.d, self.V, self.support_size, seed=self.seed,
                              embedding_scale=self.embedding_scale, dirichlet=self.dirichlet, pi=self.pi, dtype=dtype)
        if self.source == "two_d":
            return two_d_example(seed=self.seed, dtype=dtype)
        from ..data.sequences import load_sequences

        if self.path.endswith(".npz"):
            return NTPData.load(self.path, dtype=dtype)
        return load_sequences(self.path, context_length=self.context_length or None,
                              autoregressive=self.autoregressive, embedding=self.embedding, dtype=dtype)


@dataclass(frozen=True)
class LinearConfig:
    """One training run of a linear next-token predictor (``ntpbias train``; the defaults are Fig. 4's).

    Attributes
    ----------
    experiment : always "linear" (selects this config class in a TOML file)
    seed : seed of the first run's initialization (and of SGD sampling); run b uses ``seed + b``
    seeds : number of runs trained at once (batched)
    init : "lecun_normal" | "lecun_uniform" | "zeros"
    device, dtype : "cpu" | "cuda"; "float64" (theory default) | "float32"
    batch_size, sample_over : SGD minibatch size (0 = full-batch) and "contexts" | "samples"
    solver : NTP-SVM backend for the reference W^mm
    """

    experiment: str = "linear"
    seed: int = 0
    seeds: int = 1
    init: str = "lecun_normal"
    device: str = "cpu"
    dtype: str = "float64"
    batch_size: int = 0
    sample_over: str = "contexts"
    solver: str = "auto"
    data: LinearDataConfig = field(default_factory=LinearDataConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        require_choice("experiment", self.experiment, ("linear",))
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        require_choice("dtype", self.dtype, DTYPES)


# ------------------------------------------------------------------------------------------------ presets
FIG4 = LinearConfig()
FIG5_NGD = replace(FIG4, optimizer=OptimizerConfig(name="ngd", lr=0.01))
FIG5_ADAM = replace(FIG4, optimizer=OptimizerConfig(name="adam", lr=0.01, betas=(0.9, 0.99)))
TWO_D = LinearConfig(data=LinearDataConfig(source="two_d"), train=TrainConfig(steps=100_000))
TWO_D_QUICK_STEPS = 10_000
REGPATH_B = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0)


SMOKE_STEPS = 300


def scaled(cfg: LinearConfig, scale: str) -> LinearConfig:
    """A preset at ``scale``: paper and quick keep the paper's 10^4 steps (they take seconds), except the 2D
    example's 10^5 (quick: 10^4); smoke runs 300 steps."""
    if scale == "smoke":
        return replace(cfg, train=replace(cfg.train, steps=min(cfg.train.steps, SMOKE_STEPS), log_points=20))
    if scale == "quick" and cfg.data.source == "two_d":
        return replace(cfg, train=replace(cfg.train, steps=TWO_D_QUICK_STEPS))
    return cfg


for _name, _desc, _cfg in (
    ("linear-2d", "Fig. 1: GD (η=0.5) on the 2D example (d=2, m=3, V=5); 10^5 steps (quick: 10^4)", TWO_D),
    ("linear-fig4-gd", "Fig. 4: GD (η=0.5) on m=50, d=60, V=10, |S_j|=6, 10^4 steps", FIG4),
    ("linear-fig5-ngd", "Fig. 5 (left): normalized GD (η=0.01), same data, 10^4 steps", FIG5_NGD),
    ("linear-fig5-adam", "Fig. 5 (right): Adam (η=0.01, β=(0.9, 0.99)), same data, 10^4 steps", FIG5_ADAM),
):
    register_preset(Preset(_name, _desc, lambda scale, cfg=_cfg: scaled(cfg, scale)))


# ------------------------------------------------------------------------------------------------ training
def reference(data: NTPData, solver: str = "auto") -> tuple[LinearReference, dict]:
    """F, W*, W^mm of ``data`` and the dataset facts shown in reports."""
    F = subspace(data)
    sep = ntp_separability(data)
    W_mm = ntp_svm(data, solver).W if sep.separable else None
    L = smoothness_bound(data)
    facts = {
        "contexts m": data.m, "vocabulary V": data.V, "embedding dim d": data.d,
        "entropy H (nats)": data.entropy, "dim F": F.dim, "V d": data.V * data.d,
        "NTP_H-compatible": F.compatible, "NTP-separable": sep.separable,
        "||W*||": F.norm_W_star, "||W^mm||": None if W_mm is None else float(torch.linalg.vector_norm(W_mm)),
        "smoothness bound L": L, "1/(2L)": 1 / (2 * L),
    }
    return LinearReference(F=F, W_mm=W_mm), facts


def train_run(cfg: LinearConfig, data: NTPData, ref: LinearReference, ctx: RunContext, run: str) -> History:
    """Train ``cfg`` (batched over its seeds) and return the history; rows carry ``run``."""
    problem = LinearNTPProblem(data, ref, init=cfg.init, batch_size=cfg.batch_size, sample_over=cfg.sample_over)
    optimizer = Optimizer(cfg.optimizer, loss_floor=data.entropy)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    trainer = Trainer(problem, optimizer, cfg.train, seeds=seeds, checkpoint_dir=ctx.out / "checkpoints" / run,
                      progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    return history


def run_checks(run: str, cfg: LinearConfig, history: History, data: NTPData, ref: LinearReference) -> list[Check]:
    """Theory checks of one training run (spec §12 C-D), evaluated on the worst seed."""
    last = history.at()
    out: list[Check] = []
    name = cfg.optimizer.name
    src_lemma2, src_thm2 = "Lemma 2 of paper A; spec 12.11-12", "Thm 2 of paper A; spec 12.13"
    out.append(check_at_most(f"{run}: loss gap", f"CE(W_k) - H -> 0 ({name}, k = {history.step})",
                             max(last["loss_gap"]), 5e-3, src_lemma2))
    if name == "gd" and not cfg.batch_size:
        inc = max(history.max_loss_increase or [0.0])
        eta_ok = cfg.optimizer.lr <= 1 / (2 * smoothness_bound(data))
        out.append(check_at_most(f"{run}: monotone loss",
                                 f"GD decreases CE at every step (η = {cfg.optimizer.lr:g} "
                                 f"{'<=' if eta_ok else '>'} 1/(2L) = {1 / (2 * smoothness_bound(data)):.3g})",
                                 inc, 1e-12, "spec 12.11"))
        out.extend(_invariant_checks(run, cfg, history, data))
    norms = _per_seed(history, "norm")
    steps = _steps(history)
    k0 = max(1, steps[-1] // 10)  # ||W_k|| may shrink early on (spec 12.12): check "eventually increasing"
    late = steps >= k0
    growing = all(np.all(np.diff(n[late]) >= -1e-12) for n in norms)
    out.append(Check(f"{run}: norm growth", f"||W_k|| increases without bound (monotone for k >= {k0})",
                     f"{min(n[-1] for n in norms):.4g} (from {max(n[0] for n in norms):.3g})",
                     f"non-decreasing for k >= {k0}", bool(growing), src_lemma2))
    out.append(check_at_most(f"{run}: F-part", "P_F(W_k) -> W* (relative error)", max(last["F_error_rel"]), 0.2,
                             src_thm2))
    if ref.W_mm is not None:
        out.append(check_at_least(f"{run}: alignment (corrected)", "cos(W_k - W*, W^mm) -> 1",
                                  min(last["cos_mm_corrected"]), 0.9, src_thm2))
        out.append(check_at_least(f"{run}: alignment", "cos(W_k, W^mm) -> 1", min(last["cos_mm"]), 0.88, src_thm2))
        gap = min(c - r for c, r in zip(last["cos_mm_corrected"], last["cos_mm"], strict=True))
        out.append(check_at_least(f"{run}: corrected above raw", "cos(W_k - W*, W^mm) >= cos(W_k, W^mm) at the end",
                                  gap, 0.0, "spec 12.13"))
        margins = _per_seed(history, "margin_perp")
        k1000 = int(np.searchsorted(steps, min(1000, steps[-1])))
        rise = min(m[-1] - m[k1000] for m in margins)
        out.append(Check(f"{run}: margin of P_perp(W_k)", "normalized NTP margin of P_⊥(W_k) increases toward "
                         "1/||W^mm|| (ratio shown; slow)", min(m[-1] for m in margins),
                         "increases after k = 1000", bool(rise > 0), "spec 12.14"))
        out.append(check_at_least(f"{run}: key lemma (α = 0.5)",
                                  "CE(P_F W_k + 1.5 ||P_⊥ W_k|| W̄^mm) <= CE(W_k) at the end",
                                  min(last["key_lemma"]), 1.0, "Lemma 5 of paper A, eq. (14)"))
    return out


def _invariant_checks(run: str, cfg: LinearConfig, history: History, data: NTPData) -> list[Check]:
    """GD never changes 1^T W nor the part of W orthogonal to span{h̄_j} (spec §1.4, 12.16)."""
    W0 = LinearNTPProblem(data, None, init=cfg.init).init_params([cfg.seed + b for b in range(cfg.seeds)])["W"]
    dW = history.params["W"] - W0
    col = float(dW.sum(dim=1).abs().max())
    Q, _ = torch.linalg.qr(data.H.T)  # orthonormal basis of span{h̄_j} (d, rank)
    off = float(torch.linalg.vector_norm(dW - (dW @ Q) @ Q.T))
    scale = max(1.0, float(torch.linalg.vector_norm(dW)))
    return [
        check_at_most(f"{run}: invariant 1^T W", "1^T W_k = 1^T W_0 under GD (max deviation)", col, 1e-10 * scale,
                      "spec 12.16"),
        check_at_most(f"{run}: invariant W (I - Π_H)", "W_k (I - Π_span h) = W_0 (I - Π_span h) under GD", off,
                      1e-10 * scale, "spec 12.16"),
    ]


def _steps(history: History) -> np.ndarray:
    return np.array(sorted({r["step"] for r in history.rows()}))


def _per_seed(history: History, metric: str) -> list[np.ndarray]:
    """One array over logged steps per seed."""
    seeds = sorted({r["seed"] for r in history.rows()})
    return [np.array([r[metric] for r in history.rows() if r["seed"] == s]) for s in seeds]


def _prepare(cfg: LinearConfig, ctx: RunContext) -> LinearConfig:
    """Apply the invocation's seeds/device to a preset config."""
    resolve_device(ctx.device)
    return replace(cfg, seeds=max(cfg.seeds, ctx.seeds), device=ctx.device)


def _data_for(cfg: LinearConfig) -> NTPData:
    data = cfg.data.build(DTYPES[cfg.dtype])
    return data.to(device=resolve_device(cfg.device))


# ------------------------------------------------------------------------------------------------ `train`
def train_linear(cfg: LinearConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for a linear config: one run directory with its metrics, panels and checks."""
    out = ensure_dir(ctx.out)
    data = _data_for(cfg)
    ctx.say("computing W*, W^mm")
    ref, facts = reference(data, cfg.solver)
    history = train_run(cfg, data, ref, ctx, "train")
    section = Section("train", f"Linear NTP: {cfg.optimizer.name} on {cfg.data.source} data", facts=facts,
                      seconds=history.seconds)
    section.figures.append(save(figs.training_figure(history.rows(), "train", entropy=data.entropy), out,
                                "training", "Training dynamics",
                                "CE against the entropy floor, parameter norm, correlation with W^mm, and the "
                                "F-component's distance to W*."))
    if history.status == "completed":
        section.checks.extend(run_checks("train", cfg, history, data, ref))
    else:
        section.notes.append(history.message)
    write_npz(out / "geometry.npz", W_star=ref.F.W_star, W_mm=ref.W_mm, W_final=history.params["W"])
    return RunResult(section, cfg, [history],
                     {"status": history.status, "message": history.message, "final": history.at()}, failure=history)


register_trainer("linear", LinearConfig, train_linear)


# ------------------------------------------------------------------------------------------------ `reproduce linear`
FIGURES = {
    "linear-fig1": "2D example: contexts, W^mm rows and hyperplanes; GD training panels",
    "linear-fig2": "2D example: P heatmap, rows of W^mm, rows of W*",
    "linear-fig3": "eight random contexts of the overparameterized dataset",
    "linear-fig4": "GD on the overparameterized dataset (CE, norm, correlations, F-part)",
    "linear-fig5": "normalized GD and Adam on the same dataset",
    "linear-regpath": "regularization path: alignment and F-part against the norm bound B",
}


def run_group(ctx: RunContext) -> RunResult:
    """Reproduce paper A's experiments into ``ctx.out`` (a run directory)."""
    out = ensure_dir(ctx.out)
    section = Section("linear", "Paper A: implicit bias of next-token prediction in linear models",
                      description="Thrampoulidis, NeurIPS 2024. GD, normalized GD and Adam on fixed context "
                                  "embeddings converge in direction to the NTP-SVM solution W^mm while their "
                                  "F-component converges to W*.")
    histories: list[History] = []
    configs: dict[str, LinearConfig] = {}
    ensure_dir(out / "data")

    if ctx.wants("linear-fig1") or ctx.wants("linear-fig2"):
        cfg = _prepare(scaled(TWO_D, ctx.scale), ctx)
        data = _data_for(cfg)
        ctx.say("2D example: W*, W^mm")
        ref, facts = reference(data, cfg.solver)
        data.save(out / "data" / "two_d.npz")
        write_npz(out / "data" / "two_d_geometry.npz", W_star=ref.F.W_star, W_mm=ref.W_mm)
        section.tables.append(Table("2D example dataset", ("quantity", "value"), tuple(facts.items())))
        section.checks.extend(_two_d_checks(data, ref))
        if ctx.wants("linear-fig1"):
            configs["2d-gd"] = cfg
            ctx.say("2D example: GD")
            history = train_run(cfg, data, ref, ctx, "2d-gd")
            histories.append(history)
            section.checks.extend(_two_d_training_checks(history))
            section.seconds += history.seconds
            section.figures.append(_figure1(out, history.rows(), data, ref))
        if ctx.wants("linear-fig2"):
            section.figures.append(_figure2(out, data, ref))

    needs_main = any(ctx.wants(f) for f in ("linear-fig3", "linear-fig4", "linear-fig5", "linear-regpath"))
    if needs_main:
        base = _prepare(scaled(FIG4, ctx.scale), ctx)
        data = _data_for(base)
        ctx.say("overparameterized dataset: W*, W^mm")
        ref, facts = reference(data, base.solver)
        data.save(out / "data" / "overparameterized.npz")
        write_npz(out / "data" / "overparameterized_geometry.npz", W_star=ref.F.W_star, W_mm=ref.W_mm)
        section.facts.update(facts)
        section.checks.extend(_geometry_checks(data, ref))
        if ctx.wants("linear-fig3"):
            section.figures.append(_figure3(out, data, base.data.seed))
        finals = {}
        for run, preset, fig in (("fig4-gd", FIG4, "linear-fig4"), ("fig5-ngd", FIG5_NGD, "linear-fig5"),
                                 ("fig5-adam", FIG5_ADAM, "linear-fig5")):
            if not ctx.wants(fig) and not (run == "fig4-gd" and ctx.wants("linear-fig5")):
                continue
            cfg = _prepare(scaled(preset, ctx.scale), ctx)
            configs[run] = cfg
            ctx.say(f"training {run}")
            history = train_run(cfg, data, ref, ctx, run)
            raise_if_failed(history)
            histories.append(history)
            section.seconds += history.seconds
            section.checks.extend(run_checks(run, cfg, history, data, ref))
            finals[run] = history.at()
        if "fig5-ngd" in finals:
            section.checks.extend(_optimizer_comparison(finals))
        rows = [row for h in histories for row in h.rows()]
        if ctx.wants("linear-fig4"):
            section.figures.append(save(figs.training_figure(rows, "fig4-gd", entropy=data.entropy), out,
                                        "linear-fig4", "GD on the overparameterized dataset (Fig. 4)",
                                        "Upper: CE against the entropy lower bound H and the norm growth (Lemma 2). "
                                        "Lower: correlation of W^mm with W_k and with the corrected W_k - W*, and "
                                        "the relative distance of P_F(W_k) to W* (Thm 2)."))
        if ctx.wants("linear-fig5"):
            section.figures.append(_figure5(out, rows, data))
        if ctx.wants("linear-regpath"):
            ctx.say("regularization path")
            fig, checks, table = _regpath(out, data, ref, REGPATH_B[:3] if ctx.scale == "smoke" else REGPATH_B)
            section.figures.append(fig)
            section.checks.extend(checks)
            section.tables.append(table)
    return RunResult(section, configs, histories, {"scale": ctx.scale, "seeds": ctx.seeds,
                                                   "figures": list(FIGURES if ctx.figures is None else ctx.figures)})


def _geometry_checks(data: NTPData, ref: LinearReference) -> list[Check]:
    """Prop. 1 / eq. (7) / §3 facts of the dataset (exact identities and the e^{-γ} rate)."""
    F, W_mm = ref.F, ref.W_mm
    checks = [check_at_most("W* in F", "||P_⊥(W*)|| = 0 (W* lies in F)", float(torch.linalg.vector_norm(
        F.project_perp(F.W_star))), 1e-9, "spec 12.5")]
    if W_mm is None:
        return checks
    checks.append(check_at_most("W^mm in F^⊥", "||P_F(W^mm)|| = 0", float(torch.linalg.vector_norm(F.project(W_mm))),
                                1e-9, "spec 12.6"))
    checks.append(check_at_most("W* ⟂ W^mm", "|<W*, W^mm>| = 0", abs(float((F.W_star * W_mm).sum())), 1e-9,
                                "spec 12.6"))
    gammas = np.linspace(5, 20, 7)
    gaps = np.array([float(cross_entropy(F.W_star + g * W_mm, data)) - data.entropy for g in gammas])
    slope = float(np.polyfit(gammas, np.log(gaps), 1)[0])
    checks.append(Check("Prop. 1 rate", "CE(W* + γ W^mm) - H decays like e^{-γ} (slope of log gap in γ ∈ [5, 20])",
                        slope, "within 0.02 of -1", bool(abs(slope + 1) <= 0.02), "Prop. 1 of paper A; spec 12.8"))
    return checks


def _two_d_checks(data: NTPData, ref: LinearReference) -> list[Check]:
    """Fig. 2's messages: W^mm depends only on supports (w_1 = w_5), W* on probabilities (w*_1 ≠ w*_5), orthogonal."""
    W_mm, W_star = ref.W_mm, ref.F.W_star
    if W_mm is None:
        return [Check("2D: separable", "the 2D example is NTP-separable", "no", "separable", False, "spec 8.1")]
    same = float(torch.linalg.vector_norm(W_mm[0] - W_mm[4]))
    differ = float(torch.linalg.vector_norm(W_star[0] - W_star[4]))
    return [
        check_at_most("2D: w^mm_1 = w^mm_5", "tokens 1 and 5 share a support pattern, so their W^mm rows coincide",
                      same, 1e-8, "Fig. 2 of paper A"),
        check_at_least("2D: w*_1 ≠ w*_5", "W* rows depend on the in-support probabilities", differ, 1e-3,
                       "Fig. 2 of paper A"),
        check_at_most("2D: W* ⟂ W^mm", "|<W*, W^mm>| = 0", abs(float((W_star * W_mm).sum())), 1e-9,
                      "Fig. 2 of paper A"),
    ]


def _two_d_training_checks(history: History) -> list[Check]:
    last = history.at()
    return [
        check_at_least("2d-gd: alignment", "cos(W_k, W^mm) -> 1 on the 2D example", min(last["cos_mm"]), 0.9,
                       "Fig. 1 of paper A"),
        check_at_most("2d-gd: F-part", "P_F(W_k) -> W* (relative error)", max(last["F_error_rel"]), 0.05,
                      "Fig. 1 of paper A"),
        check_at_most("2d-gd: loss gap", "CE(W_k) - H -> 0", max(last["loss_gap"]), 1e-2, "Fig. 1 of paper A"),
    ]


def _optimizer_comparison(finals: dict[str, dict]) -> list[Check]:
    """Spec 12.17: NGD and Adam reach the entropy faster than GD at equal k (Adam slightly faster than NGD)."""
    gd = max(finals["fig4-gd"]["loss_gap"])
    out = []
    for run in ("fig5-ngd", "fig5-adam"):
        if run in finals:
            out.append(check_at_most(f"{run}: faster than GD", f"CE - H at k = 10^4 below GD's ({gd:.3g})",
                                     max(finals[run]["loss_gap"]), gd, "App. A.2 of paper A; spec 12.17"))
    if "fig5-ngd" in finals and "fig5-adam" in finals:
        out.append(check_at_most("Adam vs NGD", "Adam slightly faster than NGD (CE - H at k = 10^4; an empirical "
                                 "claim of the paper)", max(finals["fig5-adam"]["loss_gap"]),
                                 min(finals["fig5-ngd"]["loss_gap"]), "App. A.2 of paper A"))
    return out


def _figure1(out, rows, data: NTPData, ref: LinearReference):
    fig = figs.two_d_figure(to_numpy(data.H), to_numpy(data.P), to_numpy(ref.W_mm), data.contexts, data.vocab, rows,
                            "2d-gd", entropy=data.entropy)
    return save(fig, out, "linear-fig1", "The 2D example (Fig. 1)",
                "Left: context embeddings A, B, C with their support sets, rows w_v of W^mm (stars) and the "
                "hyperplanes orthogonal to them (dotted). Right: GD training (loss vs entropy, norm, correlations "
                "with W^mm, F-part error).")


def _figure2(out, data: NTPData, ref: LinearReference):
    fig, axes = new_figure(1, 3, width=3.0, height=2.8)
    vocab, contexts = data.vocab, data.contexts
    figs.probability_heatmap(axes[0, 0], to_numpy(data.P), contexts, vocab)
    figs.word_vectors(axes[0, 1], to_numpy(ref.W_mm), vocab, "rows of W^mm")
    figs.word_vectors(axes[0, 2], to_numpy(ref.F.W_star), vocab, "rows of W*")
    return save(fig, out, "linear-fig2", "Support patterns versus probabilities (Fig. 2)",
                "W^mm depends only on the support pattern (tokens 1 and 5 share one, so w_1 = w_5), while W* depends "
                "on the in-support probabilities; the two lie in orthogonal subspaces.")


def _figure3(out, data: NTPData, seed: int):
    picks = np.sort(np.random.default_rng(seed).choice(data.m, size=min(8, data.m), replace=False))
    fig = figs.context_distributions(to_numpy(data.P), picks, data.vocab or [str(v) for v in range(data.V)])
    return save(fig, out, "linear-fig3", "Eight random contexts (Fig. 3)",
                f"Next-token distributions p̂_j over their supports (|S_j| = {int(data.support_sizes[0])}) for "
                f"eight contexts of the overparameterized dataset (H = {data.entropy:.4f} nats).")


def _figure5(out, rows, data: NTPData):
    fig, axes = new_figure(2, 4)
    figs.training_panels(axes[:, :2], rows, "fig5-ngd", entropy=data.entropy, title="normalized GD")
    figs.training_panels(axes[:, 2:], rows, "fig5-adam", entropy=data.entropy, title="Adam")
    return save(fig, out, "linear-fig5", "Normalized GD and Adam (Fig. 5)",
                "The same panels as Fig. 4 for normalized GD (left, η = 0.01) and Adam (right, η = 0.01, "
                "β = (0.9, 0.99)): the same implicit bias, reached faster than GD.")


def _regpath(out, data: NTPData, ref: LinearReference, B_values):
    points = regularization_path(data, B_values)
    B = np.array([p.B for p in points])
    W = torch.stack([p.W for p in points])
    cos = to_numpy(cosine(W, ref.W_mm[None]))
    f_err = np.array([float(torch.linalg.vector_norm(ref.F.project(p.W) - ref.F.W_star)) / ref.F.norm_W_star
                      for p in points])
    attained = np.array([p.attained for p in points])
    fig = save(figs.regularization_path_figure(B, cos, f_err, attained), out, "linear-regpath",
               "Regularization path (Thm 1)",
               "The norm-constrained minimizers Ŵ_B align with W^mm and their F-component converges to W* as B grows.")
    src = "Thm 1 of paper A; spec 12.10"
    i20 = int(np.argmin(np.abs(B - 20)))
    checks = [
        Check("regpath: ||Ŵ_B|| = B", "the constrained minimizer lies on the sphere (attained to 1e-7)",
              f"{int(attained.sum())}/{len(B)} attained", "all B", bool(attained.all()), src),
        Check("regpath: alignment monotone", "cos(Ŵ_B, W^mm) non-decreasing in B", float(cos[-1]),
              "non-decreasing", bool(np.all(np.diff(cos) >= -1e-9)), src),
        check_at_least(f"regpath: alignment at B = {B[i20]:g}", "cos(Ŵ_B, W^mm) -> 1 (0.95 calibrated at B = 20)",
                       float(cos[i20]), 0.95, src),
        Check("regpath: F-part", "||P_F(Ŵ_B) - W*|| / ||W*|| decreases to 0", float(f_err[-1]), "decreasing",
              bool(np.all(np.diff(f_err) < 0)), "Lemma 4.5 of paper A"),
    ]
    table = Table("Regularization path", ("B", "||Ŵ_B||", "cos(Ŵ_B, W^mm)", "F-part rel. error", "KKT residual",
                                          "attained"),
                  tuple((p.B, p.norm, float(c), float(f), p.kkt_residual, p.attained)
                        for p, c, f in zip(points, cos, f_err, strict=True)))
    return fig, checks, table


register_group(Group("linear", "Paper A: linear NTP", FIGURES, run_group))

