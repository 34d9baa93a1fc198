"""Training the GPT-style decoder of :mod:`ntpbias.models.gpt` on a tokenized text (docs/lm.md#training).

**Windows.** Every line is a sequence and nothing crosses a line end. Every token that has a next token in its line
starts a window of up to ``context + 1`` tokens inside the line; the window's position t (0-based) is the context
x_s..x_{s+t} with label x_{s+t+1}. Over all windows, every (t-gram, next token) occurrence of the text with
t <= ``context`` appears exactly once, so the training objective is the NTP cross-entropy in distinct-context form
(eq. (2) of paper A) of the autoregressive data of all these windows, and the contexts of length T are exactly the
T-gram contexts that ``ntpbias lm analyze --context-length T`` reads from the same text: the model's hidden state of a
context fed at positions 0..T-1 is the one it was trained on.

**Minibatches.** A step draws ``batch_size`` window starts uniformly (with replacement) from the run's generator and
returns Σ CE over the batch's targets / (batch_size x the mean number of targets per window): an unbiased estimate of
the mean CE over all (context, next token) pairs and of its gradient. Each batch is cut to its longest window (the
causal mask makes the padding invisible to earlier positions).

Runs (seeds) are batched on the leading dimension of every parameter, as the engine expects; each run's step is one
module call through :func:`torch.func.functional_call` (a loop over runs) with autograd.
"""

from __future__ import annotations

import numpy as np
import torch

from ..models.gpt import GPT

#: windows of the fixed evaluation set on which ``loss`` is logged
EVAL_WINDOWS = 1024


class TokenWindows:
    """The training windows of a tokenized text (module docstring).

    Parameters
    ----------
    ids : int array (N,), the token ids of all lines, concatenated
    lengths : int array (L,), tokens per line
    context : the model's context (a window has at most context + 1 tokens)

    Examples
    --------
    >>> w = TokenWindows(np.array([5, 6, 7, 8, 9]), np.array([3, 2]), context=2)
    >>> w.n_windows, w.n_targets, w.mean_targets   # starts 0, 1 (line 1) and 3 (line 2)
    (3, 4, 1.3333333333333333)
    >>> x, y, mask = w.batch(torch.tensor([0, 2]))
    >>> x.tolist(), y.tolist(), mask.tolist()
    ([[5, 6], [8, 9]], [[6, 7], [9, 0]], [[True, True], [True, False]])
    """

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, context: int):
        ids = np.asarray(ids, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        line_end = np.repeat(np.cumsum(lengths), lengths)  # (N,) one past the last token of each token's line
        starts = np.nonzero(np.arange(ids.size) + 1 < line_end)[0]
        if not starts.size:
            raise ValueError("no line has two tokens: there is nothing to predict")
        targets = np.minimum(context, line_end[starts] - starts - 1)
        self.context = context
        self.ids = torch.from_numpy(ids)
        self.starts = torch.from_numpy(starts)
        self.ends = torch.from_numpy(line_end[starts])
        self.n_windows = int(starts.size)
        self.n_targets = int(targets.sum())
        self.mean_targets = float(targets.mean())

    def batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inputs, targets (B, T) and the targets' mask (B, T) of windows ``idx`` (B,), T = the longest window."""
        start = self.starts[idx]
        pos = start[:, None] + torch.arange(self.context + 1)
        valid = pos < self.ends[idx][:, None]
        tokens = torch.where(valid, self.ids[pos.clamp(max=self.ids.numel() - 1)], 0)
        T = int(valid.sum(1).max()) - 1
        return tokens[:, :T], tokens[:, 1:T + 1], valid[:, 1:T + 1]


class LMProblem:
    """NTP cross-entropy of the decoder on a text's windows, for :class:`~ntpbias.training.loop.Trainer`.

    Parameters
    ----------
    windows : TokenWindows
    vocab_size : V
    model : keyword arguments of :class:`~ntpbias.models.gpt.GPT` (``context``, ``layers``, ``d``, ``heads``,
        ``tied``, ``bias``)
    batch_size : windows per step
    dtype, device : of the parameters

    Metrics: ``loss`` (mean CE over the targets of a fixed set of :data:`EVAL_WINDOWS` windows, drawn once with seed 0
    and shared by every run) and ``unembedding_norm`` (||W||).
    """

    def __init__(self, windows: TokenWindows, vocab_size: int, model: dict, *, batch_size: int = 64,
                 dtype: torch.dtype = torch.float32, device=None):
        self.windows = windows
        self.vocab_size = vocab_size
        self.model_kwargs = dict(model)
        self.batch_size = batch_size
        self.dtype = dtype
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self._module = self.build(0)
        self.param_names = [k for k, _ in self._module.named_parameters()]
        gen = torch.Generator().manual_seed(0)
        n = min(EVAL_WINDOWS, windows.n_windows)
        self._eval = torch.randperm(windows.n_windows, generator=gen)[:n]

    def build(self, seed: int) -> GPT:
        """The module with run ``seed``'s initial parameters."""
        return GPT(self.vocab_size, seed=seed, dtype=self.dtype, device=self.device, **self.model_kwargs)

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        modules = [dict(self.build(s).named_parameters()) for s in seeds]
        return {k: torch.stack([m[k].detach() for m in modules]) for k in self.param_names}

    def _loss(self, run: dict[str, torch.Tensor], idx: torch.Tensor, scale: float) -> torch.Tensor:
        x, y, mask = (t.to(self.device) for t in self.windows.batch(idx))
        logits = torch.func.functional_call(self._module, run, (x,))
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        return (ce * mask.reshape(-1)).sum() / scale

    def loss_and_grad(self, params, step, generators):
        losses, grads = [], {k: [] for k in params}
        scale = self.batch_size * self.windows.mean_targets
        for b, gen in enumerate(generators):  # loop over runs: one module call each
            idx = torch.randint(self.windows.n_windows, (self.batch_size,), generator=gen)
            leaves = {k: v[b].detach().requires_grad_(True) for k, v in params.items()}
            with torch.enable_grad():
                loss = self._loss(leaves, idx, scale)
                gs = torch.autograd.grad(loss, list(leaves.values()))
            losses.append(loss.detach())
            for k, g in zip(leaves, gs, strict=True):
                grads[k].append(g)
        return torch.stack(losses), {k: torch.stack(v) for k, v in grads.items()}

    def metrics(self, params) -> dict[str, torch.Tensor]:
        B = next(iter(params.values())).shape[0]
        chunks = self._eval.split(256)
        n_targets = sum(int(self.windows.batch(c)[2].sum()) for c in chunks)
        loss = torch.stack([sum(self._loss({k: v[b] for k, v in params.items()}, c, n_targets) for c in chunks)
                            for b in range(B)])
        W = params[self.unembedding_name]
        return {"loss": loss, "unembedding_norm": torch.linalg.vector_norm(W.reshape(B, -1), dim=1)}

    @property
    def unembedding_name(self) -> str:
        """The parameter that holds W (the token embedding when tied)."""
        return "head.weight" if "head.weight" in self.param_names else "tok_emb.weight"
