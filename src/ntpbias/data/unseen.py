"""New inputs under a dataset's structure (paper C): sentences regenerated from the collocation and the orders
(Sec. 4.1 of paper C), and the inputs whose prediction Theorem 3 fixes (docs/paper-c-transformer.md#objects)."""

from __future__ import annotations

import numpy as np
import torch

from .structure import CONFUSED, NON_COMPARABLE, NON_OPTIMAL, OPTIMAL, DatasetStructure, regenerate_labels


def regenerate_sentences(structure: DatasetStructure, starts, lengths) -> list[list[int]]:
    """Sentences generated from first tokens by iterating the rule of :func:`regenerate_labels` (Sec. 4.1 of paper C).

    Sentence i starts with ``starts[i]`` and stops at ``lengths[i]`` tokens or where the rule is undefined.
    Vectorized over sentences (the loop is over positions).
    """
    starts = torch.as_tensor(starts, dtype=torch.long).reshape(-1)
    lengths = torch.as_tensor(lengths, dtype=torch.long).reshape(-1).expand(starts.shape[0])
    T = int(lengths.max())
    X = torch.zeros(starts.shape[0], T, dtype=torch.long)
    X[:, 0] = starts
    length = torch.ones_like(starts)
    for t in range(1, T):
        alive = (length == t) & (lengths > t)
        if not alive.any():
            break
        idx = torch.nonzero(alive)[:, 0]
        nxt = regenerate_labels(structure, X[idx, :t], torch.ones(idx.numel(), t, dtype=torch.bool))
        ok = nxt >= 0
        X[idx[ok], t] = nxt[ok]
        length[idx[ok]] += 1
    return [X[i, : int(length[i])].tolist() for i in range(starts.shape[0])]


def theorem3_premise(structure: DatasetStructure, X: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Inputs whose prediction Theorem 3 of paper C fixes: the query q (last token) ends some training input, the
    input holds a token non-comparable under q's order, no confused token, and one distinct token ranks first in the
    order the trained model extends (optimal > non-comparable > non-optimal, Theorem 3's gaps): either one optimal
    token (the theorem's first part: its attention dominates) or, with no optimal token, one non-comparable token x_0
    among non-optimal ones (the second part: the prediction is n(x_0)). BoolTensor (M,).

    Parameters
    ----------
    X : LongTensor (M, L) left-aligned input ids. mask : BoolTensor (M, L).

    Examples
    --------
    >>> from ntpbias.data.sentences import example1
    >>> from ntpbias.data.structure import analyze_structure
    >>> st = analyze_structure(example1())
    >>> X = torch.tensor([st.samples.encode(s.split()) for s in ("O S P", "V V P", "S V P")])  # two non-comparable
    >>> theorem3_premise(st, X, torch.ones_like(X, dtype=torch.bool)).tolist()
    [True, True, False]
    """
    X = torch.as_tensor(X, dtype=torch.long)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    q = X.gather(1, (mask.sum(1) - 1)[:, None])[:, 0]  # (M,)
    cls = structure.classes[q[:, None], X]  # (M, L): class of each position's token under the input's query
    rank = torch.full_like(X, -1)
    for c, r in ((NON_OPTIMAL, 0), (NON_COMPARABLE, 1), (OPTIMAL, 2)):  # the three classes, not the data
        rank = torch.where(cls == c, r, rank)
    rank = torch.where(mask, rank, -2)
    top = rank.max(1, keepdim=True).values
    at_top = (rank == top) & mask
    leader = X.gather(1, at_top.to(torch.int8).argmax(1, keepdim=True))
    one_leader = (~at_top | (X == leader)).all(1)
    no_confused = ((cls != CONFUSED) | ~mask).all(1)
    has_non_comparable = ((cls == NON_COMPARABLE) & mask).any(1)
    seen = torch.as_tensor(np.isin(q.numpy(), np.array(structure.queries, dtype=np.int64)))
    return one_leader & no_confused & has_non_comparable & seen & (mask.sum(1) >= 2)
