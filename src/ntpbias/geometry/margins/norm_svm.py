"""The NTP-SVM in any norm of :mod:`ntpbias.geometry.norms`, with a certificate recomputed from the solution.

With the reduced-form constraints of paper A (:class:`~ntpbias.geometry.constraints.NTPConstraints`: in-support
logits tied, ``A_eq(W) = 0``, eq. (6a); at least 1 above every out-of-support logit, ``A_in(W) >= 1``, eq. (6b)),

    minimize ||W||  subject to  A_in(W) >= 1,  A_eq(W) = 0                                            (P_N)

is the max-margin problem of the norm: the largest normalized NTP margin over F^⊥ in that norm is 1/||W^mm_N||.
Its Lagrange dual is

    maximize Σ λ  subject to  λ >= 0,  ||A_in^T λ + A_eq^T μ||_* <= 1                                (D_N)

(||.||_* the dual norm), and at the optimum ||W|| = Σ λ and <A_in^T λ + A_eq^T μ, W> = ||W||
(docs/optimizers.md#the-max-margin-programs). l1 and linf make (P_N) a linear program, spectral and nuclear a
semidefinite program; both are solved by cvxpy with Clarabel named explicitly (an interior-point method for LPs, SOCPs
and SDPs), on vec(W) with each constraint family one sparse matrix. The l2 norm keeps the quadratic program of
:mod:`ntpbias.geometry.margins.program` (same minimizer; ``ntp_svm(data, norm="l2")`` is exactly ``ntp_svm(data)``).

Its :class:`~ntpbias.geometry.margins.result.Certificate` is recomputed from (W, λ, μ) alone, never from the
solver's own report:

* ``primal_violation``: max(max_i (1 - A_in(W)_i)^+, max |A_eq(W)|) (the margin is 1, so this is relative to it);
* ``dual_violation``: max_i (-λ_i)^+ / Σ |λ|;
* ``dual_norm_violation``: (||A_in^T λ + A_eq^T μ||_* - 1)^+;
* ``duality_gap``: | ||W|| - Σ λ | / ||W||.

Whether the minimizer is unique (l1, linf, spectral and nuclear are not strictly convex) is decided by
:func:`ntpbias.geometry.margins.uniqueness.uniqueness`: certified unique, certified non-unique (a second minimizer is
exhibited and checked), or undecided.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from ...data.ntp import NTPData
from ...errors import NotSeparableError, SolverError
from ..constraints import LogitGaps, constraints
from ..norms import DUAL, check_norm, matrix_norm
from .result import Certificate, SVMResult

#: A result is certified when every certificate residual is at most this.
CERT_TOL = 1e-6
#: The norms solved here (l2 stays with the quadratic program of ntpbias.geometry.margins.program).
CONIC_NORMS = ("linf", "l1", "spectral", "nuclear")
#: The cone program each norm is.
PROGRAM_KIND = {"linf": "LP", "l1": "LP", "spectral": "SDP", "nuclear": "SDP"}


def certificate(ineq: LogitGaps, eq: LogitGaps | None, norm: str, W: torch.Tensor, lam: torch.Tensor,
                mu: torch.Tensor) -> Certificate:
    """The certificate of (W, λ, μ) for (P_N) in ``norm`` (module docstring), from the constraint operators alone."""
    g = ineq.apply(W)
    viol = float(torch.clamp(1 - g, min=0).max()) if len(g) else 0.0
    G = ineq.adjoint(lam)
    if eq is not None and len(eq):
        viol = max(viol, float(eq.apply(W).abs().max()))
        G = G + eq.adjoint(mu)
    value = float(matrix_norm(W, norm))
    lam_mass = float(lam.abs().sum())
    return Certificate(
        primal_violation=viol,
        dual_violation=float(torch.clamp(-lam, min=0).max()) / max(lam_mass, 1e-300) if len(lam) else 0.0,
        dual_norm_violation=max(0.0, float(matrix_norm(G, DUAL[norm])) - 1.0),
        duality_gap=abs(value - float(lam.sum())) / max(value, 1e-300),
    )


def solve_norm_svm(ineq: LogitGaps, eq: LogitGaps | None, norm: str, *, eps: float = 1e-10, max_iter: int = 400,
                   dynamic_regularization: bool = True):
    """(P_N) by cvxpy + Clarabel; returns (W, λ, μ, iterations, status). Raises NotSeparableError when infeasible.

    l1, linf and spectral are solved in the primal form (P_N), λ and μ being the constraints' multipliers. The nuclear
    norm is solved in the dual form (D_N) with ||G||_2 <= 1 written as the linear matrix inequality
    [[I, G], [G^T, I]] ⪰ 0, and W = -2 Z_12 from its multiplier Z ⪰ 0 (Clarabel stops with a numerical error on
    cvxpy's primal nuclear-norm program here; the dual form solves in a dozen iterations).
    """
    import cvxpy as cp

    V, d = ineq.var_shape
    A_in = ineq.to_sparse()
    A_eq = eq.to_sparse() if eq is not None and len(eq) else None
    settings = {"max_iter": max_iter, "tol_gap_abs": eps, "tol_gap_rel": eps, "tol_feas": eps, "tol_ktratio": 1e-8,
                "dynamic_regularization_enable": dynamic_regularization}
    if norm == "nuclear":
        lam_v = cp.Variable(A_in.shape[0])
        G = A_in.T @ lam_v
        mu_v = None
        if A_eq is not None:
            mu_v = cp.Variable(A_eq.shape[0])
            G = G + A_eq.T @ mu_v
        Gm = cp.reshape(G, (V, d), order="C")
        lmi = cp.bmat([[np.eye(V), Gm], [Gm.T, np.eye(d)]]) >> 0
        prob = cp.Problem(cp.Maximize(cp.sum(lam_v)), [lam_v >= 0, lmi])
    else:
        x = cp.Variable(V * d)
        cons = [A_in @ x >= 1]
        if A_eq is not None:
            cons.append(A_eq @ x == 0)
        W = cp.reshape(x, (V, d), order="C")
        objective = {"l1": lambda: cp.norm1(x), "linf": lambda: cp.norm_inf(x), "spectral": lambda: cp.sigma_max(W)}
        prob = cp.Problem(cp.Minimize(objective[norm]()), cons)
    try:
        with warnings.catch_warnings():  # cvxpy's "may be inaccurate": the certificate below is what decides
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.CLARABEL, **settings)
    except cp.error.SolverError as exc:
        raise SolverError(f"Clarabel failed on the {norm} NTP-SVM: {exc}") from None
    if prob.status in ("infeasible", "infeasible_inaccurate", "unbounded", "unbounded_inaccurate"):
        raise NotSeparableError(f"the {norm} max-margin program is infeasible: the data are not NTP-separable (run "
                                "`ntpbias analyze` for the separability verdict and its certificate)")
    dtype, device = ineq.H.dtype, ineq.H.device

    def tensor(v, sign=1.0):
        if v is None:
            raise SolverError(f"Clarabel returned no solution of the {norm} NTP-SVM (status {prob.status})")
        return sign * torch.as_tensor(np.asarray(v, dtype=np.float64), dtype=dtype, device=device).reshape(-1)

    if norm == "nuclear":
        Z = lmi.dual_value
        Wt = tensor(None if Z is None else -2 * np.asarray(Z)[:V, V:]).reshape(V, d)
        lam = tensor(lam_v.value)
        mu = tensor(mu_v.value) if mu_v is not None else torch.zeros(0, dtype=dtype, device=device)
    else:
        Wt = tensor(x.value).reshape(V, d)
        lam = tensor(cons[0].dual_value)
        mu = tensor(cons[1].dual_value, -1.0) if len(cons) > 1 else torch.zeros(0, dtype=dtype, device=device)
    iters = prob.solver_stats.num_iters if prob.solver_stats is not None else None
    return Wt, lam, mu, iters, prob.status


def feasible_dual(ineq: LogitGaps, eq: LogitGaps | None, norm: str, lam: torch.Tensor,
                  mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(λ, μ) clipped to λ >= 0 and scaled by 1/max(1, ||A_in^T λ + A_eq^T μ||_*): a point of (D_N), so that Σ λ is a
    lower bound on ||W^mm|| (interior-point multipliers violate the dual-norm bound by about the solver tolerance)."""
    lam = lam.clamp(min=0)
    G = ineq.adjoint(lam)
    if eq is not None and len(eq):
        G = G + eq.adjoint(mu)
    scale = max(1.0, float(matrix_norm(G, DUAL[norm])))
    return lam / scale, mu / scale


def norm_svm(data: NTPData, norm: str, *, tol: float = CERT_TOL, decide_uniqueness: bool = True,
             **options) -> SVMResult:
    """W^mm in ``norm`` ("linf", "l1", "spectral", "nuclear") for ``data``, certified (module docstring).

    ``options``: Clarabel's ``eps`` (gap and feasibility tolerances), ``max_iter`` and ``dynamic_regularization``
    (default off, which certifies to about 1e-10 where Clarabel's default stalls near 1e-7; a solver failure retries
    with it on). ``decide_uniqueness``: run
    :func:`~ntpbias.geometry.margins.uniqueness.uniqueness` (a few rank tests; ``unique`` stays None when False).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> res = norm_svm(data, "linf")
    >>> res.certified, round(res.norm, 6)
    (True, 0.5)
    """
    check_norm(norm)
    if norm not in CONIC_NORMS:
        raise SolverError(f"norm_svm solves {', '.join(CONIC_NORMS)}; the l2 NTP-SVM is ntp_svm(data)")
    cons = constraints(data)
    if len(cons.ineq) == 0:
        raise NotSeparableError("every context has full support: no out-of-support token, so no max-margin direction")
    eq = cons.eq if len(cons.eq) else None
    start = time.perf_counter()
    options.setdefault("dynamic_regularization", False)  # 1e-10 certificates instead of about 1e-7 (docs)
    try:
        W, lam, mu, iters, status = solve_norm_svm(cons.ineq, eq, norm, **options)
    except SolverError:
        if not options["dynamic_regularization"]:  # the more robust default settings, less accurate
            retry = {**options, "dynamic_regularization": True}
            W, lam, mu, iters, status = solve_norm_svm(cons.ineq, eq, norm, **retry)
        else:
            raise
    lam, mu = feasible_dual(cons.ineq, eq, norm, lam, mu)
    solve_seconds = time.perf_counter() - start
    cert = certificate(cons.ineq, eq, norm, W, lam, mu)
    details = {"program": PROGRAM_KIND[norm], "solver_status": status, "clarabel_seconds": solve_seconds}
    unique, how, second = None, "not decided (decide_uniqueness=False)", None
    if decide_uniqueness:
        from .uniqueness import uniqueness

        verdict = uniqueness(cons.ineq, eq, norm, W, lam, mu)
        unique, how = verdict.unique, verdict.reason
        second = verdict.details.pop("W_second", None)
        details.update(verdict.details)
    result = SVMResult(norm_name=norm, W=W, dual_ineq=lam, dual_eq=mu, certificate=cert,
                       status="optimal" if cert.worst <= tol else "inaccurate", solver="clarabel",
                       solve_seconds=time.perf_counter() - start, iterations=iters, tol=tol,
                       min_gap=float(cons.ineq.apply(W).min()), unique=unique,
                       uniqueness=how, W_second=second, details=details)
    if not result.certified:
        warnings.warn(f"the {norm} NTP-SVM missed its tolerance: certificate residual {cert.worst:.2e} > {tol:g} "
                      f"(Clarabel status {status!r})", stacklevel=2)
    return result
