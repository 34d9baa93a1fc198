"""NTP-separability (Def. 2 of paper A, eqs. (6a)-(6b)) decided by a linear program, with a certificate.

Separable: some W satisfies A_eq(W) = 0 (W ∈ F^⊥, in-support logits tied) and A_in(W) >= 1 (in-support logits
exceed out-of-support ones). The LP (HiGHS through scipy) either returns such a W, which is then cleaned
(projected onto F^⊥ exactly and rescaled to margin 1) and checked, or reports infeasibility, in which case a
Gordan-type certificate is computed: y >= 0 with Σy = 1 and μ such that A_in^T y + A_eq^T μ = 0, which proves
that no W has A_in(W) > 0 and A_eq(W) = 0 (since then 0 = <W, A_in^T y + A_eq^T μ> = y^T A_in(W) > 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from scipy.optimize import linprog

from ..data.ntp import NTPData
from ..errors import SolverError
from .constraints import constraints
from .subspace import subspace

#: A separating certificate must have margin >= 1 - CERT_TOL after cleaning; an infeasibility certificate
#: must have residual ||A_in^T y + A_eq^T μ|| <= CERT_TOL.
CERT_TOL = 1e-7


@dataclass(frozen=True, eq=False)
class SeparabilityResult:
    """Verdict of the NTP-separability LP.

    Attributes
    ----------
    separable : bool
    W : Tensor (V, d) or None
        When separable: a certificate in F^⊥ with min in-vs-out logit gap exactly 1 (not the max-margin one).
    farkas_y, farkas_mu : Tensor or None
        When not separable: y >= 0, Σy = 1, μ with A_in^T y + A_eq^T μ ≈ 0.
    residual : float
        The certificate's defect: max(1 - margin, ||A_eq(W)||) if separable, else ||A_in^T y + A_eq^T μ||.
    certified : bool
        ``residual <= CERT_TOL``.
    reason : str
        One line saying why (shown in reports).
    """

    separable: bool
    W: torch.Tensor | None
    farkas_y: torch.Tensor | None
    farkas_mu: torch.Tensor | None
    residual: float
    certified: bool
    reason: str


def ntp_separability(data: NTPData) -> SeparabilityResult:
    """Decide NTP-separability of ``data`` with an LP and return a checkable certificate.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> ntp_separability(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])).separable
    True
    """
    cons = constraints(data)
    if len(cons.ineq) == 0:
        return SeparabilityResult(False, None, None, None, 0.0, True,
                                  "every context has full support: the entropy is attained at W* and no "
                                  "out-of-support token needs to be separated")
    A_in = cons.ineq.to_sparse()
    A_eq = cons.eq.to_sparse() if len(cons.eq) else None
    n = A_in.shape[1]
    res = linprog(np.zeros(n), A_ub=-A_in, b_ub=-np.ones(A_in.shape[0]), A_eq=A_eq,
                  b_eq=None if A_eq is None else np.zeros(A_eq.shape[0]), bounds=(None, None), method="highs")
    if res.status == 0:
        W = torch.as_tensor(res.x, dtype=data.H.dtype).reshape(data.V, data.d).to(data.H.device)
        W = subspace(data).project_perp(W)
        margin = float(cons.ineq.apply(W).min())
        if margin > 0:
            W = W / margin
            eq_res = float(cons.eq.apply(W).abs().max()) if len(cons.eq) else 0.0
            residual = max(1 - float(cons.ineq.apply(W).min()), eq_res, 0.0)
            return SeparabilityResult(True, W, None, None, residual, residual <= CERT_TOL,
                                      "an LP found W in F^⊥ with every in-support logit at least 1 above every "
                                      "out-of-support logit")
    elif res.status not in (2,):  # 2 = infeasible
        raise SolverError(f"separability LP failed: {res.message}")
    return _gordan_certificate(A_in, A_eq, data)


def _gordan_certificate(A_in: sp.csr_matrix, A_eq: sp.csr_matrix | None, data: NTPData) -> SeparabilityResult:
    """Find y >= 0, Σy = 1, μ free with A_in^T y + A_eq^T μ = 0 (proof of non-separability)."""
    r_in = A_in.shape[0]
    r_eq = 0 if A_eq is None else A_eq.shape[0]
    blocks = [A_in.T] + ([A_eq.T] if A_eq is not None else [])
    ones = [sp.csr_matrix(np.ones((1, r_in)))] + ([sp.csr_matrix((1, r_eq))] if r_eq else [])
    M = sp.vstack([sp.hstack(blocks), sp.hstack(ones)])
    rhs = np.zeros(M.shape[0])
    rhs[-1] = 1.0
    bounds = [(0, None)] * r_in + [(None, None)] * r_eq
    res = linprog(np.zeros(r_in + r_eq), A_eq=M.tocsr(), b_eq=rhs, bounds=bounds, method="highs")
    if res.status != 0:
        raise SolverError(f"the separability LP was infeasible but no Gordan certificate was found: {res.message}")
    y, mu = res.x[:r_in], res.x[r_in:]
    residual = A_in.T @ y + (A_eq.T @ mu if A_eq is not None else 0)
    resid = float(np.linalg.norm(residual))
    dtype = data.H.dtype
    return SeparabilityResult(False, None, torch.as_tensor(y, dtype=dtype), torch.as_tensor(mu, dtype=dtype),
                              resid, resid <= CERT_TOL,
                              "no W in F^⊥ separates in-support from out-of-support tokens (Gordan certificate: a "
                              "convex combination of the separation constraints cancels out)")
