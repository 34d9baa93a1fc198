"""Algorithm 1 of paper C (two-stage normalized GD) and one-stage joint training, as Trainer problems.

Algorithm 1 (Sec. 4.2; docs/paper-c-transformer.md#objects), from W_ov^(0) = 0 and W_kq^(0) = 0:

* stage 1 (eq. 7): W_ov^(t+1) = W_ov^(t) - η₀ ∇L_0(W_ov^(t)) / ||∇L_0(W_ov^(t))||, t < T, on the collocation loss
  L_0 (:class:`Stage1Problem`);
* stage 2 (eq. 10): W_kq^(t+1) = W_kq^(t) - η ∇_{W_kq} L(W_ov^(T), W_kq^(t)) / ||·||, t < T_1, on the loss of
  eq. (1) over all of D_0 with W_ov frozen at its stage-1 value (:class:`Stage2Problem`).

Both stages are normalized GD with the Frobenius norm (``OptimizerConfig(name="ngd", normalize="grad")``); the
paper's step sizes are η₀ = 0.2/√d and η = 0.05/√d (:func:`~ntpbias.training.config.paper_step_sizes`).
:class:`JointProblem` trains (W_ov, W_kq) together on eq. (1) with NGD normalized by the joint gradient norm (an
ablation; not in the paper).

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
from ..geometry.transformer.optimum import theorem3_gap, theorem3_masks, token_basis, wkq_star, wov_star
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


def binary_exponent(tensors) -> torch.Tensor:
    """Per run b, the binary exponent e_b of the largest |entry| over ``tensors`` (each (B, ...)): that entry is
    m 2^{e_b} with m in [1/2, 1); 0 for a run whose entries are all 0.

    Scaling by 2^{-e_b} is exact in floating point, so it changes no normalized step and no cosine, bit for bit, while
    keeping squared norms clear of underflow: gradient entries below ~1e-154 square to 0, which would stop normalized
    GD long before the gradient itself vanishes (docs/paper-c-transformer.md#decisions, C-D7).

    >>> binary_exponent([torch.tensor([[3.0, -0.5], [0.0, 0.0]])]).tolist()
    [2, 0]
    """
    peak = torch.stack([t.reshape(t.shape[0], -1).abs().amax(1) for t in tensors]).amax(0)
    return torch.where(peak > 0, torch.frexp(peak).exponent, 0)


def _scaled(t: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """t (B, ...) times 2^{-e_b} per run (exact)."""
    return torch.ldexp(t, -e.reshape(-1, *[1] * (t.ndim - 1)).to(t.dtype))


class _ExactlyScaledNGD(Optimizer):
    """Normalized GD on gradients scaled per run by an exact power of two (:func:`binary_exponent`): bitwise the steps
    of :class:`~ntpbias.training.optimizers.Optimizer`'s ``ngd`` wherever ||∇L||² does not underflow, and steps that
    go on where it would (Algorithm 1 after ~10^5 stage-2 steps on the Fig. 2 data)."""

    def step(self, params, grads, loss):
        e = binary_exponent(list(grads.values()))
        return super().step(params, {k: _scaled(g, e) for k, g in grads.items()}, loss)


def _per_run(fn: Callable, *batched: torch.Tensor):
    """``fn`` applied to each run's slice of the (B, ...) tensors; outputs stacked on dim 0 (vmap when B > 1)."""
    if batched[0].shape[0] == 1:
        return tuple(o[None] for o in fn(*(t[0] for t in batched)))
    return torch.func.vmap(fn)(*batched)


def _cos_or_nan(A: torch.Tensor, B: torch.Tensor, norm_A: torch.Tensor, norm_B: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Per-run cosine, NaN where A = 0 (cos is undefined at W^(0) = 0, docs/paper-c-transformer.md#decisions);
    ``norm_A`` = ``frobenius(A)`` (and ``norm_B``, if known)."""
    return torch.where(norm_A > 0, cosine(A, B, norm_A=norm_A, norm_B=norm_B), math.nan)


def _cosines(A: list[torch.Tensor], B: list[torch.Tensor], norms_A: list[torch.Tensor], norms_B: list[torch.Tensor]
              ) -> torch.Tensor:
    """cos(A[i], B[i]) for several pairs of (R, ...) tensors (B[i] broadcastable to A[i]) with their known norms, as
    one product and one sum: (pairs, R), the values :func:`~ntpbias.metrics.cosine` gives pair by pair."""
    num = (torch.stack(A) * torch.stack([b.expand_as(a) for a, b in zip(A, B, strict=True)])).flatten(2).sum(-1)
    den = torch.stack(norms_A) * torch.stack([nb.expand_as(na) for na, nb in zip(norms_A, norms_B, strict=True)])
    return num / den.clamp_min(torch.finfo(num.dtype).tiny)


class _Reference:
    """A reference direction (solved on the CPU) as a (1, ...) tensor on the iterates' device and dtype, with its
    norm: converted once per problem, not at every logged step."""

    def __init__(self, ref: torch.Tensor | None, like: torch.Tensor):
        self.W = None if ref is None else ref.to(device=like.device, dtype=like.dtype)[None]
        self.norm = None if self.W is None else frobenius(self.W)


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
        # (V - 1, V'): column x lists the tokens v != n(x), whose logit gaps (e_n(x) - e_v)^T W x are the margins
        others = torch.arange(task.V, device=tokens.device).expand(tokens.numel(), -1)  # (V', V)
        self._wrong = others[others != self._n[:, None]].reshape(tokens.numel(), task.V - 1).T
        self._star = _Reference(None if task.W_ov_star is None else task.W_ov_star.W, task.E)

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        t = self.task
        return {"W_ov": lecun((t.V, t.d), seeds, scheme=self.init, dtype=t.E.dtype, device=t.E.device, stream=0)}

    def _loss_grad(self, W_ov: torch.Tensor):
        return loss_and_grad_L0(W_ov, self.task.E, self.task.next_token)

    def loss_and_grad(self, params, step, generators):
        loss, grad = _per_run(self._loss_grad, params["W_ov"])
        return loss, {"W_ov": grad}

    def loss_grad_metrics(self, params, step, generators):
        loss, grads = self.loss_and_grad(params, step, generators)
        return loss, grads, self._metrics(params["W_ov"], loss, grads["W_ov"])

    def metrics(self, params) -> dict[str, torch.Tensor]:
        return self.loss_grad_metrics(params, 0, [])[2]

    def _metrics(self, W: torch.Tensor, loss: torch.Tensor, grad: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = W @ self.task.E[:, self._tokens]  # (B, V, V'): column = logits of token x
        B = W.shape[0]
        correct = logits.gather(1, self._n.expand(B, -1)[:, None, :])  # (B, 1, V')
        gaps = correct - logits.gather(1, self._wrong.expand(B, -1, -1))  # (B, V - 1, V')
        low, high = torch.aminmax(gaps, dim=1)  # (B, V'): the smallest and largest gap of each token x
        out = {
            "loss_L0": loss,
            "grad_norm": frobenius(grad),
            "norm_ov": frobenius(W),
            "margin_ov": low.amin(1),
            "margin_spread_ov": (high - low).amax(1),
        }
        if self._star.W is not None:
            out["cos_ov"] = _cos_or_nan(W, self._star.W, out["norm_ov"], self._star.norm)
        return out


def _model_outputs(task: TransformerTask, W_ov: torch.Tensor, W_kq: torch.Tensor, *, wrt_ov: bool):
    """Per run (both (B, ...)): the loss, grad W_kq, attention φ, logits and (``wrt_ov``) grad W_ov of eq. (1)."""
    def fn(a, b):
        out = loss_and_grads(a, b, task.inputs, wrt_ov=wrt_ov)
        return (out.loss, out.grad_W_kq, out.attention, out.logits) + ((out.grad_W_ov,) if wrt_ov else ())

    return _per_run(fn, W_ov, W_kq)


class _ModelMetrics:
    """Metrics of the full model (stage 2 and joint training) from the outputs of :func:`_model_outputs`: loss,
    attention on the optimal tokens, accuracy, W_kq's norm, alignment and margin; the task's constants (optimal
    positions, relations, W_kq*) are moved to the device once."""

    def __init__(self, task: TransformerTask):
        self.task = task
        self.optimal = task.structure.optimal.to(task.E.device)
        # (N, 1): φ_l^(n,0) = 1/L^(n), the attention from W_kq = 0
        self.uniform = 1.0 / task.inputs.mask.sum(1, keepdim=True).to(task.inputs.pi.dtype)
        rel = task.structure.relations.to(task.E.device)  # (R, 3): query q, optimal token u, other token u'
        V = task.V  # margins of W_kq: A[u, q] - A[u', q] with A = E^T W_kq E, gathered from A flattened (V * V)
        self.relations = (rel[:, 1] * V + rel[:, 0], rel[:, 2] * V + rel[:, 0]) if rel.shape[0] else None
        self.star = _Reference(None if task.W_kq_star is None else task.W_kq_star.W, task.E)
        self.theorem3 = theorem3_masks(task.structure, task.E.device)

    def __call__(self, W_kq: torch.Tensor, loss: torch.Tensor, g_kq: torch.Tensor, phi: torch.Tensor,
                 z: torch.Tensor) -> dict[str, torch.Tensor]:
        """The metrics at W_kq (B, d, d), each (B,), and ``grad_norm`` = ||∇_{W_kq} L||."""
        task, pi = self.task, self.task.inputs.pi
        phi_plus = (phi * self.optimal).sum(-1)  # (B, N): attention mass on the optimal positions φ_+^(n)
        e = binary_exponent([g_kq])  # the cosines and the norm from the exactly scaled gradient (no underflow)
        g, norm = _scaled(g_kq, e), frobenius(W_kq)
        g_norm = frobenius(g)
        grad_norm = torch.ldexp(g_norm, e.to(g_norm.dtype))
        pairs = [(W_kq, -g, norm, g_norm)]  # cos(W_kq, -∇L), and with W_kq*: cos(W_kq, W_kq*), cos(∇L, W_kq*)
        if self.star.W is not None:
            pairs += [(W_kq, self.star.W, norm, self.star.norm), (g, self.star.W, g_norm, self.star.norm)]
        cos = _cosines(*map(list, zip(*pairs, strict=True)))
        undefined = norm == 0  # cos is undefined at W_kq = 0 (docs/paper-c-transformer.md#decisions)
        out = {
            "loss": loss,
            "norm_kq": norm,
            "attn_opt_min": phi_plus.amin(1),
            "attn_opt_floor": (phi - self.uniform).masked_fill(~self.optimal, math.inf).amin((1, 2)),  # Lemma 5
            "attn_opt_mean": phi_plus @ pi,
            "accuracy": (z.argmax(-1) == task.inputs.y).to(pi.dtype) @ pi,
            "cos_neg_grad_kq": cos[0].masked_fill(undefined, math.nan),
            "grad_norm": grad_norm,
        }
        if self.star.W is not None:
            out["cos_kq"] = cos[1].masked_fill(undefined, math.nan)
            out["cos_grad_kq_star"] = cos[2]
        if self.relations is not None:
            A = token_basis(W_kq, task.E)  # (B, V, V): A[u, q] = x_u^T W_kq x_q, at u * V + q flattened
            opt, other = self.relations
            out["margin_kq"] = (A.flatten(1).index_select(1, opt) - A.flatten(1).index_select(1, other)).amin(1)
            out["order_gap"] = theorem3_gap(A, task.structure, self.theorem3)  # NaN: no non-comparable tokens
        return out


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
        self._metrics = _ModelMetrics(task)

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
        return self.loss_grad_metrics(params, 0, [])[2]

    def loss_grad_metrics(self, params, step, generators):
        W_kq = params["W_kq"]
        W_ov = self._W_ov(W_kq.shape[0])
        loss, g_kq, phi, z = _model_outputs(self.task, W_ov, W_kq, wrt_ov=False)
        out = self._metrics(W_kq, loss, g_kq, phi, z)
        B = W_kq.shape[0]
        if B not in self._floor_cache:  # W_ov is frozen: the floor is a constant of the run
            self._floor_cache[B] = self.task.loss_floor(W_ov)
        floor = self._floor_cache[B]
        if floor is not None:
            out["loss_floor"] = floor
            out["loss_excess"] = loss - floor
        return loss, {"W_kq": g_kq}, out


class JointProblem:
    """One-stage ablation: (W_ov, W_kq) trained together on eq. (1) (not in the paper).

    Normalized GD then divides by the joint norm sqrt(||∇_{W_ov} L||² + ||∇_{W_kq} L||²). From zero, ∇_{W_kq} L
    vanishes until W_ov ≠ 0, so the first step moves W_ov only. Metrics: those of :class:`Stage2Problem` (except
    the floor, which moves with W_ov) plus ``norm_ov`` and ``cos_ov``.
    """

    def __init__(self, task: TransformerTask, *, init: str = "zeros"):
        self.task = task
        self.init = init
        self._metrics = _ModelMetrics(task)
        self._star_ov = _Reference(None if task.W_ov_star is None else task.W_ov_star.W, task.E)

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
        return self.loss_grad_metrics(params, 0, [])[2]

    def loss_grad_metrics(self, params, step, generators):
        W_ov, W_kq = params["W_ov"], params["W_kq"]
        loss, g_kq, phi, z, g_ov = _model_outputs(self.task, W_ov, W_kq, wrt_ov=True)
        out = self._metrics(W_kq, loss, g_kq, phi, z)
        out["grad_norm"] = (frobenius(g_ov) ** 2 + out["grad_norm"] ** 2).sqrt()
        out["norm_ov"] = frobenius(W_ov)
        if self._star_ov.W is not None:
            out["cos_ov"] = _cos_or_nan(W_ov, self._star_ov.W, out["norm_ov"], self._star_ov.norm)
        return loss, {"W_ov": g_ov, "W_kq": g_kq}, out


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


def _ngd(lr: float, *, normalized: bool = True) -> Optimizer:
    return (_ExactlyScaledNGD(OptimizerConfig(name="ngd", lr=lr, normalize="grad")) if normalized
            else Optimizer(OptimizerConfig(name="gd", lr=lr)))


def _train(problem, lr: float, config: TrainConfig, seeds: list[int], run: str, checkpoint_dir, progress: bool,
           resume: bool, *, normalized: bool = True) -> History:
    trainer = Trainer(problem, _ngd(lr, normalized=normalized), config, seeds=seeds,
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
    h2 = train_stage2(task, h1.params["W_ov"], eta=eta, config=stage2, seeds=seeds, init=init, run=f"{prefix}stage2",
                      checkpoint_dir=checkpoint_dir, progress=progress, resume=resume)
    return TwoStageResult(h1, h2)


def train_stage2(task: TransformerTask, W_ov: torch.Tensor, *, eta: float, config: TrainConfig, seeds: list[int],
                 init: str = "zeros", normalized: bool = True, run: str = "stage2",
                 checkpoint_dir: str | Path | None = None, progress: bool = False, resume: bool = False) -> History:
    """Stage 2 of Algorithm 1 alone (eq. 10): ``config.steps`` NGD steps of size η on L in W_kq, W_ov frozen.

    ``normalized=False`` takes plain gradient steps W <- W - η ∇L instead (not Algorithm 1: the negative controls of
    docs/paper-c-transformer.md#theory-checks train it, and stage 2 from a ``W_ov`` other than stage 1's, to show
    that the checks fail on the wrong algorithm). Checkpoints go to ``checkpoint_dir/<run>``.

    Examples
    --------
    >>> from ntpbias.data.sentences import example1
    >>> from ntpbias.models.transformer import token_embeddings
    >>> task = TransformerTask.build(example1(), token_embeddings(4))
    >>> cfg = TrainConfig(steps=100, log_points=0, log_every=100)
    >>> res = train_two_stage(task, eta0=0.1, eta=0.025, stage1=cfg, stage2=cfg, seeds=[0])
    >>> gd = train_stage2(task, res.W_ov, eta=0.025, config=cfg, seeds=[0], normalized=False)
    >>> bool(gd.rows()[-1]["norm_kq"] < res.stage2.rows()[-1]["norm_kq"])
    True
    """
    return _train(Stage2Problem(task, W_ov, init=init), eta, config, seeds, run, checkpoint_dir, progress, resume,
                  normalized=normalized)


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
