"""The cls-attention classifiers of paper B (eqs. (1) and (17) of paper B; docs/paper-b-attention.md#objects) as torch
modules.

* :class:`OneLayerAttention`, eq. (1): f(X; p, E) = softmax(p^T E_X^T) E_X v, the ``<cls>`` embedding p acting
  only as the query (it is not a key or value, docs/paper-b-attention.md#decisions);
* :class:`TwoLayerAttention`, eq. (17): E'_X = LayerNorm(softmax(E_X E_X^T) E_X + E_X), then the same readout
  f = softmax(p^T E'_X^T) E'_X v.

Both take token ids ``X: (n, T)`` and an optional padding mask ``mask: (n, T)`` (True at real tokens); padded
positions are removed from every softmax (keys of the first layer, positions of the readout), so padding
changes nothing. The readout's backward uses the stable weight form of docs/paper-b-attention.md#theory-checks
(:class:`_StableReadout`), so autograd stays accurate when the attention concentrates (large ||p||). v is fixed (a
buffer, the theory's default) or trained (``train_v=True``). Parameters are float64 by default and drawn from the
theory's initialisation (:func:`theory_init`): E_s, p ~ N(0, I_d/d), v uniform on the unit sphere. Training uses
autograd; the closed-form gradients of model (1) for the theory checks live in
:mod:`ntpbias.geometry.attention.stage_one`, which shares :func:`readout_terms` and :func:`theory_init` with these
modules.
"""

from __future__ import annotations

import abc
import math

import torch
from torch import nn

from .._tensor import DEFAULT_DTYPE
from ..data.tokens import TokenSequences
from ..errors import ConfigError, DataError


def theory_init(num_tokens: int, d: int, *, seed: int = 0, dtype: torch.dtype = DEFAULT_DTYPE,
                device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The theory's initialisation of model (1) (Sec. 4 of paper B): E⁰_s, p⁰ ~ N(0, I_d/d) i.i.d. and v uniform on
    the unit sphere, drawn in this order on the CPU from one generator seeded with ``seed``.

    Returns (E0 (|S|, d), p0 (d,), v (d,)).
    """
    if num_tokens < 1 or d < 1:
        raise ConfigError(f"num_tokens and d must be >= 1, got {num_tokens}, {d}")
    gen = torch.Generator().manual_seed(seed)
    E = torch.randn(num_tokens, d, generator=gen, dtype=DEFAULT_DTYPE) / math.sqrt(d)
    p = torch.randn(d, generator=gen, dtype=DEFAULT_DTYPE) / math.sqrt(d)
    v = torch.randn(d, generator=gen, dtype=DEFAULT_DTYPE)
    v = v / torch.linalg.vector_norm(v)
    return tuple(t.to(dtype=dtype, device=device) for t in (E, p, v))


def readout_terms(a: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The readout f = Σ_i q_i u_i, q = softmax(a), in the stable form shared by the model and the theory.

    Returns (q, c, f) with c_i = (u_i - r) - Σ_j q_j (u_j - r), r = u at the most attended position, so that
    ∂f/∂a_i = q_i (u_i - f) = q_i c_i without the cancellation of u_i - f once q_i ≈ 1 (Lemma A.1 of paper B; decision
    in docs/paper-b-attention.md). a, u: (..., T); masked positions carry a = -inf (q = 0) and a finite u.
    """
    q = torch.softmax(a, dim=-1)
    r = u.gather(-1, a.argmax(-1, keepdim=True))
    du = u - r
    fr = (q * du).sum(-1, keepdim=True)
    return q, du - fr, (r + fr).squeeze(-1)


class _StableReadout(torch.autograd.Function):
    """f = Σ_i q_i u_i with q = softmax(a), differentiated in the stable weight form of
    docs/paper-b-attention.md#theory-checks.

    f is evaluated relative to r = u at the most attended position, and ∂f/∂a_i = q_i (u_i - f) as
    q_i ((u_i - r) - Σ_j q_j (u_j - r)), which at that position is exactly q_i Σ_j q_j (u_i - u_j): no
    cancellation once q_i ≈ 1 (autograd's softmax backward computes q_i u_i - q_i f and loses the gradient's
    direction to rounding at large ||p||). a, u: (..., T); masked positions carry a = -inf (q = 0), finite u.
    """

    @staticmethod
    def forward(ctx, a, u):
        q, centered, f = readout_terms(a, u)
        ctx.save_for_backward(q, centered)
        return f

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_f):
        q, centered = ctx.saved_tensors
        g = grad_f.unsqueeze(-1)
        return g * q * centered, g * q


def logistic_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss Ê log(1 + exp(-y f)) of eq. (2), via softplus. f, y: (n,)."""
    return nn.functional.softplus(-y * f).mean()


def one_layer_loss_and_grads(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, X: torch.Tensor,
                             mask: torch.Tensor | None, y: torch.Tensor, *, out_E: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Loss (2) of model (1) on a batch and its gradients w.r.t. E, p and v in closed form (Lemma A.1 of paper B,
    docs/paper-b-attention.md#objects), in O(n T + |S| d) work: no (n, T, d) tensor is formed.

    With the token scores z = E p, u = E v (|S|,), the attention q = softmax(z_X) over the real positions, the
    stable weights q_i c_i = ∂f/∂a_i of :func:`readout_terms` and g_k = ∂L/∂f_k = -y_k σ(-y_k f_k) / n, the two
    per-token coefficient vectors are α_s = Σ_{x_{k,i} = s} g_k q_{k,i} c_{k,i} and β_s = Σ_{x_{k,i} = s} g_k q_{k,i}
    (|S|,), and

        ∇_E L = α p^T + β v^T,    ∇_p L = E^T α,    ∇_v L = E^T β.

    Parameters
    ----------
    E : (|S|, d).  p, v : (d,).  X : LongTensor (n, T).  mask : BoolTensor (n, T) or None (all real).
    y : (n,) labels ±1 in E's dtype.
    out_E : (|S|, d), optional
        Where to write ∇_E L (saves allocating |S| x d floats per step; returned as the second value).

    Returns
    -------
    (loss (), grad_E (|S|, d), grad_p (d,), grad_v (d,))

    Examples
    --------
    >>> E, p, v = theory_init(5, 4, seed=0)
    >>> X = torch.tensor([[0, 1, 2], [3, 4, 0]]); mask = torch.tensor([[True, True, True], [True, True, False]])
    >>> y = torch.tensor([1.0, -1.0], dtype=E.dtype)
    >>> model = OneLayerAttention(5, 4, seed=0, train_v=True)
    >>> ref = logistic_loss(model(X, mask), y)
    >>> loss, gE, gp, gv = one_layer_loss_and_grads(E, p, v, X, mask, y)
    >>> auto = torch.autograd.grad(ref, [model.E, model.p, model.v])
    >>> bool(torch.allclose(loss, ref)), all(torch.allclose(a, b) for a, b in zip((gE, gp, gv), auto))
    (True, True)
    """
    PV = torch.stack((p, v))  # (2, d)
    zu = PV @ E.T  # (2, |S|): z = E p, u = E v (a short-and-wide product: one streaming pass over E)
    a, u = zu[0][X], zu[1][X]  # (n, T)
    if mask is not None:
        a = a.masked_fill(~mask, -math.inf)
    q, centered, f = readout_terms(a, u)
    margin = y * f
    loss = nn.functional.softplus(-margin).mean()
    g = (-y * torch.sigmoid(-margin) / X.shape[0])[:, None]  # (n, 1) ∂L/∂f
    gq = g * q  # (n, T) ∂L/∂u at each position (0 at padding)
    coef = torch.stack((gq * centered, gq), dim=-1)  # (n, T, 2) ∂L/∂a, ∂L/∂u
    ab = torch.zeros(E.shape[0], 2, dtype=E.dtype, device=E.device).index_add_(0, X.reshape(-1), coef.reshape(-1, 2))
    alpha, beta = ab[:, 0], ab[:, 1]  # (|S|,) each
    grad_E = torch.mul(alpha[:, None], p, out=out_E) if out_E is not None else alpha[:, None] * p
    grad_E.addr_(beta, v)  # α p^T + β v^T, two streaming passes
    grad_pv = ab.T @ E  # (2, d): E^T α, E^T β
    return loss, grad_E, grad_pv[0], grad_pv[1]


class _ClsAttention(nn.Module, abc.ABC):
    """Shared parameters (E, p, v), initialisation and readout of the cls-attention models."""

    def __init__(self, num_tokens: int, d: int, *, train_v: bool = False, seed: int = 0,
                 dtype: torch.dtype = DEFAULT_DTYPE, device=None):
        super().__init__()
        E, p, v = theory_init(num_tokens, d, seed=seed, dtype=dtype, device=device)
        self.E = nn.Parameter(E)  # (|S|, d)
        self.p = nn.Parameter(p)  # (d,)
        if train_v:
            self.v = nn.Parameter(v)  # (d,)
        else:
            self.register_buffer("v", v)
        self.train_v = train_v

    @property
    def num_tokens(self) -> int:
        return self.E.shape[0]

    @property
    def d(self) -> int:
        return self.E.shape[1]

    def load_params(self, E: torch.Tensor, p: torch.Tensor, v: torch.Tensor) -> _ClsAttention:
        """Overwrite (E, p, v) in place (shapes must match); returns self."""
        with torch.no_grad():
            for name, value in (("E", E), ("p", p), ("v", v)):
                target = getattr(self, name)
                if tuple(value.shape) != tuple(target.shape):
                    raise DataError(f"{name} must have shape {tuple(target.shape)}, got {tuple(value.shape)}")
                target.copy_(value)
        return self

    @abc.abstractmethod
    def _scores(self, X: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Readout logits a (n, T) = p^T e_i and values u (n, T) = v^T e_i of the readout's inputs e_i."""

    def attention(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Readout attention q (n, T): softmax over real positions of the cls query p (0 at padding)."""
        a, _ = self._scores(X, mask)
        if mask is not None:
            a = a.masked_fill(~mask, -math.inf)
        return torch.softmax(a, dim=-1)

    def forward(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """f(X) (n,) for token ids X (n, T) and optional padding mask (n, T); backward in the stable form."""
        a, u = self._scores(X, mask)
        if mask is not None:
            a = a.masked_fill(~mask, -math.inf)
        return _StableReadout.apply(a, u)

    def loss(self, ds: TokenSequences) -> torch.Tensor:
        """Logistic loss (2) on a whole dataset (validated against the vocabulary size)."""
        if ds.num_tokens > self.num_tokens:
            raise DataError(f"the data use {ds.num_tokens} tokens but the model has an embedding for only "
                            f"{self.num_tokens}; build the model with num_tokens >= {ds.num_tokens}")
        ds = ds.to(self.E.device)
        return logistic_loss(self(ds.X, ds.mask), ds.y.to(self.E.dtype))

    @torch.no_grad()
    def embedding_dots(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(<E_s, p>, <E_s, v>) for every token, each (|S|,): the two panels of Figures 1-3."""
        return self.E @ self.p, self.E @ self.v


class OneLayerAttention(_ClsAttention):
    """Model (1): f(X; p, E) = Σ_i q_i E_{x_i}^T v, q = softmax_i(p^T E_{x_i}) over the real positions.

    Evaluated through the token scores z = E p and u = E v (|S|,), gathered at X: never forms E_X (n, T, d).

    Parameters
    ----------
    num_tokens : int, |S|.  d : int, embedding dimension.
    train_v : bool, train v (default False: fixed unit v, as in the theory, docs/paper-b-attention.md#decisions).
    seed : int, initialisation seed.  dtype, device : parameter dtype (float64 default) and device.

    Examples
    --------
    >>> import torch
    >>> model = OneLayerAttention(5, 8, seed=0)
    >>> X = torch.tensor([[0, 1, 2], [3, 4, 0]]); mask = torch.tensor([[True, True, True], [True, True, False]])
    >>> f = model(X, mask)
    >>> f.shape, f.dtype, torch.allclose(f[1], model(X[1:, :2])[0])
    (torch.Size([2]), torch.float64, True)
    """

    def _scores(self, X, mask):
        return (self.E @ self.p)[X], (self.E @ self.v)[X]


class TwoLayerAttention(_ClsAttention):
    """Model (17): self-attention without weights, skip connection and LayerNorm, then the cls readout of (1).

    E'_X = LayerNorm(softmax(E_X E_X^T) E_X + E_X) with the row-wise softmax over the real keys (no scaling, no
    positional encoding, no causal mask), LayerNorm over d per position; f = softmax(p^T E'_X^T) E'_X v.

    Parameters
    ----------
    As :class:`OneLayerAttention`, plus ``layer_norm_affine`` (default True) and ``layer_norm_eps`` (1e-5):
    torch's LayerNorm defaults (docs/paper-b-attention.md#decisions).
    """

    def __init__(self, num_tokens: int, d: int, *, train_v: bool = False, seed: int = 0,
                 layer_norm_affine: bool = True, layer_norm_eps: float = 1e-5, dtype: torch.dtype = DEFAULT_DTYPE,
                 device=None):
        super().__init__(num_tokens, d, train_v=train_v, seed=seed, dtype=dtype, device=device)
        self.norm = nn.LayerNorm(d, eps=layer_norm_eps, elementwise_affine=layer_norm_affine, dtype=dtype,
                                 device=device)

    def contextual(self, X: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """E'_X (n, T, d): the first layer's output (rows at padded positions are computed but never used)."""
        EX = self.E[X]  # (n, T, d)
        logits = EX @ EX.mT  # (n, T, T)
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, :], -math.inf)
        return self.norm(torch.softmax(logits, dim=-1) @ EX + EX)

    def _scores(self, X, mask):
        H = self.contextual(X, mask)
        return H @ self.p, H @ self.v
