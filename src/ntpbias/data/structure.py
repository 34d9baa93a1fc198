"""Dataset structure of the transformer paper (004, Sec. 4.1; docs/paper-c-transformer.md#objects).

From distinct samples (:class:`~ntpbias.data.sentences.NTPSamples`) this module extracts

* the **collocation** n: V -> V from the one-token samples [x] -> n(x) (Sec. 4.1 of paper C), and says whether it is a
  permutation, where it is undefined, contradictory (x followed by two tokens) or not injective;
* the **optimal positions** l(n) = {l : n(x_l) = label of X^(n)} of every sample (Secs. 4.1 and 5.2 of paper C);
* the **query-dependent relations** u >_q v: some sample with query q contains u and v with n(u) = label != n(v)
  (Definition 1), and the **token classes** per query (Sec. 4.1, read as disjoint classes;
  docs/paper-c-transformer.md#setting): optimal (above something, below nothing), non-optimal (below something, above
  nothing), confused (both), non-comparable (neither);
* checks of **Assumption 1** (realizable; strict partial orders; no confused tokens) and **Assumption 3**
  (the optimal token occurs at least as often as any other token of its sample), each naming the offending
  samples and sentences and the theory results that no longer apply; **Assumption 2** (orthonormal
  embeddings) is a property of the embedding, checked by :func:`orthonormality_residual`;
* **regeneration** of labels from the collocation and the orders (Sec. 4.1 of paper C; sentences and Theorem 3's
  premise for new inputs in :mod:`ntpbias.data.unseen`).

When the collocation is contradictory, "n(x) = y" is read as "[x] -> y is a sample", so every quantity stays
defined and every violation is reported rather than raised. Irreflexivity of >_q holds by construction (a token
cannot both map and not map to the label).

Everything is vectorized over samples and positions: per-sample work is a (N, L, L) comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import DataError
from ..limits import check_memory, nbytes
from .sentences import NTPSamples

#: Token classes under a query (entries of :attr:`DatasetStructure.classes`).
NON_COMPARABLE, OPTIMAL, NON_OPTIMAL, CONFUSED = 0, 1, 2, 3
CLASS_NAMES = ("non_comparable", "optimal", "non_optimal", "confused")

#: Each check: (the assumption it tests, the theory results that no longer apply when it fails).
CHECKS = {
    "collocation": (
        "Assumption 1(i): every token x has the one-token sample [x] with a unique next token n(x), and n is "
        "injective (a permutation of V)",
        ("Proposition 1", "Lemmas 1-3", "Corollary 1", "the closed form of W_ov*", "Lemmas 4-7", "Theorems 1-3",
         "Proposition 2"),
    ),
    "realizable": (
        "Assumption 1(i): every input has a single label, and it is n(x_l) for some token x_l of the input",
        ("Lemmas 4-7", "Theorems 1-3", "Proposition 2"),
    ),
    "partial_orders": (
        "Assumption 1(ii): every query-dependent relation >_q is a strict partial order (transitive)",
        ("Lemma 5", "Theorems 1-3", "Proposition 2"),
    ),
    "no_confused": (
        "Assumption 1(ii): no token is both above and below other tokens under the same query",
        ("Lemma 5", "Theorems 1-3", "Proposition 2"),
    ),
    "assumption3": (
        "Assumption 3: in every sample the optimal token occurs at least as often as any other token",
        ("Lemma 5", "Theorems 1-3"),
    ),
}


@dataclass(frozen=True)
class Violation:
    """One offending case of a check: a message, the samples involved, and the tokens/query it concerns."""

    message: str
    samples: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    query: int | None = None


@dataclass(frozen=True)
class Check:
    """The outcome of one assumption check."""

    name: str
    violations: tuple[Violation, ...]

    @property
    def holds(self) -> bool:
        return not self.violations

    @property
    def statement(self) -> str:
        return CHECKS[self.name][0]

    @property
    def not_applicable(self) -> tuple[str, ...]:
        """Theory results that no longer apply when this check fails (empty when it holds)."""
        return () if self.holds else CHECKS[self.name][1]


@dataclass(frozen=True, eq=False)
class Collocation:
    """The collocation {(x, n(x))} read from the one-token samples (docs/paper-c-transformer.md#objects).

    Attributes
    ----------
    follows : BoolTensor (V, V)
        ``follows[x, y]``: the one-token input [x] has label y.
    """

    follows: torch.Tensor

    @property
    def next_token(self) -> torch.Tensor:
        """(V,) n(x) where it is unique, -1 where x has no or several next tokens."""
        unique = self.follows.sum(1) == 1
        return torch.where(unique, self.follows.to(torch.int8).argmax(1), torch.full_like(unique, -1, dtype=torch.long))

    @property
    def missing(self) -> tuple[int, ...]:
        """Tokens x without a one-token sample (n(x) undefined)."""
        return tuple(torch.nonzero(~self.follows.any(1))[:, 0].tolist())

    @property
    def contradictory(self) -> tuple[int, ...]:
        """Tokens x followed by two or more different tokens."""
        return tuple(torch.nonzero(self.follows.sum(1) > 1)[:, 0].tolist())

    @property
    def collisions(self) -> tuple[int, ...]:
        """Labels y that follow two or more different one-token inputs (n not injective)."""
        return tuple(torch.nonzero(self.follows.sum(0) > 1)[:, 0].tolist())

    @property
    def is_permutation(self) -> bool:
        return not (self.missing or self.contradictory or self.collisions)

    @property
    def fixed_points(self) -> tuple[int, ...]:
        """Tokens with n(x) = x (allowed by the paper, docs/paper-c-transformer.md#decisions)."""
        n = self.next_token
        return tuple(torch.nonzero(n == torch.arange(n.numel()))[:, 0].tolist())


@dataclass(frozen=True, eq=False)
class TokenClasses:
    """The four disjoint token classes under one query (token ids, sorted)."""

    query: int
    optimal: tuple[int, ...]
    non_optimal: tuple[int, ...]
    non_comparable: tuple[int, ...]
    confused: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class DatasetStructure:
    """Collocation, optimal positions, query-dependent orders, token classes and assumption checks of a dataset.

    Build it with :func:`analyze_structure`.

    Attributes
    ----------
    samples : NTPSamples
    collocation : Collocation
    optimal : BoolTensor (N, L)
        ``optimal[n, l]``: l ∈ l(n), i.e. n(x_l) is the label of sample n (False at padding).
    relations : LongTensor (R, 3)
        Distinct rows (q, u, v) meaning u >_q v, sorted.
    relation_sample : LongTensor (R,)
        The first sample that creates each relation (for messages).
    classes : Int8Tensor (V, V)
        ``classes[q, x]`` ∈ {NON_COMPARABLE, OPTIMAL, NON_OPTIMAL, CONFUSED}: class of token x under query q.
    queries : tuple of int
        Tokens that are the query (last token) of some input of length >= 2, sorted.
    checks : tuple of Check
        collocation, realizable, partial_orders, no_confused, assumption3 (in this order).
    regenerated : LongTensor (N,)
        Labels regenerated from the collocation and the orders (Sec. 4.1 of paper C); -1 where the rule is undefined.

    Examples
    --------
    >>> from ntpbias.data.sentences import example1
    >>> st = analyze_structure(example1())
    >>> c = st.token_classes("O")
    >>> st.samples.text(c.optimal), st.samples.text(c.non_optimal), st.assumptions_hold
    ('O', 'S V', True)
    """

    samples: NTPSamples
    collocation: Collocation
    optimal: torch.Tensor
    relations: torch.Tensor
    relation_sample: torch.Tensor
    classes: torch.Tensor
    queries: tuple[int, ...]
    checks: tuple[Check, ...]
    regenerated: torch.Tensor

    # ------------------------------------------------------------------ queries
    def _query_id(self, query: int | str) -> int:
        q = self.samples.encode([query], what="query")[0]
        if q not in self.queries:
            raise DataError(
                f"{self.samples.source}: token {self.samples.vocab[q]!r} is never the query (last token) of a "
                f"training input with 2 or more tokens, so its order is empty and the theory says nothing under it; "
                f"queries: {' '.join(self.samples.vocab[i] for i in self.queries)}"
            )
        return q

    def token_classes(self, query: int | str) -> TokenClasses:
        """The token classes under ``query`` (a name or id); an unknown or never-seen query is a DataError."""
        q = self._query_id(query)
        row = self.classes[q]
        return TokenClasses(q, *(tuple(torch.nonzero(row == c)[:, 0].tolist())
                                 for c in (OPTIMAL, NON_OPTIMAL, NON_COMPARABLE, CONFUSED)))

    def order(self, query: int | str) -> list[tuple[int, int]]:
        """The pairs (u, v) with u >_query v."""
        q = self._query_id(query)
        rel = self.relations[self.relations[:, 0] == q]
        return [tuple(r) for r in rel[:, 1:].tolist()]

    @property
    def k_and_m(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(V,) number of distinct optimal tokens |O_q| and non-optimal tokens |N_q| per query (Prop. 2)."""
        return (self.classes == OPTIMAL).sum(1), (self.classes == NON_OPTIMAL).sum(1)

    # ------------------------------------------------------------------ checks
    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"unknown check {name!r}; checks: {', '.join(CHECKS)}")

    @property
    def assumptions_hold(self) -> bool:
        """Assumptions 1 and 3 hold (Assumption 2 concerns the embedding, see :func:`orthonormality_residual`)."""
        return all(c.holds for c in self.checks)

    @property
    def regenerates(self) -> bool:
        """The collocation and the orders reproduce every label (Sec. 4.1 of paper C)."""
        return bool((self.regenerated == self.samples.y).all())

    def not_applicable(self) -> tuple[str, ...]:
        """Theory results that no longer apply, given the failed checks."""
        return tuple(dict.fromkeys(r for c in self.checks for r in c.not_applicable))

    def failure_message(self, names=None) -> str:
        """One line naming each failed check (of ``names``, default all), its first offence, and lost results."""
        failed = [c for c in self.checks if not c.holds and (names is None or c.name in names)]
        if not failed:
            return ""
        parts = [f"{c.name} ({c.statement.split(':')[0]}): {c.violations[0].message}"
                 + (f" (+{len(c.violations) - 1} more)" if len(c.violations) > 1 else "") for c in failed]
        results = tuple(dict.fromkeys(r for c in failed for r in c.not_applicable))
        return (f"{self.samples.source} violates " + "; ".join(parts)
                + f"; no longer applicable: {', '.join(results)}")

    def require(self, *names: str) -> None:
        """Raise :class:`DataError` unless the named checks (default: all) hold."""
        message = self.failure_message(names or None)
        if message:
            raise DataError(message)

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict:
        """JSON-ready analysis: ``collocation``, ``queries``, ``assumptions`` (see the ``structure`` command)."""
        s = self.samples
        name = s.vocab.__getitem__
        nxt = self.collocation.next_token.tolist()
        col = self.collocation
        queries = {}
        for q in self.queries:
            tc = self.token_classes(q)
            queries[name(q)] = {cls: [name(t) for t in getattr(tc, cls)] for cls in
                                ("optimal", "non_optimal", "non_comparable", "confused")}
            queries[name(q)]["order"] = [[name(u), name(v)] for u, v in self.order(q)]
        assumptions = {c.name: c.holds for c in self.checks}
        assumptions["all"] = self.assumptions_hold
        assumptions["violations"] = {c.name: [self._violation_dict(v) for v in c.violations] for c in self.checks}
        assumptions["statements"] = {c.name: c.statement for c in self.checks}
        assumptions["not_applicable"] = list(self.not_applicable())
        mismatch = torch.nonzero(self.regenerated != s.y)[:, 0].tolist()
        return {
            "dataset": {k: v for k, v in s.to_dict().items() if k != "samples"},
            "collocation": {name(x): (name(y) if y >= 0 else None) for x, y in enumerate(nxt)},
            "collocation_report": {
                "is_permutation": col.is_permutation,
                "missing": [name(x) for x in col.missing],
                "contradictory": {name(x): [name(y) for y in torch.nonzero(col.follows[x])[:, 0].tolist()]
                                  for x in col.contradictory},
                "not_injective": {name(y): [name(x) for x in torch.nonzero(col.follows[:, y])[:, 0].tolist()]
                                  for y in col.collisions},
                "fixed_points": [name(x) for x in col.fixed_points],
            },
            "queries": queries,
            "assumptions": assumptions,
            "regeneration": {"reproduces_labels": self.regenerates,
                             "mismatches": [{"sample": s.sample_text(n),
                                             "regenerated": name(int(self.regenerated[n]))
                                             if self.regenerated[n] >= 0 else None} for n in mismatch]},
            "samples": s.to_dict()["samples"],
            "L_max": s.L_max, "N": s.N,
        }

    def _violation_dict(self, v: Violation) -> dict:
        s = self.samples
        sentences = list({(d["sentence"], d["text"]): d for d in map(s.sentence_of, v.samples)}.values())
        return {"message": v.message, "samples": [s.sample_text(n) for n in v.samples],
                "sentences": sentences, "tokens": [s.vocab[t] for t in v.tokens],
                "query": None if v.query is None else s.vocab[v.query]}


# ---------------------------------------------------------------------------------------------- analysis
def analyze_structure(samples: NTPSamples) -> DatasetStructure:
    """Extract the collocation, optimal positions, orders and token classes of ``samples`` and run every check.

    Never raises on a violated assumption: violations are findings (see :meth:`DatasetStructure.require`).
    """
    V = samples.V
    X, mask, y = samples.X, samples.mask, samples.y
    N, L = X.shape
    check_memory({f"position-pair tables ({N:,} samples x {L:,} x {L:,} positions)": nbytes(N, L, L, itemsize=4),
                  f"token tables ({V:,} x {V:,})": nbytes(V, V, itemsize=4)},
                 f"{samples.source}: the structure analysis", hint="split long sentences into shorter lines")
    lengths, query = samples.lengths, samples.queries
    follows = torch.zeros(V, V, dtype=torch.bool)
    single = lengths == 1
    follows[X[single, 0], y[single]] = True
    collocation = Collocation(follows)
    optimal = follows[X, y[:, None]] & mask  # (N, L): n(x_l) = label

    # relations u >_q v from every (optimal position, non-optimal position) pair of a sample
    n_idx, l_opt, l_non = torch.nonzero(optimal[:, :, None] & (mask & ~optimal)[:, None, :], as_tuple=True)
    triples = torch.stack([query[n_idx], X[n_idx, l_opt], X[n_idx, l_non]], 1).numpy()
    keys = (triples[:, 0] * V + triples[:, 1]) * V + triples[:, 2]
    ukeys, first = np.unique(keys, return_index=True)
    relations = torch.as_tensor(np.stack([ukeys // (V * V), ukeys // V % V, ukeys % V], 1).reshape(-1, 3))
    relation_sample = n_idx[torch.as_tensor(first, dtype=torch.long)]

    win = torch.zeros(V, V, dtype=torch.bool)
    lose = torch.zeros(V, V, dtype=torch.bool)
    win[relations[:, 0], relations[:, 1]] = True
    lose[relations[:, 0], relations[:, 2]] = True
    classes = (OPTIMAL * (win & ~lose) + NON_OPTIMAL * (lose & ~win) + CONFUSED * (win & lose)).to(torch.int8)
    queries = tuple(torch.unique(query[lengths >= 2]).tolist())

    partial = DatasetStructure(samples, collocation, optimal, relations, relation_sample, classes, queries, (),
                               torch.empty(0, dtype=torch.long))
    regenerated = regenerate_labels(partial, X, mask)
    checks = (_check_collocation(partial), _check_realizable(partial), _check_transitive(partial),
              _check_confused(partial), _check_assumption3(partial))
    return DatasetStructure(samples, collocation, optimal, relations, relation_sample, classes, queries, checks,
                            regenerated)


def _first_sample_of(structure: DatasetStructure, single_x: int, label: int) -> int:
    """Index of the one-token sample [x] -> label."""
    s = structure.samples
    hit = (s.lengths == 1) & (s.X[:, 0] == single_x) & (s.y == label)
    return int(torch.nonzero(hit)[0, 0])


def _check_collocation(st: DatasetStructure) -> Check:
    col, s = st.collocation, st.samples
    out = []
    if col.missing:
        out.append(Violation(
            f"token(s) {s.text(col.missing)} never start a sentence (no one-token sample), so n(x) is undefined "
            "and L_0, a sum over all of V, is not defined; add a sentence starting with each", tokens=col.missing))
    for x in col.contradictory:
        ys = torch.nonzero(col.follows[x])[:, 0].tolist()
        out.append(Violation(f"token {s.vocab[x]!r} is followed by {' and '.join(map(repr, s.text(ys).split()))} "
                             "(the collocation is contradictory)",
                             samples=tuple(_first_sample_of(st, x, y) for y in ys), tokens=(x, *ys)))
    for y in col.collisions:
        xs = torch.nonzero(col.follows[:, y])[:, 0].tolist()
        out.append(Violation(f"tokens {s.text(xs)} are all followed by {s.vocab[y]!r} (n is not injective, so the "
                             "first-token loss cannot reach 0)",
                             samples=tuple(_first_sample_of(st, x, y) for x in xs), tokens=(*xs, y)))
    return Check("collocation", tuple(out))


def _check_realizable(st: DatasetStructure) -> Check:
    s = st.samples
    out = []
    keys = torch.cat([s.lengths[:, None], s.X], 1).numpy()
    _, inverse, n_labels = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    for g in np.nonzero(n_labels > 1)[0]:  # reporting loop over offending inputs only
        members = tuple(np.nonzero(inverse == g)[0].tolist())
        labels = s.text(s.y[list(members)])
        out.append(Violation(f"input {s.text(s.input_ids(members[0]))!r} has several labels ({labels}); a "
                             "realizable dataset gives every input one next token", samples=members))
    for n in torch.nonzero(~st.optimal.any(1))[:, 0].tolist():
        out.append(Violation(f"the label of {s.sample_text(n)!r} is n(x) for no token x of the input, so no "
                             "attention pattern can predict it", samples=(n,), tokens=(int(s.y[n]),)))
    return Check("realizable", tuple(out))


def _check_transitive(st: DatasetStructure) -> Check:
    """Every chain u >_q v >_q w needs u >_q w (a cycle u >_q v >_q u always fails)."""
    s, rel, V = st.samples, st.relations.numpy(), st.samples.V
    if rel.size == 0:
        return Check("partial_orders", ())
    key_qu = rel[:, 0] * V + rel[:, 1]  # rows are sorted by (q, u, v), hence by key_qu
    want = rel[:, 0] * V + rel[:, 2]
    lo, hi = np.searchsorted(key_qu, want, "left"), np.searchsorted(key_qu, want, "right")
    i = np.repeat(np.arange(len(rel)), hi - lo)
    j = np.arange(i.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo) + np.repeat(lo, hi - lo)
    closure = (rel[i, 0] * V + rel[i, 1]) * V + rel[j, 2]
    all_keys = (rel[:, 0] * V + rel[:, 1]) * V + rel[:, 2]
    bad = ~np.isin(closure, all_keys)
    out = []
    for a, b in zip(i[bad].tolist(), j[bad].tolist(), strict=True):
        q, u, v = rel[a]
        w = rel[b, 2]
        shown = f"{s.vocab[u]} > {s.vocab[v]} > {s.vocab[w]}"
        what = "a cycle" if u == w else f"but not {s.vocab[u]} > {s.vocab[w]}"
        out.append(Violation(f"under query {s.vocab[q]!r}: {shown}, {what} (not a strict partial order)",
                             samples=(int(st.relation_sample[a]), int(st.relation_sample[b])),
                             tokens=(int(u), int(v), int(w)), query=int(q)))
    return Check("partial_orders", tuple(out))


def _check_confused(st: DatasetStructure) -> Check:
    s, rel = st.samples, st.relations
    out = []
    for q, x in torch.nonzero(st.classes == CONFUSED).tolist():
        above = int(st.relation_sample[(rel[:, 0] == q) & (rel[:, 1] == x)][0])
        below = int(st.relation_sample[(rel[:, 0] == q) & (rel[:, 2] == x)][0])
        out.append(Violation(f"token {s.vocab[x]!r} is confused under query {s.vocab[q]!r}: it wins in "
                             f"{s.sample_text(above)!r} and loses in {s.sample_text(below)!r}",
                             samples=(above, below), tokens=(x,), query=q))
    return Check("no_confused", tuple(out))


def _check_assumption3(st: DatasetStructure) -> Check:
    s = st.samples
    X, mask = s.X, s.mask
    count = ((X[:, :, None] == X[:, None, :]) & mask[:, None, :]).sum(-1)  # (N, L) multiplicity of x_l in X^(n)
    n_opt = st.optimal.sum(1)
    bad = mask & ~st.optimal & (count > n_opt[:, None]) & (n_opt > 0)[:, None]
    out = []
    for n in torch.nonzero(bad.any(1))[:, 0].tolist():
        l = int(torch.nonzero(bad[n])[0, 0])
        x = int(X[n, l])
        out.append(Violation(f"in {s.sample_text(n)!r} the non-optimal token {s.vocab[x]!r} occurs "
                             f"{int(count[n, l])} times but the optimal token only {int(n_opt[n])}",
                             samples=(n,), tokens=(x,)))
    return Check("assumption3", tuple(out))


def orthonormality_residual(E) -> float:
    """Assumption 2: max |E^T E - I| for token embeddings E (d, V) (columns x_i); 0 for orthonormal columns."""
    E = torch.as_tensor(E)
    return float((E.T @ E - torch.eye(E.shape[1], dtype=E.dtype, device=E.device)).abs().max())


# ---------------------------------------------------------------------------------------------- regeneration
#: bytes per (input, position, position) entry of :func:`regenerate_labels` (12 measured at M = 1, L = 4000): the int64
#: pair codes, the membership table of ``isin`` and the boolean tables
PAIR_TABLE_BYTES = 16


def regenerate_labels(structure: DatasetStructure, X: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Labels given by the collocation and the orders (Sec. 4.1, docs/paper-c-transformer.md#objects); -1 where the rule
    is undefined.

    [x] -> n(x); a longer input X with query q -> n(u) where u is the token of X that is >_q every other
    distinct token of X (u itself if X has one distinct token). Undefined when no such token exists (e.g.
    an unseen combination: where Theorem 3's generalization applies) or n(u) is undefined.

    Parameters
    ----------
    X : LongTensor (M, L) left-aligned input ids. mask : BoolTensor (M, L).
    """
    V = structure.samples.V
    X = torch.as_tensor(X, dtype=torch.long)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    M, L = X.shape
    check_memory({f"position-pair tables ({M:,} inputs x {L:,} x {L:,} positions)":
                  nbytes(M, L, L, itemsize=PAIR_TABLE_BYTES)}, "the orders' labels of the inputs",
                 hint="use shorter inputs")
    q = X.gather(1, (mask.sum(1) - 1)[:, None])  # (M, 1)
    pair = ((q[:, :, None] * V + X[:, :, None]) * V + X[:, None, :]).numpy()
    rel = structure.relations
    known = torch.as_tensor(np.isin(pair, ((rel[:, 0] * V + rel[:, 1]) * V + rel[:, 2]).numpy()))
    above_all = (known | (X[:, :, None] == X[:, None, :]) | ~mask[:, None, :]).all(-1) & mask  # (M, L)
    first = above_all.to(torch.int8).argmax(1)
    u = X.gather(1, first[:, None])[:, 0]
    unique = above_all.any(1) & ((X == u[:, None]) | ~above_all).all(1)
    n = structure.collocation.next_token
    return torch.where(unique, n[u], torch.full_like(u, -1))
