"""Figure 1 of paper C for any dataset: the collocation and each query's partial order (``ntpbias structure --plot``
and ``reproduce transformer`` for Example 1), drawn from the dataset's structure only."""

from __future__ import annotations

import numpy as np

from .figures import new_figure
from .plots import plot

#: at most this many queries get a panel (the JSON output of ``structure`` lists every order)
MAX_QUERIES = 12
#: node colours by token class under a query: optimal, non-comparable, non-optimal
CLASS_STYLE = {"optimal": ("#176f2c", 2.0), "non-comparable": ("#7f7f7f", 1.0), "non-optimal": ("#b00020", 0.0)}


def structure_data(structure) -> dict:
    """The plot's keyword arguments from a :class:`~ntpbias.data.structure.DatasetStructure` (plain lists)."""
    from ..data.structure import NON_COMPARABLE, NON_OPTIMAL, OPTIMAL

    names = {OPTIMAL: "optimal", NON_COMPARABLE: "non-comparable", NON_OPTIMAL: "non-optimal"}
    queries = list(structure.queries)
    return {
        "vocab": list(structure.samples.vocab),
        "next_token": structure.collocation.next_token.tolist(),
        "relations": structure.relations.tolist(),
        "classes": {q: [names.get(int(c), "confused") for c in structure.classes[q].tolist()] for q in queries},
    }


@plot("structure.figure1")
def structure_figure(structure):
    """Left: the collocation x -> n(x) on a circle. Right: per query q, the tokens of q's order in three rows
    (optimal, non-comparable, non-optimal: Theorem 3 inserts the middle row between the others) with an arrow
    u -> v for every training relation u >_q v. ``structure``: a :class:`~ntpbias.data.structure.DatasetStructure`."""
    data = structure_data(structure)
    vocab, next_token, relations, classes = data["vocab"], data["next_token"], data["relations"], data["classes"]
    queries = list(classes)[:MAX_QUERIES]
    cols = min(4, max(1, len(queries)))
    rows = max(1, -(-len(queries) // cols))
    fig, axes = new_figure(rows, cols + 1, width=2.6, height=2.4)
    _collocation(axes[0, 0], vocab, next_token)
    for ax in axes[1:, 0]:
        ax.axis("off")
    panels = list(axes[:, 1:].flat)
    for ax, q in zip(panels, queries, strict=False):
        _order(ax, q, vocab, [r for r in relations if r[0] == q], classes[q])
    for ax in panels[len(queries):]:
        ax.axis("off")
    return fig


def _collocation(ax, vocab: list[str], next_token: list[int]) -> None:
    V = len(vocab)
    angle = np.pi / 2 - 2 * np.pi * np.arange(V) / V
    xy = np.stack([np.cos(angle), np.sin(angle)], 1)
    for x, n in enumerate(next_token):
        if n >= 0:
            ax.annotate("", xy=0.85 * xy[n] + 0.15 * xy[x], xytext=0.85 * xy[x] + 0.15 * xy[n],
                        arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 1.0})
    for x, name in enumerate(vocab):
        ax.text(*xy[x], name, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "white", "ec": "0.5"})
    ax.text(0, -1.45, "orders: green = optimal, grey dashed = non-comparable,\nred = non-optimal; u -> v means u >_q v",
            ha="center", va="top", fontsize=6)
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", title="collocation x -> n(x)")
    ax.axis("off")


def _order(ax, q: int, vocab: list[str], relations: list[list[int]], classes: list[str]) -> None:
    shown = sorted({t for _, u, v in relations for t in (u, v)} | {t for t, c in enumerate(classes)
                                                                    if c == "non-comparable" and t != q})
    pos = {}
    for name, (_, y) in CLASS_STYLE.items():
        members = [t for t in shown if classes[t] == name]
        for i, t in enumerate(members):
            pos[t] = ((i + 1) / (len(members) + 1), y)
    for _, u, v in relations:
        if u in pos and v in pos:
            ax.annotate("", xy=pos[v], xytext=pos[u], arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8,
                                                                   "shrinkA": 9, "shrinkB": 9})
    for t, (x, y) in pos.items():
        color = CLASS_STYLE.get(classes[t], ("#9467bd", 1.0))[0]
        ax.text(x, y, vocab[t], ha="center", va="center", fontsize=8, color=color,
                bbox={"boxstyle": "round", "fc": "white", "ec": color, "ls": "--" if classes[t] == "non-comparable"
                      else "-"})
    ax.set(xlim=(0, 1), ylim=(-0.5, 2.5), title=f"order under query {vocab[q]}")
    ax.axis("off")
