"""Everything the linear-NTP theory predicts for one dataset, in one call (``ntpbias analyze``).

:func:`analyze` computes the entropy floor H, the subspace F, W*, the compatibility and separability
verdicts with their certificates, and the NTP-SVM W^mm with its KKT certificate. The result serializes to
``analysis.json`` (:meth:`Analysis.to_dict`) and ``geometry.npz`` (:meth:`Analysis.arrays`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .._repr import short_repr
from .._tensor import to_numpy
from ..config import argument, unknown_keyword
from ..data.ntp import NTPData, as_ntp_data
from ..errors import ArgumentTypeError, describe_value
from ..limits import check_memory, nbytes
from .constraints import constraints
from .linear.loss import smoothness_bound
from .linear.subspace import EXACT_MAX_ROWS, subspace
from .linear.subspace import METHODS as SUBSPACE_METHODS
from .margins.program import SOLVERS, MarginProgram, SVMResult, ntp_svm
from .norms import parse_norms
from .scaling import data_scale, stable_norm
from .separability.verdict import METHODS as SEPARABILITY_METHODS
from .separability.verdict import SeparabilityResult, ntp_separability


@short_repr
@dataclass(frozen=True, eq=False)
class Analysis:
    """The theory's objects for one dataset, as :func:`analyze` computes them (``analysis.json`` is ``to_dict()``).

    Attributes
    ----------
    data : NTPData
        The dataset.
    dim_F : int
        Dimension of the data subspace F (eq. (5) of paper A).
    W_star : Tensor (V, d)
        The finite component W*: the solution of the log-odds equations (4) inside F (least squares when the data
        are not compatible).
    compatibility_residual : float
        Relative residual of eq. (4) at W*; ``compatible`` is True when it is below the tolerance.
    compatible : bool
        NTP_H-compatibility (Def. 1 of paper A).
    separability : SeparabilityResult
        NTP-separability (Def. 2) with its certificate either way.
    svm : SVMResult or None
        The NTP-SVM W^mm (Def. 3) with its certificate; None when the data are not separable.
    seconds : dict of str to float
        Time per stage.
    notes : list of str
        Findings in words (not compatible, a solve that missed its tolerance, ...).
    subspace_method : str
        How F and W* were computed (``"exact"`` or ``"iterative"``).
    max_margin : dict of str to SVMResult or None
        The NTP-SVM in each norm asked for by ``norms=``.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> a = analyze(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> isinstance(a, Analysis), a.dim_F, a.summary()["separable"]
    (True, 1, True)
    """

    data: NTPData
    dim_F: int
    W_star: torch.Tensor
    compatibility_residual: float
    compatible: bool
    separability: SeparabilityResult
    svm: SVMResult | None
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)
    subspace_method: str = "exact"
    max_margin: dict = field(default_factory=dict)  # norm -> SVMResult | None (``norms=``)

    def summary(self) -> dict[str, object]:
        """The headline numbers: sizes, entropy floor, dim F, the two verdicts and ||W^mm||."""
        d = self.data
        return {"m": d.m, "V": d.V, "d": d.d, "entropy": d.entropy, "dim_F": self.dim_F,
                "compatible": self.compatible, "separable": self.separability.separable,
                "norm_W_star": stable_norm(self.W_star),
                "norm_W_mm": None if self.svm is None else self.svm.norm,
                "certified": None if self.svm is None else self.svm.certified}

    def _summary(self) -> dict:
        """What ``repr`` (and the notebook table) shows: :meth:`summary`."""
        return self.summary()

    def to_dict(self) -> dict:
        """The ``analysis.json`` record (the file formats section of the README)."""
        data, svm = self.data, self.svm
        cons = constraints(data)
        sizes = data.support_sizes
        out = {
            "m": data.m,
            "V": data.V,
            "d": data.d,
            "n_samples": data.n_samples,
            "entropy": data.entropy,
            "dim_F": self.dim_F,
            "ambient_dim": data.V * data.d,
            "n_equalities": len(cons.eq),
            "n_inequalities": len(cons.ineq),
            "support_size_min": int(sizes.min()),
            "support_size_max": int(sizes.max()),
            "support_size_mean": float(sizes.double().mean()),
            "compatible": self.compatible,
            "compatibility_residual": self.compatibility_residual,
            "separable": self.separability.separable,
            "separability_method": self.separability.method,
            "subspace_method": self.subspace_method,
            "separability_certificate": {
                "kind": "separating W (margin 1, in F^perp)" if self.separability.separable
                else "Gordan multipliers (A_in^T y + A_eq^T mu = 0, y >= 0, sum y = 1)",
                "residual": self.separability.residual,
                "certified": self.separability.certified,
                "reason": self.separability.reason,
                "method": self.separability.method,
            },
            "margin": None if svm is None else 1.0 / svm.norm,
            "min_logit_gap_W_mm": None if svm is None else svm.min_gap,
            "norm_W_star": stable_norm(self.W_star),
            "norm_W_mm": None if svm is None else svm.norm,
            "n_support_vectors": None if svm is None else svm.n_active,
            "solver": None if svm is None else svm.solver,
            "solver_details": None if svm is None else svm.details,
            "solve_seconds": None if svm is None else svm.solve_seconds,
            "solver_iterations": None if svm is None else svm.iterations,
            "status": None if svm is None else svm.status,
            "certified": None if svm is None else svm.certified,
            "kkt": None if svm is None else svm.certificate.as_dict(),
            "data_scale": data_scale(data.H),
            "embedding_bound_M": data.embedding_bound,
            "smoothness_bound_L": smoothness_bound(data),
            "seconds": self.seconds,
            "notes": self.notes,
        }
        if data.context_lengths is not None:
            out["entropy_per_length"] = {str(t): h for t, h in data.entropy_per_length().items()}
        if self.max_margin:
            out["max_margin"] = {norm: max_margin_entry(norm, r) for norm, r in self.max_margin.items()}
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``geometry.npz`` arrays: ``W_star`` always; ``W_mm`` and its multipliers when separable;
        ``W_separating`` or the Gordan multipliers from the separability LP."""
        out = {"W_star": to_numpy(self.W_star)}
        if self.svm is not None:
            out["W_mm"] = to_numpy(self.svm.W)
            out["dual_ineq"] = to_numpy(self.svm.dual_ineq)
            out["dual_eq"] = to_numpy(self.svm.dual_eq)
        sep = self.separability
        if sep.W is not None:
            out["W_separating"] = to_numpy(sep.W)
        if sep.farkas_y is not None:
            out["gordan_y"] = to_numpy(sep.farkas_y)
            out["gordan_mu"] = to_numpy(sep.farkas_mu)
        for norm, r in self.max_margin.items():
            if r is not None and not isinstance(r, str):
                out[f"W_mm_{norm}"] = to_numpy(r.W)
        return out


def footprint(data: NTPData) -> dict[str, int]:
    """Memory of :func:`analyze` by part, from the shapes (its preflight): the constraint system's index arrays and
    multipliers (one row per in-support/out-of-support pair and per equality), logits (V x m) and iterates (V x d)
    of the matrix-free solvers, the exact Gram matrix when used."""
    s = data.support_sizes.to(torch.float64)
    R = int((s * (data.V - s) + s - 1).sum())
    # per-entry byte counts calibrated on autoregressive one-hot data (m = 1560 and 3120 contexts: measured peaks
    # 0.28 and 0.73 GB above the data's, these estimates 0.22 and 0.81 GB)
    parts = {f"constraint indices and multipliers ({R:,} rows)": nbytes(R, itemsize=25 * 8),
             f"logits and their gradients (V = {data.V:,} x m = {data.m:,})": nbytes(data.V, data.m, itemsize=10 * 8),
             f"W iterates (V x d = {data.V:,} x {data.d:,})": nbytes(data.V, data.d, itemsize=20 * 8)}
    rows = int((s - 1).sum())
    if rows <= EXACT_MAX_ROWS:
        parts[f"Gram matrix ({rows:,} x {rows:,})"] = nbytes(rows, rows, itemsize=3 * 8)
    return parts
def max_margin_entry(norm: str, result) -> dict:
    """The ``analysis.json`` record of one norm's NTP-SVM (docs/optimizers.md, "ntpbias analyze --norms"): its norm,
    the maximum normalized margin 1/||W^mm||, the certificate, uniqueness, the solver and its time; a string result is
    the reason it is missing (not separable, solver failure)."""
    if result is None or isinstance(result, str):
        return {"norm_W_mm": None, "margin": None, "certified": None, "unique": None, "solver": None, "seconds": None,
                "status": result or "not separable"}
    l2 = norm == "l2"
    return {"norm_W_mm": result.norm, "margin": 1.0 / result.norm, "certified": result.certified,
            "unique": True if l2 else result.unique, "solver": result.solver, "seconds": result.solve_seconds,
            "status": result.status, "min_logit_gap": result.min_gap,
            "certificate": result.certificate.as_dict(),
            "uniqueness": "the l2 norm is strictly convex" if l2 else result.uniqueness}


#: the options of the dual solver that :func:`analyze` passes on (``solver_options``)
SOLVER_OPTIONS = ("dtype", "device", "max_iter")


def analyze(data: NTPData, *, solver: str = "auto", progress=None, separability_method: str = "auto",
            subspace_method: str = "auto", solver_options: dict | None = None,
            norms: str | tuple[str, ...] = ()) -> Analysis:
    """Compute the entropy floor, F, W*, compatibility, separability and W^mm of ``data`` (``ntpbias analyze``).

    Small problems get the exact Gram eigendecomposition, the separability LP and cvxpy + Clarabel; large ones the
    matrix-free path, where the dual solver's certified W^mm is both the separability certificate and the NTP-SVM
    solution (solved once). Non-separable or non-compatible data are findings, not errors.

    Parameters
    ----------
    data : NTPData or path
        The dataset (``NTPData.from_arrays``, :func:`~ntpbias.api.from_sequences`, :func:`~ntpbias.api.from_text`),
        or the path of an NTP dataset ``.npz`` (read with ``NTPData.load``).
    solver : {"auto", "clarabel", "dual", "workset", "ipm"}
        The NTP-SVM backend; ``"ipm"``, the interior-point method, is for ill-conditioned features such as a trained
        model's (its cost does not depend on cond(H): docs/benchmarks.md#ill-conditioned-features).
    progress : callable, optional
        Receives a short description of each stage (for a status display).
    separability_method : {"auto", "lp", "dual"}
        How separability is decided (:func:`~ntpbias.geometry.separability.verdict.ntp_separability`).
    subspace_method : {"auto", "exact", "iterative"}
        How F and W* are computed (:class:`~ntpbias.geometry.linear.subspace.DataSubspace`).
    solver_options : dict, optional
        ``dtype``, ``device``, ``max_iter`` for the dual solver (another key is an error naming these).
    norms : str or tuple of str
        A norm name, a comma-separated list (``"l2,linf"``) or a list of names: also solve the NTP-SVM in each of
        these norms (``"l2"``, ``"linf"``, ``"l1"``, ``"spectral"``, ``"nuclear"``;
        :func:`~ntpbias.geometry.margins.norm_svm.norm_svm`, "l2" reuses W^mm) into ``max_margin``
        (docs/optimizers.md, "ntpbias analyze --norms").

    Returns
    -------
    Analysis
        Every object with its certificate; ``to_dict()`` is ``analysis.json``.

    Raises
    ------
    ArgumentTypeError
        When an argument has the wrong type (``data`` an array, ``progress`` not callable, ...).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> a = analyze(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> a.compatible, a.separability.separable, round(a.svm.norm, 6)
    (True, True, 1.154701)
    >>> a  # doctest: +ELLIPSIS
    Analysis(m=2, V=3, d=2, entropy=0.346574, dim_F=1, compatible=True, separable=True, ..., certified=True)
    """
    where = "analyze"
    data = as_ntp_data(data, where)
    solver = argument(where, "solver", solver, str, choices=SOLVERS)
    separability_method = argument(where, "separability_method", separability_method, str,
                                   choices=SEPARABILITY_METHODS)
    subspace_method = argument(where, "subspace_method", subspace_method, str, choices=SUBSPACE_METHODS)
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(f"{where}: progress = {describe_value(progress)}: expected a function of one "
                                "message (or None)")
    if solver_options is not None and not isinstance(solver_options, dict):
        raise ArgumentTypeError(f"{where}: solver_options = {describe_value(solver_options)}: expected a dict, e.g. "
                                "{\"max_iter\": 50000}")
    for key in solver_options or {}:
        if key not in SOLVER_OPTIONS:
            raise unknown_keyword(f"{where}: solver_options", key, SOLVER_OPTIONS)
    norms = parse_norms(norms, f"{where}: norms") if not (isinstance(norms, tuple) and not norms) else ()
    say = progress or (lambda _msg: None)
    check_memory(footprint(data), f"the analysis of {data.m:,} contexts (V = {data.V:,}, d = {data.d:,})",
                 hint="use fewer contexts or a smaller embedding", device=data.H.device)
    seconds = {}
    notes = []
    t0 = time.perf_counter()
    say("subspace F and W*")
    F = subspace(data, subspace_method)
    seconds["subspace"] = time.perf_counter() - t0
    if not F.compatible:
        notes.append("not NTP_H-compatible: no W matches every in-support log-odds ratio, so CE cannot reach H "
                     "(Def. 1 of paper A); W_star is the least-squares solution in F")
    options = dict(solver_options or {})
    t0 = time.perf_counter()
    say("separability")
    sep = ntp_separability(data, method=separability_method, **options)
    seconds["separability"] = time.perf_counter() - t0
    svm = None
    if sep.separable:
        t0 = time.perf_counter()
        say("NTP-SVM")
        cons = constraints(data)
        backend = MarginProgram(cons.ineq, cons.eq).choose_solver(solver)
        if sep.svm is not None and backend in ("dual", "workset") and (backend == "dual" or sep.svm.certified):
            svm = sep.svm  # the dual solver's (certified) W^mm already decided separability
        else:
            svm = ntp_svm(data, backend, **(options if backend in ("dual", "workset") else {}))
        seconds["svm"] = time.perf_counter() - t0
        if not svm.certified:
            notes.append(f"the NTP-SVM solve missed its tolerance: worst KKT residual {svm.certificate.worst:.2e} > "
                         f"{svm.tol:g} (status {svm.status})")
    else:
        notes.append("not NTP-separable: " + sep.reason)
    if not sep.certified:
        notes.append(f"the separability certificate has residual {sep.residual:.2e} (above tolerance)")
    max_margin = _norm_svms(data, norms, sep.separable, svm, seconds, notes, say)
    return Analysis(data=data, dim_F=F.dim, W_star=F.W_star, compatibility_residual=F.compatibility_residual,
                    compatible=F.compatible, separability=sep, svm=svm, seconds=seconds, notes=notes,
                    subspace_method=F.method, max_margin=max_margin)


def _norm_svms(data: NTPData, norms, separable: bool, svm, seconds: dict, notes: list, say) -> dict:
    """norm -> its NTP-SVM result, or a string saying why there is none."""
    from ..errors import NotSeparableError, SolverError
    from .margins.norm_svm import norm_svm

    out = {}
    for norm in norms:  # validated by analyze (parse_norms)
        if not separable:
            out[norm] = "not separable"
            continue
        if norm == "l2":
            out[norm] = svm
            continue
        say(f"NTP-SVM in the {norm} norm")
        t0 = time.perf_counter()
        try:
            out[norm] = norm_svm(data, norm)
        except (NotSeparableError, SolverError) as exc:
            out[norm] = f"failed: {exc}"
            notes.append(f"the {norm} NTP-SVM: {exc}")
        seconds[f"svm_{norm}"] = time.perf_counter() - t0
        if not isinstance(out[norm], str) and not out[norm].certified:
            notes.append(f"the {norm} NTP-SVM missed its tolerance: certificate residual "
                         f"{out[norm].certificate.worst:.2e}")
    return out
