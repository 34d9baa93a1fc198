"""The log-bilinear model's runs: the reference objects of a dataset, the regularization path, one batched training
run, and the order-of-learning analysis (docs/ufm.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..._tensor import resolve_device
from ...data.ntp import NTPData
from ...geometry.margins.result import SVMResult
from ...geometry.ufm.logit_svm import nuclear_svm, same_support_spread, svm_vs_centred_support
from ...geometry.ufm.logits import finite_logits
from ...training.history import History
from ...training.loop import Trainer
from ...training.optimizers import Optimizer
from ...training.ufm import UFMProblem, UFMReference, ufm_metrics
from ...training.ufm_path import UFMPathPoint, lambda_grid, regularization_path
from ..base import RunContext
from .config import UFMConfig


# ------------------------------------------------------------------------------------------------ data and reference
def prepare(cfg: UFMConfig, ctx: RunContext) -> UFMConfig:
    """Apply the invocation's seeds/device to a preset config."""
    resolve_device(ctx.device)
    return replace(cfg, seeds=max(cfg.seeds, ctx.seeds), device=ctx.device)


def data_for(cfg: UFMConfig) -> NTPData:
    """The config's dataset in float64 (every logit-space object is a theory quantity)."""
    return cfg.data.build(torch.float64)


def reference(data: NTPData, cfg: UFMConfig, *, svm: SVMResult | None = None) -> tuple[UFMReference, dict]:
    """L^mm (certified), the SVD of S̃, the groups and D0's modes, and the dataset facts shown in reports."""
    ref = UFMReference.of(data, solver=cfg.model.solver, svm=svm)
    s = ref.support
    facts = {
        "contexts m": data.m, "vocabulary V": data.V, "embedding dim d": cfg.model.dim(data),
        "support sets (distinct)": int(ref.groups.max()) + 1, "entropy H (nats)": data.entropy,
        "||L*|| (finite part)": float(torch.linalg.matrix_norm(finite_logits(data))),
        "rank of S̃": s.rank, "singular values of S̃": [round(x, 6) for x in s.sigma.tolist()],
        "polar factor of S̃, largest entry off the supports": s.polar_out_max,
        "||L^mm||_* (nuclear-norm NTP-SVM)": ref.svm.norm, "rank of L^mm": ref.svm.rank,
        "SVM solver": ref.svm.solver, "SVM relative duality gap": ref.svm.certificate.duality_gap,
        "||L^mm - S̃|| / ||S̃||": svm_vs_centred_support(ref.svm, data),
        "same-support column spread of L^mm": same_support_spread(ref.svm.L, ref.groups),
    }
    return ref, facts


def cross_check(data: NTPData, main: SVMResult) -> tuple[SVMResult, float]:
    """The other backend's solution (Clarabel when ``main`` came from ADMM and vice versa) and the relative
    difference of the two optimal values."""
    other = nuclear_svm(data, "admm" if main.solver == "clarabel" else "clarabel")
    return other, abs(other.norm - main.norm) / main.norm


# ------------------------------------------------------------------------------------------------ the path
@dataclass(frozen=True, eq=False)
class PathRun:
    """A solved regularization path and its ``metrics.csv`` rows (``run = path-<name>``, ``step`` = index of λ)."""

    name: str
    points: list[UFMPathPoint]
    rows: list[dict]
    seconds: float


def run_path(cfg: UFMConfig, data: NTPData, ref: UFMReference, ctx: RunContext, name: str,
             extra_lambdas: tuple[float, ...] = ()) -> PathRun:
    """The path over ``cfg.path``'s λ grid (plus ``extra_lambdas``), batched over the config's seeds."""
    lambdas = sorted(set(lambda_grid(data, cfg.path.points, cfg.path.decades)) | set(extra_lambdas), reverse=True)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    d = cfg.model.dim(data)
    points = regularization_path(data, lambdas, seeds=seeds, d=d, init_scale=cfg.path.init_scale,
                                 tol=cfg.path.tol, progress=lambda msg: ctx.say(f"path {name}: {msg}"))
    rows = []
    for i, p in enumerate(points):
        values = ufm_metrics(p.W, p.H, data, p.lam, ref)
        values.update({k: p.certificate[k] for k in ("grad_rel", "op_ratio", "gap_rel", "variational_gap")})
        for b, seed in enumerate(seeds):
            rows.append({"run": f"path-{name}", "step": i, "seed": seed, "lam": p.lam,
                         **{k: float(v[b]) for k, v in values.items()}})
    return PathRun(name, points, rows, sum(p.seconds for p in points))


def optimum_at(cfg: UFMConfig, data: NTPData, lam: float) -> UFMPathPoint:
    """The certified optimum at the training λ, reached along a short path from λ_0/√10 (two points per decade); one
    seed: the logits are the same from every seed."""
    start = lambda_grid(data, 2, 1.0)[0]
    n = max(1, int(np.ceil(2 * np.log10(start / lam))) + 1) if lam < start else 1
    lambdas = np.geomspace(start, lam, n) if n > 1 else np.array([lam])
    return regularization_path(data, lambdas.tolist(), seeds=[cfg.seed], d=cfg.model.dim(data),
                               init_scale=cfg.path.init_scale, tol=cfg.path.tol)[-1]


# ------------------------------------------------------------------------------------------------ training
def train_run(cfg: UFMConfig, data: NTPData, ref: UFMReference, ctx: RunContext, run: str) -> History:
    """Train ``cfg`` (batched over its seeds) and return the history; rows carry ``run``."""
    problem = UFMProblem(data, ref, d=cfg.model.dim(data), lam=cfg.model.lam, init_scale=cfg.model.init_scale)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    trainer = Trainer(problem, Optimizer(cfg.optimizer, loss_floor=data.entropy), cfg.train, seeds=seeds,
                      checkpoint_dir=ctx.out / "checkpoints" / run, progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    return history


def half_times(history: History, prefix: str = "mode_") -> tuple[np.ndarray, np.ndarray]:
    """When each mode is learned: the first logged step at which a_i reaches half its final value (docs/ufm.md, U-6).

    Returns (times (r, n_seeds) float, NaN where a mode's final strength is <= 0; final strengths (r, n_seeds)).
    """
    names = sorted((n for n in history.names if n.startswith(prefix)), key=lambda n: int(n[len(prefix):]))
    modes = np.stack([history[n] for n in names])  # (r, steps, seeds)
    final = modes[:, -1, :]
    reached = modes >= 0.5 * final[:, None, :]
    first = np.argmax(reached, axis=1)  # (r, seeds)
    times = history.steps[first].astype(float)
    return np.where(final > 0, times, np.nan), final


def order_statistics(sigma: np.ndarray, times: np.ndarray, *, share: float = 1 / 3, gap: float = 1.2) -> dict:
    """How well the half-times follow the singular values (docs/ufm.md, U-6), per seed, over the leading modes
    (σ_i >= share σ_1):

    * ``concordance``: the fraction of pairs with well-separated singular values (σ_i >= gap σ_k) learned in the order
      of σ (t_i <= t_k); nearly equal σ have no predicted order;
    * ``spearman``: the rank correlation of σ_i with 1/t_i;
    * ``ratios``: t_i σ_i / (t_1 σ_1), which the small-initialisation linearization predicts to be about 1.
    """
    from scipy import stats

    keep = sigma >= share * sigma[0]
    idx = np.flatnonzero(keep)
    pairs = [(i, k) for i in idx for k in idx if sigma[i] >= gap * sigma[k]]
    rhos, conc, ratios = [], [], []
    for t in times.T:
        ok = keep & np.isfinite(t)
        rhos.append(float(stats.spearmanr(sigma[ok], 1 / t[ok]).statistic) if ok.sum() >= 3 else float("nan"))
        valid = [(i, k) for i, k in pairs if np.isfinite(t[i]) and np.isfinite(t[k])]
        conc.append(float(np.mean([t[i] <= t[k] for i, k in valid])) if valid else float("nan"))
        ratios.append(t[ok] * sigma[ok] / (t[0] * sigma[0]))
    return {"modes": int(keep.sum()), "pairs": len(pairs), "concordance": conc, "spearman": rhos, "ratios": ratios}
