"""The optimum of the transformer paper (004, "Non-asymptotic convergence of training transformers for NTP";
docs/paper-c-transformer.md#objects).

* Max-margin solutions through :class:`~ntpbias.geometry.margins.program.MarginProgram` (one result type, one KKT
  certificate): W_ov* of eq. (2) (:func:`wov_star`, with the closed form e_{n(x)} - 1/|V| under Assumption 2,
  :func:`wov_star_closed_form`) and W_kq* of eq. (3) (:func:`wkq_star`; for non-orthonormal embeddings the
  constraint x_u^T W x_q uses LogitGaps' ``left`` factor E^T).
* Proposition 2's closed form (:func:`prop2_closed_form`), its validity condition (:func:`prop2_condition`:
  the transportation/Hall condition of docs/paper-c-transformer.md#objects — the proposition is false without it) and a
  side-by-side comparison with the QP (:func:`compare_prop2`).
* Every bound of Proposition 1, Lemmas 1, 6, 7, Corollary 1 and Theorems 1-3 is in
  :mod:`ntpbias.geometry.transformer.bounds`.
* The exact stage-1 dynamics under orthonormal embeddings and zero initialization (docs/paper-c-transformer.md#objects,
[DERIVED]):
  W_ov^(t) = t η₀ W_ov*/||W_ov*|| (:func:`stage1_exact`, :func:`stage1_exact_W`).

Token basis: with orthonormal E (d, |V|), A = E^T W_kq E has entry A[u, q] = x_u^T W_kq x_q (key u, query q).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import maximum_flow

from ...data.structure import NON_COMPARABLE, NON_OPTIMAL, OPTIMAL, DatasetStructure
from ...errors import DataError
from ..constraints import LogitGaps
from ..margins.program import KKT_TOL, MarginProgram, SVMResult


def _is_identity(E: torch.Tensor) -> bool:
    return E.shape[0] == E.shape[1] and torch.equal(E, torch.eye(E.shape[0], dtype=E.dtype, device=E.device))


# ---------------------------------------------------------------------------------------------- W_ov*
def wov_star(next_token: torch.Tensor, E: torch.Tensor, *, solver: str = "auto", tol: float = KKT_TOL,
             **options) -> SVMResult:
    """W_ov* = argmin ||W|| s.t. (e_{n(x)} - e_v)^T W x >= 1 for every x with n(x) defined and v ≠ n(x) (eq. 2).

    Parameters
    ----------
    next_token : LongTensor (|V|,) the collocation n, -1 where undefined (those tokens carry no constraint).
    E : (d, |V|) token embeddings. The variable W is (|V|, d).

    Returns
    -------
    SVMResult with its KKT certificate (``W``, ``dual_ineq``, ``certificate``, ``certified``).
    """
    tokens = torch.nonzero(next_token >= 0)[:, 0].to(E.device)
    if tokens.numel() == 0:
        raise DataError("the collocation is empty (no one-token sample): W_ov* has no constraint")
    V = E.shape[1]
    x = tokens.repeat_interleave(V)
    v = torch.arange(V, device=E.device).repeat(tokens.numel())
    n = next_token.to(E.device)[x]
    keep = v != n
    gaps = LogitGaps(E.T, V, n[keep], x[keep], v[keep], x[keep])
    return MarginProgram(gaps).solve(solver, tol=tol, **options)


def wov_star_closed_form(next_token: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """Σ_x (e_{n(x)} - 1/|V| 1) x^T over tokens with n(x) defined, (|V|, d): W_ov* under Assumption 2
    (docs/paper-c-transformer.md#objects).

    Its norm is sqrt(|V| - 1) when n is defined on all of V (sqrt(|V'|(|V| - 1)/|V|) on a subset V').
    """
    tokens = torch.nonzero(next_token >= 0)[:, 0].to(E.device)
    V = E.shape[1]
    cols = torch.nn.functional.one_hot(next_token.to(E.device)[tokens], V).to(E.dtype) - 1.0 / V  # (V', V)
    return cols.T @ E[:, tokens].T


# ---------------------------------------------------------------------------------------------- W_kq*
def wkq_star(structure: DatasetStructure, E: torch.Tensor, *, solver: str = "auto", tol: float = KKT_TOL,
             **options) -> SVMResult:
    """W_kq* = argmin ||W|| s.t. (x_{l*} - x_l)^T W x_q >= 1 for all n, l* ∈ l(n), l ∉ l(n) (eq. 3).

    The constraints are the distinct relations u >_q v of the dataset (positions holding the same token give
    the same constraint). With one-hot E the variable is the token-basis matrix itself; otherwise L = E^T W E
    through LogitGaps' ``left`` factor, so non-orthonormal embeddings are handled exactly. Data with confused
    tokens may be infeasible (:class:`~ntpbias.errors.NotSeparableError`).

    Parameters
    ----------
    structure : from :func:`~ntpbias.data.structure.analyze_structure`. E : (d, |V|).

    Returns
    -------
    SVMResult, ``W`` of shape (d, d).
    """
    rel = structure.relations.to(E.device)
    if rel.shape[0] == 0:
        raise DataError(f"{structure.samples.source}: no query has a relation (no input holds an optimal and a "
                        "non-optimal token), so W_kq* = 0 and there is no max-margin direction")
    q, u, v = rel.unbind(1)
    left = None if _is_identity(E) else E.T
    gaps = LogitGaps(E.T, E.shape[0], u, q, v, q, left)
    return MarginProgram(gaps).solve(solver, tol=tol, **options)


def token_basis(W_kq: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """A = E^T W_kq E, (|V|, |V|): A[u, q] = x_u^T W_kq x_q (key u, query q)."""
    return E.T @ W_kq @ E


def theorem3_masks(structure: DatasetStructure, device: torch.device | str = "cpu"
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The sets :func:`theorem3_gap` reads, on ``device``: masks (|V|, |V|) of O_q, M_q and N_q (token u, query q)
    and the indices of the queries that have all three (empty: the theorem says nothing)."""
    classes = structure.classes.to(device).T  # (token u, query q)
    opt, nc, non = (classes == c for c in (OPTIMAL, NON_COMPARABLE, NON_OPTIMAL))
    queries = torch.zeros(classes.shape[1], dtype=torch.bool, device=device)
    queries[list(structure.queries)] = True
    queries &= opt.any(0) & nc.any(0) & non.any(0)
    return opt, nc, non, queries.nonzero().flatten()


def theorem3_gap(A: torch.Tensor, structure: DatasetStructure,
                 masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Theorem 3's gaps (Sec. 6 of paper C): min over queries q with non-comparable tokens of
    min{(x_* - x_0)^T W x^q, (x_0 - x)^T W x^q} over x_* in O_q, x_0 in M_q, x in N_q.

    A : (B, |V|, |V|) scores in the token basis (:func:`token_basis`, A[u, q]) -> (B,); NaN where no query has an
    optimal, a non-comparable and a non-optimal token (the theorem then says nothing). ``masks``: the structure's
    :func:`theorem3_masks` on A's device, for a caller that evaluates the gap at every step (computed here if absent).

    >>> from ntpbias.data.sentences import example1
    >>> from ntpbias.data.structure import analyze_structure
    >>> st = analyze_structure(example1())
    >>> round(float(theorem3_gap(prop2_closed_form(st)[None], st)[0]), 4)  # query O: scores 2/3, 0, -1/3
    0.3333
    """
    opt, nc, non, queries = theorem3_masks(structure, A.device) if masks is None else masks
    if queries.numel() == 0:
        return torch.full(A.shape[:1], math.nan, dtype=A.dtype, device=A.device)

    def extreme(mask: torch.Tensor, largest: bool) -> torch.Tensor:  # (B, |V|) per query column
        fill = -math.inf if largest else math.inf
        masked = A.masked_fill(~mask[None], fill)
        return masked.amax(1) if largest else masked.amin(1)

    gap = torch.minimum(extreme(opt, False) - extreme(nc, True), extreme(nc, False) - extreme(non, True))
    return gap.index_select(1, queries).amin(1)


# ---------------------------------------------------------------------------------------------- Proposition 2
def prop2_closed_form(structure: DatasetStructure) -> torch.Tensor:
    """Proposition 2's W_kq* in the token basis, (|V|, |V|), column q:

    m/(k+m) on the k optimal tokens, -k/(k+m) on the m non-optimal tokens, 0 elsewhere (Sec. 6; App. D.1).
    It is the QP solution only where :func:`prop2_condition` holds (docs/paper-c-transformer.md#objects: the proposition
    is false in general). Requires Assumption 1.
    """
    structure.require("collocation", "realizable", "partial_orders", "no_confused")
    k, m = (c.to(torch.float64) for c in structure.k_and_m)
    total = (k + m).clamp(min=1)
    A = torch.where(structure.classes == OPTIMAL, (m / total)[:, None], 0.0)
    A = torch.where(structure.classes == NON_OPTIMAL, (-k / total)[:, None], A)
    return A.T  # classes is indexed [query, token]


def prop2_condition(structure: DatasetStructure) -> torch.Tensor:
    """(|V|,) bool: Proposition 2's closed form is the QP solution for query q (docs/paper-c-transformer.md#objects,
    [DERIVED]).

    The closed form meets every constraint with equality, so it is optimal iff KKT multipliers λ >= 0 on the
    edges u >_q v exist with Σ_v λ_uv = m/(k+m) at each optimal u and Σ_u λ_uv = k/(k+m) at each non-optimal v:
    a balanced transportation problem on the relation graph, feasible iff (Hall) |N(S)| k >= |S| m for every
    set S of optimal tokens. Decided exactly by an integer max-flow (supplies m, demands k). Queries without
    relations hold trivially (both columns are 0).
    """
    V = structure.samples.V
    rel = structure.relations.numpy()
    k_all, m_all = (c.numpy() for c in structure.k_and_m)
    ok = np.ones(V, dtype=bool)
    for q in np.unique(rel[:, 0]):  # one small flow problem per query
        edges = rel[rel[:, 0] == q]
        opt = np.unique(edges[:, 1])
        non = np.unique(edges[:, 2])
        k, m = int(k_all[q]), int(m_all[q])
        if len(opt) != k or len(non) != m:  # confused tokens: the proposition does not apply
            ok[q] = False
            continue
        src, sink = 0, 1 + k + m
        ui = 1 + np.searchsorted(opt, edges[:, 1])
        vi = 1 + k + np.searchsorted(non, edges[:, 2])
        rows = np.concatenate([np.full(k, src), ui, 1 + k + np.arange(m)])
        cols = np.concatenate([1 + np.arange(k), vi, np.full(m, sink)])
        caps = np.concatenate([np.full(k, m), np.full(len(edges), k * m), np.full(m, k)]).astype(np.int32)
        graph = sp.csr_matrix((caps, (rows, cols)), shape=(sink + 1, sink + 1))
        ok[q] = maximum_flow(graph, src, sink).flow_value == k * m
    return torch.as_tensor(ok)


@dataclass(frozen=True, eq=False)
class Prop2Comparison:
    """Proposition 2's closed form next to the QP solution, per query column (token basis).

    Attributes
    ----------
    closed_form, qp : Tensor (|V|, |V|), columns = queries.
    condition : BoolTensor (|V|,), :func:`prop2_condition`.
    max_abs_diff : Tensor (|V|,) per column.  agree : BoolTensor (|V|,), max_abs_diff <= atol.
    norm2_closed_form, norm2_qp : Tensor (|V|,) squared column norms.
    """

    closed_form: torch.Tensor
    qp: torch.Tensor
    condition: torch.Tensor
    max_abs_diff: torch.Tensor
    agree: torch.Tensor
    norm2_closed_form: torch.Tensor
    norm2_qp: torch.Tensor

    @property
    def consistent(self) -> bool:
        """The closed form agrees with the QP exactly where the condition predicts (a self-check)."""
        return bool((self.agree == self.condition).all())

    def to_dict(self, vocab) -> dict:
        """JSON-ready per-query comparison (only queries with a non-zero column)."""
        out = {}
        for q in torch.nonzero((self.closed_form != 0).any(0) | (self.qp.abs() > 1e-12).any(0))[:, 0].tolist():
            out[vocab[q]] = {
                "closed_form": dict(zip(vocab, self.closed_form[:, q].tolist(), strict=True)),
                "qp": dict(zip(vocab, self.qp[:, q].tolist(), strict=True)),
                "condition_holds": bool(self.condition[q]), "agree": bool(self.agree[q]),
                "max_abs_diff": float(self.max_abs_diff[q]),
                "norm2_closed_form": float(self.norm2_closed_form[q]), "norm2_qp": float(self.norm2_qp[q]),
            }
        return out


def compare_prop2(structure: DatasetStructure, qp: SVMResult | torch.Tensor, E: torch.Tensor, *,
                  atol: float = 1e-6) -> Prop2Comparison:
    """Compare :func:`prop2_closed_form` with the W_kq* QP solution ``qp`` (token basis of E, Assumption 2), or with
    any W_kq (d, d) given as a tensor (a wrong solution, for a negative control)."""
    closed = prop2_closed_form(structure).to(E.dtype)
    A = token_basis(qp if isinstance(qp, torch.Tensor) else qp.W, E).cpu()
    diff = (A - closed).abs().amax(0)
    return Prop2Comparison(closed_form=closed, qp=A, condition=prop2_condition(structure), max_abs_diff=diff,
                           agree=diff <= atol, norm2_closed_form=(closed ** 2).sum(0), norm2_qp=(A ** 2).sum(0))


# ---------------------------------------------------------------------------------------------- stage 1, exact
@dataclass(frozen=True)
class Stage1Exact:
    """Exact stage-1 trajectory of normalized GD from 0 under Assumption 2 (docs/paper-c-transformer.md#objects), arrays
    over t.

    Attributes
    ----------
    t : iterations. norm : ||W_ov^(t)|| = t η₀. margin : s_t = t η₀/||W_ov*|| (every logit gap; Lemma 3 and
    Corollary 1's equal margins hold exactly). loss_L0 : |V'| log(1 + (|V|-1) e^{-s_t}). loss_infimum :
    L* = log(1 + (|V|-1) e^{-s_t}), the infimum of the stage-2 loss with W_ov^(t) frozen. cos : 1 for t >= 1.
    """

    t: np.ndarray
    norm: np.ndarray
    margin: np.ndarray
    loss_L0: np.ndarray
    loss_infimum: np.ndarray
    cos: np.ndarray


def stage1_exact(t, *, eta0: float, V: int, n_tokens: int | None = None) -> Stage1Exact:
    """The exact stage-1 dynamics (docs/paper-c-transformer.md#objects): values of Algorithm 1's stage 1 at iterations
    ``t``.

    ``n_tokens`` = number of tokens with n(x) defined (default |V|).

    >>> s = stage1_exact(900, eta0=0.2 / 20 ** 0.5, V=20)
    >>> round(float(s.margin), 6), round(float(s.loss_L0), 7), round(float(s.loss_infimum), 8)
    (9.233805, 0.0370843, 0.00185422)
    """
    t = np.asarray(t, dtype=np.float64)
    n_tokens = V if n_tokens is None else n_tokens
    norm_star = np.sqrt(n_tokens * (V - 1) / V)
    margin = t * eta0 / norm_star
    infimum = np.log1p((V - 1) * np.exp(-margin))
    cos = np.where(t >= 1, 1.0, np.nan)
    return Stage1Exact(t=t, norm=t * eta0, margin=margin, loss_L0=n_tokens * infimum, loss_infimum=infimum, cos=cos)


def stage1_exact_W(t: int, *, eta0: float, next_token: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """W_ov^(t) = t η₀ W_ov*/||W_ov*|| (docs/paper-c-transformer.md#objects), (|V|, d), valid for orthonormal E and
    W_ov^(0) = 0."""
    W = wov_star_closed_form(next_token, E)
    return t * eta0 * W / torch.linalg.vector_norm(W)


def stage2_loss_infimum(margin, V: int):
    """L* = log(1 + (|V|-1) e^{-Δ}) = L_0(W_ov^(T))/|V|: the stage-2 loss infimum for equal margins Δ
    (docs/paper-c-transformer.md#objects)."""
    return np.log1p((V - 1) * np.exp(-np.asarray(margin, dtype=np.float64)))


@dataclass(frozen=True, eq=False)
class UnseenInputs:
    """Inputs absent from the training data with the next token Theorem 3 predicts.

    ids, mask : (M, L) left-aligned. expected : (M,). focus : (M,) the token x_0 (or u) whose n(.) is expected.
    kind : tuple of str per input.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    expected: torch.Tensor
    focus: torch.Tensor
    kind: tuple[str, ...]

    @property
    def M(self) -> int:
        return self.ids.shape[0]


KIND_NC = "x_0 + non-optimal"


KIND_OPT = "optimal + x_0"


def theorem3_inputs(structure: DatasetStructure, *, seed: int = 0) -> UnseenInputs:
    """Unseen inputs of check C-C8 (docs/paper-c-transformer.md) for every query q that is non-optimal under its own
    order and has non-comparable tokens M_q: [x_0, (0-2 random non-optimal tokens), q] -> n(x_0) for each x_0 in M_q,
    and [u, x_0, q] (random order of u and x_0) -> n(u) for each optimal u and x_0 in M_q. Inputs that occur in the
    training data are dropped."""
    s = structure.samples
    rng = np.random.default_rng(seed)
    n = structure.collocation.next_token.tolist()
    seen = {tuple(s.input_ids(i)) for i in range(s.N)}
    rows: list[tuple[list[int], int, int, str]] = []
    for q in structure.queries:  # a few hundred inputs at most: plain loops
        tc = structure.token_classes(q)
        if q not in tc.non_optimal or tc.confused:
            continue
        others = [v for v in tc.non_optimal if v != q]
        for x0 in tc.non_comparable:
            if n[x0] >= 0:
                k = int(rng.integers(0, min(2, len(others)) + 1))
                body = rng.permutation([x0, *rng.permutation(others)[:k].tolist()]).tolist()
                rows.append(([*body, q], n[x0], x0, KIND_NC))
            for u in tc.optimal:
                if n[u] >= 0:
                    rows.append(([*rng.permutation([u, x0]).tolist(), q], n[u], u, KIND_OPT))
    rows = [r for r in rows if tuple(r[0]) not in seen]
    if not rows:
        empty = torch.zeros(0, 1, dtype=torch.long)
        return UnseenInputs(empty, empty.bool(), empty[:, 0], empty[:, 0], ())
    L = max(len(r[0]) for r in rows)
    ids = torch.tensor([r[0] + [0] * (L - len(r[0])) for r in rows])
    mask = torch.tensor([[True] * len(r[0]) + [False] * (L - len(r[0])) for r in rows])
    return UnseenInputs(ids, mask, torch.tensor([r[1] for r in rows]), torch.tensor([r[2] for r in rows]),
                        tuple(r[3] for r in rows))
