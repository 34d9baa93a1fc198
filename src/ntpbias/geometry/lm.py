"""The NTP geometry of a language model read as a linear decoder on its own features (docs/lm.md#what-is-measured).

A model state gives, for the m distinct contexts of NTP data, its last hidden states H (m, d) (what multiplies the
unembedding) and its unembedding W (V, d); its logits are L = W H^T (V, m), column j = ℓ_j. Softmax is blind to a
constant added to a column, so every measurement uses the **centred** unembedding W_c = (I - 11^T/V) W, whose logits
L_c = W_c H^T differ from L by a constant per column (the component 1 w̄^T of W lies in F^⊥ and never changes a
probability; GD keeps it fixed, eq. (3) of paper A, Adam and tied embeddings need not).

Two readings of the same state, each with the theory's prediction:

* **paper A** (H fixed, W trained): with F, W* and W^mm of the data (m contexts, embeddings H), P_F(W) -> W* and
  P_⊥(W) grows in the direction of W^mm (Thm 2 of paper A). Measured: ``F_error_rel`` = ||P_F(W) - W*|| / ||W*||,
  ``svm_norm`` = ||W^mm||, ``cos_perp_mm`` = cos(P_⊥(W_c), W^mm), ``margin`` = γ(W)/||W_c|| with
  γ(W) = min_j min_{z ∈ S_j, v ∉ S_j} (ℓ_{j,z} - ℓ_{j,v}) (Sec. 3.1 of paper A) and ``margin_ratio`` =
  margin x ||W^mm|| (1 at W^mm).
* **the log-bilinear model** (H and W both free, docs/ufm.md): the logits split into the finite in-support log-odds
  L* and a part growing in the direction of the nuclear-norm NTP-SVM L^mm; Gram matrices align with L^mm's SVD;
  contexts that share a support collapse. Measured: ``finite_rel_error`` = ||P_F(L_c) - L*|| / ||L*|| (logit space:
  the in-support logit differences against the log-odds, defined for every H), ``logit_cos_perp_mm`` =
  cos(P_⊥(L_c), L^mm), ``logit_cos_perp_S`` = cos(P_⊥(L_c), S̃), the Gram cosines and the collapse angles of
  :mod:`ntpbias.geometry.ufm`.

Non-separable H (no W puts every context's support above the rest) is a finding: the paper-A max-margin quantities
are then None, and ``separated_fraction`` (the share of contexts whose every in-support logit is above every
out-of-support one, weighted by π̂; a context with full support counts as separated) says how far the model's own W
is from separating.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.ntp import NTPData
from .analysis import Analysis, analyze
from .linear.loss import cross_entropy
from .linear.subspace import subspace
from .margins.program import ntp_margin
from .margins.result import SVMResult
from .solvers.ipm import fits as ipm_fits
from .ufm.logit_svm import nuclear_svm
from .ufm.logits import (
    SupportSVD,
    collapse,
    finite_logits,
    gram_alignment,
    predicted_grams,
    project_F,
    subspace_collapse,
    support_groups,
    support_svd,
)

#: singular values of the logits, of H and of W_c kept per checkpoint (the spectra figure)
SPECTRUM = 32
#: ``solver="auto"``: F by the exact Gram eigendecomposition up to this many rows Σ_j (|S_j| - 1) (a model's features
#: are ill-conditioned, cond(H) ~ 1e4 on Shakespeare, where the conjugate gradients of the iterative method stall), and
#: the NTP-SVM by the interior-point method wherever it fits (:func:`~ntpbias.geometry.solvers.ipm.fits`: its cost does
#: not depend on cond(H); it certified where the workset method did not, docs/benchmarks.md#ill-conditioned-features)
EXACT_ROWS = 6000


def centred(W: torch.Tensor) -> torch.Tensor:
    """W_c = (I - 11^T/V) W for W (..., V, d) (or logits (..., V, m)): the rows minus their mean, i.e. the unembedding
    (the logits) modulo the softmax-invariant direction.

    >>> centred(torch.tensor([[1.0, 2.0], [3.0, 6.0]])).tolist()
    [[-1.0, -2.0], [1.0, 2.0]]
    """
    return W - W.mean(-2, keepdim=True)


def _cos(A: torch.Tensor, B: torch.Tensor) -> float:
    den = float(torch.linalg.vector_norm(A) * torch.linalg.vector_norm(B))
    return float((A * B).sum()) / den if den > 0 else float("nan")


@dataclass(frozen=True, eq=False)
class LogitReference:
    """The objects that depend on the data's supports and probabilities alone, shared by every checkpoint.

    Attributes
    ----------
    L_star : (V, m) the finite part L* (docs/ufm.md)
    support : the SVD of the centred support matrix S̃
    svm : the nuclear-norm NTP-SVM (L^mm centred over the vocabulary; None when not computed)
    groups : (m,) support-set label of every context
    grams : the predicted word and context Gram directions ((V, V), (m, m)) of L^mm and of S̃
    """

    L_star: torch.Tensor
    support: SupportSVD
    svm: SVMResult | None
    groups: torch.Tensor
    grams: dict[str, tuple[torch.Tensor, torch.Tensor]]

    @property
    def L_mm(self) -> torch.Tensor | None:
        return None if self.svm is None else centred(self.svm.L)

    @property
    def U_mm(self) -> torch.Tensor:
        """Left singular vectors of L^mm (or of S̃ without the SVM): the support-pattern directions of the words."""
        if self.svm is None:
            return self.support.U
        U, s, _ = torch.linalg.svd(self.L_mm, full_matrices=False)
        return U[:, : int((s > 1e-9 * s[0]).sum())]


def logit_reference(data: NTPData, *, solver: str = "auto", nuclear: bool = True) -> LogitReference:
    """What every checkpoint of a model is compared with, from the data's supports and probabilities alone.

    Parameters
    ----------
    data : NTPData
        The contexts' next-token distributions (its ``H`` is not used).
    solver : str
        Backend of the nuclear-norm NTP-SVM (:func:`~ntpbias.geometry.ufm.logit_svm.nuclear_svm`).
    nuclear : bool
        False skips the nuclear-norm SVM (the reference is then the centred support matrix S̃ alone).

    Returns
    -------
    LogitReference
        L*, the SVD of S̃, the certified L^mm, the support groups and the predicted Gram directions (float64, CPU).

    Examples
    --------
    >>> data = NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0, 0, 0.3, 0.7]])
    >>> ref = logit_reference(data)
    >>> ref.svm.certified, ref.groups.tolist(), tuple(ref.L_mm.shape)
    (True, [0, 1, 2], (4, 3))
    """
    data = data.to(device="cpu", dtype=torch.float64)
    ssvd = support_svd(data)
    svm = nuclear_svm(data, solver) if nuclear else None
    grams = {"S": (ssvd.U * ssvd.sigma @ ssvd.U.mT, ssvd.Vt.mT * ssvd.sigma @ ssvd.Vt)}
    if svm is not None:
        grams["mm"] = predicted_grams(centred(svm.L))
    return LogitReference(finite_logits(data), ssvd, svm, support_groups(data)[0], grams)


@dataclass(frozen=True, eq=False)
class ModelGeometry:
    """The geometry of one model state (module docstring).

    Attributes
    ----------
    values : name -> float or None (None: undefined here, e.g. max-margin quantities of non-separable H)
    analysis : paper A's objects of (H, P) (:func:`~ntpbias.geometry.analysis.analyze`)
    spectra : name -> the leading singular values of ``logits`` (L_c), ``H`` and ``W`` (W_c)
    """

    values: dict[str, float | bool | None]
    analysis: Analysis
    spectra: dict[str, torch.Tensor]


def model_geometry(data: NTPData, W: torch.Tensor, ref: LogitReference, *, solver: str = "auto",
                   analysis: Analysis | None = None) -> ModelGeometry:
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
        NTP-SVM backend of :func:`~ntpbias.geometry.analysis.analyze`; "auto" takes the exact subspace method while
        the problem is small enough (:data:`EXACT_ROWS`) and the interior-point method where it fits.
    analysis : Analysis, optional
        Paper A's objects of ``data`` when already computed.

    Returns
    -------
    ModelGeometry
        ``values`` (name -> number, bool or None: the quantities of docs/lm.md#what-is-measured), ``analysis`` and
        ``spectra``.

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
    if analysis is None:
        rows = int((data.support_sizes - 1).sum())
        auto = solver == "auto"
        analysis = analyze(data, solver="ipm" if auto and ipm_fits(data.V, data.m) else solver,
                           subspace_method="exact" if auto and rows <= EXACT_ROWS else "auto")
    a = analysis
    Wc = centred(W)
    L = Wc @ data.H.mT  # (V, m) centred logits
    support = data.support.T
    PF = project_F(L, data)
    perp = L - PF
    inf = torch.tensor(float("inf"), dtype=L.dtype)
    lowest_in = torch.where(support, L, inf).amin(0)
    highest_out = torch.where(support, -inf, L).amax(0)
    separated = (lowest_in > highest_out).to(L.dtype)
    norm_Wc = float(torch.linalg.vector_norm(Wc))
    gamma = float(ntp_margin(W, data))
    loss = float(cross_entropy(W, data))
    values: dict[str, float | bool | None] = {
        "loss": loss, "loss_gap": loss - data.entropy, "entropy": data.entropy,
        "finite_rel_error": float(torch.linalg.vector_norm(PF - ref.L_star) / torch.linalg.vector_norm(ref.L_star))
        if float(torch.linalg.vector_norm(ref.L_star)) > 0 else None,
        "unembedding_norm": norm_Wc, "mean_row_share": float(torch.linalg.vector_norm(W - Wc))
        / max(float(torch.linalg.vector_norm(W)), 1e-300),
        "feature_norm": float(torch.linalg.vector_norm(data.H)) / data.m ** 0.5,
        "logit_perp_norm": float(torch.linalg.vector_norm(perp)),
        "margin": gamma / norm_Wc if norm_Wc > 0 else None,
        "separated_fraction": 1.0 - float((data.pi * (1 - separated)).sum()),  # exactly 1 when all are
        "dim_F": a.dim_F, "compatible": a.compatible, "separable": a.separability.separable,
        "F_error_rel": _rel(a.data, W, a) if a.compatible and float(torch.linalg.vector_norm(a.W_star)) > 0 else None,
        "svm_norm": None, "svm_certified": None, "svm_kkt_worst": None, "cos_perp_mm": None, "margin_ratio": None,
        "logit_cos_perp_S": _cos(perp, ref.support.S_tilde),
    }
    if a.svm is not None:
        W_mm = a.svm.W
        values.update(svm_norm=a.svm.norm, svm_certified=a.svm.certified, svm_kkt_worst=a.svm.certificate.worst,
                      cos_perp_mm=_cos(subspace(a.data).project_perp(Wc), W_mm),
                      margin_ratio=None if values["margin"] is None else values["margin"] * a.svm.norm)
    if ref.L_mm is not None:
        values["logit_cos_perp_mm"] = _cos(perp, ref.L_mm)
    for key, (word, context) in ref.grams.items():
        suffix = "" if key == "mm" else "_S"
        for name, v in gram_alignment(Wc, data.H, word, context).items():
            values[name + suffix] = float(v)
    for name, v in {**collapse(data.H, ref.groups), **subspace_collapse(Wc, data.H, ref.groups, ref.U_mm)}.items():
        values[name] = float(v)
    spectra = {"logits": torch.linalg.svdvals(L)[:SPECTRUM], "H": torch.linalg.svdvals(data.H)[:SPECTRUM],
               "W": torch.linalg.svdvals(Wc)[:SPECTRUM]}
    return ModelGeometry(values, a, spectra)


def _rel(data: NTPData, W: torch.Tensor, a: Analysis) -> float:
    """||P_F(W) - W*|| / ||W*|| (paper A's finite component, on the model's own H)."""
    return float(torch.linalg.vector_norm(subspace(data).project(W) - a.W_star) / torch.linalg.vector_norm(a.W_star))


__all__ = ["LogitReference", "ModelGeometry", "SPECTRUM", "centred", "logit_reference", "model_geometry"]
