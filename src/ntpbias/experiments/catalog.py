"""The catalog: every experiment, reproduce group and preset, in three explicit tables.

Which code trains which experiment, what ``reproduce ID`` runs and what ``train --preset NAME`` trains is read here and
nowhere else:

* :data:`EXPERIMENTS`: a config's ``experiment`` key -> its config class, trainer, theory checks and figures;
* :data:`GROUPS`: a ``reproduce`` ID -> its title, figure IDs, runner and the presets it trains;
* :data:`PRESETS`: a preset name -> its description and its config (the paper's values) at each scale.

The tables name code by its dotted path (``"ntpbias.experiments.linear.runs:train_linear"``), imported when it is
used: reading the catalog imports no experiment code, so ``ntpbias list``, ``--help`` and argument errors need no
torch. ``tests/unit/test_catalog.py`` checks that every path resolves and that every config class names its experiment.

>>> EXPERIMENTS["linear"].trainer
'ntpbias.experiments.linear.runs:train_linear'
>>> resolve_ids(["linear-fig4", "transformer"])
{'linear': ('linear-fig4',), 'transformer': None}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .base import RunContext

_PKG = "ntpbias.experiments"


def resolve(path: str) -> Any:
    """The object a dotted path names: ``"package.module:attribute"`` (imported now), or a module ``"package.module"``.

    >>> resolve("ntpbias.experiments.catalog:resolve") is resolve
    True
    """
    module, _, attr = path.partition(":")
    obj = import_module(module)
    return getattr(obj, attr) if attr else obj


@dataclass(frozen=True)
class Experiment:
    """One kind of training run (the ``experiment`` key of a config file; ``ntpbias train``).

    ``config``: its config class; ``trainer``: ``(config, RunContext) -> RunResult``; ``checks``: the module of its
    theory checks; ``report``: the module that draws its figures; ``doc``: its page of the documentation.
    """

    name: str
    config: str
    trainer: str
    checks: str
    report: str
    doc: str

    @property
    def config_class(self) -> type:
        return resolve(self.config)

    def train(self, cfg, ctx: RunContext):
        """Run the trainer on ``cfg`` (a :class:`~ntpbias.results.RunResult`)."""
        return resolve(self.trainer)(cfg, ctx)


@dataclass(frozen=True)
class Group:
    """What ``ntpbias reproduce ID`` runs: several trainings, the theory's objects, figures and checks.

    ``figures``: figure ID -> description (a figure ID reproduces that figure only); ``run``: ``RunContext ->
    RunResult``; ``presets``: the presets it trains (their checks at the door run before any group starts);
    ``regrade``: ``Path -> RunResult``, the checks, tables and figures again from a run's saved outputs (``None``: the
    group cannot be regraded); ``read_inputs``: ``RunContext -> None``, reads and checks the user's files the group
    takes.
    """

    id: str
    title: str
    run: str
    figures: dict[str, str]
    presets: tuple[str, ...] = ()
    regrade: str | None = None
    read_inputs: str | None = None

    def __call__(self, ctx: RunContext):
        return resolve(self.run)(ctx)

    def regrade_run(self, out: Path):
        """The group's result again from the run directory ``out`` (only where :attr:`regrade` is set)."""
        return resolve(self.regrade)(out)

    def preflight(self, ctx: RunContext) -> None:
        """The group's checks at the door: :func:`~ntpbias.experiments.base.preflight` of each of its presets at
        ``ctx``'s scale and seeds, and the user's files it reads (``read_inputs``, e.g. the ``--yelp`` file, read
        through), so that a ``reproduce`` of several groups fails before the first group's work."""
        from .base import preflight

        for name in self.presets:
            cfg = PRESETS[name].make(ctx.scale)
            if hasattr(cfg, "seeds"):
                cfg = replace(cfg, seeds=max(cfg.seeds, ctx.seeds))
            preflight(cfg)
        if self.read_inputs is not None:
            resolve(self.read_inputs)(ctx)


@dataclass(frozen=True)
class Preset:
    """A named configuration: ``config`` holds the paper's values; ``scaled(config, scale)`` gives it at the quick
    and smoke scales (``None``: the same config at every scale)."""

    name: str
    description: str
    config: str
    scaled: str | None = None

    def make(self, scale: str = "paper"):
        """The config at ``scale`` (smoke, quick or paper)."""
        cfg = resolve(self.config)
        return resolve(self.scaled)(cfg, scale) if self.scaled else cfg


def _experiment(name: str, package: str, config: str, trainer: str, report: str, doc: str) -> Experiment:
    return Experiment(name, f"{_PKG}.{package}.config:{config}", f"{_PKG}.{package}.{trainer}",
                      f"{_PKG}.{package}.checks", f"ntpbias.report.{report}", doc)


#: ``experiment`` key -> what trains it
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    _experiment("linear", "linear", "LinearConfig", "runs:train_linear", "linear", "docs/paper-a-linear-ntp.md"),
    _experiment("separability", "separability", "SeparabilityConfig", "group:train_separability", "separability",
                "docs/separability.md"),
    _experiment("optimizers", "optimizers", "NormsConfig", "runs:train_norms", "optimizers", "docs/optimizers.md"),
    _experiment("ufm", "ufm", "UFMConfig", "group:train_ufm", "ufm", "docs/ufm.md"),
    _experiment("lm", "lm", "LMConfig", "runs:train_lm", "lm", "docs/lm.md"),
    _experiment("attention", "attention", "AttentionConfig", "group:train_attention", "attention",
                "docs/paper-b-attention.md"),
    _experiment("attention-stage2", "attention", "StageTwoConfig", "group:train_stage2", "attention",
                "docs/paper-b-attention.md"),
    _experiment("transformer", "transformer", "TransformerConfig", "group:train_transformer", "transformer",
                "docs/paper-c-transformer.md"),
)}

#: ``reproduce`` ID -> the group; the order is that of ``reproduce all`` and ``ntpbias list``: papers A (and what goes
#: beyond it), B, C
GROUPS: dict[str, Group] = {g.id: g for g in (
    Group("linear", "Paper A: linear NTP", f"{_PKG}.linear.group:run_group", {
        "linear-fig1": "2D example: contexts, W^mm rows and hyperplanes; GD training panels",
        "linear-fig2": "2D example: P heatmap, rows of W^mm, rows of W*",
        "linear-fig3": "eight random contexts of the overparameterized dataset",
        "linear-fig4": "GD on the overparameterized dataset (CE, norm, correlations, F-part)",
        "linear-fig5": "normalized GD and Adam on the same dataset",
        "linear-regpath": "regularization path: alignment and F-part against the norm bound B",
        "linear-spread": "Figs. 4-5 over many random datasets: the band of GD, NGD and Adam, and where seed 0 lies",
    }, presets=("linear-2d", "linear-fig4-gd", "linear-fig5-ngd", "linear-fig5-adam")),
    Group("separability", "NTP-separability phase transition (paper A, open question 1)",
          f"{_PKG}.separability.group:run_group", {
              "separability-transition": "fraction of NTP-separable and NTP_H-compatible datasets against d/m",
              "separability-thresholds": "empirical thresholds (median d*/m, 95% interval) per (V, |S_j|) and m",
              "separability-cover": "one-hot binary: distribution of the critical d against Cover's exact law",
              "separability-phase": "phase diagram: extrapolated thresholds against |S_j|/V per V, measured and "
                                    "predicted",
              "separability-extrapolation": "finite-size extrapolation of the thresholds in 1/m, with residuals",
          }, presets=("separability-cover", "separability-ntp")),
    Group("optimizers", "Beyond paper A: the max-margin direction of each optimizer in every norm",
          f"{_PKG}.optimizers.group:run_group", {
              f"optimizers-{name}": f"margin ratio in each norm against steps, one curve per optimizer: {title}"
              for name, title in (("onehot", "one-hot multiclass data (m = 40, d = 30, V = 5)"),
                                  ("fig4", "paper A's Fig. 4 data (m = 50, d = 60, V = 10, |S_j| = 6)"),
                                  ("shakespeare", "Shakespeare, contexts of 1-2 words, 10-word vocabulary"))}),
    Group("ufm", "Beyond paper A: the log-bilinear (unconstrained-features) model", f"{_PKG}.ufm.group:run_group", {
        "ufm-path": "planted supports: the logits' decomposition, Gram alignment and collapse along the λ path",
        "ufm-training": "planted supports: GD, Adam and normalized GD at a fixed λ, against the certified optimum",
        "ufm-modes": "planted supports: the order in which singular directions are learned from a small "
                     "initialisation",
        "ufm-geometry": "planted supports: S̃, L^mm, the predicted and the learned context Gram matrices",
        "ufm-support": "the centred support matrix against the nuclear-norm SVM (planted, overlapping, Shakespeare)",
        "ufm-shakespeare": "Shakespeare's short contexts: decomposition, Gram alignment and collapse along the λ path",
    }),
    Group("lm", "Beyond paper A: a transformer language model's NTP geometry", f"{_PKG}.lm.group:run_group", {
        "lm-planted": "planted chain: the model's geometry against training steps, its spectra and its collapse",
        "lm-frozen": "planted chain: GD on the unembedding alone over the model's final features (paper A's setting)",
        "lm-shakespeare": "Shakespeare: the same measurements on real text (findings)",
    }, presets=("lm-planted", "lm-shakespeare")),
    Group("attention", "Paper B: attention with trained embeddings (synthetic data and theory)",
          f"{_PKG}.attention.group:run_group", {
              "attention-fig2": "Fig. 2: one-layer model (AdamW, all parameters) on K-level data: <E_s, p>, <E_s, v> "
                                "vs PD(s)",
              "attention-lemma41": "Lemma 4.1: one-step error vs d against 11 η₀ d^{-1/4}; <E¹_s - E⁰_s, v> vs "
                                   "(η₀/2) α_s",
              "attention-stage2": "Stage 2 (Thm 4.3, Lemmas 4.4-4.5): cos with the max-margin direction, selection "
                                  "accuracy",
          }, presets=("attention-fig2", "attention-stage2", "attention-stage2-gd", "attention-stage2-lemma44")),
    Group("attention-imdb", "Paper B on real text (IMDB, Yelp): Figures 1 and 3", f"{_PKG}.attention.imdb:run_group", {
        "attention-fig3": "Fig. 3: one-layer model on IMDB (and Yelp): <E_s, p>, <E_s, v> vs PD(s)",
        "attention-fig1": "Fig. 1: two-layer model (17) on IMDB (and Yelp): <E_s, p>, <E_s, v> vs PD(s)",
    }, presets=("attention-imdb-one-layer", "attention-imdb-two-layer"), regrade=f"{_PKG}.attention.imdb_grade:regrade",
        read_inputs=f"{_PKG}.attention.imdb:read_yelp"),
    Group("transformer", "Paper C: one-layer transformer (Algorithm 1)", f"{_PKG}.transformer.group:run_group", {
        "transformer-fig1": "Fig. 1 for Example 1: the collocation and each query's partial order",
        "transformer-fig2": "Fig. 2: stage-1 and stage-2 loss, direction and norm on a random |V| = 20 dataset",
        "transformer-stage2": "stage-2 diagnostics: excess loss, attention on optimal tokens (Lemma 5, Thm 2), "
                              "Lemma 6",
        "transformer-example2": "Algorithm 1 on Example 1 (reference values) and Example 2's unseen inputs SP, OSP, "
                                "VP",
        "transformer-generalization": "Theorem 3: predicted vs expected next tokens of unseen inputs (tables)",
        "transformer-ablation": "non-orthonormal (unit-norm) embeddings and one-stage joint training (outside the "
                                "theory)",
        "transformer-prop2": "Proposition 2 vs the W_kq* QP on data with several optimal tokens per query (the "
                             "5-token counterexample and the 'samples' generator), trained by Algorithm 1",
    }, presets=("transformer-fig2", "transformer-example1", "transformer-unit", "transformer-joint",
                "transformer-prop2", "transformer-fig2-samples")),
)}


def _presets(package: str, scaled: str | None, *rows: tuple[str, str, str]) -> tuple[Preset, ...]:
    """Presets whose configs live in ``package``'s config module and scale with its function ``scaled``."""
    module = f"{_PKG}.{package}.config"
    return tuple(Preset(name, desc, f"{module}:{cfg}", scaled and f"{module}:{scaled}") for name, desc, cfg in rows)


#: preset name -> preset (``ntpbias train --preset NAME``)
PRESETS: dict[str, Preset] = {p.name: p for p in (
    *_presets("linear", "scaled",
              ("linear-2d", "Fig. 1: GD on the 2D example (d=2, m=3, V=5; contexts placed as the caption "
                            "describes, probabilities of data seed 0); η=0.5 and 10^5 steps (quick: 10^4) are ours: "
                            "the paper gives neither", "TWO_D"),
              ("linear-2d-symmetric", "the 2D example with contexts 120° apart (equal cones), GD (η=0.5)",
               "TWO_D_SYMMETRIC"),
              ("linear-fig4-gd", "Fig. 4: GD (η=0.5) on m=50, d=60, V=10, |S_j|=6, 10^4 steps", "FIG4"),
              ("linear-fig5-ngd", "Fig. 5 (left): normalized GD (η=0.01), same data, 10^4 steps", "FIG5_NGD"),
              ("linear-fig5-adam", "Fig. 5 (right): Adam (η=0.01, β=(0.9, 0.99)), same data, 10^4 steps",
               "FIG5_ADAM")),
    *_presets("separability", None,
              ("separability-cover", "one-hot binary (V=2, |S_j|=1): Cover's d/m = 1/2, m = 40, 200 datasets",
               "COVER"),
              ("separability-ntp", "NTP-separability of paper A's support pattern (V=10, |S_j|=6), m = 40, "
                                   "100 datasets", "NTP")),
    *_presets("optimizers", "scaled",
              ("optimizers-sign", "sign descent (linf steepest) on the one-hot data, measured in every norm (10^4 "
                                  "steps; paper 10^5)", "SIGN"),
              ("optimizers-muon", "Muon (β = 0.9, quintic Newton-Schulz) on the one-hot data, measured in every "
                                  "norm (10^4 steps; paper 10^5)", "MUON"),
              ("optimizers-adam", "Adam (β = 0.9, 0.99) on the one-hot data, measured in every norm (10^4 steps; "
                                  "paper 10^5)", "ADAM")),
    *_presets("ufm", "scaled",
              ("ufm-planted-gd", "log-bilinear model, GD (η=2, λ=1e-3) on planted supports (V=16, 4 sets of sizes "
                                 "2, 3, 4, 6)", "PLANTED_GD"),
              ("ufm-planted-adam", "log-bilinear model, Adam (η=0.01) on the same planted data", "PLANTED_ADAM"),
              ("ufm-planted-ngd", "log-bilinear model, normalized GD (η=0.05) on the same planted data",
               "PLANTED_NGD"),
              ("ufm-overlap-gd", "log-bilinear model, GD on the overlapping support sets where L^mm differs from S̃",
               "OVERLAP"),
              ("ufm-shakespeare-adam", "log-bilinear model, Adam (η=0.01, λ=3e-3) on Shakespeare's short contexts "
                                       "(T=2, V=20, 20,000 tokens)", "SHAKESPEARE")),
    *_presets("lm", "scaled",
              ("lm-shakespeare", "GPT-style decoder (2 blocks, d=128, 4 heads, context 16) on Shakespeare's words "
                                 "(64-token vocabulary with <unk>), Adam η=3e-3, 4000 steps of 64 windows",
               "SHAKESPEARE"),
              ("lm-shakespeare-1k", "the same decoder on Shakespeare's words with a 1024-token vocabulary, 16,000 "
                                    "steps of 64 windows, η x0.1 at step 12,000 (under 15 CPU minutes)",
               "SHAKESPEARE_1K"),
              ("lm-planted", "the same decoder (d=32, 2 heads, context 8) on a 16-token Markov chain with 4 planted "
                             "support sets, 3000 steps of 32 windows", "PLANTED_CHAIN")),
    *_presets("attention", "fig2_scaled",
              ("attention-fig2", "Fig. 2 of paper B: one-layer model, AdamW on K-level data (|S|=2048, K=8, T=256); "
                                 "paper: d=2048, lr 1e-4, 196 epochs (quick: d=256, lr 1e-3, 10 epochs)", "FIG2")),
    *_presets("attention", None,
              ("attention-stage2", "Paper B stage 2: normalized GD (h=0.5) on p with E fixed at E¹, A1-base data, "
                                   "d=1024, η₀=200", "STAGE2_NGD"),
              ("attention-stage2-gd", "Paper B stage 2 by plain GD (h=1, 10^4 steps), A1-base data", "STAGE2_GD"),
              ("attention-stage2-lemma44", "Paper B Lemma 4.4 case: one irrelevant token, d=16384, normalized GD",
               "STAGE2_LEMMA44")),
    *_presets("attention", "real_text_scaled",
              ("attention-imdb-one-layer", "Fig. 3 of paper B (IMDB row): one-layer model, AdamW lr 0.01, 500 "
                                           "epochs, d=2048 on the packaged IMDB reviews (--set data.path=FILE.csv "
                                           "for your own)", "IMDB_ONE_LAYER"),
              ("attention-imdb-two-layer", "Fig. 1 of paper B (IMDB row): two-layer model (17), same settings",
               "IMDB_TWO_LAYER"),
              ("attention-yelp-one-layer", "Fig. 3 of paper B (Yelp row): one-layer model on Yelp reviews (needs "
                                           "--set data.path=yelp_academic_dataset_review.json)", "YELP_ONE_LAYER"),
              ("attention-yelp-two-layer", "Fig. 1 of paper B (Yelp row): two-layer model on Yelp reviews (needs "
                                           "--set data.path=...)", "YELP_TWO_LAYER")),
    *_presets("transformer", None,
              ("transformer-fig2", "Fig. 2: Algorithm 1 on a random realizable dataset, |V| = d = 20, η₀ = 0.2/√d, "
                                   "η = 0.05/√d, 900 + 900 steps", "FIG2"),
              ("transformer-fig2-samples", "Fig. 2 on the 'samples' generator (not prefix-closed, |O_q| >= 2 common)",
               "FIG2_SAMPLES"),
              ("transformer-prop2", "Algorithm 1 on the 5-token counterexample to Proposition 2 (d = 5, Fig. 2's "
                                    "step sizes)", "PROP2"),
              ("transformer-example1", "Algorithm 1 on Example 1 (d = 4, η₀ = 0.1, η = 0.025, 900 + 900 steps)",
               "EXAMPLE1"),
              ("transformer-unit", "ablation: random unit-norm (non-orthonormal) embeddings, Fig. 2's settings",
               "UNIT"),
              ("transformer-joint", "ablation: W_ov and W_kq trained jointly (NGD, η₀, 1800 steps), Fig. 2's data",
               "JOINT")),
)}


def get_preset(name: str) -> Preset:
    """The preset ``name``; an unknown name is a user error listing the presets."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; run `ntpbias list` to see the presets ({', '.join(PRESETS)})")
    return PRESETS[name]


def get_experiment(name: Any, where: str = "") -> Experiment:
    """The experiment ``name`` (a config's ``experiment`` key); an unknown one is a user error naming the valid ones."""
    if not isinstance(name, str) or name not in EXPERIMENTS:
        shape = "" if name is None or isinstance(name, str) else ": expected a string in quotes"
        raise ConfigError(f"{where}experiment = {name!r}{shape}; set `experiment` to one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def load_run_config(path: str | Path):
    """A saved or hand-written run config of any experiment: its ``experiment`` key picks the config class."""
    from ..config import load_toml, read_toml

    path = Path(path)
    experiment = get_experiment(read_toml(path).get("experiment"), f"{path}: ")
    return load_toml(experiment.config_class, path)


def resolve_ids(ids: list[str]) -> dict[str, tuple[str, ...] | None]:
    """Map reproduce IDs (groups, figure IDs, or ``all``) to {group id: figure subset or None for all}."""
    if not ids or "all" in ids:
        return {g: None for g in GROUPS}
    figure_owner = {fig: g.id for g in GROUPS.values() for fig in g.figures}
    chosen: dict[str, tuple[str, ...] | None] = {}
    for item in ids:
        if item in GROUPS:
            chosen[item] = None
        elif item in figure_owner:
            owner = figure_owner[item]
            if owner not in chosen or chosen[owner] is not None:
                chosen[owner] = (*(chosen.get(owner) or ()), item)
        else:
            valid = ", ".join(["all", *GROUPS, *figure_owner])
            raise ConfigError(f"unknown experiment or figure ID {item!r}; valid IDs: {valid} (see `ntpbias list`)")
    return chosen


def figures_of(group: str, ctx: RunContext) -> list[str]:
    """The figure IDs a run of ``group`` under ``ctx`` draws (recorded in its summary)."""
    return list(GROUPS[group].figures if ctx.figures is None else ctx.figures)


__all__ = ["EXPERIMENTS", "GROUPS", "PRESETS", "Experiment", "Group", "Preset", "figures_of",
           "get_experiment", "get_preset", "load_run_config", "resolve", "resolve_ids"]
