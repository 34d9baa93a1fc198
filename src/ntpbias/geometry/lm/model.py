"""One model state measured (docs/lm.md#what-is-measured): :func:`model_geometry` reads the model as paper A's linear
decoder on its own features (:mod:`.paper_a`) and as the log-bilinear model (:mod:`.measures`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ...data.ntp import NTPData
from ..linear.subspace import subspace
from ..margins.program import ntp_margin
from ..margins.result import SVMResult
from ..separability.decide import separable_prefix
from ..ufm.logits import project_F
from .measures import LogitReference, centred, cosine, gram_cosines, logit_values, support_collapse
from .paper_a import EXACT_ROWS, PaperA, paper_a, prefix_values

#: singular values of the logits, of H and of W_c kept per checkpoint (the spectra figure)
SPECTRUM = 32
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
        NTP-SVM backend; "auto" takes the interior-point method where it fits (:func:`.paper_a.svm_backend`).
    prefix : bool
        Also measure the longest separable prefix of the contexts when the data are not separable (``prefix_*``).

    Returns
    -------
    ModelGeometry
        ``values`` (the quantities of docs/lm.md#what-is-measured), ``paper_a`` and ``spectra``.

    Examples
    --------
    >>> from ntpbias.geometry.lm import logit_reference
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
        values.update(svm_norm=a.svm.norm, cos_perp_mm=None if perp is None else cosine(perp, a.W_mm),
                      margin_ratio=None if values["margin"] is None else values["margin"] * a.svm.norm)
    prefix_svm = None
    if prefix and a.decision.separable is False and values["nontrivial_contexts"]:
        t0 = time.process_time()
        p_values, prefix_svm = prefix_values(data, Wc, separable_prefix(data, structure=st), solver)
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




__all__ = ["SPECTRUM", "ModelGeometry", "model_geometry"]
