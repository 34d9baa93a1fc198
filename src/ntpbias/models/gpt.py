"""A small GPT-style decoder (nanoGPT's shape) whose last hidden state and unembedding the NTP geometry measures
(docs/lm.md#the-model).

Token and position embeddings, ``layers`` pre-norm blocks (LayerNorm -> causal multi-head self-attention -> residual,
LayerNorm -> MLP with a 4d GELU hidden layer -> residual), a final LayerNorm, and a linear unembedding W (V, d)
without bias, tied to the token embedding or not:

    h(x_1..x_t) = LN_f(block_L(... block_1(E[x] + P[0..t-1]))) at the last position,   logits = W h.

``h`` is what multiplies the unembedding (:meth:`GPT.hidden`): paper A's context embedding h̄_j of the context
x_1..x_t when the model is read as a linear decoder on its own features. No dropout (the theory is about the training
objective itself). Initialisation as nanoGPT: N(0, 0.02²) for weights, 0.02/sqrt(2 layers) for the residual
projections, zero biases, drawn from a generator seeded by ``seed`` so a run's parameters depend on its seed alone.

Shapes: ``idx`` (B, T) int64 token ids with T <= ``context``; hidden states (B, T, d); logits (B, T, V).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..errors import ConfigError


class SelfAttention(nn.Module):
    """Causal multi-head self-attention: one (d, 3d) projection to queries, keys and values, one (d, d) output."""

    def __init__(self, d: int, heads: int, bias: bool):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.proj = nn.Linear(d, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(B, T, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))  # (B, heads, T, dh)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    """x + attn(LN(x)), then x + MLP(LN(x)) (pre-norm)."""

    def __init__(self, d: int, heads: int, bias: bool):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, bias=bias)
        self.attn = SelfAttention(d, heads, bias)
        self.ln_2 = nn.LayerNorm(d, bias=bias)
        self.fc = nn.Linear(d, 4 * d, bias=bias)
        self.proj = nn.Linear(4 * d, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """The decoder of the module docstring.

    Parameters
    ----------
    vocab_size : V
    context : longest input (number of position embeddings)
    layers, d, heads : blocks, width, attention heads (``d`` divisible by ``heads``)
    tied : the unembedding is the token embedding (W = E)
    bias : biases in the blocks' linear maps and LayerNorms (never on the unembedding)
    seed, dtype, device : initialisation

    Examples
    --------
    >>> model = GPT(10, context=4, layers=1, d=8, heads=2, seed=0)
    >>> idx = torch.tensor([[1, 2, 3]])
    >>> tuple(model(idx).shape), tuple(model.hidden(idx).shape), tuple(model.unembedding.shape)
    ((1, 3, 10), (1, 3, 8), (10, 8))
    >>> bool(torch.allclose(model(idx), model.hidden(idx) @ model.unembedding.T))
    True
    """

    def __init__(self, vocab_size: int, *, context: int, layers: int, d: int, heads: int, tied: bool = False,
                 bias: bool = True, seed: int = 0, dtype: torch.dtype = torch.float32, device=None):
        super().__init__()
        if d % heads:
            raise ConfigError(f"model.d = {d} must be divisible by model.heads = {heads}")
        if min(vocab_size, context, layers, d, heads) < 1:
            raise ConfigError("the vocabulary, context, layers, d and heads must all be >= 1")
        self.context = context
        self.tok_emb = nn.Embedding(vocab_size, d)
        self.pos_emb = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, bias) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, bias=bias)
        self.head = nn.Linear(d, vocab_size, bias=False)
        if tied:
            self.head.weight = self.tok_emb.weight
        self._init(seed, layers)
        self.to(dtype=dtype, device=device)

    def _init(self, seed: int, layers: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():  # tied weights appear once
                if name.endswith("bias"):
                    p.zero_()
                elif p.ndim == 1:  # LayerNorm gains
                    p.fill_(1.0)
                else:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    @property
    def unembedding(self) -> torch.Tensor:
        """W (V, d): logits = W h."""
        return self.head.weight

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The last hidden states LN_f(...) (B, T, d) of token ids ``idx`` (B, T): what multiplies W."""
        T = idx.shape[1]
        if T > self.context:
            raise ConfigError(f"an input of {T} tokens exceeds the model's context of {self.context}")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V)."""
        return self.head(self.hidden(idx))
