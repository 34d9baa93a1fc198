"""Training paper B's attention models on the shared engine (Sec. 5, App. D; docs/paper-b-attention.md#algorithms).

Two :class:`~ntpbias.training.loop.Problem` implementations:

* :class:`StageTwoProblem`: stage 2 of the theory, the flow (9) on the ``<cls>`` embedding p with E frozen at
  E¹ (one GD step from the theory initialisation, eq. (4)), discretised by GD (faithful, slow in direction) or
  normalized GD (the same curve up to a time change, docs/paper-b-attention.md#decisions); closed-form gradient of
  :func:`~ntpbias.geometry.attention.stage_one.loss_and_grad_p` (stable weight form, no autograd).
  :func:`train_stage_two` runs it.
* :class:`ClassifierProblem`: joint training of all parameters of the one-layer (eq. (1)) or two-layer (eq. (17))
  :mod:`~ntpbias.models.attention` modules with minibatches (the experiments of Sec. 5 / App. D: AdamW, batch 128, step
  decay per epoch). Model (1)'s gradient is the closed-form rank-2 one (O(n_batch T + |S| d) per step, no (n, T, d)
  tensor); model (17)'s is autograd over length groups of the minibatch (:func:`length_groups`). Each epoch visits a
  fresh permutation of the sequences, drawn from the run's generator *without advancing it* (a per-epoch generator
  is seeded from the run generator's state and the epoch number), so an interrupted run resumes with exactly the
  batches it would have seen.

Runs (seeds) are batched on the leading dimension of every parameter as the engine expects; these models cannot
batch seeds in one tensor operation (each run has its own E¹, or its own module call), so the gradient is a loop
over the runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._tensor import DEFAULT_DTYPE
from ..data.tokens import TokenSequences, token_statistics
from ..geometry.attention.stage_one import StageOne, loss_and_grad_p
from ..metrics import cosine
from ..models.attention import (
    OneLayerAttention,
    TwoLayerAttention,
    one_layer_loss_and_grads,
    readout_terms,
)
from ..stats import pearson
from .loop import History, TrainConfig, Trainer
from .optimizers import Optimizer, OptimizerConfig

MODELS = {"one_layer": OneLayerAttention, "two_layer": TwoLayerAttention}


# ---------------------------------------------------------------------------------------------------------------
# Stage 2: p trained with E fixed at E¹
# ---------------------------------------------------------------------------------------------------------------


class StageTwoProblem:
    """The stage-2 flow (9): L(E¹, p) minimised over p from p¹, for one or more stage-1 results (one per run).

    Parameters
    ----------
    stages : sequence of StageOne
        One stage-1 result per run (run b starts at ``stages[b].p1`` and keeps ``stages[b].E1`` fixed).
    ds : TokenSequences
        The training data (the same for every run).
    references : sequence of (d,) tensors, optional
        Per run, the max-margin solution p̂ the iterates are compared with (Lemma 4.5's
        :func:`~ntpbias.geometry.attention.stage_one.important_svm` under Assumption 1); enables ``cos_mm`` and
        ``margin_mm``.
    relevant : LongTensor (n,), optional
        s*_X per sequence (Assumption 1); enables ``selection_accuracy`` and ``loss_above_floor``.
    grad_floor : float
        A gradient whose norm is below this (or not finite) is returned as zero, which freezes the iterate
        (the tails of the softmax underflow once margin·||p|| exceeds ~700; normalized GD would then follow
        rounding noise, docs/paper-b-attention.md#theory-checks).

    Metrics (``metrics.DEFINITIONS``): ``loss``, ``grad_norm``, ``p_norm`` and, with references/relevant tokens,
    ``cos_mm``, ``margin_mm``, ``selection_accuracy``, ``loss_above_floor``.
    """

    def __init__(self, stages: Sequence[StageOne], ds: TokenSequences, *,
                 references: Sequence[torch.Tensor] | None = None, relevant: torch.Tensor | None = None,
                 grad_floor: float = 1e-200):
        self.stages = list(stages)
        if not self.stages:
            raise ValueError("StageTwoProblem needs at least one stage-1 result")
        self.device = self.stages[0].E1.device
        self.ds = ds.to(self.device)
        self.references = None if references is None else [r.to(self.stages[0].E1) for r in references]
        self.relevant = None if relevant is None else relevant.to(self.device)
        self.grad_floor = grad_floor
        if self.relevant is not None:
            self._star = (self.ds.X == self.relevant[:, None]) & self.ds.mask  # (n, T) positions of s*_X
            self._floor = torch.stack([
                torch.nn.functional.softplus(-self.ds.y * (st.E1 @ st.v)[self.relevant]).mean()
                for st in self.stages])

    def _runs(self, n_runs: int) -> list[StageOne]:
        if n_runs != len(self.stages):
            raise ValueError(f"StageTwoProblem holds {len(self.stages)} stage-1 result(s) but {n_runs} runs were "
                             f"requested; build one StageOne per seed")
        return self.stages

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        return {"p": torch.stack([st.p1 for st in self._runs(len(seeds))])}

    def _grads(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        losses, grads = [], []
        for st, pb in zip(self._runs(p.shape[0]), p, strict=True):  # loop over runs: each has its own E¹
            loss, grad = loss_and_grad_p(st.E1, pb, st.v, self.ds)
            losses.append(loss)
            grads.append(grad)
        return torch.stack(losses), torch.stack(grads)

    def loss_and_grad(self, params, step, generators):
        loss, grad = self._grads(params["p"])
        norm = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
        frozen = ~torch.isfinite(norm) | (norm < self.grad_floor)
        return loss, {"p": torch.where(frozen, torch.zeros_like(grad), grad)}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        p = params["p"]
        loss, grad = self._grads(p)
        norm = torch.linalg.vector_norm(p, dim=1)
        out = {"loss": loss, "grad_norm": torch.linalg.vector_norm(grad, dim=1), "p_norm": norm}
        if self.relevant is not None:
            a = torch.stack([(st.E1 @ pb)[self.ds.X] for st, pb in zip(self.stages, p, strict=True)])  # (B, n, T)
            star = a.masked_fill(~self._star, -math.inf).amax(2)  # (B, n) score of s*_X
            rest = a.masked_fill(self._star | ~self.ds.mask, -math.inf).amax(2)  # (B, n) best other token
            out["selection_accuracy"] = (star > rest).to(p.dtype).mean(1)
            out["loss_above_floor"] = loss - self._floor
            if self.references is not None:
                ref = torch.stack(self.references)
                ref_norm = torch.linalg.vector_norm(ref, dim=1)
                out["cos_mm"] = cosine(p, ref)
                gap = (star - rest).amin(1)  # sequences with no other token give +inf and do not bind
                out["margin_mm"] = gap * ref_norm / norm
        return out


def stage_two_optimizer(method: str = "ngd", lr: float = 0.5) -> OptimizerConfig:
    """The two discretisations of the flow (9): ``"ngd"`` (p ← p - h ∇L/||∇L||) or ``"gd"`` (p ← p - h ∇L)."""
    if method not in ("gd", "ngd"):
        raise ValueError(f"stage 2 is discretised by 'gd' or 'ngd', got {method!r}")
    return OptimizerConfig(name=method, lr=lr, normalize="grad")


def train_stage_two(stages: StageOne | Sequence[StageOne], ds: TokenSequences, *, method: str = "ngd",
                    lr: float = 0.5, steps: int = 4000, log_points: int = 60, log_every: int = 0,
                    references: Sequence[torch.Tensor] | None = None, relevant: torch.Tensor | None = None,
                    grad_floor: float = 1e-200, seeds: Sequence[int] | None = None,
                    checkpoint_dir=None, resume: bool = False, progress: bool = False,
                    description: str = "stage 2") -> History:
    """Run stage 2 (flow (9), E fixed at E¹) on the engine; one run per stage-1 result.

    Parameters
    ----------
    stages : StageOne or a sequence of them (one per run; ``seeds`` labels the runs, default 0, 1, ...).
    ds : TokenSequences
    method, lr : "ngd" (default, h = 0.5 as in docs/paper-b-attention.md#theory-checks) or "gd"
    (docs/paper-b-attention.md#theory-checks uses h = 1). steps, log_points, log_every : the loop's
    :class:`~ntpbias.training.loop.TrainConfig`. references, relevant, grad_floor : see :class:`StageTwoProblem`.

    Returns
    -------
    History
        ``history.params["p"]`` is (runs, d); ``history.rows()`` hold the metrics at the logged steps.

    Examples
    --------
    >>> from ntpbias.data.tokens import sample_assumption1
    >>> from ntpbias.geometry.attention.stage_one import stage_one
    >>> ds = sample_assumption1(seed=0)
    >>> st = stage_one(ds, d=256, eta0=200.0, seed=0)
    >>> h = train_stage_two(st, ds, steps=50, log_points=3)
    >>> h.params["p"].shape, h.status, [r["step"] for r in h.rows()]
    (torch.Size([1, 256]), 'completed', [0, 1, 7, 50])
    """
    stages = [stages] if isinstance(stages, StageOne) else list(stages)
    seeds = list(range(len(stages))) if seeds is None else list(seeds)
    problem = StageTwoProblem(stages, ds, references=references, relevant=relevant, grad_floor=grad_floor)
    trainer = Trainer(problem, Optimizer(stage_two_optimizer(method, lr)),
                      TrainConfig(steps=steps, log_points=log_points, log_every=log_every), seeds=seeds,
                      checkpoint_dir=checkpoint_dir, progress=progress, description=description)
    return trainer.run(resume=resume)


# ---------------------------------------------------------------------------------------------------------------
# Joint training of the nn.Modules (Figures 1-3)
# ---------------------------------------------------------------------------------------------------------------


def _generator_base(generator: torch.Generator) -> int:
    """A 62-bit number drawn from a copy of ``generator`` (which is left untouched)."""
    probe = torch.Generator()
    probe.set_state(generator.get_state())
    return int(torch.randint(0, 2 ** 62, (1,), generator=probe))


def epoch_permutation(generator: torch.Generator, epoch: int, n: int) -> torch.Tensor:
    """The order of the n sequences in ``epoch``: a permutation drawn from a generator seeded by (the state of
    ``generator``, ``epoch``); ``generator`` itself is left untouched, so the order depends only on its state.

    >>> g = torch.Generator().manual_seed(0)
    >>> a = epoch_permutation(g, 3, 5); b = epoch_permutation(g, 3, 5)
    >>> bool(torch.equal(a, b)), sorted(a.tolist())
    (True, [0, 1, 2, 3, 4])
    """
    epoch_gen = torch.Generator().manual_seed((_generator_base(generator) + 1_000_003 * epoch) % (2 ** 63 - 1))
    return torch.randperm(n, generator=epoch_gen)


@dataclass(frozen=True, eq=False)
class EmbeddingScores:
    """The quantities plotted in Figures 1-3, for the final parameters of every run.

    e_dot_p, e_dot_v : (B, |S|) <E_s, p> and <E_s, v> per token.
    """

    e_dot_p: torch.Tensor
    e_dot_v: torch.Tensor


#: gradient paths of :class:`ClassifierProblem`: "closed_form" (model (1) only) and "autograd"
GRADIENTS = ("auto", "closed_form", "autograd")


def length_groups(extent: torch.Tensor, *, overhead: float = 4096.0, linear: float = 64.0) -> list[torch.Tensor]:
    """Split a batch into groups of similar length, each to be padded only to its own longest sequence.

    ``extent`` (m,) holds each sequence's padded width (last real position + 1). The sequences are sorted by it and
    cut into contiguous groups minimising Σ_groups [n_g W_g (W_g + ``linear``) + ``overhead``], a model of the
    two-layer attention's cost (n_g W_g² for the T x T products, n_g W_g for the per-position work, a fixed cost per
    call), by dynamic programming over the cut points. Returns the groups' positions in the batch (LongTensors).

    >>> [g.tolist() for g in length_groups(torch.tensor([3, 40, 2, 41]), overhead=100.0, linear=0.0)]
    [[2, 0], [1, 3]]
    """
    order = torch.argsort(extent, stable=True)
    w = extent[order].double().numpy()
    m = len(w)
    best = np.zeros(m + 1)
    cut = np.zeros(m + 1, dtype=np.int64)
    for j in range(1, m + 1):  # best[j]: cheapest split of the j shortest; the last group is [i, j) with width w[j-1]
        i = np.arange(j)
        cost = best[:j] + (j - i) * w[j - 1] * (w[j - 1] + linear) + overhead
        cut[j] = int(np.argmin(cost))
        best[j] = cost[cut[j]]
    groups, j = [], m
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


class ClassifierProblem:
    """Logistic loss (2) of model (1) or (17) on labelled token sequences, trained jointly with minibatches.

    Parameters
    ----------
    ds : TokenSequences
        Training data (padding masked in every softmax).
    model : "one_layer" (eq. (1)) | "two_layer" (eq. (17))
    d : int
        Embedding dimension (paper: 2048).
    train_v : bool
        Train v too (default False: v fixed at a random unit vector, as in the theory,
        docs/paper-b-attention.md#decisions).
    layer_norm_affine : bool
        Two-layer model: learnable LayerNorm affine (torch's default, docs/paper-b-attention.md#decisions).
    batch_size : int
        Minibatch size (paper: 128); 0 = full batch. Each epoch is one pass over a fresh permutation
        (:func:`epoch_permutation`); the last batch of an epoch may be smaller.
    dtype, device : parameter dtype (float64 default) and device.
    chunk : int
        Sequences per forward pass when the metrics evaluate the whole dataset.
    gradient : "auto" | "closed_form" | "autograd"
        How a step's gradient is computed. "closed_form" (model (1) only, the default there): the rank-2 form of
        :func:`~ntpbias.models.attention.one_layer_loss_and_grads`, O(n_batch T + |S| d) per step, written into a
        gradient buffer reused across steps. "autograd" (the default for model (17)): autograd through the module.
    group_lengths : bool
        Autograd path: split each minibatch into groups of similar length (:func:`length_groups`), each padded only to
        its own longest sequence (default True; the loss and gradient are the same sums, in another order). The
        whole-data metrics are evaluated on length-sorted chunks either way.

    Parameters of run b are those of ``MODELS[model](|S|, d, seed=seeds[b])`` (the theory initialisation:
    E_s, p ~ N(0, I/d), v uniform on the sphere). Metrics: ``loss`` and ``class_accuracy`` on the whole data,
    ``p_norm``, ``pearson_v_pd`` and ``pearson_p_abs_pd`` over the tokens that occur. Every quantity the host needs
    to form a batch (permutation, widths) lives on the CPU, so a step on a GPU never waits for the device.
    """

    def __init__(self, ds: TokenSequences, *, model: str = "one_layer", d: int = 2048, train_v: bool = False,
                 layer_norm_affine: bool = True, batch_size: int = 128, dtype: torch.dtype = DEFAULT_DTYPE,
                 device=None, chunk: int = 512, gradient: str = "auto", group_lengths: bool = True):
        if model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
        if batch_size < 0 or d < 1 or chunk < 1:
            raise ValueError(f"need batch_size >= 0, d >= 1 and chunk >= 1, got {batch_size}, {d}, {chunk}")
        if gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {', '.join(GRADIENTS)}, got {gradient!r}")
        if gradient == "closed_form" and model != "one_layer":
            raise ValueError("the closed-form gradient exists for the one-layer model (1) only; use "
                             "gradient='autograd' for the two-layer model")
        self.gradient = ("closed_form" if model == "one_layer" else "autograd") if gradient == "auto" else gradient
        self.group_lengths = group_lengths
        self.device = torch.device("cpu") if device is None else torch.device(device)
        cpu_mask = ds.mask.cpu()
        positions = torch.arange(1, ds.T + 1).expand_as(cpu_mask)
        self._extent = (positions * cpu_mask).amax(1)  # (n,) on the CPU: last real position + 1
        self._sorted = torch.argsort(self._extent, stable=True)
        self.ds = ds.to(self.device)
        self.model, self.d, self.train_v, self.dtype = model, d, train_v, dtype
        self.layer_norm_affine = layer_norm_affine
        self.batch_size = batch_size or ds.n
        self.steps_per_epoch = math.ceil(ds.n / self.batch_size)
        self.chunk = chunk
        stats = token_statistics(ds)
        self.present = stats.present.to(self.device)
        self.pd = stats.posterior_difference.to(self.device, dtype)[self.present]
        self._module = self._build(0)
        self.param_names = [k for k, _ in self._module.named_parameters()]
        self._fixed: dict[str, torch.Tensor] = {}
        self._perm_key, self._perms, self._plans = None, [], []
        self._grad_E: torch.Tensor | None = None
        self.chunk_elements = 2 ** 26  # model (17)'s metrics: ~0.5 GB per float64 (m, W, d) tensor
        # fixed cost of one length group in the units of length_groups (each group's backward forms a dense
        # (|S|, d) gradient of E, about as costly as a few hundred sequence positions of attention per token)
        self.group_overhead = 8.0 * ds.num_tokens

    def _build(self, seed: int):
        kwargs = {"layer_norm_affine": self.layer_norm_affine} if self.model == "two_layer" else {}
        return MODELS[self.model](self.ds.num_tokens, self.d, train_v=self.train_v, seed=seed, dtype=self.dtype,
                                  device=self.device, **kwargs)

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        modules = [self._build(s) for s in seeds]
        self._fixed = {k: torch.stack([dict(m.named_buffers())[k] for m in modules])
                       for k, _ in self._module.named_buffers()}  # fixed v, one per run
        return {k: torch.stack([dict(m.named_parameters())[k].detach() for m in modules]) for k in self.param_names}

    def _call(self, run_params: dict[str, torch.Tensor], b: int, X: torch.Tensor, mask: torch.Tensor):
        """f (m,) of run b's module with parameters ``run_params`` (name -> one run's tensor) on X, mask (m, T')."""
        state = run_params | {k: v[b] for k, v in self._fixed.items()}
        return torch.func.functional_call(self._module, state, (X, mask))

    def _epoch(self, step: int, generators: list[torch.Generator]) -> int:
        """Make the plan of ``step``'s epoch current; returns the step's index within its epoch.

        The plan, per run: the epoch's permutation (CPU), the order in which the sequences are visited (each batch's
        sequences grouped by length, the whole order moved to the device once per epoch) and, per batch, its
        groups as (start, stop, width) into that order, all decided on the CPU: a step needs no transfer and no sync.
        """
        epoch, k = divmod(step, self.steps_per_epoch)
        key = (epoch, tuple(_generator_base(g) for g in generators))
        if self._perm_key != key:
            self._perms = [epoch_permutation(g, epoch, self.ds.n) for g in generators]
            self._plans = [self._plan(perm) for perm in self._perms]
            self._perm_key = key
        return k

    def _plan(self, perm: torch.Tensor) -> tuple[torch.Tensor, list[list[tuple[int, int, int]]]]:
        """(visiting order (n,) on the device, per batch its groups as (start, stop, width)) for one permutation."""
        order, groups, at = [], [], 0
        for start in range(0, self.ds.n, self.batch_size):  # loop over the epoch's batches, once per epoch
            idx = perm[start:start + self.batch_size]
            ext = self._extent[idx]
            parts = (length_groups(ext, overhead=self.group_overhead)
                     if self.gradient == "autograd" and self.group_lengths else [torch.arange(len(idx))])
            batch = []
            for pos in parts:
                order.append(idx[pos])
                batch.append((at, at + len(pos), int(ext[pos].max())))
                at += len(pos)
            groups.append(batch)
        return torch.cat(order).to(self.device), groups

    def batch_indices(self, step: int, generators: list[torch.Generator]) -> list[torch.Tensor]:
        """Sequence indices of the minibatch at ``step`` for every run (cached per epoch)."""
        k = self._epoch(step, generators)
        return [perm[k * self.batch_size:(k + 1) * self.batch_size].to(self.device) for perm in self._perms]

    def _batch(self, idx: torch.Tensor, width: int):
        """X, mask (m, width) and labels (m,) of the sequences ``idx`` (on the device)."""
        return self.ds.X[:, :width][idx], self.ds.mask[:, :width][idx], self.ds.y[idx].to(self.dtype)

    def _groups(self, b: int, k: int):
        """Run b's batch k as (X, mask, y) per length group (one group unless the autograd path groups lengths)."""
        order, groups = self._plans[b]
        return [self._batch(order[lo:hi], width) for lo, hi, width in groups[k]]

    def _v(self, params, b: int) -> torch.Tensor:
        return params["v"][b] if "v" in params else self._fixed["v"][b]

    def loss_and_grad(self, params, step, generators):
        k = self._epoch(step, generators)
        if self.gradient == "closed_form":
            return self._closed_form(params, k)
        losses, grads = [], {name: [] for name in params}
        for b in range(len(self._plans)):  # loop over runs (one module call each)
            leaves = {name: v[b].detach().requires_grad_(True) for name, v in params.items()}
            parts = self._groups(b, k)
            n = sum(len(y) for _, _, y in parts)
            total, acc = 0.0, None
            for X, mask, y in parts:  # loop over the length groups of the batch: the loss is a sum over sequences
                with torch.enable_grad():
                    part = nn.functional.softplus(-y * self._call(leaves, b, X, mask)).sum() / n
                    gs = torch.autograd.grad(part, list(leaves.values()))
                total = total + part.detach()
                acc = list(gs) if acc is None else [a + g for a, g in zip(acc, gs, strict=True)]
            losses.append(total)
            for name, g in zip(leaves, acc, strict=True):
                grads[name].append(g)
        return torch.stack(losses), {name: torch.stack(v) for name, v in grads.items()}

    def _closed_form(self, params, k: int):
        """Model (1): loss and gradients by :func:`one_layer_loss_and_grads`; ∇_E is written into a buffer that is
        reused at every step (the caller consumes the gradients before the next step)."""
        E = params["E"]
        if self._grad_E is None or self._grad_E.shape != E.shape or self._grad_E.dtype != E.dtype:
            self._grad_E = torch.empty_like(E)
        grads = {"E": self._grad_E, "p": torch.empty_like(params["p"])}
        if "v" in params:
            grads["v"] = torch.empty_like(params["v"])
        losses = []
        for b in range(len(self._plans)):  # loop over runs: each has its own minibatch
            (X, mask, y), = self._groups(b, k)
            loss, _, gp, gv = one_layer_loss_and_grads(E[b], params["p"][b], self._v(params, b), X, mask, y,
                                                       out_E=self._grad_E[b])
            losses.append(loss)
            grads["p"][b] = gp
            if "v" in grads:
                grads["v"][b] = gv
        return torch.stack(losses), {name: grads[name] for name in params}

    def outputs(self, params, b: int) -> torch.Tensor:
        """f(X) (n,) of run b on the whole dataset, in chunks of at most ``chunk`` length-sorted sequences, each padded
        only to its longest (model (17): also at most :attr:`chunk_elements` entries in a chunk's (m, W, max(W, d))
        tensors)."""
        f = torch.empty(self.ds.n, dtype=self.dtype, device=self.device)
        run = {k: v[b] for k, v in params.items()}
        scores = None
        if self.model == "one_layer":  # token scores once, then gathers: no module call per chunk
            scores = run["E"] @ torch.stack((run["p"], self._v(params, b)), dim=1)  # (|S|, 2): E p, E v
        start = 0
        while start < self.ds.n:  # chunks bound the memory of the T x T attention
            rows = min(self.chunk, self.ds.n - start)
            if scores is None:
                width = int(self._extent[self._sorted[start + rows - 1]])  # the widest of a full chunk
                rows = max(1, min(rows, self.chunk_elements // (width * max(width, self.d))))
            idx = self._sorted[start:start + rows]
            on_device = idx.to(self.device)
            X, mask, _ = self._batch(on_device, int(self._extent[idx[-1]]))
            if scores is None:
                out = self._call(run, b, X, mask)
            else:
                out = readout_terms(scores[:, 0][X].masked_fill(~mask, -math.inf), scores[:, 1][X])[2]
            f[on_device] = out
            start += rows
        return f

    def scores(self, params) -> EmbeddingScores:
        """<E_s, p> and <E_s, v> of every token for every run."""
        E = params["E"]
        v = params["v"] if "v" in params else self._fixed["v"]
        return EmbeddingScores(e_dot_p=(E @ params["p"][:, :, None])[..., 0], e_dot_v=(E @ v[:, :, None])[..., 0])

    def metrics(self, params) -> dict[str, torch.Tensor]:
        B = params["E"].shape[0]
        y = self.ds.y.to(self.dtype)
        f = torch.stack([self.outputs(params, b) for b in range(B)])  # (B, n)
        sc = self.scores(params)
        zp, zv = sc.e_dot_p[:, self.present], sc.e_dot_v[:, self.present]
        return {
            "loss": torch.nn.functional.softplus(-y * f).mean(1),
            "class_accuracy": (torch.sign(f) == y).to(self.dtype).mean(1),
            "p_norm": torch.linalg.vector_norm(params["p"], dim=1),
            "pearson_v_pd": pearson(zv, self.pd.expand_as(zv)),
            "pearson_p_abs_pd": pearson(zp, self.pd.abs().expand_as(zp)),
        }


def classifier_optimizer(config: OptimizerConfig, *, steps_per_epoch: int,
                         decay_epochs: Sequence[int]) -> OptimizerConfig:
    """``config`` with its step-decay milestones set from epochs (MultiStepLR stepped once per epoch)."""
    from dataclasses import replace

    return replace(config, milestones=tuple(int(e) * steps_per_epoch for e in decay_epochs))
