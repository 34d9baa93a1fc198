"""Stage 2 of paper B: token selection and the max-margin problem (12).

Token selection S_X(p) (eq. (10)): :func:`token_selection`; the max-margin problem (12) for a given selection, selected
tokens tied by equalities, through :class:`~ntpbias.geometry.margins.program.MarginProgram`:
:func:`max_margin_selection` -> :class:`SelectionSVM`; Lemma 4.5's important-only SVM: :func:`important_svm`; Theorem
4.3's checks on a trained p: :func:`directional_convergence`, :func:`important_selection`; the Lemma 4.4 corollary (one
irrelevant token): :func:`one_irrelevant_limit`, and a selection it leaves open (:func:`partial_tie`); Lemma 4.5's
gap condition: :func:`lemma45_gap`, and its heuristic (:func:`lemma45_heuristic`); the loss floor of a selection:
:func:`selection_loss_floor`. Tensors as in :mod:`ntpbias.geometry.attention.stage_one`: ``E: (|S|, d)``,
``p: (d,)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...data.tokens import TokenSequences, relevant_tokens, token_statistics
from ...errors import DataError, NotSeparableError
from ..constraints import LogitGaps
from ..margins.program import KKT_TOL, MarginProgram, SVMResult
from .stage_one import _check


def token_selection(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *, tol: float = 0.0) -> torch.Tensor:
    """S_X(p) of eq. (10) as a position mask (n, T): real positions whose score p^T E_{x_i} is maximal in X.

    With ``tol > 0``, positions whose normalized gap (max_j a_j - a_i)/||p|| is at most ``tol`` count as tied
    (docs/paper-b-attention.md#theory-checks: at finite ||p|| true ties leave gaps O(1/||p||), non-selected gaps stay
    bounded away from 0). Repeated tokens share their score, so the mask selects token identities.
    """
    ds = _check(E, ds)
    a = (E @ p)[ds.X].masked_fill(~ds.mask, -math.inf)
    gap = a.amax(1, keepdim=True) - a
    return (gap <= tol * torch.linalg.vector_norm(p)) & ds.mask


@dataclass(frozen=True, eq=False)
class SelectionSVM:
    """The max-margin problem (12) for one selection, solved (or found infeasible), with its certificate.

    Attributes
    ----------
    status : "optimal" | "inaccurate" (solved, certificate above tolerance) | "infeasible" | "degenerate"
        ("degenerate": every sequence selects all its tokens, so there is no inequality and p̂ = 0, Lemma 4.4).
    message : one line saying why, for the last two.
    p_hat : (d,) the solution, or None.
    result : the :class:`~ntpbias.geometry.margins.program.SVMResult` (KKT certificate), or None.
    n_ineq, n_eq : number of distinct inequality rows p^T(E_s - E_s') >= 1 and tie rows p^T(E_s - E_s0) = 0.
    """

    status: str
    message: str
    p_hat: torch.Tensor | None
    result: SVMResult | None
    n_ineq: int
    n_eq: int

    @property
    def feasible(self) -> bool:
        return self.p_hat is not None

    @property
    def certified(self) -> bool:
        return self.result is not None and self.result.certified

    @property
    def norm(self) -> float:
        """||p̂|| (inf when there is no solution)."""
        return float(torch.linalg.vector_norm(self.p_hat)) if self.feasible else math.inf

    @property
    def direction(self) -> torch.Tensor | None:
        """p_* = p̂/||p̂||, or None."""
        return self.p_hat / self.norm if self.feasible else None

    @property
    def margin(self) -> float:
        """The maximal normalized margin 1/||p̂|| (0 when there is no solution)."""
        return 1.0 / self.norm


def _selection_rows(E: torch.Tensor, ds: TokenSequences, selected: torch.Tensor):
    """Reduced rows of (12): anchor s0_X = first selected token of X; ineq (s0_X, s') for s' ∈ X unselected,
    eq (s, s0_X) for the other selected s. Given the ties, these are equivalent to all (s, s') pairs of (12).

    Returns (ineq LogitGaps, eq LogitGaps, clash) where ``clash`` is a message when one token is both selected
    and unselected in a sequence (then (12) is infeasible: p^T(E_s - E_s) = 0 < 1).
    """
    selected = selected.to(ds.mask.device)
    if selected.shape != ds.X.shape:
        raise DataError(f"the selection has shape {tuple(selected.shape)}; it must be a (n, T) = {tuple(ds.X.shape)} "
                        f"boolean mask over positions")
    sel = selected.bool() & ds.mask
    empty = ~sel.any(1)
    if bool(empty.any()):
        raise DataError(f"the selection picks no token of sequence {int(torch.nonzero(empty)[0])}; S_X(p) is never "
                        f"empty (eq. (10))")
    anchor = ds.X.gather(1, sel.to(torch.int8).argmax(1, keepdim=True)).expand_as(ds.X)  # (n, T)
    S = E.shape[0]
    rest = ds.mask & ~sel
    ij, ik = anchor[rest], ds.X[rest]
    clash = None
    if bool((ij == ik).any()):
        k = int(torch.nonzero(rest & (anchor == ds.X))[0, 0])
        clash = f"sequence {k} has token {int(anchor[k, 0])} both selected and not selected"
    tie = sel & (ds.X != anchor)
    ej, ek = ds.X[tie], anchor[tie]

    def gaps(j, k):
        key = torch.unique(j * S + k)
        j, k = key // S, key % S
        zeros = torch.zeros_like(j)
        return LogitGaps(E, 1, zeros, j, zeros, k)

    return gaps(ij, ik), gaps(ej, ek), clash


def max_margin_selection(E: torch.Tensor, ds: TokenSequences, selected: torch.Tensor, *, solver: str = "auto",
                         tol: float = KKT_TOL) -> SelectionSVM:
    """Solve (12) for the selection ``selected`` (n, T): min ||p|| s.t. p^T(E_s - E_s') >= 1 for s selected and
    s' not selected in the same X, with the selected tokens of each X tied (p^T(E_s - E_s0) = 0,
    docs/paper-b-attention.md#decisions).

    Solved by :class:`~ntpbias.geometry.margins.program.MarginProgram` on the variable p as a (1, d) matrix with
    H = E (|S|, d) (logit rows a = b = 0, columns j = s, k = s'). When |S| < d the solution lies in the row
    space of E, so the same program is solved exactly in coordinates c of an orthonormal basis Q of it
    (p = Q c, H = E Q, ||p|| = ||c||); the certificate ``result.certificate`` then refers to c. An infeasible
    selection is reported as ``status="infeasible"``, never raised.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.tokens import TokenSequences
    >>> ds = TokenSequences.from_lists([[0, 2], [1, 2]], [1, -1])
    >>> E = torch.eye(3, dtype=torch.float64)
    >>> res = max_margin_selection(E, ds, ds.X != 2)
    >>> res.status, [round(x, 6) for x in res.p_hat.tolist()]
    ('optimal', [0.333333, 0.333333, -0.666667])
    """
    ds = _check(E, ds)
    basis = None
    if E.shape[0] < E.shape[1]:  # |S| < d: solve for c in p = Q c, Q an orthonormal basis of E's row space
        basis, R = torch.linalg.qr(E.T)
        H = R.T  # = E Q, (|S|, |S|)
    else:
        H = E
    ineq, eq, clash = _selection_rows(H, ds, selected)
    counts = {"n_ineq": len(ineq), "n_eq": len(eq)}
    if clash is not None:
        return SelectionSVM("infeasible", f"(12) is infeasible: {clash}", None, None, **counts)
    if len(ineq) == 0:
        return SelectionSVM("degenerate", "the selection ties every token of every sequence: (12) has no "
                            "inequality and its solution is p = 0 (no direction; cf. Lemma 4.4)", None, None, **counts)
    try:
        res = MarginProgram(ineq, eq if len(eq) else None).solve(solver, tol=tol)
    except NotSeparableError:
        return SelectionSVM("infeasible", "(12) is infeasible for this selection: no p keeps the selected tokens "
                            "tied and above the others by a positive margin in every sequence", None, None, **counts)
    p_hat = res.W.reshape(-1) if basis is None else basis @ res.W.reshape(-1)
    return SelectionSVM(res.status, "", p_hat, res, **counts)


def important_svm(E: torch.Tensor, ds: TokenSequences, *, relevant: torch.Tensor | None = None, solver: str = "auto",
                  tol: float = KKT_TOL) -> SelectionSVM:
    """Lemma 4.5's p̂ = argmin ||p|| s.t. p^T(E_{s*_X} - E_s) >= 1 for every s ∈ X \\ {s*_X}, every X.

    ``relevant`` (n,) defaults to s*_X of Assumption 1 (:func:`~ntpbias.data.tokens.relevant_tokens`).
    """
    ds = _check(E, ds)
    s_star = relevant_tokens(ds) if relevant is None else relevant.to(ds.X.device)
    return max_margin_selection(E, ds, (ds.X == s_star[:, None]) & ds.mask, solver=solver, tol=tol)


def one_irrelevant_limit(E: torch.Tensor, ds: TokenSequences, *, solver: str = "auto",
                         tol: float = KKT_TOL) -> SelectionSVM:
    """The limit direction the text after Lemma 4.4 predicts when the vocabulary has exactly one irrelevant token:
    p̂/||p̂|| of :func:`important_svm` (only s*_X selected).

    Under Assumption 1 a limit p_∞ selects s*_X in every X (Theorem 4.3) and, by Lemma 4.4, cannot tie it with
    the irrelevant token in every sequence. That does not leave {s*_X} alone: a selection that ties the irrelevant
    token with s*_X in only some sequences can be realised by (12) and be its own max-margin direction
    (:func:`partial_tie`; docs/paper-b-attention.md#errata, erratum B-E9), so the text's conclusion needs Lemma 4.5's
    gap condition (:func:`lemma45_gap`). DataError when the data do not have exactly one irrelevant token or violate
    Assumption 1.
    """
    ds = _check(E, ds)
    stats = token_statistics(ds)
    n_irr = int(stats.irrelevant.sum())
    if n_irr != 1:
        raise DataError(f"the Lemma 4.4 case needs exactly one irrelevant token in the data; found {n_irr}")
    return important_svm(E, ds, relevant=relevant_tokens(ds, stats), solver=solver, tol=tol)


def _normalized_gaps(p: torch.Tensor, rows: LogitGaps) -> torch.Tensor:
    norm = torch.linalg.vector_norm(p)
    return rows.apply(p.reshape(1, -1)) / norm


@dataclass(frozen=True, eq=False)
class DirectionalConvergence:
    """Theorem 4.3 item 2 at a (trained) p: is p/||p|| the max-margin direction p_*(p) of its own selection?

    Attributes
    ----------
    selected : (n, T) S_X(p).  svm : (12) for that selection.
    cosine : cos(p, p̂) (NaN without a solution).
    normalized_margin : min over (12)'s inequality rows of p^T(E_s - E_s')/||p||, compare with
        ``max_margin`` = 1/||p̂||, the largest value any direction achieves.
    tie_spread : max over tie rows of |p^T(E_s - E_s0)|/||p|| (0 for single selections).
    """

    selected: torch.Tensor
    svm: SelectionSVM
    cosine: float
    normalized_margin: float
    max_margin: float
    tie_spread: float


def directional_convergence(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *, tol: float = 0.0,
                            solver: str = "auto") -> DirectionalConvergence:
    """Compare a trained p with the solution of (12) for its own selection S_X(p) (``tol`` as in
    :func:`token_selection`)."""
    ds = _check(E, ds)
    sel = token_selection(E, p, ds, tol=tol)
    ineq, eq, _ = _selection_rows(E, ds, sel)
    svm = max_margin_selection(E, ds, sel, solver=solver)
    norm = torch.linalg.vector_norm(p)
    cos = float(p @ svm.p_hat / (norm * svm.norm)) if svm.feasible else math.nan
    margin = float(_normalized_gaps(p, ineq).min()) if len(ineq) else math.nan
    spread = float(_normalized_gaps(p, eq).abs().max()) if len(eq) else 0.0
    return DirectionalConvergence(selected=sel, svm=svm, cosine=cos, normalized_margin=margin,
                                  max_margin=svm.margin if svm.feasible else math.nan, tie_spread=spread)


@dataclass(frozen=True, eq=False)
class ImportantSelection:
    """Theorem 4.3 item 1 at a (trained) p, per sequence (the stronger form that Lemma C.2 proves,
    docs/paper-b-attention.md#decisions).

    Attributes
    ----------
    relevant : (n,) s*_X.  selected : (n, T) S_X(p).
    relevant_selected : (n,) bool, s*_X ∈ S_X(p).
    only_relevant : (n,) bool, S_X(p) = {s*_X} (what Lemma 4.5 adds).
    covers_important : bool, S_c ⊆ ∪_X S_X(p) (the theorem's statement).
    """

    relevant: torch.Tensor
    selected: torch.Tensor
    relevant_selected: torch.Tensor
    only_relevant: torch.Tensor
    covers_important: bool

    @property
    def all_relevant_selected(self) -> bool:
        return bool(self.relevant_selected.all())

    @property
    def all_only_relevant(self) -> bool:
        return bool(self.only_relevant.all())


def important_selection(E: torch.Tensor, p: torch.Tensor, ds: TokenSequences, *,
                        tol: float = 0.0) -> ImportantSelection:
    """Does p select the completely positive/negative token of every sequence (Assumption-1 data)?"""
    ds = _check(E, ds)
    stats = token_statistics(ds)
    s_star = relevant_tokens(ds, stats)
    sel = token_selection(E, p, ds, tol=tol)
    is_star = (ds.X == s_star[:, None]) & ds.mask
    ever = torch.zeros(E.shape[0], dtype=torch.bool, device=E.device)
    ever[ds.X[sel]] = True
    important = stats.important.to(E.device)
    return ImportantSelection(relevant=s_star, selected=sel, relevant_selected=(sel & is_star).any(1),
                              only_relevant=(sel == is_star).all(1),
                              covers_important=bool((ever[:important.shape[0]] | ~important).all()))


def selection_loss_floor(E: torch.Tensor, v: torch.Tensor, ds: TokenSequences, *,
                         relevant: torch.Tensor | None = None) -> float:
    """Ê log(1 + exp(-γ_{s*})), γ_{s*} = y E_{s*_X}^T v: the loss once all attention sits on s*_X
    (docs/paper-b-attention.md#theory-checks)."""
    ds = _check(E, ds)
    s_star = relevant_tokens(ds) if relevant is None else relevant.to(ds.X.device)
    return float(torch.nn.functional.softplus(-ds.y * (E @ v)[s_star]).mean())


@dataclass(frozen=True, eq=False)
class GapCondition:
    """Lemma 4.5's margin-gap condition, as corrected (docs/paper-b-attention.md#decisions): ||p̂|| <= (1 - μ) ||p̂'||
    with μ > 0, where p̂ is the important-only SVM and p̂' solves (12) for a selection that also ties one irrelevant
    token u with s*_X in one sequence X.

    Attributes
    ----------
    norm : ||p̂||.  alternatives : (A, 2) LongTensor of (sequence index, token u).
    alternative_norms : (A,) ||p̂'|| (inf where that (12) is infeasible).
    sampled_norms : (S,) ||p̂'|| of random selections that add any set of irrelevant tokens to any sequences.
    n_possible : the number of alternative selections of the lemma (every non-empty choice of irrelevant tokens
        per sequence), as a float (it is astronomically large beyond toy sizes).
    nearest : the one-token alternative with the smallest ||p̂'|| (the competitor with the largest margin), solved;
        None when every one-token alternative is infeasible.
    """

    norm: float
    alternatives: torch.Tensor
    alternative_norms: torch.Tensor
    sampled_norms: torch.Tensor
    n_possible: float
    nearest: SelectionSVM | None = None

    @property
    def n_checked(self) -> int:
        return len(self.alternative_norms) + len(self.sampled_norms)

    @property
    def ratio(self) -> float:
        """max ||p̂|| / ||p̂'|| over the alternatives (one-token and sampled)."""
        return float((self.norm / torch.cat([self.alternative_norms, self.sampled_norms])).max())

    @property
    def mu(self) -> float:
        return 1.0 - self.ratio

    @property
    def n_infeasible(self) -> int:
        return int(torch.isinf(torch.cat([self.alternative_norms, self.sampled_norms])).sum())


def lemma45_gap(E: torch.Tensor, ds: TokenSequences, *, solver: str = "auto", tol: float = KKT_TOL,
                samples: int = 0, seed: int = 0) -> GapCondition:
    """Solve (12) for every alternative selection {s*_X, u} (one sequence X, one irrelevant u ∈ X; all other
    sequences select s* only), and for ``samples`` random selections that add a random non-empty set of irrelevant
    tokens to a random non-empty set of sequences, and compare norms with the important-only SVM (Lemma 4.5 of
    paper B; its set of alternatives is too large to enumerate beyond toy sizes).

    One QP per alternative (a loop over programs). DataError on data violating Assumption 1; an infeasible
    alternative is kept with norm inf (it cannot be a limit direction).
    """
    ds = _check(E, ds)
    s_star = relevant_tokens(ds)
    base = (ds.X == s_star[:, None]) & ds.mask
    ref = max_margin_selection(E, ds, base, solver=solver, tol=tol)
    if not ref.feasible:
        raise NotSeparableError(f"Lemma 4.5's important-only SVM has no solution: {ref.message}")
    cand = ds.mask & ~base
    key = torch.unique(torch.nonzero(cand)[:, 0] * E.shape[0] + ds.X[cand])
    alts = torch.stack([key // E.shape[0], key % E.shape[0]], 1)
    norms = torch.empty(alts.shape[0], dtype=E.dtype)
    nearest = None
    for idx, (k, u) in enumerate(alts.tolist()):
        sel = base.clone()
        sel[k] |= ds.X[k] == u
        alt = max_margin_selection(E, ds, sel, solver=solver, tol=tol)
        norms[idx] = alt.norm
        if alt.feasible and (nearest is None or alt.norm < nearest.norm):
            nearest = alt
    per_sequence = torch.bincount(alts[:, 0], minlength=ds.n).double()  # distinct irrelevant tokens per sequence
    n_possible = float(torch.exp2(per_sequence).prod()) - 1.0
    gen = torch.Generator().manual_seed(seed)
    sampled = torch.empty(samples, dtype=E.dtype)
    for idx in range(samples):
        chosen = alts[torch.rand(alts.shape[0], generator=gen) < 0.25]
        if not len(chosen):
            chosen = alts[torch.randint(alts.shape[0], (1,), generator=gen)]
        add = torch.zeros(ds.n, E.shape[0], dtype=torch.bool)
        add[chosen[:, 0], chosen[:, 1]] = True  # (sequence, token) pairs that join the selection
        sel = base | (add.gather(1, ds.X.cpu()).to(base.device) & ds.mask)
        sampled[idx] = max_margin_selection(E, ds, sel, solver=solver, tol=tol).norm
    return GapCondition(norm=ref.norm, alternatives=alts, alternative_norms=norms, sampled_norms=sampled,
                        n_possible=n_possible, nearest=nearest)


@dataclass(frozen=True, eq=False)
class PartialTie:
    """A selection that ties an irrelevant token u with s*_X in some sequences only, solved by (12) and tested for
    self-consistency (docs/paper-b-attention.md#errata, erratum B-E9).

    Attributes
    ----------
    selected : (n, T) the selection: s*_X in every X, plus u in the sequences ``tied``.
    tied : (n,) bool, the sequences where u is tied with s*_X.
    svm : (12) for that selection (``svm.p_hat`` is p̂').
    own : :class:`DirectionalConvergence` of p̂' (its own selection at tolerance ``tol``, and (12) solved for it).
    important : (12) for the important-only selection (Lemma 4.5's p̂).
    """

    selected: torch.Tensor
    tied: torch.Tensor
    svm: SelectionSVM
    own: DirectionalConvergence | None
    important: SelectionSVM

    @property
    def self_consistent(self) -> bool:
        """p̂' is feasible, selects exactly this selection and is the max-margin direction of it (Thm 4.3 item 2's
        fixed point p = p_*(p)), and selects s*_X in every X (item 1)."""
        return (self.own is not None and bool(torch.equal(self.own.selected, self.selected))
                and self.own.cosine > 1 - 1e-6)


def partial_tie(E: torch.Tensor, ds: TokenSequences, tied: torch.Tensor, *, token: int | None = None,
                solver: str = "auto", tol: float = 1e-6) -> PartialTie:
    """Solve (12) for the selection that ties the irrelevant token ``token`` (default: the only irrelevant token)
    with s*_X in the sequences ``tied`` (n,) bool, and s*_X alone elsewhere; then read p̂'s own selection with the
    normalized tie tolerance ``tol`` (:func:`token_selection`) and solve (12) for it.

    With one irrelevant token, ``tied`` = "s*_X is token 0" is a counterexample to the text after Lemma 4.4: a
    feasible selection, neither {s*_X} nor all tokens, whose max-margin direction is its own fixed point
    (docs/paper-b-attention.md#errata, erratum B-E9). DataError on data violating Assumption 1.

    Examples
    --------
    >>> from ntpbias.data.tokens import sample_assumption1, relevant_tokens
    >>> from ntpbias.geometry.attention.stage_one import stage_one
    >>> ds = sample_assumption1(n_irr=1, seed=0)
    >>> st = stage_one(ds, d=2048, eta0=200.0, seed=0)
    >>> tie = partial_tie(st.E1, ds, relevant_tokens(ds) == 0)
    >>> tie.svm.status, round(tie.important.norm, 3), round(tie.svm.norm, 3), tie.self_consistent
    ('optimal', 0.916, 1.185, True)
    """
    ds = _check(E, ds)
    stats = token_statistics(ds)
    s_star = relevant_tokens(ds, stats)
    if token is None:
        irrelevant = torch.nonzero(stats.irrelevant).reshape(-1)
        if len(irrelevant) != 1:
            raise DataError(f"partial_tie: name the irrelevant token to tie (token=...); the data have "
                            f"{len(irrelevant)} irrelevant tokens")
        token = int(irrelevant[0])
    tied = tied.to(ds.X.device).bool()
    base = (ds.X == s_star[:, None]) & ds.mask
    selected = base | (tied[:, None] & (ds.X == token) & ds.mask)
    svm = max_margin_selection(E, ds, selected, solver=solver)
    own = directional_convergence(E, svm.p_hat, ds, tol=tol, solver=solver) if svm.feasible else None
    return PartialTie(selected=selected, tied=tied, svm=svm, own=own,
                      important=max_margin_selection(E, ds, base, solver=solver))


@dataclass(frozen=True)
class Heuristic:
    """The heuristic after Lemma 4.5 at Lemma 4.5's p̂, against its printed and its centred predictions
    (docs/paper-b-attention.md#errata, erratum B-E10).

    The printed heuristic: p̂^T v ≈ 0, p̂^T E_s ≈ 1 on the selected tokens and ≈ 0 on the others, so that
    ||p̂|| ≈ sqrt(|S_sel|) (S_sel = ∪_X S_X(p̂), the relevant tokens). For orthonormal embeddings (12) only fixes
    score differences, and the smallest norm centres them: scores a = m/(k + m) on the k selected and a - 1 on the m
    other present tokens, ||p̂|| = sqrt(k m/(k + m)).

    Attributes
    ----------
    p_dot_v : p̂^T v.  selected_scores, other_scores : (k,), (m,) p̂^T E_s on the selected / other present tokens.
    norm : ||p̂||.  n_selected, n_other : k, m.
    """

    p_dot_v: float
    selected_scores: torch.Tensor
    other_scores: torch.Tensor
    norm: float
    n_selected: int
    n_other: int

    @property
    def printed_norm(self) -> float:
        """sqrt(k), the printed heuristic's ||p̂||."""
        return math.sqrt(self.n_selected)

    @property
    def centred_score(self) -> float:
        """m/(k + m), the centred score of a selected token (a - 1 on the others)."""
        return self.n_other / (self.n_selected + self.n_other)

    @property
    def centred_norm(self) -> float:
        """sqrt(k m/(k + m)), the centred prediction of ||p̂||."""
        return math.sqrt(self.n_selected * self.n_other / (self.n_selected + self.n_other))

    @property
    def printed_score_error(self) -> float:
        """max of |p̂^T E_s - 1| over the selected and |p̂^T E_s| over the other tokens (printed: ≈ 0)."""
        return max(float((self.selected_scores - 1).abs().max()), float(self.other_scores.abs().max()))

    @property
    def centred_score_error(self) -> float:
        """The same against the centred scores a and a - 1."""
        a = self.centred_score
        return max(float((self.selected_scores - a).abs().max()), float((self.other_scores - a + 1).abs().max()))


def lemma45_heuristic(E: torch.Tensor, v: torch.Tensor, p: torch.Tensor, ds: TokenSequences) -> Heuristic:
    """The quantities of the heuristic after Lemma 4.5 at a direction ``p`` (Lemma 4.5's p̂ from
    :func:`important_svm`): p^T v, the scores p^T E_s of the selected tokens ∪_X S_X(p) and of the other present
    tokens, ||p||.

    Examples
    --------
    >>> from ntpbias.data.tokens import sample_assumption1
    >>> from ntpbias.geometry.attention.stage_one import stage_one
    >>> ds = sample_assumption1(seed=0)
    >>> st = stage_one(ds, d=1024, eta0=200.0, seed=0)
    >>> h = lemma45_heuristic(st.E1, st.v, important_svm(st.E1, ds).p_hat, ds)
    >>> h.n_selected, h.n_other, round(h.norm, 3), round(h.printed_norm, 3), round(h.centred_norm, 3)
    (8, 11, 2.056, 2.828, 2.152)
    """
    ds = _check(E, ds)
    stats = token_statistics(ds)
    picked = torch.zeros(E.shape[0], dtype=torch.bool, device=E.device)
    picked[ds.X[token_selection(E, p, ds)]] = True
    present = stats.present.to(E.device)
    scores = E @ p
    return Heuristic(p_dot_v=float(p @ v), selected_scores=scores[picked & present],
                     other_scores=scores[~picked & present], norm=float(torch.linalg.vector_norm(p)),
                     n_selected=int((picked & present).sum()), n_other=int((~picked & present).sum()))
