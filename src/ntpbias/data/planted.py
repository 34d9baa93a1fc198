"""NTP data with planted support patterns, for the log-bilinear model (docs/ufm.md#data).

K support sets S^(1..K) of given sizes are drawn from a vocabulary of V tokens (disjoint, or independently with
overlaps); support set k is shared by ``contexts[k]`` contexts, each with its own next-token probabilities on it
(Dirichlet). Contexts that share a support set are what the theory predicts to collapse; supports of different sizes
and groups of different sizes give the centred support matrix distinct singular values.

The contexts are embedded one-hot (H = I_m): the log-bilinear model ignores H and learns its own embeddings, and paper
A's linear model on one-hot contexts is the model with free logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE, floating_dtype
from ..config import argument, describe_value
from ..errors import ArgumentTypeError, DataError
from ..limits import check_memory, nbytes
from .ntp import NTPData


def planted_supports(V: int = 16, sizes: Sequence[int] = (2, 3, 4, 6), contexts: Sequence[int] | int = 6, *,
                     seed: int = 0, disjoint: bool = True, dirichlet: float = 1.0, pi: str = "uniform",
                     sets: Sequence[Sequence[int]] | None = None, dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
    """NTP data whose contexts share K = len(sizes) planted support sets.

    Parameters
    ----------
    V : int
        Vocabulary size; tokens are named ``t0 .. t{V-1}``.
    sizes : sequence of int
        The support sizes |S^(k)| of the K sets.
    contexts : int or sequence of int
        Contexts per set (one number for all sets, or one per set); context names are ``c<k>.<i>`` (set k, i-th
        context).
    seed : int
        Drives every random choice (the sets, the probabilities, π̂).
    disjoint : bool
        Draw the sets as disjoint blocks of a random permutation of the vocabulary (needs Σ sizes <= V), or each
        independently (uniform subsets; sets may overlap or repeat).
    dirichlet : float
        Concentration of each context's probabilities on its support.
    pi : {"uniform", "dirichlet"}
        Context probabilities: uniform, or one Dirichlet(1) draw.
    sets : sequence of sequences of int, optional
        Explicit support sets (token ids in 0..V-1); when given, ``sizes`` and ``disjoint`` are ignored.
    dtype : torch.dtype
        Floating type of the arrays (float64 by default).

    Returns
    -------
    NTPData
        m = Σ contexts contexts with one-hot embeddings ``H = I_m`` (the log-bilinear model trains its own).

    Examples
    --------
    >>> data = planted_supports(V=8, sizes=(1, 2, 3), contexts=2, seed=0)
    >>> data.m, data.V, data.support_sizes.tolist()
    (6, 8, [1, 1, 2, 2, 3, 3])
    >>> bool((data.support[0] == data.support[1]).all()), data.contexts[:3]
    (True, ('c0.0', 'c0.1', 'c1.0'))
    """
    where = "planted_supports"
    V = argument(where, "V", V, int, ge=2)
    if sets is not None:
        if isinstance(sets, (str, bytes)) or not isinstance(sets, Sequence):
            raise ArgumentTypeError(f"{where}: sets = {describe_value(sets)}: expected a list of token-id lists")
        sets = [argument(where, "sets", t, tuple[int, ...], ge=0, le=V - 1,
                         admits=f"lists of token ids in 0..{V - 1}") for t in sets]
        sets = [np.unique(np.asarray(t, dtype=np.int64)) for t in sets]
        if any(t.size == 0 for t in sets):
            raise DataError(f"{where}: every explicit support set must be a non-empty set of token ids in 0..{V - 1}")
        sizes = [t.size for t in sets]
    sizes = list(argument(where, "sizes", sizes, tuple[int, ...], ge=1, le=V))
    contexts = argument(where, "contexts", contexts, int if isinstance(contexts, int | np.integer) else
                        tuple[int, ...], ge=1)
    counts = [contexts] * len(sizes) if isinstance(contexts, int) else list(contexts)
    if not sizes or len(counts) != len(sizes):
        raise DataError(f"{where}: need one context count per support set: {len(sizes)} sizes, {len(counts)} counts")
    disjoint = argument(where, "disjoint", disjoint, bool)
    if sets is None and disjoint and sum(sizes) > V:
        raise DataError(f"{where}: disjoint support sets need sum(sizes) = {sum(sizes)} <= V = {V}")
    seed = argument(where, "seed", seed, int, ge=0)
    dirichlet = argument(where, "dirichlet", dirichlet, float, gt=0)
    pi = argument(where, "pi", pi, str, choices=("uniform", "dirichlet"))
    dtype = floating_dtype(where, dtype)
    check_memory({f"P ({sum(counts):,} x {V:,}) and its draws": nbytes(sum(counts), V, itemsize=32)},
                 f"{where}: the data", hint="use fewer contexts or a smaller V")
    rng = np.random.default_rng(seed)
    if sets is not None:
        pass
    elif disjoint:
        perm = rng.permutation(V)
        starts = np.cumsum([0, *sizes])
        sets = [np.sort(perm[a:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)]
    else:
        sets = [np.sort(rng.choice(V, size=s, replace=False)) for s in sizes]
    group = np.repeat(np.arange(len(sizes)), counts)  # (m,)
    m = len(group)
    support = np.zeros((m, V), dtype=bool)
    for k, tokens in enumerate(sets):  # K sets, not contexts
        support[np.ix_(group == k, tokens)] = True
    weights = np.where(support, rng.gamma(dirichlet, size=(m, V)), 0.0)
    P = weights / weights.sum(1, keepdims=True)
    pis = None if pi == "uniform" else rng.dirichlet(np.ones(m))
    names = [f"c{k}.{i}" for k, c in enumerate(counts) for i in range(c)]
    return NTPData.from_arrays(torch.eye(m, dtype=dtype), torch.as_tensor(P, dtype=dtype), pis, dtype=dtype,
                               vocab=[f"t{v}" for v in range(V)], contexts=names, source="planted_supports")


def planted_markov_lines(V: int = 16, sizes: Sequence[int] = (2, 3, 5, 6), contexts: Sequence[int] | int = 4, *,
                         lines: int = 2000, length: int = 16, seed: int = 0, dirichlet: float = 2.0
                         ) -> tuple[list[str], NTPData]:
    """Lines of a Markov chain over V tokens whose next-token supports are planted (docs/lm.md#the-planted-control).

    The transition row of token j is the next-token distribution of context j of :func:`planted_supports` (``V``,
    ``sizes``, ``contexts``, disjoint sets): tokens share K support sets, so after a token of group k the next token
    always lies in set k. Every line starts at a uniformly random token and has ``length`` tokens, named ``t0 ..
    t{V-1}``; everything is drawn from ``seed``.

    Returns (the lines, one string of space-separated tokens each; the transition data, whose ``P`` (V, V) is the
    transition matrix and whose supports are the planted ones).

    Examples
    --------
    >>> text, chain = planted_markov_lines(V=6, sizes=(2, 4), contexts=3, lines=3, length=5, seed=0)
    >>> len(text), len(text[0].split()), chain.P.shape
    (3, 5, torch.Size([6, 6]))
    """
    where = "planted_markov_lines"
    lines = argument(where, "lines", lines, int, ge=1)
    length = argument(where, "length", length, int, ge=2)
    chain = planted_supports(V, sizes, contexts, seed=seed, dirichlet=dirichlet)
    if chain.m != V:
        raise DataError(f"{where}: a Markov chain needs one context per token: the contexts per set sum to "
                        f"{chain.m}, not V = {V}")
    rng = np.random.default_rng([seed, 1])  # a stream of its own, beside the one that drew the chain
    cdf = np.cumsum(chain.P.double().numpy(), axis=1)
    cdf[:, -1] = 1.0
    tokens = np.empty((lines, length), dtype=np.int64)
    tokens[:, 0] = rng.integers(V, size=lines)
    for t in range(1, length):  # loop over positions, vectorized over lines
        u = rng.random(lines)
        tokens[:, t] = (u[:, None] >= cdf[tokens[:, t - 1]]).sum(1)
    names = np.array([f"t{v}" for v in range(V)])
    return [" ".join(row) for row in names[tokens].tolist()], chain
