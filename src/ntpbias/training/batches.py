"""The minibatches of paper B's joint training (:class:`~ntpbias.training.attention.ClassifierProblem`): each epoch's
permutation, drawn so that a resumed run sees the batches an uninterrupted one would, and the length groups of a
batch of model (17), each padded only to its own longest sequence."""

from __future__ import annotations

import numpy as np
import torch


def generator_base(generator: torch.Generator) -> int:
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
    epoch_gen = torch.Generator().manual_seed((generator_base(generator) + 1_000_003 * epoch) % (2 ** 63 - 1))
    return torch.randperm(n, generator=epoch_gen)


#: model (17)'s fixed cost of one length group in the units of :func:`length_groups` (measured on one CPU core: the
#: launches of one forward and backward cost about as much as this many positions x width of attention)
GROUP_OVERHEAD = 4096.0


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
