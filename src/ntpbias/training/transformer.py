"""Algorithm 1 of paper C (two-stage normalized GD) and one-stage joint training, as Trainer problems.

Algorithm 1 (Sec. 4.2; docs/paper-c-transformer.md#objects), from W_ov^(0) = 0 and W_kq^(0) = 0:

* stage 1 (eq. 7): W_ov^(t+1) = W_ov^(t) - η₀ ∇L_0(W_ov^(t)) / ||∇L_0(W_ov^(t))||, t < T, on the collocation loss
  L_0 (:class:`Stage1Problem`);
* stage 2 (eq. 10): W_kq^(t+1) = W_kq^(t) - η ∇_{W_kq} L(W_ov^(T), W_kq^(t)) / ||·||, t < T_1, on the loss of
  eq. (1) over all of D_0 with W_ov frozen at its stage-1 value (:class:`Stage2Problem`).

Both stages are normalized GD with the Frobenius norm (``OptimizerConfig(name="ngd", normalize="grad")``); the
paper's step sizes are η₀ = 0.2/√d and η = 0.05/√d (:func:`paper_step_sizes`). :class:`JointProblem` trains
(W_ov, W_kq) together on eq. (1) with NGD normalized by the joint gradient norm (an ablation; not in the paper).

Parameters are batched over runs (dim 0) as the :class:`~ntpbias.training.loop.Trainer` requires; all runs of a
problem share one dataset and embedding (different datasets need different problems). A zero gradient leaves
the iterate unchanged (the optimizer's guard), which happens legitimately when no sample holds two distinct
tokens or when attention weights underflow after very long stage-2 runs (docs/paper-c-transformer.md#decisions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.sentences import NTPSamples
from ..data.structure import DatasetStructure, analyze_structure
from ..errors import DataError, NotSeparableError
from ..geometry.margins.program import SVMResult
from ..geometry.transformer.optimum import theorem3_gap, token_basis, wkq_star, wov_star
from ..metrics import cosine, frobenius
from ..models.transformer import (
    TransformerInputs,
    attention,
    cross_entropy,
    forward_reparam,
    loss_and_grad_L0,
    loss_and_grads,
)
from .init import lecun
from .loop import History, TrainConfig, Trainer
from .optimizers import Optimizer, OptimizerConfig


def paper_step_sizes(d: int) -> tuple[float, float]:
    """(η₀, η) = (0.2/√d, 0.05/√d), the step sizes of Sec. 7.

    >>> [round(v, 7) for v in paper_step_sizes(20)]
    [0.0447214, 0.0111803]
    """
    return 0.2 / math.sqrt(d), 0.05 / math.sqrt(d)


# ---------------------------------------------------------------------------------------------- the task
@dataclass(frozen=True, eq=False)
class TransformerTask:
    """A dataset with its embedding and the theory's reference objects, shared by every problem below.

    Build it with :meth:`build`.

    Attributes
    ----------
    samples : NTPSamples. structure : DatasetStructure (collocation, orders, assumption checks).
    E : (d, |V|) token embeddings (columns). inputs : TransformerInputs of every distinct sample.
    next_token : LongTensor (|V|,) the collocation n, -1 where undefined (left out of L_0).
    W_ov_star, W_kq_star : SVMResult or None
        The max-margin solutions of eqs. (2) and (3) with their KKT certificates; None when the program has no
        solution on this data (``reference_error`` says why) or when the task was built with ``solve=False``.
    reference_error : str
        Why a reference is missing ("" when both were solved).
    """

    samples: NTPSamples
    structure: DatasetStructure
    E: torch.Tensor
    inputs: TransformerInputs
    next_token: torch.Tensor
    W_ov_star: SVMResult | None
    W_kq_star: SVMResult | None
    reference_error: str = ""

    @classmethod
    def build(cls, samples: NTPSamples, E: torch.Tensor, *, structure: DatasetStructure | None = None,
              solve: bool = True, solver: str = "auto") -> TransformerTask:
        """Embed ``samples`` through E (d, |V|) and (if ``solve``) solve W_ov* and W_kq*.

        A dataset whose collocation is empty (no one-token sample) is a :class:`DataError`: stage 1 has no
        loss to minimize. A max-margin program without a solution (no relation, or confused tokens) leaves
        that reference None.
        """
        structure = analyze_structure(samples) if structure is None else structure
        next_token = structure.collocation.next_token
        if not bool((next_token >= 0).any()):
            raise DataError(f"{samples.source}: no token has a unique next token (no one-token sample [x] -> n(x)), "
                            "so the stage-1 loss L_0 is empty; every sentence needs at least two tokens")
        inputs = TransformerInputs.from_samples(samples, E)
        ov = kq = None
        errors = []
        if solve:
            ov = wov_star(next_token, E, solver=solver)
            try:
                kq = wkq_star(structure, E, solver=solver)
            except (DataError, NotSeparableError) as exc:
                errors.append(f"W_kq*: {exc}")
        return cls(samples, structure, E, inputs, next_token.to(E.device), ov, kq, "; ".join(errors))

    @property
    def V(self) -> int:
        return self.samples.V

    @property
    def d(self) -> int:
        return self.E.shape[0]

    def loss_floor(self, W_ov: torch.Tensor) -> torch.Tensor | None:
        """L at perfect attention: Σ_n π^(n) CE(W_ov x̄^(n), label), x̄^(n) = mean of the optimal positions' tokens.

        The value the stage-2 loss approaches as attention concentrates on the optimal tokens (Theorem 2);
        under Assumption 2 with stage 1's equal margins Δ it is L* = log(1 + (|V|-1) e^{-Δ}) = L_0(W_ov^(T))/|V|
        (docs/paper-c-transformer.md#objects). None when some sample has no optimal position (unrealizable data).

        W_ov : (B, |V|, d) -> (B,).
        """
        opt = self.structure.optimal.to(self.E.device)
        if not bool(opt.any(1).all()):
            return None
        weights = opt.to(self.E.dtype) / opt.sum(1, keepdim=True)
        pooled = torch.einsum("nl,nld->nd", weights, self.inputs.X)  # (N, d)
        logits = pooled @ W_ov.mT  # (B, N, V)
        target = self.inputs.y.expand(logits.shape[:-1])
        per_sample, _ = cross_entropy(logits.flatten(0, 1), target.flatten())  # stable: L* reaches 1e-22
        return per_sample.reshape(target.shape) @ self.inputs.pi


def _per_run(fn: Callable, *batched: torch.Tensor):
    """``fn`` applied to each run's slice of the (B, ...) tensors; outputs stacked on dim 0 (vmap when B > 1)."""
    if batched[0].shape[0] == 1:
        return tuple(o[None] for o in fn(*(t[0] for t in batched)))
    return torch.func.vmap(fn)(*batched)


def _cos_or_nan(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Per-run cosine, NaN where A = 0 (cos is undefined at W^(0) = 0, docs/paper-c-transformer.md#decisions)."""
    return torch.where(frobenius(A) > 0, cosine(A, B), torch.full_like(frobenius(A), math.nan))


# ---------------------------------------------------------------------------------------------- problems
class Stage1Problem:
    """Stage 1 of Algorithm 1: L_0(W_ov) = Σ_x CE(W_ov x, n(x)) over the collocation (eqs. 5, 7).

    Parameters ``{"W_ov": (B, |V|, d)}``; initialization zeros (Algorithm 1) or a LeCun scheme (Lemma 1 allows
    any start). Metrics: ``loss_L0``, ``grad_norm``, ``norm_ov``, ``cos_ov``, ``margin_ov``, ``margin_spread_ov``
    (see :data:`ntpbias.metrics.DEFINITIONS`).
    """

    def __init__(self, task: TransformerTask, *, init: str = "zeros"):
        self.task = task
        self.init = init
        tokens = torch.nonzero(task.next_token >= 0)[:, 0]
        self._tokens = tokens  # tokens with n(x) defined
        self._n = task.next_token[tokens]

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        t = self.task
        return {"W_ov": lecun((t.V, t.d), seeds, scheme=self.init, dtype=t.E.dtype, device=t.E.device, stream=0)}

    def _loss_grad(self, W_ov: torch.Tensor):
        return loss_and_grad_L0(W_ov, self.task.E, self.task.next_token)

    def loss_and_grad(self, params, step, generators):
        loss, grad = _per_run(self._loss_grad, params["W_ov"])
        return loss, {"W_ov": grad}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        W = params["W_ov"]
        loss, grad = _per_run(self._loss_grad, W)
        logits = W @ self.task.E[:, self._tokens]  # (B, V, V'): column = logits of token x
        correct = logits.gather(1, self._n.expand(W.shape[0], -1)[:, None, :])  # (B, 1, V')
        wrong = torch.ones_like(logits, dtype=torch.bool)
        wrong[:, self._n, torch.arange(self._n.numel())] = False
        gaps = (correct - logits).masked_fill(~wrong, math.nan)  # (B, V, V'): (e_n(x) - e_v)^T W x, v != n(x)
        out = {
            "loss_L0": loss,
            "grad_norm": frobenius(grad),
            "norm_ov": frobenius(W),
            "margin_ov": gaps.nan_to_num(math.inf).amin((1, 2)),
            "margin_spread_ov": (gaps.nan_to_num(-math.inf).amax(1) - gaps.nan_to_num(math.inf).amin(1)).amax(1),
        }
        if self.task.W_ov_star is not None:
            out["cos_ov"] = _cos_or_nan(W, _like(self.task.W_ov_star.W, W))
        return out


def _like(ref: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """A reference matrix (solved on the CPU) as a (1, ...) tensor on W's device and dtype."""
    return ref.to(device=W.device, dtype=W.dtype)[None]


def _model_metrics(task: TransformerTask, W_ov: torch.Tensor, W_kq: torch.Tensor):
    """Metrics of the full model at (W_ov, W_kq), both (B, ...): loss, attention on optimal tokens, accuracy,
    W_kq's norm, alignment and margin (stage 2 and joint training); also returns the loss and both gradients."""
    def fn(a, b):
        out = loss_and_grads(a, b, task.inputs)
        return out.loss, out.grad_W_ov, out.grad_W_kq, out.attention, out.logits

    loss, g_ov, g_kq, phi, z = _per_run(fn, W_ov, W_kq)
    opt = task.structure.optimal.to(phi.device)
    phi_plus = (phi * opt).sum(-1)  # (B, N): attention mass on the optimal positions φ_+^(n)
    pi = task.inputs.pi
    uniform = 1.0 / task.inputs.mask.sum(1, keepdim=True).to(phi.dtype)  # (N, 1): φ_l^(n,0) = 1/L^(n) from zero
    out = {
        "loss": loss,
        "norm_kq": frobenius(W_kq),
        "attn_opt_min": phi_plus.amin(1),
        "attn_opt_floor": (phi - uniform).masked_fill(~opt, math.inf).amin((1, 2)),  # Lemma 5, per position
        "attn_opt_mean": phi_plus @ pi,
        "accuracy": (z.argmax(-1) == task.inputs.y).to(pi.dtype) @ pi,
        "cos_neg_grad_kq": _cos_or_nan(W_kq, -g_kq),
    }
    if task.W_kq_star is not None:
        W_star = _like(task.W_kq_star.W, W_kq)
        out["cos_kq"] = _cos_or_nan(W_kq, W_star)
        out["cos_grad_kq_star"] = cosine(g_kq, W_star)
    rel = task.structure.relations.to(W_kq.device)
    if rel.shape[0]:
        A = token_basis(W_kq, task.E)  # (B, V, V): A[u, q] = x_u^T W_kq x_q
        out["margin_kq"] = (A[:, rel[:, 1], rel[:, 0]] - A[:, rel[:, 2], rel[:, 0]]).amin(1)
        out["order_gap"] = theorem3_gap(A, task.structure)  # NaN when no query has non-comparable tokens
    return out, loss, g_ov, g_kq


class Stage2Problem:
    """Stage 2 of Algorithm 1: L(W_ov, W_kq) of eq. (1) in W_kq with W_ov frozen (eqs. 6, 10).

    Parameters ``{"W_kq": (B, d, d)}``. ``W_ov`` is (|V|, d) (shared) or (B, |V|, d) (one per run, e.g. from a
    batched stage 1). Metrics: ``loss``, ``loss_floor``, ``loss_excess``, ``grad_norm``, ``norm_kq``, ``cos_kq``,
    ``cos_neg_grad_kq``, ``cos_grad_kq_star``, ``attn_opt_min``, ``attn_opt_mean``, ``margin_kq``, ``accuracy``,
    ``attn_opt_floor`` (Lemma 5: min over samples n and optimal positions l of φ_l^(n,t) - 1/L^(n)) and ``order_gap``
    (Theorem 3's gaps, :func:`~ntpbias.geometry.transformer.theorem3_gap`).
    """

    def __init__(self, task: TransformerTask, W_ov: torch.Tensor, *, init: str = "zeros"):
        self.task = task
        self.W_ov = W_ov.to(dtype=task.E.dtype, device=task.E.device)
        self.init = init
        self._floor_cache: dict[int, torch.Tensor | None] = {}

    def _W_ov(self, B: int) -> torch.Tensor:
        W = self.W_ov if self.W_ov.ndim == 3 else self.W_ov[None]
        if W.shape[0] not in (1, B):
            raise ValueError(f"W_ov holds {W.shape[0]} runs but the parameters hold {B}")
        return W.expand(B, -1, -1)

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        t = self.task
        return {"W_kq": lecun((t.d, t.d), seeds, scheme=self.init, dtype=t.E.dtype, device=t.E.device, stream=1)}

    def loss_and_grad(self, params, step, generators):
        W_kq = params["W_kq"]

        def fn(a, b):
            out = loss_and_grads(a, b, self.task.inputs, wrt_ov=False)
            return out.loss, out.grad_W_kq

        loss, grad = _per_run(fn, self._W_ov(W_kq.shape[0]), W_kq)
        return loss, {"W_kq": grad}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        W_kq = params["W_kq"]
        W_ov = self._W_ov(W_kq.shape[0])
        out, loss, _, g_kq = _model_metrics(self.task, W_ov, W_kq)
        out["grad_norm"] = frobenius(g_kq)
        B = W_kq.shape[0]
        if B not in self._floor_cache:  # W_ov is frozen: the floor is a constant of the run
            self._floor_cache[B] = self.task.loss_floor(W_ov)
        floor = self._floor_cache[B]
        if floor is not None:
            out["loss_floor"] = floor
            out["loss_excess"] = loss - floor
        return out


class JointProblem:
    """One-stage ablation: (W_ov, W_kq) trained together on eq. (1) (not in the paper).

    Normalized GD then divides by the joint norm sqrt(||∇_{W_ov} L||² + ||∇_{W_kq} L||²). From zero, ∇_{W_kq} L
    vanishes until W_ov ≠ 0, so the first step moves W_ov only. Metrics: those of :class:`Stage2Problem` (except
    the floor, which moves with W_ov) plus ``norm_ov`` and ``cos_ov``.
    """

    def __init__(self, task: TransformerTask, *, init: str = "zeros"):
        self.task = task
        self.init = init

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        t = self.task
        return {"W_ov": lecun((t.V, t.d), seeds, scheme=self.init, dtype=t.E.dtype, device=t.E.device, stream=0),
                "W_kq": lecun((t.d, t.d), seeds, scheme=self.init, dtype=t.E.dtype, device=t.E.device, stream=1)}

    def loss_and_grad(self, params, step, generators):
        def fn(a, b):
            out = loss_and_grads(a, b, self.task.inputs)
            return out.loss, out.grad_W_ov, out.grad_W_kq

        loss, g_ov, g_kq = _per_run(fn, params["W_ov"], params["W_kq"])
        return loss, {"W_ov": g_ov, "W_kq": g_kq}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        W_ov, W_kq = params["W_ov"], params["W_kq"]
        out, _, g_ov, g_kq = _model_metrics(self.task, W_ov, W_kq)
        out["grad_norm"] = (frobenius(g_ov) ** 2 + frobenius(g_kq) ** 2).sqrt()
        out["norm_ov"] = frobenius(W_ov)
        if self.task.W_ov_star is not None:
            out["cos_ov"] = _cos_or_nan(W_ov, _like(self.task.W_ov_star.W, W_ov))
        return out


# ---------------------------------------------------------------------------------------------- running
@dataclass
class TwoStageResult:
    """What Algorithm 1 produced: both stages' histories (named ``<prefix>stage1|2``) and the final
    W_ov^(T) (B, |V|, d) and W_kq^(T_1) (B, d, d)."""

    stage1: History
    stage2: History | None

    @property
    def W_ov(self) -> torch.Tensor:
        return self.stage1.params["W_ov"]

    @property
    def W_kq(self) -> torch.Tensor:
        return self.stage2.params["W_kq"]

    @property
    def histories(self) -> list[History]:
        return [self.stage1] + ([self.stage2] if self.stage2 is not None else [])

    @property
    def status(self) -> str:
        return self.stage1.status if self.stage2 is None else self.stage2.status


def _ngd(lr: float) -> Optimizer:
    return Optimizer(OptimizerConfig(name="ngd", lr=lr, normalize="grad"))


def _train(problem, lr: float, config: TrainConfig, seeds: list[int], run: str, checkpoint_dir, progress: bool,
           resume: bool) -> History:
    trainer = Trainer(problem, _ngd(lr), config, seeds=seeds,
                      checkpoint_dir=None if checkpoint_dir is None else Path(checkpoint_dir) / run,
                      progress=progress, description=run)
    history = trainer.run(resume=resume)
    history.run = run
    return history


def train_two_stage(task: TransformerTask, *, eta0: float, eta: float, stage1: TrainConfig, stage2: TrainConfig,
                    seeds: list[int], init: str = "zeros", prefix: str = "", checkpoint_dir: str | Path | None = None,
                    progress: bool = False, resume: bool = False) -> TwoStageResult:
    """Algorithm 1: ``stage1.steps`` NGD steps (η₀) on L_0, then ``stage2.steps`` NGD steps (η) on L in W_kq.

    Checkpoints go to ``checkpoint_dir/<prefix>stage1`` and ``.../<prefix>stage2``; with ``resume`` each stage
    continues from its checkpoint (a finished stage is reloaded, not retrained). Stage 2 is skipped (None) when
    stage 1 did not complete (diverged or interrupted).

    Examples
    --------
    >>> from ntpbias.data.sentences import example1
    >>> from ntpbias.models.transformer import token_embeddings
    >>> task = TransformerTask.build(example1(), token_embeddings(4))
    >>> cfg = TrainConfig(steps=900, log_points=0, log_every=300)
    >>> res = train_two_stage(task, eta0=0.1, eta=0.025, stage1=cfg, stage2=cfg, seeds=[0])
    >>> round(float(res.stage2.rows()[-1]["cos_kq"]), 5), round(float(res.stage2.rows()[-1]["norm_kq"]), 3)
    (0.99952, 22.483)
    """
    h1 = _train(Stage1Problem(task, init=init), eta0, stage1, seeds, f"{prefix}stage1", checkpoint_dir, progress,
                resume)
    if h1.status != "completed":
        return TwoStageResult(h1, None)
    h2 = _train(Stage2Problem(task, h1.params["W_ov"], init=init), eta, stage2, seeds, f"{prefix}stage2",
                checkpoint_dir, progress, resume)
    return TwoStageResult(h1, h2)


def train_joint(task: TransformerTask, *, eta: float, config: TrainConfig, seeds: list[int], init: str = "zeros",
                prefix: str = "", checkpoint_dir: str | Path | None = None, progress: bool = False,
                resume: bool = False) -> History:
    """One-stage ablation: NGD (step η) on (W_ov, W_kq) jointly for ``config.steps`` steps (run ``<prefix>joint``)."""
    return _train(JointProblem(task, init=init), eta, config, seeds, f"{prefix}joint", checkpoint_dir, progress,
                  resume)


# ---------------------------------------------------------------------------------------------- prediction
def predict(W_ov: torch.Tensor, W_kq: torch.Tensor, E: torch.Tensor, ids, mask) -> tuple[torch.Tensor, ...]:
    """Next-token distributions of a trained model on inputs it may never have seen (Theorem 3).

    Parameters
    ----------
    W_ov : (|V|, d). W_kq : (d, d). E : (d, |V|). ids, mask : (M, L) left-aligned token ids and mask.

    Returns
    -------
    prediction : LongTensor (M,) argmax token. probability : (M,) its probability. probs : (M, |V|).
    attention : (M, L) attention weights over the input positions.
    """
    inputs = TransformerInputs.from_ids(ids, mask, E)
    probs = forward_reparam(W_ov, W_kq, inputs)
    p, pred = probs.max(1)
    return pred, p, probs, attention(W_kq, inputs)
