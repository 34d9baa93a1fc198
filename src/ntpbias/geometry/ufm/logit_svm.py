"""The nuclear-norm NTP-SVM in logit space, certified (docs/ufm.md#the-nuclear-norm-ntp-svm, U-2 and U-3).

    L^mm = argmin ||L||_*  s.t.  L[z, j] = L[z', j]        (z, z' in S_j: in-support logits tied)
                                 L[z, j] >= L[v, j] + 1    (z in S_j, v not in S_j)

over (V, m) logit matrices. With an auxiliary c_j (the tied in-support logit of context j) the constraints are one
per entry: L[z, j] = c_j on the support and L[v, j] <= c_j - 1 off it. The problem depends on the data only through
the support pattern.

**Dual** (our derivation, docs/ufm.md, U-2): max -Σ_{v not in S_j} Λ[v, j] over Λ (V, m) with ||Λ||_op <= 1, every
column summing to 0 and Λ[v, j] <= 0 off the supports. For feasible L and dual-feasible Λ, <Λ, L> >= -Σ_out Λ, and
||L||_* >= <Λ, L>: the gap ||L||_* + Σ_out Λ >= 0 certifies both. :func:`certify` recomputes it from (L, Λ) alone,
after making L exactly feasible and Λ exactly dual-feasible (so the reported gap is a rigorous bound up to round-off).

Two solvers return the same :class:`~ntpbias.geometry.margins.result.SVMResult` (``L``, ``Lam``, ``dual_value``,
``singular_values`` set; its certificate's ``duality_gap`` is the relative gap above):

* ``"clarabel"``: cvxpy's ``normNuc`` (an SDP) solved by Clarabel (named explicitly); Λ from the constraints' duals.
  Clarabel stops near 1e-7 relative accuracy on these degenerate SDPs ("optimal_inaccurate"); when its certificate
  misses ``tol`` the solution is polished by ADMM warm-started from it (``details["polished"]`` says so, with
  Clarabel's own gap in ``details["clarabel_gap_rel"]``);
* ``"admm"``: a first-order method for sizes beyond the SDP: ADMM on min ||X||_* + ι_C(L) s.t. X = L, whose steps are
  singular-value thresholding and an exact column-wise projection onto the constraint set (a one-dimensional
  piecewise-quadratic problem per context, solved by sorting); Λ = -ρ U (the scaled dual). Started from S̃ with the
  polar factor of S̃ as dual guess, so it stops at once when S̃ is optimal (U-3).

``"auto"`` picks Clarabel while V + m <= :data:`SDP_MAX_SIZE`, else ADMM.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from ..._tensor import to_numpy
from ...config import argument
from ...data.ntp import NTPData, as_ntp_data
from ...errors import SolverError
from ..margins.result import Certificate, SVMResult
from .logits import centred_support, nuclear_norm, support_svd

#: relative duality gap (and feasibility) a certified solution reaches
SVM_TOL = 1e-8
#: Clarabel is used by ``solver="auto"`` while V + m (the side of the SDP's PSD block) is at most this (Clarabel takes
#: about 2 s at V + m = 56 and 60 s at 96 on one core; ADMM well under a second)
SDP_MAX_SIZE = 64
SOLVERS = ("auto", "clarabel", "admm")


def svm_record(result: SVMResult) -> dict:
    """The JSON record of a nuclear-norm NTP-SVM result (``analysis.json``'s ``ufm.svm``; its keys are a file
    contract): ``dual_violation`` is the larger of the certificate's dual and dual-norm violations."""
    c = result.certificate
    return {"value": result.norm, "dual_value": result.dual_value, "gap_rel": c.duality_gap,
            "primal_violation": c.primal_violation, "dual_violation": max(c.dual_violation, c.dual_norm_violation),
            "min_gap": result.min_gap, "rank": result.rank, "singular_values": result.singular_values.tolist(),
            "solver": result.solver, "status": result.status, "certified": result.certified,
            "seconds": result.solve_seconds, "iterations": result.iterations, "tol": result.tol, **result.details}


# ================================================================================================ feasibility
def project_constraints(A: torch.Tensor, support: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Euclidean projection of A (..., V, m) onto C = {L : L[S_j, j] = c_j, L[v, j] <= c_j - 1 off S_j}, column-wise.

    For column j with in-support entries a_S (s of them) and off-support entries a_v, the projection ties the support
    at c and clips the others to min(a_v, c - 1), where c minimizes Σ_S (c - a_z)² + Σ_v max(0, a_v + 1 - c)²: with the
    breakpoints b_v = a_v + 1 sorted decreasingly, c = (Σ_S a_z + Σ_{k largest} b) / (s + k) for the k with
    b_(k+1) <= c <= b_(k). All columns at once (one sort), no loop over contexts. ``support`` is (V, m) bool.

    Returns (projection (..., V, m), c (..., m)).
    """
    S = support.to(A.device)
    V = A.shape[-2]
    s = S.sum(-2).to(A.dtype)  # (m,)
    sum_in = torch.where(S, A, torch.zeros_like(A)).sum(-2)  # (..., m)
    b = torch.where(S, torch.full_like(A, -torch.inf), A + 1)
    bs = torch.sort(b, dim=-2, descending=True).values  # (..., V, m)
    finite = torch.where(torch.isfinite(bs), bs, torch.zeros_like(bs))
    zero = torch.zeros_like(sum_in)[..., None, :]
    cums = torch.cat([zero, torch.cumsum(finite, -2)], -2)  # (..., V+1, m): sum of the k largest, k = 0..V
    k = torch.arange(V + 1, dtype=A.dtype, device=A.device)[:, None]
    cand = (sum_in[..., None, :] + cums) / (s + k)
    inf = torch.full_like(zero, torch.inf)
    upper = torch.cat([inf, bs], -2)  # b_(k), k = 0..V (b_(0) = +inf)
    lower = torch.cat([bs, -inf], -2)  # b_(k+1)
    slack = 1e-12 * (1 + cand.abs())
    ok = (cand <= upper + slack) & (cand >= lower - slack) & (k <= V - s)
    idx = torch.argmax(ok.to(torch.int8), dim=-2, keepdim=True)  # the first (smallest k) valid candidate
    c = torch.gather(cand, -2, idx).squeeze(-2)
    L = torch.where(S, c[..., None, :].expand_as(A), torch.minimum(A, c[..., None, :] - 1))
    return L, c


def repair_dual(Lam: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """The nearest-in-spirit dual-feasible Λ: off-support entries clipped to <= 0, in-support entries shifted so each
    column sums to 0, then scaled to ||Λ||_op <= 1 (every step keeps the previous ones' properties)."""
    S = support.to(Lam.device)
    Lam = torch.where(S, Lam, Lam.clamp_max(0.0))
    shift = Lam.sum(-2, keepdim=True) / S.sum(-2, keepdim=True).to(Lam)
    Lam = Lam - shift * S
    op = torch.linalg.matrix_norm(Lam, ord=2)
    return Lam / torch.clamp_min(op, 1.0)[..., None, None]


def certify(L: torch.Tensor, Lam: torch.Tensor, data: NTPData, *, solver: str, seconds: float,
            iterations: int | None = None, tol: float = SVM_TOL, details: dict | None = None) -> SVMResult:
    """Certify a candidate (L, Λ) independently of the solver that produced it (module docstring).

    L is projected onto the constraint set and Λ repaired to dual feasibility (:func:`repair_dual`); the gap between
    ||L||_* and -Σ_out Λ is then a rigorous optimality bound. The violations before these repairs are reported.
    """
    support = data.support.T
    L = L.to(torch.float64)
    Lam = Lam.to(torch.float64)
    out = ~support
    L_feas, c = project_constraints(L, support)
    primal_violation = float(torch.linalg.matrix_norm(L - L_feas) / torch.linalg.matrix_norm(L_feas).clamp_min(1e-300))
    col = float(Lam.sum(0).abs().max())
    dual_violation = max(float(Lam[out].clamp_min(0).max()) if bool(out.any()) else 0.0, col, 0.0)
    dual_norm_violation = max(float(torch.linalg.matrix_norm(Lam, ord=2)) - 1.0, 0.0)
    Lam_feas = repair_dual(Lam, support)
    sv = torch.linalg.svdvals(L_feas)
    dual_value = float(-Lam_feas[out].sum())
    gaps = (c[None, :] - L_feas)[out]
    min_gap = float(gaps.min()) if gaps.numel() else float("inf")
    if not bool(out.any()):
        status, gap_rel = "degenerate", 0.0
    else:
        value = float(sv.sum())
        gap_rel = (value - dual_value) / max(value, 1e-300)
        status = "optimal" if gap_rel <= tol else "inaccurate"
    cert = Certificate(primal_violation=primal_violation, dual_violation=dual_violation,
                       dual_norm_violation=dual_norm_violation, duality_gap=gap_rel)
    return SVMResult(L=L_feas, Lam=Lam_feas, certificate=cert, status=status, solver=solver, solve_seconds=seconds,
                     iterations=iterations, tol=tol, min_gap=min_gap, norm_name="nuclear", dual_value=dual_value,
                     singular_values=sv, details=details or {})


# ================================================================================================ solvers
def _clarabel(data: NTPData, *, eps: float = 1e-10, max_iter: int = 500) -> tuple[np.ndarray, np.ndarray, dict]:
    """cvxpy + Clarabel on min ||L||_* with the tied form of the constraints; returns (L, Λ, details)."""
    import cvxpy as cp

    S = to_numpy(data.support.T)
    V, m = S.shape
    iz, jz = np.nonzero(S)
    io, jo = np.nonzero(~S)
    L, c = cp.Variable((V, m)), cp.Variable(m)
    cons = [L[iz, jz] == c[jz]]
    if len(io):
        cons.append(L[io, jo] <= c[jo] - 1)
    prob = cp.Problem(cp.Minimize(cp.normNuc(L)), cons)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "solution may be inaccurate": the certificate decides
        try:
            prob.solve(solver=cp.CLARABEL, max_iter=max_iter, tol_gap_abs=eps, tol_gap_rel=eps, tol_feas=eps)
        except cp.error.SolverError as exc:
            raise SolverError(f"Clarabel failed on the nuclear-norm NTP-SVM (V = {V}, m = {m}): {exc}; try "
                              "solver='admm'") from None
    if L.value is None:
        raise SolverError(f"Clarabel returned no solution for the nuclear-norm NTP-SVM (status {prob.status})")
    Lam = np.zeros((V, m))
    Lam[iz, jz] = -np.asarray(cons[0].dual_value)  # cvxpy's sign: Lagrangian + y (L - c) for L == c
    if len(io):
        Lam[io, jo] = -np.asarray(cons[1].dual_value)
    return L.value, Lam, {"form": "cvxpy normNuc (SDP), tied constraints", "cvxpy_status": prob.status}


def _admm(data: NTPData, *, tol: float, max_iter: int, check_every: int = 10, dtype=torch.float64,
          device=None, start: tuple[torch.Tensor, torch.Tensor] | None = None
          ) -> tuple[torch.Tensor, torch.Tensor, int, dict]:
    """ADMM with residual balancing (module docstring); stops when :func:`certify` would pass. ``start``: (L, Λ) to
    warm-start from (default: S̃ and its polar factor)."""
    support = data.support.T.to(device)
    if start is None:
        ssvd = support_svd(data)
        L, Lam = ssvd.S_tilde, ssvd.polar
    else:
        L, Lam = start
    L = torch.as_tensor(L).to(device=device, dtype=dtype)
    X = L.clone()
    rho = L.shape[0] ** 0.5 / max(float(torch.linalg.matrix_norm(L, ord=2)), 1e-12)
    U = -torch.as_tensor(Lam).to(device=device, dtype=dtype) / rho  # Λ = -ρ U
    it = 0
    for it in range(1, max_iter + 1):
        if it == 1 or it % check_every == 0:
            res = certify(L, -rho * U, data, solver="admm", seconds=0.0, tol=tol)
            if res.status != "inaccurate":
                break
        Uu, s, Vh = torch.linalg.svd(L - U, full_matrices=False)
        X = (Uu * (s - 1.0 / rho).clamp_min(0)[None, :]) @ Vh
        L_old = L
        L, _ = project_constraints(X + U, support)
        U = U + X - L
        r = float(torch.linalg.matrix_norm(X - L))
        q = rho * float(torch.linalg.matrix_norm(L - L_old))
        if r > 10 * q:
            rho, U = 2 * rho, U / 2
        elif q > 10 * r:
            rho, U = rho / 2, U * 2
    return L, -rho * U, it, {"form": "ADMM (singular-value thresholding + exact projection)", "rho": rho}


def nuclear_svm(data: NTPData, solver: str = "auto", *, tol: float = SVM_TOL, max_iter: int = 20_000,
                device=None) -> SVMResult:
    """Solve and certify the nuclear-norm NTP-SVM of ``data`` in logit space (docs/ufm.md, U-2 and U-3).

    L^mm = argmin ||L||_* subject to in-support logits tied and at least 1 above the out-of-support ones; only the
    supports of ``data`` matter. The certificate (a dual matrix Λ with ||Λ||_op <= 1, the duality gap) is recomputed
    from the solution, independently of the solver. A solve that misses ``tol`` is returned with status
    "inaccurate" and a warning, never silently.

    Parameters
    ----------
    data : NTPData
        The dataset (its ``H`` is ignored).
    solver : {"auto", "clarabel", "admm"}
        cvxpy + Clarabel (the SDP, up to V + m = 64 with "auto") or ADMM (first order, beyond).
    tol : float
        Tolerance of the certificate's relative residuals.
    max_iter : int
        ADMM iterations at most.
    device : str or torch.device, optional
        Where ADMM's SVDs run.

    Returns
    -------
    SVMResult
        ``L`` (V, m), ``norm`` = ||L^mm||_*, the dual ``Lam``, ``certificate``, ``status``, ``certified``.

    Examples
    --------
    >>> import torch
    >>> data = NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0], [0, 0, 1.0], [0, 0, 1.0]])
    >>> r = nuclear_svm(data, "admm")
    >>> r.status, round(r.norm, 6), r.certificate.duality_gap < 1e-9
    ('optimal', 1.414214, True)
    """
    where = "nuclear_svm"
    data = as_ntp_data(data, where)
    solver = argument(where, "solver", solver, str, choices=SOLVERS)
    tol, max_iter = argument(where, "tol", tol, float, gt=0), argument(where, "max_iter", max_iter, int, ge=1)
    if solver == "auto":
        solver = "clarabel" if data.V + data.m <= SDP_MAX_SIZE else "admm"
    start = time.perf_counter()
    if not bool((~data.support).any()):  # every context's support is the whole vocabulary: L^mm = 0
        zero = torch.zeros(data.V, data.m, dtype=torch.float64)
        return certify(zero, zero, data, solver=solver, seconds=time.perf_counter() - start, tol=tol)
    if solver == "clarabel":
        L, Lam, details = _clarabel(data)
        iters = None
        raw = certify(torch.as_tensor(L, dtype=torch.float64), torch.as_tensor(Lam, dtype=torch.float64), data,
                      solver=solver, seconds=0.0, tol=tol)
        details["clarabel_gap_rel"] = raw.certificate.duality_gap
        if raw.status == "inaccurate":
            L, Lam, iters, _ = _admm(data, tol=tol, max_iter=max_iter, device=device, start=(raw.L, raw.Lam))
            details["polished"] = f"ADMM warm-started from Clarabel's solution, {iters} iterations"
    else:
        L, Lam, iters, details = _admm(data, tol=tol, max_iter=max_iter, device=device)
    result = certify(torch.as_tensor(L, dtype=torch.float64).cpu(), torch.as_tensor(Lam, dtype=torch.float64).cpu(),
                     data, solver=solver, seconds=time.perf_counter() - start, iterations=iters, tol=tol,
                     details=details)
    if result.status == "inaccurate":
        warnings.warn(f"nuclear-norm NTP-SVM ({solver}): relative duality gap {result.certificate.duality_gap:.2e} > "
                      f"{tol:g}",
                      stacklevel=2)
    return result


def svm_vs_centred_support(result: SVMResult, data: NTPData) -> float:
    """||L^mm - S̃|| / ||S̃||: 0 (to the solver's accuracy) exactly when S̃ solves the SVM (U-3)."""
    St = centred_support(data)
    return float(torch.linalg.matrix_norm(result.L - St) / torch.linalg.matrix_norm(St))


def same_support_spread(L: torch.Tensor, groups: torch.Tensor) -> float:
    """max over contexts j of ||L[:, j] - mean of its support set's columns|| / max_j ||L[:, j]||: 0 when contexts
    sharing a support set have identical columns (they do at an optimum that is unique, by symmetry; U-5)."""
    K = int(groups.max()) + 1
    onehot = torch.nn.functional.one_hot(groups, K).to(L)  # (m, K)
    means = (L @ onehot) / onehot.sum(0)
    dev = torch.linalg.vector_norm(L - means[:, groups], dim=0).max()
    return float(dev / torch.linalg.vector_norm(L, dim=0).max().clamp_min(1e-300))


def ufm_summary(data: NTPData, solver: str = "auto", **options) -> tuple[dict, dict]:
    """The log-bilinear model's logit-space objects of ``data`` for ``ntpbias analyze --ufm`` (docs/ufm.md#commands).

    Returns (the ``ufm`` record of ``analysis.json``, arrays for ``geometry.npz``: ``ufm_L_mm``, ``ufm_Lambda``,
    ``ufm_S_tilde``, ``ufm_L_star``).
    """
    from ..linear.loss import logit_cross_entropy_grad
    from .logits import finite_logits, support_groups

    svm = nuclear_svm(data, solver, **options)
    ssvd = support_svd(data)
    groups, sets = support_groups(data)
    L_star = finite_logits(data)
    _, G0 = logit_cross_entropy_grad(torch.zeros(data.V, data.m, dtype=data.P.dtype), data)
    record = {
        "model": "log-bilinear: logits L = W H^T (V x m), CE + (λ/2)(||W||² + ||H||²)",
        "support_sets": int(len(sets)),
        "support_matrix_singular_values": ssvd.sigma.tolist(),
        "support_matrix_rank": ssvd.rank,
        "support_matrix_nuclear_norm": float(ssvd.sigma.sum()),
        "polar_out_max": ssvd.polar_out_max,
        "svm_is_centred_support": ssvd.svm_is_centred_support,
        "svm_vs_centred_support": svm_vs_centred_support(svm, data),
        "same_support_column_spread": same_support_spread(svm.L, groups),
        "finite_part_norm": float(torch.linalg.matrix_norm(L_star)),
        "lambda_0": float(torch.linalg.matrix_norm(G0, ord=2)),
        "svm": svm_record(svm),
    }
    return record, {"ufm_L_mm": svm.L, "ufm_Lambda": svm.Lam, "ufm_S_tilde": ssvd.S_tilde, "ufm_L_star": L_star}


__all__ = ["SDP_MAX_SIZE", "SOLVERS", "SVM_TOL", "certify", "nuclear_norm", "nuclear_svm", "project_constraints",
           "repair_dual", "same_support_spread", "svm_record", "svm_vs_centred_support", "ufm_summary"]
