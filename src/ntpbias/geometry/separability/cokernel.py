"""NTP-separability as an LP over the cokernel of H: small when d is close to m (large supports).

The separability LP of :mod:`ntpbias.geometry.separability.verdict` has V d variables and one row per constraint, each
with 2d nonzeros. Its Gordan alternative lives in logit space instead (docs/paper-a-linear-ntp.md, decision A-D19):
with A_in, A_eq the rows of :func:`~ntpbias.geometry.constraints.constraints`, the data are *not* NTP-separable iff
y >= 0, Σ y = 1 and μ exist with A_in^T y + A_eq^T μ = 0, and A_in^T y + A_eq^T μ = U^T H for the matrix
U (m x V) with rows

    u_j = (Σ_v y_jv + Σ_a μ_ja) e_{anchor_j} - Σ_{v ∉ S_j} y_jv e_v - Σ_{a ∈ S_j \\ anchor_j} μ_ja e_a,

i.e. rows that sum to zero, out-of-support entries -y_jv <= 0 and free in-support entries. U^T H = 0 says that
every column of U lies in the cokernel of H, U = N C with N (m x r) an orthonormal basis of range(H)^⊥ and
r = m - rank H. So the alternative is the LP over C (r x V) and ρ >= 0

    min ρ  subject to  (N C)_jv <= 0 (v ∉ S_j),   Σ_{j, v ∉ S_j} (N C)_jv = ρ - 1,   C 1 = 0,

always feasible (C = 0, ρ = 1) with optimum ρ* = 0 (not separable: y = -(N C)_out, μ = -(N C)_in) or ρ* = 1
(separable). In the second case its multipliers λ_jv >= 0 of the sign rows and σ of the normalization row give
a separating W: stationarity in C reads N^T Λ = -β 1^T with Λ_jv = λ_jv + σ on the out-of-support cells (0 on
the support) and β the multipliers of C 1 = 0, so Z = -Λ + N N^T Λ lies in range(H), ties every in-support logit
of context j (at -(N β)_j) and puts every out-of-support logit σ + λ_jv >= 1 below them; W^T = H^+ Z = -H^+ Λ.

The LP has (m - d) V + 1 variables and (m - d) nonzeros per sign row, against V d variables and 2d nonzeros per
row for the primal LP: for |S_j| = V - 1 at d ≈ m it is thousands of times smaller. Either way the caller checks
the certificate it returns against the original constraints
(:func:`ntpbias.geometry.separability.verdict.ntp_separability`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..._tensor import to_numpy
from ...data.ntp import NTPData
from ...errors import SolverError
from ..constraints import NTPConstraints
from ..solvers.lp import highs_linprog

#: singular values of H below this times the largest count as zero (H's rank decides the cokernel)
RANK_RTOL = 1e-10


@dataclass(frozen=True)
class CokernelSolution:
    """What the cokernel LP found: a separating W (V, d) or the Gordan multipliers (y, μ), as numpy arrays."""

    separable: bool
    W: np.ndarray | None = None
    y: np.ndarray | None = None
    mu: np.ndarray | None = None


def cokernel_nnz(data: NTPData, cons: NTPConstraints) -> int:
    """Constraint-matrix nonzeros of the cokernel LP, taking rank H = min(m, d): (m - d) (rows + V)."""
    r = max(data.m - data.d, 0)
    return r * (len(cons.ineq) + data.V)


def cokernel_lp(data: NTPData, cons: NTPConstraints, *, algorithm: str = "highs-ds") -> CokernelSolution:
    """Solve the cokernel LP of ``data`` (module docstring) with HiGHS (``algorithm``: scipy's ``highs-ds`` or
    ``highs-ipm``) and return the certificate it yields, unchecked.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> from ntpbias.geometry.constraints import constraints
    >>> data = NTPData.from_arrays(torch.tensor([[1.0], [1.0]]), [[1.0, 0.0], [0.0, 1.0]])  # one point, two labels
    >>> cokernel_lp(data, constraints(data)).separable
    False
    """
    H = to_numpy(data.H).astype(np.float64)
    m, V = H.shape[0], data.V
    U_svd, s, Vt = np.linalg.svd(H, full_matrices=True)
    rank = int((s > RANK_RTOL * s.max()).sum()) if s.size and s.max() > 0 else 0
    N = U_svd[:, rank:]  # (m, r): orthonormal basis of range(H)^⊥
    r = N.shape[1]
    j, v = to_numpy(cons.ineq.j).astype(np.int64), to_numpy(cons.ineq.b).astype(np.int64)
    n_in = len(j)

    def separating_W(lam: np.ndarray, sigma: float) -> np.ndarray:
        Lam = np.zeros((m, V))
        Lam[j, v] = lam + sigma
        # W^T = -H^+ Λ with H^+ = V_r S_r^{-1} U_r^T
        Wt = -(Vt[:rank].T / s[:rank]) @ (U_svd[:, :rank].T @ Lam)
        return Wt.T

    if r == 0:  # H has full row rank: every logit matrix is reachable
        return CokernelSolution(True, W=separating_W(np.zeros(n_in), 1.0))
    n = V * r + 1  # C[i, v] at column v * r + i, then ρ
    rows = np.repeat(np.arange(n_in), r)
    cols = (v[:, None] * r + np.arange(r)[None]).ravel()
    A_sign = sp.csr_matrix((N[j].ravel(), (rows, cols)), shape=(n_in, n))
    normalization = np.asarray(A_sign.sum(axis=0)).ravel()
    normalization[-1] = -1.0
    row_sums = sp.csr_matrix((np.ones(V * r), (np.tile(np.arange(r), V), np.arange(V * r))), shape=(r, n))
    A_eq = sp.vstack([sp.csr_matrix(normalization[None]), row_sums]).tocsr()
    b_eq = np.zeros(r + 1)
    b_eq[0] = -1.0
    c = np.zeros(n)
    c[-1] = 1.0
    res = highs_linprog(c, A_ub=A_sign, b_ub=np.zeros(n_in), A_eq=A_eq, b_eq=b_eq,
                        bounds=[(None, None)] * (V * r) + [(0.0, None)], algorithm=algorithm)
    if res.status != 0:
        raise SolverError(f"the cokernel separability LP failed: {res.message}")
    if res.x[-1] > 0.5:  # ρ* = 1: separable; scipy's marginals are the negated multipliers
        lam = np.maximum(-res.ineqlin.marginals, 0.0)
        sigma = float(-res.eqlin.marginals[0])
        return CokernelSolution(True, W=separating_W(lam, sigma if sigma > 0 else 1.0))
    U = N @ res.x[:-1].reshape(V, r).T  # (m, V)
    y = -U[j, v]
    mu = -U[to_numpy(cons.eq.j).astype(np.int64), to_numpy(cons.eq.b).astype(np.int64)]
    total = y.sum()
    return CokernelSolution(False, y=np.maximum(y, 0.0) / total, mu=mu / total)
