"""Optimizers used by the three papers, on batched parameters with explicit gradients.

Parameters are a dict ``name -> Tensor (B, ...)``: the leading dimension B indexes independent runs (seeds)
trained at once, so every norm an optimizer takes (normalized GD) is per run, never across runs. Gradients
come from the problem (closed form or autograd); the optimizers do no autograd themselves, which keeps a step
to a few tensor operations and lets the state be saved and restored exactly (``state_dict``).

* ``gd``: W <- W - η ∇L (full-batch gradient descent; SGD when the problem samples minibatches).
* ``ngd``: normalized GD, W <- W - η ∇L / ||∇L|| with the global norm over all parameters of the run
  (``normalize="grad"``, the default of paper A's App. A.2 and paper C's Algorithm 1), or the loss-normalized
  variants η ∇L / L (``"loss"``) and η ∇L / (L - L_floor) (``"excess"``, with the entropy floor for NTP).
  A zero or non-finite gradient norm leaves the parameters unchanged (guard).
* ``adam`` / ``adamw``: Kingma & Ba with bias correction; ``weight_decay`` is an L2 term added to the
  gradient for ``adam`` and decoupled (Loshchilov & Hutter) for ``adamw``. Any β1, β2 in [0, 1) run, β1 = β2
  included; the implicit-bias results for Adam on separable data (Zhang, Zou & Cao 2024; Fan, Schmidt &
  Thrampoulidis 2025) assume β1 <= β2 and a decaying step (docs/optimizers.md#the-optimizers).
* ``sign``: sign descent W <- W - η sign(∇L) (normalized steepest descent in the entrywise max-norm).
* ``nsd``: normalized steepest descent W <- W - η D, D the unit-``norm`` steepest direction
  (:func:`~ntpbias.training.steepest.steepest_direction`: l2 = ``ngd``, linf = ``sign``, l1 = the largest-|g| entry,
  spectral = the polar factor U V^T of ∇L by SVD or Newton-Schulz, nuclear = the top singular pair).
* ``muon``: momentum M <- β M + (1 - β) ∇L, then the spectral steepest step along M (the polar factor; Muon's quintic
  Newton-Schulz by default).
* ``adagrad``: S <- S + ∇L², W <- W - η ∇L / (sqrt(S) + ε) (Duchi et al. 2011; torch.optim.Adagrad with no decay).

The step at step t (0-based) is η_t = η (t + 1)^(-lr_power), multiplied by ``lr_decay`` at each step in
``milestones``: ``lr_power`` = 0 is a constant step, and the max-margin theorems for normalized steepest descent,
sign descent, Muon and Adam assume η_t = Θ(t^-a) with 0 < a <= 1.

``Optimizer(config, fused=True)`` runs Adam/AdamW as torch's fused kernel (one pass over each parameter, its
gradient and moments; where torch's functional Adam offers ``fused`` and ``decoupled_weight_decay``, as the pinned
torch does, else the plain path), updating the parameters *in place*: a step over millions of parameters is then
bound by memory traffic alone (paper B at d = 2048). It computes the same update, written as
p ← p(1 - η λ) - η m̂ / (sqrt(v̂) + ε) for AdamW, so the iterates agree with the plain path to rounding
(docs/paper-b-attention.md#algorithms), and the state (``t``, moments) is the same, so checkpoints are
interchangeable.
"""

from __future__ import annotations

import functools

import torch

from .config import OptimizerConfig
from .steepest import steepest_direction


def _per_run_norm(tensors) -> torch.Tensor:
    """sqrt(Σ_params ||t[b]||²) for each run b: (B,)."""
    sq = sum(t.reshape(t.shape[0], -1).pow(2).sum(1) for t in tensors)
    return sq.sqrt()


def _expand(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A (B,) vector broadcast against a (B, ...) tensor."""
    return v.reshape(-1, *([1] * (like.ndim - 1)))


class Optimizer:
    """Stateful optimizer over batched parameter dicts (see the module docstring).

    Examples
    --------
    >>> import torch
    >>> opt = Optimizer(OptimizerConfig(name="ngd", lr=0.1))
    >>> W = {"W": torch.zeros(2, 3, dtype=torch.float64)}
    >>> g = {"W": torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)}
    >>> opt.step(W, g, loss=torch.ones(2))["W"].round(decimals=12).tolist()  # run 1: zero gradient, unchanged
    [[-0.06, -0.08, 0.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, config: OptimizerConfig, *, loss_floor: torch.Tensor | float = 0.0, fused: bool = False):
        self.config = config
        self.loss_floor = loss_floor
        self.fused = fused and config.name in ("adam", "adamw") and _fused_adam() is not None
        self.t = 0
        self.state: dict[str, dict[str, torch.Tensor]] = {}

    def lr_at(self, t: int) -> float:
        """η at step t (0-based): η (t + 1)^(-lr_power) under the step-decay schedule."""
        c = self.config
        lr = c.lr * c.lr_decay ** sum(t >= m for m in c.milestones)
        return lr * (t + 1) ** -c.lr_power if c.lr_power else lr

    def direction(self, grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The unit steepest-descent direction of ``sign``/``nsd``/``muon`` for ``grads`` (per run)."""
        c = self.config
        norm = {"sign": "linf", "muon": "spectral"}.get(c.name, c.norm)
        method = c.polar if c.polar != "auto" else ("quintic" if c.name == "muon" else "svd")
        return steepest_direction(grads, norm, polar_method=method, ns_steps=c.ns_steps or None)

    def step(self, params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor],
             loss: torch.Tensor) -> dict[str, torch.Tensor]:
        """One update; returns new parameter tensors (inputs are not modified)."""
        c = self.config
        lr = self.lr_at(self.t)
        self.t += 1
        if c.name == "gd":
            return {k: params[k] - lr * grads[k] for k in params}
        if c.name == "ngd":
            if c.normalize == "grad":
                scale = _per_run_norm(grads.values())
            elif c.normalize == "loss":
                scale = loss.detach()
            else:
                scale = loss.detach() - self.loss_floor
            ok = torch.isfinite(scale) & (scale > 0)  # guard: a zero or non-finite norm leaves the run unchanged
            factor = lr / torch.where(ok, scale, torch.ones_like(scale))
            return {k: torch.where(_expand(ok, p), p - _expand(factor, grads[k]) * grads[k], p)
                    for k, p in params.items()}
        if c.name in ("sign", "nsd", "muon"):
            # guard: a run with a non-finite gradient is left unchanged (a zero direction), its momentum too
            ok = torch.stack([torch.isfinite(g.reshape(g.shape[0], -1)).all(1) for g in grads.values()]).all(0)
            grads = {k: torch.where(_expand(ok, g), g, torch.zeros_like(g)) for k, g in grads.items()}
            if c.name == "muon":
                for k, g in grads.items():
                    if k not in self.state:
                        self.state[k] = {"m": torch.zeros_like(g)}
                    st = self.state[k]
                    st["m"].copy_(torch.where(_expand(ok, g), st["m"] * c.momentum + (1 - c.momentum) * g, st["m"]))
                grads = {k: torch.where(_expand(ok, g), self.state[k]["m"], g) for k, g in grads.items()}
            step = self.direction(grads)  # a zero gradient gives a zero direction
            return {k: p - lr * step[k] for k, p in params.items()}
        if c.name == "adagrad":
            out = {}
            for k, p in params.items():
                g = grads[k]
                if k not in self.state:
                    self.state[k] = {"sum": torch.zeros_like(p)}
                st = self.state[k]
                st["sum"].addcmul_(g, g)
                out[k] = p.addcdiv(g, st["sum"].sqrt().add_(c.eps), value=-lr)
            return out
        b1, b2 = c.betas
        if self.fused:
            return self._fused_step(params, grads, lr)
        out = {}
        for k, p in params.items():
            g = grads[k]
            if c.name == "adam" and c.weight_decay:
                g = g + c.weight_decay * p
            if k not in self.state:
                self.state[k] = {"m": torch.zeros_like(p), "v": torch.zeros_like(p)}
            st = self.state[k]
            st["m"].mul_(b1).add_(g, alpha=1 - b1)  # moments updated in place: large models stay compute-bound
            st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (st["v"] / (1 - b2 ** self.t)).sqrt_().add_(c.eps)
            new = p.addcdiv(st["m"], denom, value=-lr / (1 - b1 ** self.t))
            if c.name == "adamw" and c.weight_decay:
                new.add_(p, alpha=-lr * c.weight_decay)
            out[k] = new
        return out

    def _fused_step(self, params, grads, lr: float) -> dict[str, torch.Tensor]:
        """Adam/AdamW in place by torch's fused kernel (the moments are this optimizer's own state tensors)."""
        c = self.config
        names = list(params)
        for k in names:
            if k not in self.state:  # (setdefault would allocate two zero tensors at every step)
                self.state[k] = {"m": torch.zeros_like(params[k]), "v": torch.zeros_like(params[k])}
        ps = [params[k] for k in names]
        # the step counts: the kernel adds 1 before using them
        steps = [torch.full((), float(self.t - 1), dtype=torch.float32, device=p.device) for p in ps]
        _fused_adam()(ps, [grads[k] for k in names], [self.state[k]["m"] for k in names],
                      [self.state[k]["v"] for k in names], [], steps, fused=True, amsgrad=False, beta1=c.betas[0],
                      beta2=c.betas[1], lr=lr, weight_decay=c.weight_decay, eps=c.eps, maximize=False,
                      decoupled_weight_decay=c.name == "adamw")
        return params

    def state_dict(self) -> dict:
        """A copy of the step count and moments (the moments are updated in place, so they are cloned)."""
        return {"t": self.t, "state": {k: {n: t.clone() for n, t in v.items()} for k, v in self.state.items()}}

    def load_state_dict(self, sd: dict) -> None:
        self.t = int(sd["t"])
        self.state = {k: {n: t.clone() for n, t in v.items()} for k, v in sd["state"].items()}


@functools.cache
def _fused_adam():
    """torch's functional Adam with ``fused`` and ``decoupled_weight_decay`` (torch >= 2.4 on the CPU), or None."""
    import inspect

    try:
        from torch.optim.adam import adam
    except ImportError:  # pragma: no cover - very old torch
        return None
    params = inspect.signature(adam).parameters
    return adam if "fused" in params and "decoupled_weight_decay" in params else None
