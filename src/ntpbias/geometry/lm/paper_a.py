"""Paper A's objects of a model state's features, decided at any size (docs/lm.md#decided-by-structure).

:func:`paper_a` takes the verdicts from :func:`~ntpbias.geometry.separability.decide.decide` (structure first: where
m > d the support graph usually decides *not separable* in a second; the certified LP where it fits; "undecided"
otherwise), dim F and compatibility from the structure or the exact subspace method while it fits (:data:`EXACT_ROWS`),
W* from that method, and W^mm from the NTP-SVM (a certificate that misses its tolerance nulls every W^mm-derived value).
Where the data are not separable, the longest separable prefix of the contexts by frequency
(:func:`~ntpbias.geometry.separability.decide.separable_prefix`) gets its own W^mm (:func:`prefix_values`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ...data.ntp import NTPData
from ...errors import NotSeparableError, SolverError
from ..linear.subspace import subspace
from ..margins.program import ntp_margin, ntp_svm
from ..margins.result import SVMResult
from ..separability.decide import Decision, Prefix, decide, subset
from ..separability.structure import Structure, ntp_structure
from ..solvers.ipm import fits as ipm_fits
from .measures import cosine, logit_values

#: ``solver="auto"``: F and W* by the exact Gram eigendecomposition up to this many rows Σ_j (|S_j| - 1) (a model's
#: features are ill-conditioned, cond(H) ~ 1e4 on Shakespeare, where the conjugate gradients of the iterative method
#: stall)
EXACT_ROWS = 6000


def svm_backend(data: NTPData, solver: str) -> str:
    """The NTP-SVM backend for a model's features: ``solver="auto"`` takes the interior-point method wherever it fits
    (:func:`~ntpbias.geometry.solvers.ipm.fits`; its cost does not depend on cond(H), and it certified where the
    workset method did not: docs/benchmarks.md#ill-conditioned-features), the NTP-SVM's own choice beyond."""
    return "ipm" if solver == "auto" and ipm_fits(data.V, data.m) else solver


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
        try:
            svm = ntp_svm(data, svm_backend(data, solver))
        except (SolverError, NotSeparableError) as exc:
            notes.append(f"the NTP-SVM failed ({exc}): the W^mm values are null")
        seconds["svm"] = time.perf_counter() - t0
        if svm is not None and not svm.certified:
            notes.append(f"the NTP-SVM missed its tolerance (worst KKT residual {svm.certificate.worst:.1e} > "
                         f"{svm.tol:g}, solver {svm.solver}): the W^mm values are null, not findings")
    elif decision.separable is None:
        notes.append(decision.reason)
    return PaperA(st, decision, dim, compatible, method, residual, W_star, svm, notes, seconds)


def prefix_values(data: NTPData, Wc: torch.Tensor, prefix: Prefix, solver: str) -> tuple[dict, SVMResult | None]:
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
    try:
        svm = ntp_svm(sub, svm_backend(sub, solver))
    except (SolverError, NotSeparableError):  # no certified W^mm: the same as a solve that misses its tolerance
        values["prefix_svm_certified"] = False
        return values, None
    values.update(prefix_svm_certified=svm.certified, prefix_svm_kkt_worst=svm.certificate.worst)
    if not svm.certified:  # an uncertified W^mm is never reported as a finding
        return values, svm
    values["prefix_svm_norm"] = svm.norm
    if int((sub.support_sizes - 1).sum()) <= EXACT_ROWS:
        values["prefix_cos_perp_mm"] = cosine(subspace(sub, "exact").project_perp(Wc), svm.W)
    norm = float(torch.linalg.vector_norm(Wc))
    if norm > 0:
        values["prefix_margin_ratio"] = float(ntp_margin(Wc, sub)) / norm * svm.norm
    return values, svm




__all__ = ["EXACT_ROWS", "PaperA", "paper_a", "prefix_values", "svm_backend"]
