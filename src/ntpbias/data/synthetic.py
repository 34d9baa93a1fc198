"""The papers' synthetic data generators (linear NTP: docs/paper-a-linear-ntp.md#experiments-and-figures).

All generators take one ``seed`` that drives every random choice.
"""

from __future__ import annotations

import math

import torch

from .._tensor import DEFAULT_DTYPE, floating_dtype
from ..config import argument
from ..limits import check_memory, nbytes
from .ntp import NTPData


def random_ntp(m: int = 50, d: int = 60, V: int = 10, support_size: int = 6, *, seed: int = 0,
               embedding_scale: float = 1.0, dirichlet: float = 1.0, pi: str = "uniform",
               dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
    """Random NTP data of paper A's overparameterized experiment (App. A.2; defaults = Figs. 3-5).

    h̄_j ~ N(0, embedding_scale² I_d) i.i.d.; S_j a uniform random ``support_size``-subset of [V];
    p̂_j|S_j ~ Dirichlet(dirichlet · 1); π̂ uniform (``pi="uniform"``) or Dirichlet(1) (``pi="dirichlet"``).
    With the defaults E[H] = H_6 - 1 ≈ 1.450 nats, matching the paper's H ≈ 1.445
    (docs/paper-a-linear-ntp.md#experiments-and-figures).

    Parameters
    ----------
    m, d, V : int
        Number of distinct contexts, embedding dimension, vocabulary size.
    support_size : int
        |S_j|, the same for every context (1 <= support_size <= V).
    seed : int
        Drives every random choice (embeddings, supports, probabilities).
    embedding_scale : float
        Standard deviation of the embedding entries.
    dirichlet : float
        Concentration of each context's next-token distribution on its support.
    pi : {"uniform", "dirichlet"}
        Context probabilities: uniform, or one Dirichlet(1) draw.
    dtype : torch.dtype
        Floating type of H, P and pi (float64 by default).

    Returns
    -------
    NTPData
        The dataset, with ``H`` (m, d), ``P`` (m, V) and ``pi`` (m,).

    Examples
    --------
    >>> data = random_ntp(seed=1)
    >>> data.m, data.d, data.V, int(data.support_sizes.unique())
    (50, 60, 10, 6)
    """
    where = "random_ntp"
    m, d = argument(where, "m", m, int, ge=1), argument(where, "d", d, int, ge=1)
    V = argument(where, "V", V, int, ge=2)
    support_size = argument(where, "support_size", support_size, int, ge=1, le=V)
    seed = argument(where, "seed", seed, int, ge=0)
    embedding_scale = argument(where, "embedding_scale", embedding_scale, float, gt=0)
    dirichlet = argument(where, "dirichlet", dirichlet, float, gt=0)
    pi = argument(where, "pi", pi, str, choices=("uniform", "dirichlet"))
    dtype = floating_dtype(where, dtype)
    check_memory({f"H ({m:,} x {d:,})": nbytes(m, d), f"P ({m:,} x {V:,}) and its draws": nbytes(m, V, itemsize=32)},
                 f"{where}: the data", hint="use smaller m, d or V")
    gen = torch.Generator().manual_seed(seed)
    H = embedding_scale * torch.randn(m, d, generator=gen, dtype=torch.float64)
    support = random_supports(m, V, support_size, gen)
    gamma = torch._standard_gamma(torch.full((m, V), float(dirichlet), dtype=torch.float64), generator=gen)
    weights = torch.where(support, gamma, torch.zeros_like(gamma))
    P = weights / weights.sum(1, keepdim=True)
    pis = None
    if pi == "dirichlet":
        g = torch._standard_gamma(torch.ones(m, dtype=torch.float64), generator=gen)
        pis = g / g.sum()
    return NTPData.from_arrays(H.to(dtype), P.to(dtype), pis, dtype=dtype, source="random_ntp",
                               vocab=[str(v + 1) for v in range(V)])


def random_supports(m: int, V: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """(m, V) bool: each row a uniformly random k-subset of the V tokens (the supports of :func:`random_ntp`).

    >>> random_supports(3, 5, 2, torch.Generator().manual_seed(0)).sum(1).tolist()
    [2, 2, 2]
    """
    order = torch.argsort(torch.rand(m, V, generator=generator, dtype=torch.float64), dim=1)
    return torch.zeros(m, V, dtype=torch.bool).scatter_(1, order[:, :k], True)


#: Supports of the 2D example (1-based tokens, docs/paper-a-linear-ntp.md#experiments-and-figures): A = {2,3,4}, B =
#: {1,2,5}, C = {1,4,5}.
TWO_D_SUPPORTS = ((2, 3, 4), (1, 2, 5), (1, 4, 5))


def two_d_example(*, seed: int = 0, angles_deg=(90.0, 210.0, 330.0), dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
    """The 2D example of Figs. 1-2 of paper A (d=2, m=3, V=5, |S_j|=3), as reconstructed in
    docs/paper-a-linear-ntp.md#experiments-and-figures.

    Contexts A, B, C have unit-norm embeddings at ``angles_deg`` and the supports of :data:`TWO_D_SUPPORTS`;
    in-support probabilities are Dirichlet(1) draws ("assigned randomly", seeded), π̂ uniform.
    """
    gen = torch.Generator().manual_seed(seed)
    H = torch.tensor([[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in angles_deg],
                     dtype=torch.float64)
    P = torch.zeros(3, 5, dtype=torch.float64)
    for j, supp in enumerate(TWO_D_SUPPORTS):  # three fixed contexts
        g = torch._standard_gamma(torch.ones(len(supp), dtype=torch.float64), generator=gen)
        P[j, [z - 1 for z in supp]] = g / g.sum()
    return NTPData.from_arrays(H.to(dtype), P.to(dtype), vocab=[str(v) for v in range(1, 6)],
                               contexts=["A", "B", "C"], dtype=dtype, source="two_d_example")
