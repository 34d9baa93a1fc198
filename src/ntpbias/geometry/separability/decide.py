"""NTP-separability decided at any size: by structure where it decides, by a certified LP where the LP fits, else
"undecided" (``None``) with what was computed; and the longest separable prefix of the contexts by frequency
(docs/lm.md#decided-by-structure).

:func:`decide` never asks for more iterations: it runs :func:`~ntpbias.geometry.separability.structure.ntp_structure`
(counting, rank H, the support graph; seconds at m = 10^5), and where that leaves the question open, the LP of
:func:`~ntpbias.geometry.separability.verdict.ntp_separability` (``method="lp"``, the smaller of its margin and
cokernel forms) when its constraint matrix has at most ``max_lp_nnz`` nonzeros. A structural verdict whose
certificate misses its tolerance (a rank test at the edge of its cutoff) counts as open. A larger open question is
reported undecided, with the counts and the structure's record.

:func:`separable_prefix` answers the question the d < m regime leaves: how much of the data a linear decoder on these
features can separate. The contexts ordered by decreasing π̂ (ties by index), the prefixes C_k (the k most frequent)
are nested, and a subset of a separable set is separable (fewer constraints, a smaller F), so separability of C_k is
monotone in k and a search finds the largest separable k: every prefix whose features have full row rank is separable
(:mod:`~ntpbias.geometry.separability.structure`), the smallest prefix the structure ties bounds it from above, and
bisection with :func:`decide` closes the bracket. The result is a **maximal separable prefix**, certified at both ends
(a separating certificate at k, a Gordan certificate at k + 1). It is not the maximum-mass separable subset: a set
that skips a context to take later ones can weigh more (finding that one is a combinatorial search this does not do).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..._repr import short_repr
from ...data.ntp import NTPData
from ...errors import SolverError
from ..constraints import constraints
from ..scaling import in_user_units, normalized
from .structure import CERT_TOL, RANK_RTOL, Structure, ntp_structure
from .verdict import cokernel_verdict, ntp_separability

#: :func:`decide` solves the separability LP up to this many constraint nonzeros (the smaller of its two forms; the
#: margin form's fallback only when it fits too); the LP took 16 s at m = 160, V = 64, d = 128
MAX_LP_NNZ = 2_000_000
#: :func:`separable_prefix`'s LPs stop at this many nonzeros (the search then reports its bracket): at V = 1024 a
#: cokernel LP of 4 x 10^5 nonzeros took minutes
PREFIX_LP_NNZ = 300_000


@short_repr
@dataclass(frozen=True, eq=False)
class Decision:
    """A separability verdict that may be open.

    Attributes
    ----------
    separable : bool or None (None: undecided)
    method : "structure", "trivial", "lp" or "undecided"
    certified : bool or None, whether the certificate meets its tolerance
    residual : float or None, the certificate's defect
    reason : one line
    structure : the :class:`~ntpbias.geometry.separability.structure.Structure` record of the data
    W : (V, d) a separating W (margin 1) when the LP found one, else None
    seconds : time taken
    """

    separable: bool | None
    method: str
    certified: bool | None
    residual: float | None
    reason: str
    structure: Structure
    W: torch.Tensor | None = None
    seconds: float = 0.0

    def record(self) -> dict:
        """The JSON record (``analysis.json``'s ``separability_certificate``)."""
        return {"separable": self.separable, "method": self.method, "certified": self.certified,
                "residual": self.residual, "reason": self.reason, "seconds": self.seconds}

    def _summary(self) -> dict:
        """What ``repr`` shows."""
        return {"separable": self.separable, "method": self.method, "certified": self.certified}


def lp_nnz(data: NTPData) -> tuple[int, int]:
    """Constraint nonzeros of the separability LP in its two forms, (margin: 2d per row, cokernel: m - d per row), from
    the support sizes alone (nothing is built)."""
    sizes = data.support_sizes.to(torch.float64)
    rows = int((sizes * (data.V - sizes) + sizes - 1).sum())
    return 2 * data.d * rows, max(data.m - data.d, 0) * (int((data.V - sizes).sum()) + data.V)


def decide(data: NTPData, *, max_lp_nnz: int = MAX_LP_NNZ, structure: Structure | None = None) -> Decision:
    """NTP-separability of ``data`` by structure, else by the LP where it fits, else undecided (module docstring).

    Parameters
    ----------
    data : NTPData
    max_lp_nnz : int
        The largest LP (constraint nonzeros, :func:`lp_nnz`) solved; beyond it an open question stays undecided.
    structure : Structure, optional
        :func:`~ntpbias.geometry.separability.structure.ntp_structure` of ``data`` when already computed.

    Returns
    -------
    Decision

    Examples
    --------
    >>> data = NTPData.from_arrays(torch.tensor([[1.0, 0], [0, 1], [1, 1]]), [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    >>> d = decide(data)   # three contexts in R^2, one-hot labels: structure leaves it open, the LP decides
    >>> d.separable, d.method
    (True, 'lp')
    """
    import time

    start = time.perf_counter()
    st = ntp_structure(data) if structure is None else structure
    s = st.separability
    if st.separable is not None and s.get("certified", True):
        return Decision(st.separable, s["method"], s.get("certified", True), s.get("residual"), s["reason"], st,
                        seconds=time.perf_counter() - start)
    # structure is silent, or its verdict's certificate missed its tolerance (a rank test at the edge of its cutoff):
    # an uncertified verdict is no verdict, the LP decides
    open_why = s["reason"] if st.separable is None else (
        f"its verdict (separable: {st.separable}) has a certificate that missed its tolerance (relative residual "
        f"{s['residual']:.1e} > {CERT_TOL:g})")
    margin, cokernel = lp_nnz(data)

    def undecided(why: str) -> Decision:
        return Decision(None, "undecided", None, None, f"undecided: structure leaves it open ({open_why}) and {why}; "
                        "analyse fewer contexts (e.g. --max-contexts) to decide it", st,
                        seconds=time.perf_counter() - start)

    if min(margin, cokernel) > max_lp_nnz:
        return undecided(f"the separability LP ({min(margin, cokernel):,} nonzeros) is above the limit of "
                         f"{max_lp_nnz:,}")
    try:
        if margin <= max_lp_nnz:  # either form fits: the LP decides, its certificate checked
            res = ntp_separability(data, method="lp")
        else:  # only the cokernel form fits: its certificate, or undecided (the margin form is too large)
            unit = normalized(data)[0]
            res = cokernel_verdict(unit, constraints(unit))
            if res is None:
                return undecided(f"the cokernel LP's certificate missed its tolerance, the margin LP ({margin:,} "
                                 f"nonzeros) being above the limit of {max_lp_nnz:,}")
            res = replace(res, W=None if res.W is None else in_user_units(res.W, normalized(data)[1]))
    except SolverError as exc:
        return undecided(f"the separability LP failed ({exc})")
    return Decision(res.separable, "lp", res.certified, res.residual, res.reason, st, W=res.W,
                    seconds=time.perf_counter() - start)


@short_repr
@dataclass(frozen=True, eq=False)
class Prefix:
    """The longest separable prefix of the contexts by frequency (module docstring).

    Attributes
    ----------
    k : the number of contexts in the longest prefix certified separable (0 when none is)
    k_fail : the shortest prefix certified not separable (None when none is)
    exact : k_fail == k + 1 (the prefix is maximal); False when the search stopped at an undecided prefix
    mass : Σ π̂ over the prefix (the share of the context mass it holds)
    order : (m,) the contexts by decreasing π̂
    decisions : k -> the Decision taken at that prefix length
    """

    k: int
    k_fail: int | None
    order: torch.Tensor
    mass: float
    decisions: dict = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return self.k_fail == self.k + 1

    def record(self) -> dict:
        """The JSON record (``lm.separable_prefix``)."""
        return {"contexts": self.k, "first_not_separable": self.k_fail, "maximal": self.exact, "mass": self.mass,
                "decisions": {str(k): d.record() for k, d in sorted(self.decisions.items())}}

    def _summary(self) -> dict:
        """What ``repr`` shows."""
        return {"k": self.k, "k_fail": self.k_fail, "mass": self.mass, "exact": self.exact}


def subset(data: NTPData, rows: torch.Tensor) -> NTPData:
    """The contexts ``rows`` of ``data`` (π̂ renormalized over them)."""
    pi = data.pi[rows]
    return replace(data, H=data.H[rows], P=data.P[rows], pi=pi / pi.sum(),
                   contexts=None if data.contexts is None else tuple(data.contexts[i] for i in rows.tolist()),
                   context_lengths=None if data.context_lengths is None else data.context_lengths[rows],
                   n_samples=None, _cache={})


def separable_prefix(data: NTPData, *, max_lp_nnz: int = PREFIX_LP_NNZ, structure: Structure | None = None
                     ) -> Prefix:
    """The longest prefix of the contexts by decreasing π̂ that is NTP-separable (module docstring).

    A prefix whose every context has full support has nothing to separate and counts as separable here (W = 0
    satisfies eqs. (6a)-(6b) vacuously), so that separability stays monotone along the prefixes. A prefix whose LP is
    above ``max_lp_nnz`` nonzeros (and that structure does not decide) stays undecided: the search then continues
    below it, and the result is the bracket (``k``, ``k_fail``) with ``exact`` False.

    Examples
    --------
    >>> H = torch.tensor([[1.0, 0], [0, 1], [1, 1], [2, 1]])
    >>> data = NTPData.from_arrays(H, [[1.0, 0], [1.0, 0], [0, 1.0], [1.0, 0]], [0.4, 0.3, 0.2, 0.1])
    >>> p = separable_prefix(data)   # h_3 = h_1 + h_2 with label 1 while h_1, h_2 have label 0: stop at 2
    >>> p.k, p.k_fail, round(p.mass, 6)
    (2, 3, 0.7)
    """
    data = data.to(device="cpu", dtype=torch.float64)
    order = torch.sort(data.pi, descending=True, stable=True).indices
    cum = torch.cumsum(data.pi[order], 0)
    decisions: dict[int, Decision] = {}

    def at(k: int) -> bool | None:
        if k not in decisions:
            decisions[k] = decide(subset(data, order[:k]), max_lp_nnz=max_lp_nnz)
        return True if decisions[k].method == "trivial" else decisions[k].separable

    def tied(st: Structure) -> bool:  # a certified structural "not separable"
        return st.separable is False and st.separability["method"] == "structure" and st.separability["certified"]

    # every prefix of independent features is separable: the first dependent one bounds the full-rank prefixes
    head = data.H[order[:min(data.m, data.d + 1)]]
    R = torch.linalg.qr(head.mT, mode="r").R.diagonal().abs() if head.numel() else torch.zeros(0)
    top = float(torch.linalg.svdvals(data.H)[0]) if data.m else 0.0
    dependent = torch.nonzero(R <= RANK_RTOL * top)
    lo = int(dependent[0]) if len(dependent) else int(R.numel())
    lo = max(lo, 0)
    # the shortest prefix the structure ties (structure of a prefix: seconds) bounds the separable ones from above
    hi = data.m + 1
    if tied(ntp_structure(data) if structure is None else structure):
        a, b = lo, data.m
        while b - a > 1:
            mid = (a + b) // 2
            if tied(ntp_structure(subset(data, order[:mid]))):
                b = mid
            else:
                a = mid
        hi = b
    # bisection with the full decision between lo (separable, or 0) and hi (not separable, or m + 1)
    k_fail = hi if hi <= data.m and at(hi) is False else None
    good = lo if lo > 0 and at(lo) else 0
    top = k_fail or data.m + 1  # the search's upper end: the first non-separable prefix, or an undecided one
    while top - good > 1:
        mid = (good + top) // 2
        verdict = at(mid)
        if verdict:
            good = mid
        else:  # not separable; or undecided (its LP too large), and shorter prefixes have smaller LPs
            top = mid
            k_fail = mid if verdict is False else k_fail
    return Prefix(good, k_fail, order, float(cum[good - 1]) if good else 0.0, decisions)


__all__ = ["MAX_LP_NNZ", "PREFIX_LP_NNZ", "Decision", "Prefix", "decide", "lp_nnz", "separable_prefix", "subset"]
