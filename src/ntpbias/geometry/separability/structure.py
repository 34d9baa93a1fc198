"""NTP-separability, NTP_H-compatibility and dim F decided by structure: counting, the rank of H and the support graph
(docs/lm.md#decided-by-structure).

Paper A's objects of data (H, P) (eqs. (4)-(6)) often need no solver. With r = rank H, R = Σ_j (|S_j| - 1) equations
(4) and F = span{(e_z - e_z') h_j^T : z, z' ∈ S_j} (eq. (5)):

* **Counting.** Every generator of F has zero column sums and rows in the row space of H, so dim F <= (V - 1) r, and
  dim F <= R. When dim F = R the equations (4) are independent and every right-hand side is reachable: the data are
  NTP_H-compatible.
* **Full row rank** (r = m, so m <= d). Every logit matrix L is W H^T for W = L H^{+T}. The equations are independent
  (dim F = R, compatible), and the centred support matrix S̃ (in-support entries tied, each 1 above every
  out-of-support one) is reached by W_sep = S̃ H^{+T}: separable, with W_sep as the certificate.
* **The support graph.** Link tokens a, b when the contexts whose support holds both, J_ab = {j : a, b ∈ S_j}, have
  features spanning the row space of H (rank H[J_ab] = r). Every W in F^⊥ (eq. (6a): in-support logits tied) has
  (w_a - w_b)^T h_k = 0 for k ∈ J_ab, hence for every h in the row space: w_a - w_b ⊥ row(H), and along a path
  ℓ_{j,z} = ℓ_{j,v} for every context j and any two tokens z, v of one connected component. So a context whose support
  holds some but not all tokens of a component (**tied**: z ∈ S_j, v ∉ S_j in one component) is separated by no W in
  F^⊥, and the data are **not NTP-separable**. The certificate is explicit: with the path z = t_0, ..., t_k = v and
  h_j = H[J_e]^T c_e on each edge e = (t_i, t_{i+1}),

      (e_z - e_v) h_j^T = Σ_e Σ_{l ∈ J_e} c_{e,l} (e_{t_i} - e_{t_{i+1}}) h_l^T,

  a combination of generators of F: the Gordan alternative (A_in^T y + A_eq^T μ = 0 with y the one constraint
  (j, z, v)) of :mod:`~ntpbias.geometry.separability.verdict`, whose residual is recomputed and reported.
* **dim F.** With K components (isolated tokens count), F^⊥ ⊂ {W : w_a - w_b ⊥ row(H) within each component}, so
  dim F >= (V - K) r. The generators of F only join tokens that share a support, so with K' components of the
  co-support graph (a, b linked when some S_j holds both, whatever the features) F splits over them and
  dim F <= min(R, (V - K') r). When every co-support component is one component of the support graph (K = K'),
  **dim F = (V - K) r**; one component gives dim F = (V - 1) r and F^⊥ = {1 w^T} + {Z : Z H^T = 0}.
* **Dependent equations.** On an edge with more contexts than r, the features of J_ab have a left null vector c
  (c^T H[J_ab] = 0), so every W has Σ_l c_l (ℓ_{l,a} - ℓ_{l,b}) = 0, while compatibility needs the log-odds
  b_l = log(p̂_{l,a} / p̂_{l,b}) to satisfy the same: |c^T b| / ||c|| > 0 proves the data **not compatible**, and
  bounds the residual of eq. (4) of every W from below by |c^T b| / (√2 ||c||) (a pair equation is the difference of
  two anchor equations).

What structure leaves open is ``None`` (undecided), for an LP or the subspace solve to decide. The support graph is
built without any (V x V) pass over token pairs of features: the pair counts |J_ab| come from the sparse product
S^T S, a maximum spanning forest of the pairs with |J_ab| >= r is verified edge by edge (a batched rank test on at most
:data:`EDGE_ROWS` x r contexts of each edge), and failed edges are dropped and the forest rebuilt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse import csgraph

from ..._repr import short_repr
from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ..linear.subspace import COMPATIBILITY_TOL
from ..scaling import normalized

#: singular values of H (and of H[J_ab]) below this times the largest singular value of H count as zero
RANK_RTOL = 1e-9
#: an edge's rank test uses at most this many times r of its contexts (any r independent ones suffice)
EDGE_ROWS = 4
#: edges whose rank is tested in one batched SVD
EDGE_BATCH = 64
#: a structural certificate holds when its relative residual is at most this (the LP certificates' tolerance)
CERT_TOL = 1e-7


@short_repr
@dataclass(frozen=True, eq=False)
class SupportGraph:
    """The verified spanning forest of the support graph (module docstring).

    Attributes
    ----------
    components : (V,) int64 component label of every token (isolated tokens are their own component)
    edges : (E, 2) int64 the forest's verified edges (a, b)
    edge_contexts : list of E int64 arrays, contexts of J_ab whose features have rank r (the edge's evidence)
    tested : int, the edges whose rank was tested (verified or not)
    co_support_components : int, components of the co-support graph (tokens linked when a support holds both)
    """

    components: np.ndarray
    edges: np.ndarray
    edge_contexts: list
    tested: int
    co_support_components: int

    @property
    def n_components(self) -> int:
        return int(self.components.max()) + 1 if self.components.size else 0

    def _summary(self) -> dict:
        """What ``repr`` shows: components, edges and rank tests."""
        return {"components": self.n_components, "edges": len(self.edges), "tested": self.tested}


@short_repr
@dataclass(frozen=True, eq=False)
class Structure:
    """What counting, the rank of H and the support graph decide about data (H, P) (module docstring).

    Attributes
    ----------
    m, V, d, rank : sizes and r = rank H
    equations : R = Σ_j (|S_j| - 1), the rows of eq. (4)
    inequalities : Σ_j |S_j| (V - |S_j|), the in-support/out-of-support pairs of eq. (6b)
    nontrivial : contexts with an out-of-support token (|S_j| < V)
    graph : SupportGraph or None (not built when H has full row rank)
    tied : (m,) bool, contexts no W in F^⊥ separates (their support straddles a component)
    dim_F_bounds : (lower, upper) on dim F; equal when structure decides it
    separable, compatible : bool or None (None: structure does not decide)
    separability, compatibility : the certificates and the reason, as JSON-ready dicts
    """

    m: int
    V: int
    d: int
    rank: int
    equations: int
    inequalities: int
    nontrivial: int
    graph: SupportGraph | None
    tied: torch.Tensor
    dim_F_bounds: tuple[int, int]
    separable: bool | None
    compatible: bool | None
    separability: dict = field(default_factory=dict)
    compatibility: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def dim_F(self) -> int | None:
        """dim F when structure decides it, else None."""
        lo, hi = self.dim_F_bounds
        return lo if lo == hi else None

    def record(self) -> dict:
        """The JSON record (``analysis.json``, ``lm.structure``)."""
        g = self.graph
        return {"m": self.m, "V": self.V, "d": self.d, "rank_H": self.rank, "equations": self.equations,
                "rows_bound_(V-1)r": (self.V - 1) * self.rank, "inequalities": self.inequalities,
                "nontrivial_contexts": self.nontrivial, "tied_contexts": int(self.tied.sum()),
                "components": None if g is None else g.n_components,
                "co_support_components": None if g is None else g.co_support_components,
                "graph_edges": None if g is None else len(g.edges),
                "rank_tests": None if g is None else g.tested,
                "dim_F": self.dim_F, "dim_F_bounds": list(self.dim_F_bounds), "separable": self.separable,
                "compatible": self.compatible, "separability": self.separability,
                "compatibility": self.compatibility, "seconds": self.seconds}

    def _summary(self) -> dict:
        """What ``repr`` shows: the counts and the verdicts."""
        return {"m": self.m, "V": self.V, "rank": self.rank, "equations": self.equations,
                "dim_F_bounds": self.dim_F_bounds, "separable": self.separable, "compatible": self.compatible}


def ntp_structure(data: NTPData) -> Structure:
    """Decide what counting, rank H and the support graph decide about ``data`` (module docstring).

    Parameters
    ----------
    data : NTPData
        H (m, d) and P (m, V); taken at unit scale (:mod:`~ntpbias.geometry.scaling`: the verdicts are the same for
        every scale of H).

    Returns
    -------
    Structure
        The counts, the support graph, the tied contexts, dim F (or bounds) and the verdicts (``None`` where structure
        does not decide) with their certificates.

    Examples
    --------
    Three contexts in R^1 that all share the support {0, 1} and one that has {0}: the pair (0, 1) is an edge (its
    contexts span R^1), so the last context cannot put token 0 above token 1.

    >>> data = NTPData.from_arrays(torch.tensor([[1.0], [2.0], [-1.0], [3.0]]),
    ...                            [[0.5, 0.5, 0], [0.2, 0.8, 0], [0.6, 0.4, 0], [1.0, 0, 0]])
    >>> s = ntp_structure(data)
    >>> s.separable, s.tied.tolist(), s.dim_F_bounds, s.compatible
    (False, [False, False, False, True], (1, 1), False)
    """
    import time

    start = time.perf_counter()
    data64 = normalized(data.to(device="cpu", dtype=torch.float64))[0]
    H = data64.H
    m, V, d = data64.m, data64.V, data64.d
    S = data64.support
    sizes = S.sum(1)
    R = int((sizes - 1).sum())
    ineq = int((sizes * (V - sizes)).sum())
    nontrivial = int((sizes < V).sum())
    sigma = torch.linalg.svdvals(H)
    top = float(sigma[0]) if sigma.numel() else 0.0
    r = int((sigma > RANK_RTOL * top).sum()) if top > 0 else 0
    counts = dict(m=m, V=V, d=d, rank=r, equations=R, inequalities=ineq, nontrivial=nontrivial)
    if r == m:  # full row rank: every logit matrix is reachable
        sep = _full_rank_certificate(data64) if nontrivial else _trivial()
        return Structure(**counts, graph=None, tied=torch.zeros(m, dtype=torch.bool), dim_F_bounds=(R, R),
                         separable=sep["separable"], compatible=True, separability=sep,
                         compatibility={"reason": "H has full row rank: the equations (4) are independent (dim F = "
                                        "their number), so every log-odds right-hand side is reachable",
                                        "method": "structure"}, seconds=time.perf_counter() - start)
    S_sp = sp.csr_matrix(to_numpy(S).astype(np.float64))
    graph = support_graph(H, S_sp, r, top)
    K = graph.n_components
    size = np.bincount(graph.components, minlength=K)
    big = np.flatnonzero(size > 1)  # a token alone in its component ties nothing
    member = np.isin(graph.components, big)
    comp = sp.csr_matrix((np.ones(int(member.sum())), (np.flatnonzero(member),
                                                       np.searchsorted(big, graph.components[member]))),
                         shape=(V, len(big)))
    inside = (S_sp @ comp).toarray()  # (m, components with >= 2 tokens): support tokens in each
    tied_np = ((inside > 0) & (inside < size[big][None, :])).any(1)
    tied = torch.from_numpy(tied_np)
    lo, hi = min((V - K) * r, R), min(R, (V - graph.co_support_components) * r)
    if not nontrivial:
        sep = _trivial()
    elif tied_np.any():
        sep = _tied_certificate(H, S_sp, data64.pi, graph, tied_np)
    else:
        sep = {"separable": None, "method": "structure",
               "reason": f"undecided by structure: the support graph ({K} components) ties no context"}
    log_p = torch.log(torch.where(S, data64.P, torch.ones_like(data64.P)))
    tol = COMPATIBILITY_TOL * max(1.0, _anchor_log_odds_norm(S, log_p))
    if lo == R:
        compatibility = {"compatible": True, "method": "structure",
                         "reason": f"dim F >= (V - K) r = {(V - K) * r} >= the {R} equations (4): they are "
                                   "independent, so every log-odds right-hand side is reachable"}
    else:
        compatibility = _dependency_certificate(H, S_sp, log_p, graph, r, tol)
    return Structure(**counts, graph=graph, tied=tied, dim_F_bounds=(lo, hi), separable=sep.pop("separable"),
                     compatible=compatibility.pop("compatible"), separability=sep, compatibility=compatibility,
                     seconds=time.perf_counter() - start)


def _trivial() -> dict:
    return {"separable": False, "method": "trivial", "reason": "every context has full support: no out-of-support "
            "token needs to be separated"}


def _anchor_log_odds_norm(S: torch.Tensor, log_p: torch.Tensor) -> float:
    """||b|| of the anchor-form equations (4) (anchor = first in-support token, as in
    :func:`~ntpbias.geometry.constraints.constraints`), without building them."""
    anchor = torch.argmax(S.to(torch.int8), dim=1)
    b = (log_p.gather(1, anchor[:, None]) - log_p) * S
    return float(torch.linalg.vector_norm(b))


def _full_rank_certificate(data: NTPData) -> dict:
    """Separable: W_sep = S̃ H^{+T} realises the centred support matrix (gap exactly 1); its defect is checked."""
    H, S = data.H, data.support
    St = (S.T.to(H.dtype) - S.T.to(H.dtype).mean(0, keepdim=True))  # (V, m)
    W = torch.linalg.lstsq(H, St.mT).solution.mT  # (V, d): W H^T = S̃ (H has full row rank)
    L = W @ H.mT
    inf = torch.tensor(float("inf"), dtype=L.dtype)
    lowest_in = torch.where(S.T, L, inf).amin(0)
    highest_in = torch.where(S.T, L, -inf).amax(0)
    highest_out = torch.where(S.T, -inf, L).amax(0)
    gap = float((lowest_in - highest_out)[S.sum(1) < data.V].min())
    spread = float((highest_in - lowest_in).max())
    residual = max(1.0 - gap, spread, 0.0)
    return {"separable": True, "method": "structure", "certified": residual <= CERT_TOL, "residual": residual,
            "norm_W_separating": float(torch.linalg.vector_norm(W)),
            "reason": "H has full row rank (m <= d): W = S̃ H^{+T} puts every in-support logit exactly 1 above every "
                      "out-of-support one, with in-support logits tied"}


def support_graph(H: torch.Tensor, S: sp.csr_matrix, r: int, top: float) -> SupportGraph:
    """The verified spanning forest of the support graph (module docstring) of features H (m, d) of rank r (largest
    singular value ``top``) and supports S (m, V) (0/1 CSR)."""
    V = S.shape[1]
    pairs = sp.triu(S.T @ S, k=1).tocoo()  # |J_ab| for a < b
    co_support = csgraph.connected_components(pairs, directed=False)[0]
    keep = pairs.data >= max(r, 1)
    a, b, w = pairs.row[keep], pairs.col[keep], pairs.data[keep]
    Sc = S.tocsc()
    tested = 0
    alive = np.ones(len(a), dtype=bool)
    known: dict[tuple[int, int], np.ndarray] = {}
    position = {(int(x), int(y)): i for i, (x, y) in enumerate(zip(a, b, strict=True))}
    heaviest = float(w.max()) if w.size else 0.0
    while True:
        # a maximum spanning forest of the candidate pairs still alive (weights: more shared contexts first)
        idx = np.flatnonzero(alive)
        g = sp.coo_matrix((heaviest + 1 - w[idx], (a[idx], b[idx])), shape=(V, V))
        forest = csgraph.minimum_spanning_tree(g.tocsr()).tocoo()
        todo = [(min(int(x), int(y)), max(int(x), int(y))) for x, y in zip(forest.row, forest.col, strict=True)]
        todo = [e for e in todo if e not in known]
        if not todo:
            break
        ok, evidence = _verify_edges(H, Sc, todo, r, top)
        tested += len(todo)
        for key, good, ev in zip(todo, ok, evidence, strict=True):
            if good:
                known[key] = ev
            else:
                alive[position[key]] = False
    edges = np.array(sorted(known), dtype=np.int64).reshape(-1, 2)
    adj = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(V, V))
    _, labels = csgraph.connected_components(adj, directed=False)
    return SupportGraph(labels.astype(np.int64), edges, [known[tuple(e)] for e in edges.tolist()], tested,
                        int(co_support))


def _verify_edges(H: torch.Tensor, Sc: sp.csc_matrix, todo: list[tuple[int, int]], r: int, top: float
                  ) -> tuple[list[bool], list[np.ndarray]]:
    """Rank tests of edges (a, b): is rank H[J_ab] = r? First on the first ``EDGE_ROWS * r`` contexts of J_ab (a
    batched SVD of zero-padded blocks: zero rows change no rank), then on all of J_ab where that fails."""
    n = EDGE_ROWS * max(r, 1)
    ab = np.array(todo, dtype=np.int64)
    both = Sc[:, ab[:, 0]].multiply(Sc[:, ab[:, 1]]).tocsc()  # (m, E): column e = indicator of J_e
    both.sort_indices()
    contexts = [both.indices[both.indptr[e]:both.indptr[e + 1]] for e in range(len(todo))]
    ok, evidence = [False] * len(todo), [np.zeros(0, dtype=np.int64)] * len(todo)
    for start in range(0, len(todo), EDGE_BATCH):
        block = range(start, min(start + EDGE_BATCH, len(todo)))
        X = H.new_zeros(len(block), n, H.shape[1])
        for i, e in enumerate(block):  # loop over edges (at most V - 1 per forest), not over contexts
            J = contexts[e][:n]
            X[i, :len(J)] = H[torch.from_numpy(J)]
        sv = torch.linalg.svdvals(X)
        full = (sv > RANK_RTOL * top).sum(-1) >= r
        for i, e in enumerate(block):
            J = contexts[e]
            if bool(full[i]):
                ok[e], evidence[e] = True, J[:n]
            elif len(J) > n:  # the first contexts were dependent: test them all
                rank = int((torch.linalg.svdvals(H[torch.from_numpy(J)]) > RANK_RTOL * top).sum())
                ok[e], evidence[e] = rank >= r, J
    return ok, evidence


def _forest_path(graph: SupportGraph, z: int, v: int) -> list[int]:
    """The tokens of the forest path from z to v (same component)."""
    V = graph.components.size
    e = graph.edges
    adj = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(V, V)).tocsr()
    _, pred = csgraph.breadth_first_order(adj, z, directed=False, return_predecessors=True)
    path = [v]
    while path[-1] != z:
        path.append(int(pred[path[-1]]))
    return path[::-1]


def _tied_certificate(H: torch.Tensor, S: sp.csr_matrix, pi: torch.Tensor, graph: SupportGraph,
                      tied: np.ndarray) -> dict:
    """Not separable: the Gordan certificate of the most frequent tied context (module docstring), its residual
    recomputed."""
    j = int(np.flatnonzero(tied)[np.argmax(to_numpy(pi)[tied])])
    row = np.zeros(S.shape[1], dtype=bool)
    row[S.indices[S.indptr[j]:S.indptr[j + 1]]] = True
    comp = graph.components
    straddled = [c for c in np.unique(comp[row]) if not row[comp == c].all()]
    c = straddled[0]
    z = int(np.flatnonzero(row & (comp == c))[0])
    v = int(np.flatnonzero(~row & (comp == c))[0])
    path = _forest_path(graph, z, v)
    index = {tuple(e): i for i, e in enumerate(graph.edges.tolist())}
    h = H[j]
    resid = H.new_zeros(len(path), H.shape[1])  # row i: the residual's row on token path[i]
    coef = 0.0
    for i, (x, y) in enumerate(zip(path[:-1], path[1:], strict=True)):  # loop over the path's edges
        J = torch.from_numpy(graph.edge_contexts[index[(min(x, y), max(x, y))]])
        cvec = torch.linalg.lstsq(H[J].mT, h[:, None]).solution[:, 0]
        r_e = h - H[J].mT @ cvec
        resid[i] += r_e
        resid[i + 1] -= r_e
        coef += float(cvec.abs().sum())
    residual = float(torch.linalg.vector_norm(resid)) / (math.sqrt(2) * max(float(torch.linalg.vector_norm(h)),
                                                                            1e-300))
    n_tied = int(tied.sum())
    return {"separable": False, "method": "structure", "certified": residual <= CERT_TOL, "residual": residual,
            "context": j, "tokens": [z, v], "path": path, "multiplier_l1": coef, "tied_contexts": n_tied,
            "reason": f"the support graph ties {n_tied} context(s): context {j} has token {z} in its support and "
                      f"{v} out of it, linked by a path of {len(path) - 1} pair(s) whose contexts' features span the "
                      "row space of H, so every W with tied in-support logits gives both the same logit (Gordan "
                      f"certificate from the path, relative residual {residual:.1e})"}


def _dependency_certificate(H: torch.Tensor, S: sp.csr_matrix, log_p: torch.Tensor, graph: SupportGraph, r: int,
                            tol: float) -> dict:
    """Not compatible when some edge's contexts (more than r) have a left null vector c with c^T b != 0 (module
    docstring); the strongest such certificate over the forest's edges, else undecided."""
    best = {"value": 0.0}
    for (a, b), J in zip(graph.edges.tolist(), graph.edge_contexts, strict=True):  # loop over edges (<= V - 1)
        if len(J) <= r:
            continue
        Jt = torch.from_numpy(J)
        U, s, _ = torch.linalg.svd(H[Jt], full_matrices=True)
        N = U[:, r:]  # left null space of H[J] (|J| - r columns)
        rhs = log_p[Jt, a] - log_p[Jt, b]
        proj = N.mT @ rhs
        value = float(torch.linalg.vector_norm(proj))
        if value > best["value"]:
            c = N @ proj / value
            best = {"value": value, "pair": [a, b], "contexts": len(J),
                    "null_residual": float(torch.linalg.vector_norm(c @ H[Jt]))}
    bound = best["value"] / math.sqrt(2)
    if bound > tol:
        return {"compatible": False, "method": "structure", "residual_lower_bound": bound, **best,
                "reason": f"the {best['contexts']} contexts sharing tokens {best['pair'][0]} and {best['pair'][1]} "
                          f"have dependent features (rank {r}) whose log-odds break the dependency: every W misses eq. "
                          f"(4) by at least {bound:.3g} (a left null vector c of their features with "
                          f"|c^T log-odds| = {best['value']:.3g})"}
    return {"compatible": None, "method": "structure", "residual_lower_bound": bound,
            "reason": "undecided by structure: no dependency among shared-pair contexts contradicts the log-odds"}


__all__ = ["CERT_TOL", "EDGE_ROWS", "RANK_RTOL", "Structure", "SupportGraph", "ntp_structure", "support_graph"]
