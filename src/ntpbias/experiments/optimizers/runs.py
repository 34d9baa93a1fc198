"""The norms study's runs: the NTP-SVM of every norm for a dataset, the datasets, one batched training run, and
``ntpbias train`` of a :class:`~.config.NormsConfig`."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..._tensor import DTYPES, resolve_device, to_numpy
from ...data.ntp import NTPData
from ...errors import NotSeparableError, SolverError
from ...geometry.linear.excess import excess_loss_grad
from ...geometry.linear.subspace import DataSubspace, subspace
from ...geometry.margins.program import ntp_svm
from ...io import ensure_dir, write_npz
from ...metrics import cosine, frobenius, norm_margin_metrics
from ...results import FigureSpec, RunResult, Section, Table
from ...training.history import History
from ...training.linear import LinearNTPProblem, LinearReference
from ...training.loop import Trainer
from ...training.optimizers import Optimizer, OptimizerConfig
from ..base import RunContext, register_trainer
from ..linear.config import LinearDataConfig
from .config import (
    FIG4,
    GROUP,
    ONEHOT,
    SHAKESPEARE,
    SHAKESPEARE_EMBEDDING,
    SHAKESPEARE_PAPER,
    SHAKESPEARE_PAPER_EMBEDDING,
    NormsConfig,
)


# ------------------------------------------------------------------------------------------------ references
@dataclass(frozen=True, eq=False)
class NormsReference:
    """What the iterates of one dataset are measured against: F (with W*) and, per norm, the NTP-SVM result (None
    where it could not be solved; ``notes`` says why)."""

    F: DataSubspace
    svm: dict
    notes: tuple[str, ...] = ()

    @property
    def W_mm(self) -> dict[str, torch.Tensor]:
        return {n: r.W for n, r in self.svm.items() if r is not None}

    @property
    def unique(self) -> dict[str, bool]:
        return {n: (True if n == "l2" else r.unique) for n, r in self.svm.items() if r is not None}

    def linear(self) -> LinearReference:
        l2 = self.svm.get("l2")
        return LinearReference(F=self.F, W_mm=None if l2 is None else l2.W)


def norm_references(data: NTPData, norms, solver: str = "auto") -> NormsReference:
    """F, W* and the NTP-SVM in each of ``norms`` (certified; see :func:`~ntpbias.geometry.margins.program.ntp_svm`)."""
    out, notes = {}, []
    for norm in norms:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # an uncertified solve is reported in the table instead
                out[norm] = ntp_svm(data, solver) if norm == "l2" else ntp_svm(data, norm=norm)
        except NotSeparableError as exc:
            out[norm] = None
            notes.append(f"{norm}: {exc}")
        except SolverError as exc:
            out[norm] = None
            notes.append(f"{norm}: the solver failed ({exc})")
    return NormsReference(F=subspace(data), svm=out, notes=tuple(notes))


def svm_table(name: str, ref: NormsReference) -> Table:
    """One row per norm: ||W^mm||, the maximum margin 1/||W^mm||, the certificate, uniqueness and the time."""
    rows = []
    for norm, r in ref.svm.items():
        if r is None:
            rows.append((norm, None, None, None, None, "not solved", None))
            continue
        worst = r.certificate.worst
        unique = True if norm == "l2" else r.unique
        verdict = {True: "yes", False: "no", None: "undecided"}[unique]
        rows.append((norm, r.norm, 1 / r.norm, worst, r.certified, verdict, r.solve_seconds))
    return Table(f"NTP-SVM in each norm: {name}", ("norm", "||W^mm||", "max margin 1/||W^mm||", "certificate residual",
                                                   "certified", "unique", "seconds"), tuple(rows))


# ------------------------------------------------------------------------------------------------ the problem
class NormsProblem(LinearNTPProblem):
    """CE of a linear decoder with the cancellation-free gradient, measured in every norm of ``reference``."""

    def __init__(self, data: NTPData, reference: NormsReference, *, init: str = "lecun_normal"):
        super().__init__(data, reference.linear(), init=init)
        self.norms_reference = reference

    def loss_and_grad(self, params, step, generators):
        excess, grad = excess_loss_grad(params["W"], self.data)
        return self.data.entropy + excess, {"W": grad}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        W = params["W"]
        ref = self.norms_reference
        F = ref.F
        excess, grad = excess_loss_grad(W, self.data)
        W_F = F.project(W)
        f_err = frobenius(W_F - F.W_star)
        out = {"loss": self.data.entropy + excess, "loss_gap": excess, "grad_norm": frobenius(grad),
               "norm": frobenius(W), "F_error": f_err,
               "F_error_rel": f_err / max(F.norm_W_star, torch.finfo(W.dtype).tiny)}
        if "l2" in ref.W_mm:
            out["cos_mm"] = cosine(W, ref.W_mm["l2"][None])
        if ref.W_mm:
            out.update(norm_margin_metrics(W, self.data, F, ref.W_mm, ref.unique))
        return out


def train_run(cfg: NormsConfig, data: NTPData, ref: NormsReference, ctx: RunContext, run: str) -> History:
    """Train ``cfg`` (batched over its seeds); rows carry ``run``."""
    problem = NormsProblem(data, ref, init=cfg.model.init)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    trainer = Trainer(problem, Optimizer(cfg.optimizer, loss_floor=data.entropy), cfg.train, seeds=seeds,
                      checkpoint_dir=ctx.out / "checkpoints" / run, progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    return history


# ------------------------------------------------------------------------------------------------ datasets
def dataset(name: str, scale: str, out: Path, dtype: str = "float64", device: str = "cpu"):
    """(the data config of dataset ``name``, its NTP data), saved under ``out/data/<name>.npz``.

    ``shakespeare`` is exported from the built-in corpus (:func:`~ntpbias.data.corpus.export_ntp_data`) and read back
    from the saved file, so that the runs' ``config.toml`` names the file it trained on. Raises DataError when the
    corpus is not installed (the ``text`` extra).
    """
    path = ensure_dir(out / "data") / f"{name}.npz"
    if name == "shakespeare":
        from ...data.corpus import export_ntp_data, tokenize_corpus

        corpus_cfg = SHAKESPEARE_PAPER if scale == "paper" else SHAKESPEARE
        embedding = SHAKESPEARE_PAPER_EMBEDDING if scale == "paper" else SHAKESPEARE_EMBEDDING
        export_ntp_data(tokenize_corpus("shakespeare", corpus_cfg), corpus_cfg, embedding).save(path)
        cfg = LinearDataConfig(source="file", path=str(path))
    else:
        cfg = {"onehot": ONEHOT, "fig4": FIG4}[name]
    data = data_for(cfg, dtype, device)
    if name != "shakespeare":
        data.save(path)
    return cfg, data


def data_for(cfg: LinearDataConfig, dtype: str = "float64", device: str = "cpu") -> NTPData:
    return cfg.build(DTYPES[dtype]).to(device=resolve_device(device))


def save_references(path: Path, ref: NormsReference) -> None:
    """``W_star`` and ``W_mm_<norm>`` for every solved norm."""
    write_npz(path, W_star=ref.F.W_star, **{f"W_mm_{n}": W for n, W in ref.W_mm.items()})


# ------------------------------------------------------------------------------------------------ `ntpbias train`
def known_norm(opt: OptimizerConfig) -> str | None:
    """The norm whose max-margin direction the optimizer is known to find on one-hot data (None: none known)."""
    return {"gd": "l2", "ngd": "l2" if opt.normalize == "grad" else None, "sign": "linf", "nsd": opt.norm,
            "muon": "spectral", "adam": "linf"}.get(opt.name)


def final_table(title: str, histories: list[History], labels: dict[str, str], norms) -> Table:
    """Optimizer x norm at the last step: the margin ratio (mean over seeds), the distance where unique, CE - H and
    ||P_F W_k - W*||."""
    rows = []
    for h in histories:
        last = {k: float(np.mean(v)) for k, v in h.at().items()}
        ratios = tuple(last.get(f"margin_ratio_{n}") for n in norms)
        dists = ", ".join(f"{n} {last[f'dist_{n}']:.3g}" for n in norms if f"dist_{n}" in last)
        rows.append((labels.get(h.run, h.run), *ratios, dists or "-", last["loss_gap"], last["F_error"]))
    return Table(title, ("optimizer", *[f"margin ratio {n}" for n in norms], "distance to W^mm (unique norms)",
                         "CE - H", "||P_F W - W*||"), tuple(rows))


def margins_figure(fig_id: str, title: str, histories: list[History], labels: dict[str, str], norms,
                   entropy: float) -> FigureSpec:
    rows = [row for h in histories for row in h.rows()]
    return FigureSpec(
        fig_id, title,
        "Normalized margin of P_⊥(W_k) in each norm relative to that norm's maximum 1/||W^mm|| (1 = the norm's "
        "NTP-SVM direction), one panel per norm and one curve per optimizer (mean over seeds, band = range); last "
        "panel: CE(W_k) - H.", "optimizers.margins",
        {"rows": rows, "runs": [h.run for h in histories], "labels": labels, "norms": list(norms),
         "entropy": entropy})


def train_norms(cfg: NormsConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for a norms-study config: one run, measured in every norm."""
    out = ensure_dir(ctx.out)
    data = data_for(cfg.data, cfg.dtype, cfg.device)
    ctx.say("NTP-SVM in each norm")
    t0 = time.perf_counter()
    ref = norm_references(data, cfg.model.norms, cfg.model.solver)
    history = train_run(cfg, data, ref, ctx, "train")
    section = Section("train", f"Norms study: {cfg.optimizer.name} on {cfg.data.source} data",
                      seconds=time.perf_counter() - t0)
    section.tables.append(svm_table("this dataset", ref))
    section.tables.append(final_table("At the last step", [history], {}, [n for n in cfg.model.norms
                                                                        if n in ref.W_mm]))
    section.notes.extend(ref.notes)
    section.plots.append(margins_figure("margins", "Margin ratio in each norm", [history], {},
                                        [n for n in cfg.model.norms if n in ref.W_mm], data.entropy))
    if history.status != "completed":
        section.notes.append(history.message)
    save_references(out / "geometry.npz", ref)
    write_npz(out / "final.npz", W_final=to_numpy(history.params["W"]))
    return RunResult(section, cfg, [history], {"status": history.status, "message": history.message,
                                               "final": history.at(), "known_norm": known_norm(cfg.optimizer)},
                     failure=history)


register_trainer(GROUP, NormsConfig, train_norms)
