"""One-layer transformer for next-token prediction (paper C, Sec. 3; docs/paper-c-transformer.md#objects).

Model (reparameterized form, what Algorithm 1 trains): for an input X = [x_1..x_L] (d, L) with query x_L,

    T_θ(X) = φ( W_ov X φ(X^T W_kq x_L) ),   W_ov: (|V|, d),  W_kq: (d, d),

with φ the softmax; the inner φ is the attention over positions (eq. 9), the outer one the output distribution.
The original form uses four factors, W_kq = W_k W_q and W_ov = W_o W_v (:func:`forward_original`).

Losses: the cross-entropy over distinct samples with frequencies π (eq. 1) and the stage-1 loss
L_0(W_ov) = Σ_x CE(W_ov x, n(x)) over the collocation (a sum, not a mean; Sec. 4.2). Gradients are closed
form (eqs. 5, 6, and the W_ov gradient of the full loss) in the numerically stable form of
docs/paper-c-transformer.md#objects: the target component of softmax - e_y is -Σ_{v≠y} p_v (never p_y - 1), and the
attention backward uses pairwise differences c_l = φ_l Σ_l' φ_l' (a_l - a_l') instead of (diag φ - φφ^T) a, which
cancels catastrophically when one attention weight is ~1. Everything is float64 by default, batched over samples with
padding masks.

Embeddings: E (d, |V|), column i = embedding x_i of token i (the paper's convention), built by
:func:`token_embeddings`: one-hot, random orthonormal (Assumption 2), or random unit-norm (outside the theory).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._tensor import DEFAULT_DTYPE, as_tensor
from ..data.sentences import NTPSamples
from ..errors import ConfigError, DataError
from ..limits import check_memory, nbytes
from .config import EMBEDDINGS


def token_embeddings(V: int, *, kind: str = "onehot", d: int | None = None, seed: int = 0,
                     dtype: torch.dtype = DEFAULT_DTYPE, device=None) -> torch.Tensor:
    """Token embedding matrix E (d, V), column i = x_i.

    ``kind``: ``"onehot"`` (E = I, d = V; the paper's default), ``"orthonormal"`` (random orthonormal
    columns, d >= V, default d = V: Assumption 2), ``"unit"`` (i.i.d. Gaussian columns scaled to unit norm,
    default d = V: the non-orthonormal ablation of docs/paper-c-transformer.md#experiments-and-figures). Seeded.

    >>> E = token_embeddings(3, kind="orthonormal", d=5, seed=1)
    >>> tuple(E.shape), bool(torch.allclose(E.T @ E, torch.eye(3, dtype=E.dtype)))
    ((5, 3), True)
    """
    d = V if d is None else d
    if kind not in EMBEDDINGS:
        raise ConfigError(f"unknown embedding {kind!r}; choose one of {', '.join(EMBEDDINGS)}")
    if kind == "onehot":
        if d != V:
            raise ConfigError(f"one-hot embeddings have d = |V| = {V}, got d = {d}")
        return torch.eye(V, dtype=dtype, device=device)
    if kind == "orthonormal" and d < V:
        raise ConfigError(f"orthonormal embeddings need d >= |V| = {V}, got d = {d}")
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(d, V, generator=gen, dtype=torch.float64)
    if kind == "orthonormal":
        Q, R = torch.linalg.qr(G)
        E = Q * torch.sign(torch.diagonal(R))  # Haar-distributed orthonormal columns
    else:
        E = G / torch.linalg.vector_norm(G, dim=0, keepdim=True)
    return E.to(dtype=dtype, device=device)


@dataclass(frozen=True, eq=False)
class TransformerInputs:
    """A batch of embedded inputs with labels and weights.

    Attributes
    ----------
    X : Tensor (N, L, d)
        Embedded inputs, row l of sample n = x_l^(n); zeros at padding.
    mask : BoolTensor (N, L)
        True at real tokens (left-aligned).
    query : Tensor (N, d)
        Query embedding x_L^(n) (the last real token).
    y : LongTensor (N,) or None
        Labels (indices of the next token), when known.
    pi : Tensor (N,) or None
        Sample weights π^(n) (sum to 1), when known.
    V : int
        Vocabulary size (number of output logits).
    """

    X: torch.Tensor
    mask: torch.Tensor
    query: torch.Tensor
    y: torch.Tensor | None
    pi: torch.Tensor | None
    V: int

    @classmethod
    def from_ids(cls, ids, mask, E: torch.Tensor, *, y=None, pi=None) -> TransformerInputs:
        """Embed (N, L) token ids with mask through E (d, V)."""
        ids = torch.as_tensor(ids, dtype=torch.long, device=E.device)
        mask = torch.as_tensor(mask, dtype=torch.bool, device=E.device)
        if ids.shape != mask.shape or ids.ndim != 2:
            raise DataError(f"token ids {tuple(ids.shape)} and mask {tuple(mask.shape)} must be the same (N, L) shape")
        V = E.shape[1]
        if ids.numel() and (int(ids[mask].min()) < 0 or int(ids[mask].max()) >= V):
            raise DataError(f"token ids must lie in 0..{V - 1} (columns of the embedding)")
        N, L = ids.shape
        check_memory({f"embedded inputs X ({N:,} x {L:,} x d = {E.shape[0]:,}) and their gradients":
                      nbytes(N, L, E.shape[0], itemsize=4 * E.element_size())},
                     "the transformer's inputs", hint="use shorter sentences or fewer samples", device=E.device)
        X = E.T[ids] * mask[..., None]
        query = E.T[ids.gather(1, (mask.sum(1) - 1).clamp(min=0)[:, None])[:, 0]]
        y = None if y is None else torch.as_tensor(y, dtype=torch.long, device=E.device)
        pi = None if pi is None else as_tensor(pi, dtype=E.dtype, device=E.device)
        return cls(X=X, mask=mask, query=query, y=y, pi=pi, V=V)

    @classmethod
    def from_samples(cls, samples: NTPSamples, E: torch.Tensor) -> TransformerInputs:
        """Every distinct sample of ``samples`` with its label and π, embedded through E (d, |V|)."""
        if E.ndim != 2 or E.shape[1] != samples.V:
            raise DataError(f"{samples.source}: the embedding must be (d, |V|) = (d, {samples.V}), "
                            f"got {tuple(E.shape)}")
        return cls.from_ids(samples.X, samples.mask, E, y=samples.y, pi=samples.pi)

    @property
    def N(self) -> int:
        return self.X.shape[0]


# ---------------------------------------------------------------------------------------------- forward
def attention(W_kq: torch.Tensor, inputs: TransformerInputs) -> torch.Tensor:
    """Attention weights φ^(n) = φ(X^T W_kq x_L) (eq. 9), (N, L), exactly 0 at padding."""
    scores = (inputs.X * (inputs.query @ W_kq.T)[:, None, :]).sum(-1)  # x_l^T (W_kq x_L)
    scores = scores.masked_fill(~inputs.mask, float("-inf"))
    return torch.softmax(scores, dim=1)


def logits(W_ov: torch.Tensor, W_kq: torch.Tensor, inputs: TransformerInputs) -> torch.Tensor:
    """Pre-softmax output T̄_θ(X) = W_ov X φ(X^T W_kq x_L), (N, |V|)."""
    pooled = torch.einsum("nl,nld->nd", attention(W_kq, inputs), inputs.X)
    return pooled @ W_ov.T


def forward_reparam(W_ov: torch.Tensor, W_kq: torch.Tensor, inputs: TransformerInputs) -> torch.Tensor:
    """Output distribution T_θ(X) = φ(W_ov X φ(X^T W_kq x_L)) of the reparameterized model (Sec. 3), (N, |V|)."""
    return torch.softmax(logits(W_ov, W_kq, inputs), dim=1)


def forward_original(W_o: torch.Tensor, W_v: torch.Tensor, W_k: torch.Tensor, W_q: torch.Tensor,
                     inputs: TransformerInputs) -> torch.Tensor:
    """T_θ(X) = φ(W_o W_v X φ(X^T W_k W_q x_L)) with the four original factors (Sec. 3), (N, |V|).

    Shapes: W_k (d, d1), W_q (d1, d), W_v (d2, d), W_o (|V|, d2). Computed through keys, queries and values
    (never forming W_kq or W_ov), so it is an independent check of the reparameterization.
    """
    keys = inputs.X @ W_k  # (N, L, d1): x_l^T W_k
    q = inputs.query @ W_q.T  # (N, d1): W_q x_L
    scores = (keys * q[:, None, :]).sum(-1).masked_fill(~inputs.mask, float("-inf"))
    values = inputs.X @ W_v.T  # (N, L, d2)
    pooled = torch.einsum("nl,nle->ne", torch.softmax(scores, dim=1), values)
    return torch.softmax(pooled @ W_o.T, dim=1)


def reparameterize(W_o, W_v, W_k, W_q) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_ov, W_kq) = (W_o W_v, W_k W_q) (Sec. 3)."""
    return W_o @ W_v, W_k @ W_q


def factorize(W_ov: torch.Tensor, W_kq: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Original factors (W_o, W_v, W_k, W_q) = (W_ov, I, W_kq, I), d1 = d2 = d (a right inverse of reparameterize)."""
    eye = torch.eye(W_kq.shape[0], dtype=W_kq.dtype, device=W_kq.device)
    return W_ov, eye, W_kq, eye.clone()


# ---------------------------------------------------------------------------------------------- losses
def cross_entropy(z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable per-row cross-entropy of logits z (N, V) with targets y (N,) and its gradient dz (N, V).

    loss = log1p(Σ_{v≠y} exp(z_v - z_y)) when every z_v <= z_y (accurate as p_y -> 1), else logsumexp(z) - z_y;
    dz = softmax(z) - e_y with the target entry set to -Σ_{v≠y} softmax(z)_v (docs/paper-c-transformer.md#objects).

    >>> z = torch.tensor([[60.0, 0.0, 0.0]], dtype=torch.float64)
    >>> loss, g = cross_entropy(z, torch.tensor([0]))
    >>> float(loss[0]) > 0, float(g[0, 0]) < 0
    (True, True)
    """
    target = y[:, None] == torch.arange(z.shape[1], device=z.device)  # e_y (one_hot would check y on the host)
    r = z - z.gather(1, y[:, None])
    r_off = r.masked_fill(target, float("-inf"))
    safe = r_off.amax(1) <= 0
    loss = torch.where(safe, torch.log1p(torch.exp(r_off).sum(1)), torch.logsumexp(r, 1))
    p_off = torch.softmax(z, dim=1).masked_fill(target, 0.0)
    grad = p_off - target * p_off.sum(1, keepdim=True)
    return loss, grad


def loss_and_grad_L0(W_ov: torch.Tensor, E: torch.Tensor,
                     next_token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage-1 loss L_0(W_ov) = Σ_x CE(W_ov x, n(x)) and its gradient eq. (5) Σ_x (T_0(x) - e_{n(x)}) x^T.

    Parameters
    ----------
    W_ov : (|V|, d). E : (d, |V|) token embeddings. next_token : LongTensor (|V|,) n(x), -1 where undefined
        (those tokens are left out of the sum).

    Returns
    -------
    loss : scalar tensor. grad : (|V|, d).
    """
    next_token = next_token.to(W_ov.device)
    tokens = torch.nonzero(next_token >= 0)[:, 0]
    x = E[:, tokens]  # (d, V')
    loss, g = cross_entropy((W_ov @ x).T, next_token[tokens])
    return loss.sum(), g.T @ x.T


def loss_L0(W_ov: torch.Tensor, E: torch.Tensor, next_token: torch.Tensor) -> torch.Tensor:
    """The stage-1 loss L_0(W_ov) (Sec. 4.2, App. B) as a scalar tensor."""
    return loss_and_grad_L0(W_ov, E, next_token)[0]


@dataclass(frozen=True, eq=False)
class LossGrads:
    """Loss (eq. 1), its closed-form gradients, and the forward quantities they were computed from.

    Attributes
    ----------
    loss : scalar tensor, Σ_n π^(n) CE(T̄_θ(X^(n)), label).
    grad_W_ov : (|V|, d) or None. grad_W_kq : (d, d) or None.
    attention : (N, L) φ^(n). logits : (N, |V|). per_sample : (N,) CE of each sample.
    """

    loss: torch.Tensor
    grad_W_ov: torch.Tensor | None
    grad_W_kq: torch.Tensor | None
    attention: torch.Tensor
    logits: torch.Tensor
    per_sample: torch.Tensor


def loss_and_grads(W_ov: torch.Tensor, W_kq: torch.Tensor, inputs: TransformerInputs, *, wrt_ov: bool = True,
                   wrt_kq: bool = True) -> LossGrads:
    """Loss eq. (1) with its closed-form stable gradients.

    grad_{W_kq} (eq. 6): Σ_n π^(n) Σ_l c_l^(n) x_l^(n) x_L^(n)T with a_l = x_l^T W_ov^T g^(n),
    c_l = φ_l Σ_l' φ_l' (a_l - a_l') and g^(n) = T_θ(X^(n)) - e_label (stable form,
    docs/paper-c-transformer.md#objects); grad_{W_ov} = Σ_n π^(n) g^(n) (X^(n) φ^(n))^T
    (docs/paper-c-transformer.md#objects, [DERIVED]). Cost O(N L (L + d) + N d |V|).

    Examples
    --------
    >>> from ntpbias.data.sentences import example1
    >>> ds = example1()
    >>> inputs = TransformerInputs.from_samples(ds, token_embeddings(ds.V))
    >>> out = loss_and_grads(torch.zeros(4, 4, dtype=torch.float64), torch.zeros(4, 4, dtype=torch.float64), inputs)
    >>> round(float(out.loss), 6)  # log 4 at zero weights
    1.386294
    """
    if inputs.y is None or inputs.pi is None:
        raise DataError("the loss needs labels and weights: build the inputs with TransformerInputs.from_samples")
    phi = attention(W_kq, inputs)  # (N, L)
    pooled = torch.einsum("nl,nld->nd", phi, inputs.X)  # (N, d): X φ
    z = pooled @ W_ov.T  # (N, V)
    per_sample, g = cross_entropy(z, inputs.y)
    loss = inputs.pi @ per_sample
    grad_ov = (inputs.pi[:, None] * g).T @ pooled if wrt_ov else None
    grad_kq = None
    if wrt_kq:
        a = (inputs.X * (g @ W_ov)[:, None, :]).sum(-1)  # (N, L): x_l^T W_ov^T g
        c = phi * ((a[:, :, None] - a[:, None, :]) * phi[:, None, :]).sum(-1)  # (N, L), pairwise: no cancellation
        keys = torch.einsum("nl,nld->nd", inputs.pi[:, None] * c, inputs.X)  # (N, d)
        grad_kq = keys.T @ inputs.query
    return LossGrads(loss=loss, grad_W_ov=grad_ov, grad_W_kq=grad_kq, attention=phi, logits=z,
                     per_sample=per_sample)


def loss(W_ov: torch.Tensor, W_kq: torch.Tensor, inputs: TransformerInputs) -> torch.Tensor:
    """The training loss L(θ) of eq. (1) as a scalar tensor."""
    return loss_and_grads(W_ov, W_kq, inputs, wrt_ov=False, wrt_kq=False).loss


def grads_original(W_o, W_v, W_k, W_q, inputs: TransformerInputs) -> tuple[torch.Tensor, ...]:
    """Loss and gradients w.r.t. the four original factors by the chain rule (docs/paper-c-transformer.md#objects,
    [DERIVED]).

    Returns (loss, grad W_o, grad W_v, grad W_k, grad W_q) with grad W_o = G_ov W_v^T, grad W_v = W_o^T G_ov,
    grad W_k = G_kq W_q^T, grad W_q = W_k^T G_kq.
    """
    W_ov, W_kq = reparameterize(W_o, W_v, W_k, W_q)
    out = loss_and_grads(W_ov, W_kq, inputs)
    G_ov, G_kq = out.grad_W_ov, out.grad_W_kq
    return out.loss, G_ov @ W_v.T, W_o.T @ G_ov, G_kq @ W_q.T, W_k.T @ G_kq
