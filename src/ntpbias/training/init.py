"""Parameter initialization, batched over seeds: each run's parameters depend only on its own seed."""

from __future__ import annotations

import math

import torch

from .config import INITS


def lecun(shape: tuple[int, ...], seeds: list[int], *, scheme: str = "lecun_normal", fan_in: int | None = None,
          dtype: torch.dtype = torch.float64, device=None, stream: int = 0) -> torch.Tensor:
    """LeCun initialization of a (B, *shape) tensor: N(0, 1/fan_in) or U(±sqrt(3/fan_in)) (or zeros).

    ``fan_in`` defaults to ``shape[-1]`` (for W (V, d): d, as in paper A's "random LeCun initialization").
    ``stream`` separates independent parameters drawn from the same seed.

    >>> a = lecun((2, 3), [0, 1]); b = lecun((2, 3), [1])
    >>> a.shape, bool(torch.equal(a[1], b[0]))
    (torch.Size([2, 2, 3]), True)
    """
    if scheme not in INITS:
        raise ValueError(f"unknown init {scheme!r}; choose one of {', '.join(INITS)}")
    fan_in = fan_in or shape[-1]
    out = torch.empty(len(seeds), *shape, dtype=torch.float64)
    for b, seed in enumerate(seeds):  # one generator per run, so batching never changes a run's numbers
        gen = torch.Generator().manual_seed((1_000_003 * seed + stream) % 2**64)  # 64-bit: unchanged below 1.8e13
        if scheme == "lecun_normal":
            out[b] = torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(fan_in)
        elif scheme == "lecun_uniform":
            out[b] = (2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) * math.sqrt(3 / fan_in)
        else:
            out[b] = 0.0
    return out.to(dtype=dtype, device=device)
