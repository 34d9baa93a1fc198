"""The NTP geometry of a language model read as a linear decoder on its own features (docs/lm.md#what-is-measured).

A model state gives, for the m distinct contexts of NTP data, its last hidden states H (m, d) (what multiplies the
unembedding) and its unembedding W (V, d); its logits are L = W H^T (V, m), column j = ℓ_j. Softmax is blind to a
constant added to a column, so every measurement uses the **centred** unembedding W_c = (I - 11^T/V) W, whose logits
L_c = W_c H^T differ from L by a constant per column (the component 1 w̄^T of W lies in F^⊥ and never changes a
probability; GD keeps it fixed, eq. (3) of paper A, Adam and tied embeddings need not).

Two readings of the same state, each with the theory's prediction:

* **paper A** (H fixed, W trained): F, W* and W^mm of the data (m contexts, embeddings H), with P_F(W) -> W* and
  P_⊥(W) growing in the direction of W^mm (Thm 2 of paper A). The verdicts come from
  :func:`~ntpbias.geometry.separability.decide.decide` (structure first: where m > d the support graph usually decides
  *not separable* in a second; the certified LP where it fits; "undecided" otherwise), W* from the exact subspace
  method while it fits (:data:`EXACT_ROWS`), W^mm from the NTP-SVM (a certificate that misses its tolerance nulls
  every W^mm-derived value). Where the data are not separable, :func:`~ntpbias.geometry.separability.decide.
  separable_prefix` gives the longest separable prefix of the contexts by frequency and its own W^mm (``prefix_*``).
* **the log-bilinear model** (H and W both free, docs/ufm.md): the logits split into the finite in-support log-odds
  L* and a part growing in the direction of the nuclear-norm NTP-SVM L^mm; Gram matrices align with L^mm's SVD;
  contexts that share a support collapse. These are defined for every H (:func:`logit_values`), and each comes with
  its baselines (:func:`baseline_logits`: add-α smoothed counts, unigram log-frequencies, a random-feature model),
  measured by the same function, so that a number can be read.

Nothing here forms an (m, m) matrix: the predicted Gram directions are kept as thin SVD factors and compared through
them, and the collapse angles are computed by blocks of contexts sorted by support set.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..data.ntp import NTPData
from ..errors import NotSeparableError, SolverError
from .linear.subspace import subspace
from .margins.program import ntp_margin, ntp_svm
from .margins.result import SVMResult
from .separability.decide import Decision, Prefix, decide, separable_prefix, subset
from .separability.structure import Structure, ntp_structure
from .ufm.logit_svm import nuclear_svm
from .ufm.logits import SupportSVD, finite_logits, project_F, support_groups, support_svd

#: singular values of the logits, of H and of W_c kept per checkpoint (the spectra figure)
SPECTRUM = 32
#: ``solver="auto"``: F and W* by the exact Gram eigendecomposition up to this many rows Σ_j (|S_j| - 1) (a model's
#: features are ill-conditioned, cond(H) ~ 1e4 on Shakespeare, where the conjugate gradients of the iterative method
#: stall), and the NTP-SVM by Clarabel up to this many variables V d (it certified there when the workset method did
#: not)
EXACT_ROWS, CLARABEL_VARIABLES = 6000, 10_000
#: the nuclear-norm NTP-SVM is solved while one SVD of its (V, m) iterate, min(V, m)² max(V, m) flops, is at most this
#: (ADMM, one SVD an iteration: 2 s at V = 64, m = 2973 and 38 s at m = 24,894, 1.0e8, on one thread); beyond, the
#: centred support matrix S̃ is the reference
NUCLEAR_MAX_SVD = 2e8


def nuclear_cost(V: int, m: int) -> float:
    """min(V, m)² max(V, m): the flops of one SVD of a (V, m) matrix, the nuclear-norm SVM's cost per iteration."""
    return float(min(V, m)) ** 2 * max(V, m)
#: the add-α smoothing constants of the count baselines
SMOOTHING = (0.1, 1.0)
#: contexts per block of the collapse angles (a block and the contexts of its support sets)
BLOCK = 2048


def centred(W: torch.Tensor) -> torch.Tensor:
    """W_c = (I - 11^T/V) W for W (..., V, d) (or logits (..., V, m)): the rows minus their mean, i.e. the unembedding
    (the logits) modulo the softmax-invariant direction.

    >>> centred(torch.tensor([[1.0, 2.0], [3.0, 6.0]])).tolist()
    [[-1.0, -2.0], [1.0, 2.0]]
    """
    return W - W.mean(-2, keepdim=True)


def _cos(A: torch.Tensor, B: torch.Tensor) -> float | None:
    den = float(torch.linalg.vector_norm(A) * torch.linalg.vector_norm(B))
    return float((A * B).sum()) / den if den > 0 else None


# ================================================================================================ directions
@dataclass(frozen=True, eq=False)
class Directions:
    """A reference logit matrix's thin SVD U diag(σ) Vt (U (V, r), Vt (r, m)): its predicted word and context Gram
    directions are U diag(σ) U^T and Vt^T diag(σ) Vt (docs/ufm.md, U-4), never formed."""

    U: torch.Tensor
    sigma: torch.Tensor
    Vt: torch.Tensor

    @classmethod
    def of(cls, L: torch.Tensor) -> Directions:
        U, s, Vt = torch.linalg.svd(L, full_matrices=False)
        r = int((s > 1e-9 * s[0]).sum()) if s.numel() and s[0] > 0 else 0
        return cls(U[:, :r], s[:r], Vt[:r])


def gram_cosines(Wc: torch.Tensor, H: torch.Tensor, ref: Directions) -> dict[str, float | None]:
    """cos(W_c W_c^T, U Σ U^T) and cos(H H^T, V Σ V^T) through the factors: <X X^T, U Σ U^T> = ||Σ^{1/2} U^T X||²,
    ||X X^T|| = ||X^T X|| and ||U Σ U^T|| = ||σ|| (O((V + m) d r), no (m, m) matrix)."""
    root = ref.sigma.sqrt()[:, None]
    out = {}
    for key, X, basis in (("cos_word_gram", Wc, ref.U.mT), ("cos_context_gram", H, ref.Vt)):
        den = float(torch.linalg.matrix_norm(X.mT @ X) * torch.linalg.vector_norm(ref.sigma))
        out[key] = float((root * (basis @ X)).pow(2).sum()) / den if den > 0 else None
    return out


# ================================================================================================ collapse
def support_collapse(H: torch.Tensor, groups: torch.Tensor, pi: torch.Tensor) -> dict[str, float | int | None]:
    """Collapse of the features H (m, d) of contexts sharing a support set (``groups`` (m,) labels), docs/ufm.md U-5.

    Returns (angles in degrees; None when no support set holds two contexts, where there is nothing to collapse):

    * ``within_angle``: the largest angle between two contexts of one set; ``between_angle``: the smallest angle
      between the mean directions of two sets; ``collapse_ratio`` = within / between;
    * ``within_mean``: the π̂-weighted mean angle between a context and its set's mean direction, over the contexts of
      sets with at least two; ``between_mean``: the π̂-weighted mean over those sets of the angle to the nearest other
      set's mean direction; ``collapse_mean_ratio`` = within_mean / between_mean (the extremes above come from single
      pairs; these are averages);
    * ``collapse_sets``, ``collapse_contexts``: the sets with at least two contexts and the contexts in them.

    Computed by blocks of :data:`BLOCK` contexts sorted by set (each block against the contexts of its own sets, the
    set means against each other by blocks): memory O(BLOCK x (BLOCK + largest set)), no (m, m) matrix.
    """
    tiny = torch.finfo(H.dtype).tiny
    Hn = H / torch.linalg.vector_norm(H, dim=1, keepdim=True).clamp_min(tiny)
    K = int(groups.max()) + 1
    size = torch.bincount(groups, minlength=K)
    multi = size >= 2
    none = dict.fromkeys(("within_angle", "between_angle", "collapse_ratio", "within_mean", "between_mean",
                          "collapse_mean_ratio"))
    counts = {"collapse_sets": int(multi.sum()), "collapse_contexts": int(size[multi].sum())}
    if not bool(multi.any()):
        return {**none, **counts}
    means = torch.zeros(K, H.shape[1], dtype=H.dtype).index_add_(0, groups, Hn)
    means = means / torch.linalg.vector_norm(means, dim=1, keepdim=True).clamp_min(tiny)
    # within: contexts of multi-context sets, sorted by set; each block against the span of its sets
    rows = torch.nonzero(multi[groups]).flatten()
    rows = rows[torch.argsort(groups[rows], stable=True)]
    g = groups[rows]
    first = torch.searchsorted(g, g, side="left")
    last = torch.searchsorted(g, g, side="right")
    min_cos = torch.ones(len(rows), dtype=H.dtype)
    for start in range(0, len(rows), BLOCK):  # loop over blocks of contexts
        stop = min(start + BLOCK, len(rows))
        lo, hi = int(first[start]), int(last[stop - 1])
        cos = Hn[rows[start:stop]] @ Hn[rows[lo:hi]].mT
        same = g[start:stop, None] == g[None, lo:hi]
        min_cos[start:stop] = torch.where(same, cos, torch.ones_like(cos)).amin(1)
    within = math.degrees(math.acos(max(-1.0, min(1.0, float(min_cos.min())))))
    to_mean = torch.rad2deg(torch.arccos((Hn[rows] * means[g]).sum(1).clamp(-1, 1)))
    w = pi[rows]
    within_mean = float((w * to_mean).sum() / w.sum())
    # between: every set's nearest other set (by blocks of sets)
    nearest = torch.full((K,), -1.0, dtype=H.dtype)
    for start in range(0, K, BLOCK):  # loop over blocks of sets
        cm = means[start:start + BLOCK] @ means.mT
        cm[torch.arange(cm.shape[0]), torch.arange(start, start + cm.shape[0])] = -2.0
        nearest[start:start + BLOCK] = cm.amax(1)
    angle = torch.rad2deg(torch.arccos(nearest.clamp(-1, 1)))
    if K < 2:
        return {**none, "within_angle": within, "within_mean": within_mean, **counts}
    between = float(angle.min())
    mass = torch.zeros(K, dtype=H.dtype).index_add_(0, groups, pi)
    between_mean = float((mass[multi] * angle[multi]).sum() / mass[multi].sum())
    return {"within_angle": within, "between_angle": between,
            "collapse_ratio": within / between if between > 0 else None, "within_mean": within_mean,
            "between_mean": between_mean,
            "collapse_mean_ratio": within_mean / between_mean if between_mean > 0 else None, **counts}


# ================================================================================================ logit space
def logit_values(L: torch.Tensor, data: NTPData, ref: LogitReference | None = None) -> dict[str, float | int | None]:
    """The log-bilinear quantities of logits L (V, m) (docs/lm.md#what-is-measured), for a model or a baseline.

    Returns ``loss``, ``loss_gap`` (CE - H), ``logit_perp_share`` = ||P_⊥(L_c)|| / ||L_c|| (how much of the logits is
    the support-pattern part, the part that grows without bound), ``finite_rel_error`` = ||P_F(L_c) - L*|| / ||L*||,
    ``finite_rel_error_weighted`` (the same with each in-support cell weighted by π̂_j p̂_{j,z}: the error where the
    probability mass is, instead of one dominated by tokens seen once or twice), ``logit_cos_perp_S`` =
    cos(P_⊥(L_c), S̃) and ``logit_cos_perp_mm`` = cos(P_⊥(L_c), L^mm) (with ``ref``), and the separation of the
    contexts with a non-trivial support (|S_j| < V; a full support has nothing to separate and is left out):
    ``separated_fraction`` (their π̂-mass share whose every in-support logit is above every out-of-support one),
    ``separated_contexts`` (how many), ``nontrivial_contexts`` and ``full_support_mass``.
    """
    Lc = centred(L)
    PF = project_F(Lc, data)
    perp = Lc - PF
    support = data.support.T
    L_star = finite_logits(data) if ref is None else ref.L_star
    top = Lc.amax(0)
    lse = torch.log(torch.exp(Lc - top).sum(0)) + top
    loss = float((data.pi * (lse - (data.P.T * Lc).sum(0))).sum())
    weight = data.P.T * data.pi  # (V, m): π̂_j p̂_{j,z}
    star = float(torch.linalg.vector_norm(L_star))
    star_w = float((weight * L_star.pow(2)).sum().sqrt())
    inf = torch.tensor(float("inf"), dtype=L.dtype)
    lowest_in = torch.where(support, Lc, inf).amin(0)
    highest_out = torch.where(support, -inf, Lc).amax(0)
    nontrivial = data.support_sizes < data.V
    separated = (lowest_in > highest_out) & nontrivial
    mass = float(data.pi[nontrivial].sum())
    out = {"loss": loss, "loss_gap": loss - data.entropy,
           "finite_rel_error": float(torch.linalg.vector_norm(PF - L_star)) / star if star > 0 else None,
           "finite_rel_error_weighted": float((weight * (PF - L_star).pow(2)).sum().sqrt()) / star_w
           if star_w > 0 else None,
           "logit_perp_share": float(torch.linalg.vector_norm(perp)) / max(float(torch.linalg.vector_norm(Lc)), 1e-300),
           "logit_cos_perp_S": _cos(perp, centred(support.to(L.dtype)) if ref is None else ref.support.S_tilde),
           "separated_fraction": float(data.pi[separated].sum()) / mass if mass > 0 else None,
           "separated_contexts": int(separated.sum()), "nontrivial_contexts": int(nontrivial.sum()),
           "full_support_mass": 1.0 - mass}
    if ref is not None and ref.L_mm is not None:
        out["logit_cos_perp_mm"] = _cos(perp, ref.L_mm)
    return out


def baseline_logits(data: NTPData, *, d: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Logits (V, m) that need no trained model, to read the model's numbers against (docs/lm.md#baselines):

    * ``add_0.1``, ``add_1``: add-α smoothed empirical log-probabilities log((n_jz + α)/(n_j + V α)) (n_jz the
      samples of context j followed by z; counts n π̂_j p̂_{j,z} with n = ``data.n_samples``, or π̂_j p̂_{j,z} m when
      unknown);
    * ``unigram``: log of the next-token frequency, the same column for every context (no context at all);
    * ``random_features``: W_r H_r^T with W_r (V, d), H_r (m, d) standard Gaussian (seed ``seed``), a model of the same
      width that learned nothing.
    """
    n = data.n_samples or data.m
    counts = (data.P * data.pi[:, None]).T * n  # (V, m)
    per = counts.sum(0, keepdim=True)
    out = {f"add_{a:g}": torch.log((counts + a) / (per + data.V * a)) for a in SMOOTHING}
    freq = counts.sum(1)
    out["unigram"] = torch.log((freq / freq.sum()).clamp_min(torch.finfo(freq.dtype).tiny))[:, None].expand(
        -1, data.m)
    g = torch.Generator().manual_seed(seed)
    W_r = torch.randn(data.V, d, generator=g, dtype=data.H.dtype)
    H_r = torch.randn(data.m, d, generator=g, dtype=data.H.dtype)
    out["random_features"] = W_r @ H_r.mT
    return out


@dataclass(frozen=True, eq=False)
class LogitReference:
    """The objects that depend on the data's supports and probabilities alone, shared by every checkpoint.

    Attributes
    ----------
    L_star : (V, m) the finite part L* (docs/ufm.md)
    support : the SVD of the centred support matrix S̃
    svm : the nuclear-norm NTP-SVM (L^mm centred over the vocabulary; None when not computed, ``note`` says why)
    groups : (m,) support-set label of every context
    directions : "S" and (with the SVM) "mm": the thin SVDs whose Gram directions the model's are compared with
    baselines : name -> the :func:`logit_values` (and collapse) of each baseline
    note : why the nuclear-norm SVM is missing, if it is
    """

    L_star: torch.Tensor
    support: SupportSVD
    svm: SVMResult | None
    groups: torch.Tensor
    directions: dict[str, Directions]
    baselines: dict[str, dict] = field(default_factory=dict)
    note: str | None = None

    @property
    def L_mm(self) -> torch.Tensor | None:
        return None if self.svm is None else centred(self.svm.L)

    @property
    def U_mm(self) -> torch.Tensor:
        """Left singular vectors of L^mm (or of S̃ without the SVM): the support-pattern directions of the words."""
        return self.directions["mm" if "mm" in self.directions else "S"].U


def logit_reference(data: NTPData, *, solver: str = "auto", nuclear: bool = True, d: int | None = None,
                    seed: int = 0) -> LogitReference:
    """What every checkpoint of a model is compared with, from the data's supports and probabilities alone.

    Parameters
    ----------
    data : NTPData
        The contexts' next-token distributions (its ``H`` is not used).
    solver : str
        Backend of the nuclear-norm NTP-SVM (:func:`~ntpbias.geometry.ufm.logit_svm.nuclear_svm`).
    nuclear : bool
        False skips the nuclear-norm SVM (the reference is then the centred support matrix S̃ alone); it is also
        skipped, with a note, above :data:`NUCLEAR_MAX_SVD` (:func:`nuclear_cost`).
    d : int, optional
        Width of the random-feature baseline (default: ``data.d``).
    seed : int
        Seed of the random-feature baseline.

    Returns
    -------
    LogitReference
        L*, the SVD of S̃, the certified L^mm, the support groups, the Gram directions and the baselines (float64,
        CPU).

    Examples
    --------
    >>> data = NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0, 0, 0.3, 0.7]])
    >>> ref = logit_reference(data)
    >>> ref.svm.certified, ref.groups.tolist(), tuple(ref.L_mm.shape), sorted(ref.baselines)
    (True, [0, 1, 2], (4, 3), ['add_0.1', 'add_1', 'random_features', 'unigram'])
    """
    data = data.to(device="cpu", dtype=torch.float64)
    ssvd = support_svd(data)
    note = None
    svm = None
    if nuclear and nuclear_cost(data.V, data.m) > NUCLEAR_MAX_SVD:
        note = (f"the nuclear-norm SVM was not solved: one SVD of its {data.V:,} x {data.m:,} iterate is above "
                f"{NUCLEAR_MAX_SVD:.0e} flops (use --max-contexts); the centred support matrix S̃ is the reference")
    elif nuclear:
        svm = nuclear_svm(data, solver)
    directions = {"S": Directions(ssvd.U, ssvd.sigma, ssvd.Vt)}
    if svm is not None:
        directions["mm"] = Directions.of(centred(svm.L))
    groups = support_groups(data)[0]
    ref = LogitReference(finite_logits(data), ssvd, svm, groups, directions, note=note)
    width = data.d if d is None else d
    for name, L in baseline_logits(data, d=width, seed=seed).items():
        ref.baselines[name] = logit_values(L, data, ref)
    g = torch.Generator().manual_seed(seed)
    random_H = torch.randn(data.m, width, generator=g, dtype=torch.float64)
    ref.baselines["random_features"].update(support_collapse(random_H, groups, data.pi))
    return ref


# ================================================================================================ paper A
@dataclass(frozen=True, eq=False)
class PaperA:
    """Paper A's objects of one model state's features (module docstring): the structure, the separability decision,
    dim F, compatibility, W* and W^mm, each with how it was decided; None where undecided or not computed."""

    structure: Structure
    decision: Decision
    dim_F: int | None
    compatible: bool | None
    compatibility_method: str
    compatibility_residual: float | None
    W_star: torch.Tensor | None
    svm: SVMResult | None
    notes: list[str]
    seconds: dict[str, float]

    @property
    def W_mm(self) -> torch.Tensor | None:
        """W^mm when it is certified (an uncertified solve is never reported as a finding)."""
        return self.svm.W if self.svm is not None and self.svm.certified else None

    def record(self, data: NTPData) -> dict:
        """The ``analysis.json`` record (the keys of ``ntpbias analyze``'s where they are defined)."""
        st, svm = self.structure, self.svm
        sizes = data.support_sizes
        ok = svm is not None and svm.certified
        return {
            "m": data.m, "V": data.V, "d": data.d, "n_samples": data.n_samples, "entropy": data.entropy,
            "dim_F": self.dim_F, "dim_F_bounds": list(st.dim_F_bounds), "ambient_dim": data.V * data.d,
            "n_equalities": st.equations, "n_inequalities": st.inequalities,
            "support_size_min": int(sizes.min()), "support_size_max": int(sizes.max()),
            "support_size_mean": float(sizes.double().mean()),
            "compatible": self.compatible, "compatibility_method": self.compatibility_method,
            "compatibility_residual": self.compatibility_residual,
            "separable": self.decision.separable, "separability_method": self.decision.method,
            "separability_certificate": self.decision.record(), "structure": st.record(),
            "margin": 1.0 / svm.norm if ok else None, "norm_W_star": None if self.W_star is None
            else float(torch.linalg.vector_norm(self.W_star)),
            "norm_W_mm": svm.norm if ok else None, "n_support_vectors": svm.n_active if ok else None,
            "solver": None if svm is None else svm.solver, "solve_seconds": None if svm is None else svm.solve_seconds,
            "status": None if svm is None else svm.status, "certified": None if svm is None else svm.certified,
            "kkt": None if svm is None else svm.certificate.as_dict(), "seconds": self.seconds, "notes": self.notes}


def paper_a(data: NTPData, *, solver: str = "auto", structure: Structure | None = None) -> PaperA:
    """Paper A's objects of ``data`` (the model's features H and the text's P), decided at any size (module
    docstring). Never raises for a solver that does not converge: the quantity is then None, with a note."""
    seconds, notes = {}, []
    t0 = time.perf_counter()
    st = ntp_structure(data) if structure is None else structure
    decision = decide(data, structure=st)
    seconds["structure and separability"] = time.perf_counter() - t0
    dim, compatible, method, residual, W_star = st.dim_F, st.compatible, "structure", None, None
    if st.equations <= EXACT_ROWS and (compatible is not False):  # W* (and an open verdict) from the exact method
        t0 = time.perf_counter()
        F = subspace(data, "exact")
        seconds["subspace"] = time.perf_counter() - t0
        dim = F.dim if dim is None else dim
        if compatible is None:
            compatible, method = F.compatible, "subspace (exact)"
        residual = F.compatibility_residual
        W_star = F.W_star if compatible else None
    elif compatible is None:
        method = "undecided"
        notes.append(f"compatibility undecided: structure leaves it open and the {st.equations:,} equations (4) are "
                     f"above the exact method's {EXACT_ROWS:,}")
    elif compatible:
        notes.append(f"W* not computed: {st.equations:,} equations (4) are above the exact method's {EXACT_ROWS:,}")
    svm = None
    if decision.separable:
        t0 = time.perf_counter()
        backend = "clarabel" if solver == "auto" and data.V * data.d <= CLARABEL_VARIABLES else solver
        try:
            svm = ntp_svm(data, backend)
        except (SolverError, NotSeparableError) as exc:
            notes.append(f"the NTP-SVM failed ({exc}): the W^mm values are null")
        seconds["svm"] = time.perf_counter() - t0
        if svm is not None and not svm.certified:
            notes.append(f"the NTP-SVM missed its tolerance (worst KKT residual {svm.certificate.worst:.1e} > "
                         f"{svm.tol:g}, solver {svm.solver}): the W^mm values are null, not findings")
    elif decision.separable is None:
        notes.append(decision.reason)
    return PaperA(st, decision, dim, compatible, method, residual, W_star, svm, notes, seconds)


def _prefix_values(data: NTPData, Wc: torch.Tensor, prefix: Prefix, solver: str) -> tuple[dict, SVMResult | None]:
    """The longest separable prefix's size, mass and its own W^mm compared with the model's W_c on it."""
    values = {"prefix_contexts": prefix.k, "prefix_first_not_separable": prefix.k_fail,
              "prefix_maximal": prefix.exact, "prefix_mass": prefix.mass, "prefix_svm_certified": None,
              "prefix_svm_kkt_worst": None, "prefix_svm_norm": None,
              "prefix_cos_perp_mm": None, "prefix_margin_ratio": None, "prefix_separated_fraction": None}
    if prefix.k == 0:
        return values, None
    sub = subset(data, prefix.order[:prefix.k])
    values["prefix_separated_fraction"] = logit_values(Wc @ sub.H.mT, sub)["separated_fraction"]
    if bool((sub.support_sizes == sub.V).all()):
        return values, None
    backend = "clarabel" if solver == "auto" and data.V * data.d <= CLARABEL_VARIABLES else solver
    try:
        svm = ntp_svm(sub, backend)
    except (SolverError, NotSeparableError):
        return values, None
    values.update(prefix_svm_certified=svm.certified, prefix_svm_kkt_worst=svm.certificate.worst)
    if not svm.certified:  # an uncertified W^mm is never reported as a finding
        return values, svm
    values["prefix_svm_norm"] = svm.norm
    if int((sub.support_sizes - 1).sum()) <= EXACT_ROWS:
        values["prefix_cos_perp_mm"] = _cos(subspace(sub, "exact").project_perp(Wc), svm.W)
    norm = float(torch.linalg.vector_norm(Wc))
    if norm > 0:
        values["prefix_margin_ratio"] = float(ntp_margin(Wc, sub)) / norm * svm.norm
    return values, svm


# ================================================================================================ one model state
@dataclass(frozen=True, eq=False)
class ModelGeometry:
    """The geometry of one model state (module docstring).

    Attributes
    ----------
    values : name -> float, int, bool or None (None: undefined or undecided here)
    paper_a : paper A's objects of (H, P) with how each was decided
    spectra : name -> the leading singular values of ``logits`` (L_c), ``H`` and ``W`` (W_c)
    prefix_svm : the NTP-SVM of the longest separable prefix (when computed)
    """

    values: dict[str, float | int | bool | None]
    paper_a: PaperA
    spectra: dict[str, torch.Tensor]
    prefix_svm: SVMResult | None = None


def model_geometry(data: NTPData, W: torch.Tensor, ref: LogitReference, *, solver: str = "auto",
                   prefix: bool = True) -> ModelGeometry:
    """Measure a model state read as a linear decoder on its own features (module docstring, docs/lm.md).

    Parameters
    ----------
    data : NTPData
        The contexts' NTP data whose ``H`` (m, d) holds the model's features (its last hidden states).
    W : Tensor (V, d)
        The model's unembedding.
    ref : LogitReference
        :func:`logit_reference` of ``data`` (shared by every checkpoint).
    solver : str
        NTP-SVM backend; "auto" takes Clarabel up to :data:`CLARABEL_VARIABLES` variables V d.
    prefix : bool
        Also measure the longest separable prefix of the contexts when the data are not separable (``prefix_*``).

    Returns
    -------
    ModelGeometry
        ``values`` (the quantities of docs/lm.md#what-is-measured), ``paper_a`` and ``spectra``.

    Examples
    --------
    >>> data = NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0, 0, 0.3, 0.7]])
    >>> ref = logit_reference(data)
    >>> W = 5 * torch.tensor([[1.0, 0, 0], [1, 0, 0], [0, 1, 1], [-1, 0, 1]], dtype=torch.float64)
    >>> g = model_geometry(data, W, ref)
    >>> g.values["separable"], round(g.values["margin"], 4), g.values["separated_fraction"]
    (True, 0.4714, 1.0)
    """
    data = data.to(device="cpu", dtype=torch.float64)
    W = W.detach().to(device="cpu", dtype=torch.float64)
    a = paper_a(data, solver=solver)
    Wc = centred(W)
    L = Wc @ data.H.mT  # (V, m) centred logits
    values: dict[str, float | int | bool | None] = logit_values(L, data, ref)
    norm_Wc = float(torch.linalg.vector_norm(Wc))
    st = a.structure
    values.update({
        "unembedding_norm": norm_Wc,
        "mean_row_share": float(torch.linalg.vector_norm(W - Wc)) / max(float(torch.linalg.vector_norm(W)), 1e-300),
        "feature_norm": float(torch.linalg.vector_norm(data.H)) / data.m ** 0.5,
        "logit_perp_norm": float(torch.linalg.vector_norm(L - project_F(L, data))),
        "margin": float(ntp_margin(W, data)) / norm_Wc if norm_Wc > 0 and values["nontrivial_contexts"] else None,
        "rank_H": st.rank, "equations": st.equations, "tied_contexts": int(st.tied.sum()),
        "graph_components": None if st.graph is None else st.graph.n_components,
        "dim_F": a.dim_F, "compatible": a.compatible, "separable": a.decision.separable,
        "separability_method": a.decision.method, "separability_certified": a.decision.certified,
        "separability_residual": a.decision.residual, "compatibility_method": a.compatibility_method,
        "F_error_rel": None, "svm_norm": None, "svm_certified": None, "svm_kkt_worst": None, "cos_perp_mm": None,
        "margin_ratio": None,
    })
    if a.W_star is not None and float(torch.linalg.vector_norm(a.W_star)) > 0:
        F = subspace(data, "exact")
        values["F_error_rel"] = float(torch.linalg.vector_norm(F.project(W) - a.W_star)
                                      / torch.linalg.vector_norm(a.W_star))
    if a.svm is not None:
        values.update(svm_certified=a.svm.certified, svm_kkt_worst=a.svm.certificate.worst)
    if a.W_mm is not None:  # P_⊥ from the exact method only (the iterative one stalls on a model's features)
        perp = subspace(data, "exact").project_perp(Wc) if st.equations <= EXACT_ROWS else None
        values.update(svm_norm=a.svm.norm, cos_perp_mm=None if perp is None else _cos(perp, a.W_mm),
                      margin_ratio=None if values["margin"] is None else values["margin"] * a.svm.norm)
    prefix_svm = None
    if prefix and a.decision.separable is False and values["nontrivial_contexts"]:
        t0 = time.process_time()
        p_values, prefix_svm = _prefix_values(data, Wc, separable_prefix(data, structure=st), solver)
        values.update(p_values, prefix_cpu_seconds=time.process_time() - t0)
    for key, ref_dirs in ref.directions.items():
        suffix = "" if key == "mm" else "_S"
        for name, v in gram_cosines(Wc, data.H, ref_dirs).items():
            values[name + suffix] = v
    values.update(support_collapse(data.H, ref.groups, data.pi))
    Q = torch.linalg.qr(Wc.mT @ ref.U_mm)[0]  # the support-pattern subspace span(W_c^T U) (docs/ufm.md, U-5)
    values.update({f"sub_{k}": v for k, v in support_collapse(data.H @ Q, ref.groups, data.pi).items()
                   if k not in ("collapse_sets", "collapse_contexts")})  # the sets are the same as above
    spectra = {"logits": torch.linalg.svdvals(L)[:SPECTRUM], "H": torch.linalg.svdvals(data.H)[:SPECTRUM],
               "W": torch.linalg.svdvals(Wc)[:SPECTRUM]}
    return ModelGeometry(values, a, spectra, prefix_svm)


__all__ = ["BLOCK", "CLARABEL_VARIABLES", "EXACT_ROWS", "NUCLEAR_MAX_SVD", "SMOOTHING", "SPECTRUM", "Directions",
           "LogitReference", "ModelGeometry", "PaperA", "baseline_logits", "centred", "gram_cosines",
           "logit_reference", "logit_values", "model_geometry", "nuclear_cost", "paper_a", "support_collapse"]
