"""The data subspace F, its projections, and the finite component W* (spec linear_ntp.md §2.1-§2.3).

F = span{(e_z - e_z') h̄_j^T : z ≠ z' ∈ S_j, j ∈ [m]} (eq. (5) of paper A) ⊂ R^{V x d} is spanned by the
Σ_j (S_j - 1) anchor rows A of :class:`~ntpbias.geometry.constraints.NTPConstraints`. Everything is computed
through the Gram matrix G = A A^T (size Σ(S_j - 1), assembled from H H^T), never through a dense
(Vd x Vd) projector:

* P_F(W) = A^T G^† A(W) and P_⊥(W) = W - P_F(W);
* dim F = rank G;
* W* = A^T G^† b, the minimum-norm solution of the compatibility equations A(W) = b (eq. (4)), which lies
  in F; the data are NTP_H-compatible iff the residual ||A(W*) - b|| vanishes.
"""

from __future__ import annotations

import torch

from ..data.ntp import NTPData
from .constraints import constraints

#: Relative tolerance (to ||b||, at least 1) on the compatibility residual.
COMPATIBILITY_TOL = 1e-8


class DataSubspace:
    """F for one dataset; use :func:`subspace` to get the cached instance.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]])
    >>> F = subspace(data)
    >>> F.dim, F.compatible
    (2, True)
    >>> W = torch.randn(3, 2, dtype=torch.float64)
    >>> bool(torch.allclose(F.project(F.project(W)), F.project(W)))
    True
    """

    def __init__(self, data: NTPData):
        cons = constraints(data)
        self.data = data
        self.A = cons.eq
        self.log_odds = cons.log_odds
        R = len(self.A)
        if R == 0:  # every support has one token (one-hot labels): F = {0}
            self.dim = 0
            self._pinv = torch.zeros(0, 0, dtype=data.H.dtype, device=data.H.device)
        else:
            G = self.A.gram()
            evals, evecs = torch.linalg.eigh(G)
            cutoff = max(1e-10, R * torch.finfo(G.dtype).eps) * float(evals.abs().max())
            keep = evals > cutoff
            self.dim = int(keep.sum())
            Q = evecs[:, keep]
            self._pinv = (Q / evals[keep]) @ Q.T
        self.W_star = self.A.adjoint(self.log_odds @ self._pinv) if R else torch.zeros(
            data.V, data.d, dtype=data.H.dtype, device=data.H.device)
        residual = self.A.apply(self.W_star) - self.log_odds if R else self.log_odds
        self.compatibility_residual = float(torch.linalg.vector_norm(residual))
        scale = max(1.0, float(torch.linalg.vector_norm(self.log_odds)))
        self.compatible = self.compatibility_residual <= COMPATIBILITY_TOL * scale

    @property
    def ambient_dim(self) -> int:
        """V d, the dimension of the parameter space."""
        return self.data.V * self.data.d

    def project(self, W: torch.Tensor) -> torch.Tensor:
        """P_F(W) for W (..., V, d)."""
        if self.dim == 0:
            return torch.zeros_like(W)
        return self.A.adjoint(self.A.apply(W) @ self._pinv)

    def project_perp(self, W: torch.Tensor) -> torch.Tensor:
        """P_⊥(W) = W - P_F(W), the component in F^⊥ (where in-support logits are tied)."""
        return W - self.project(W)

    @property
    def norm_W_star(self) -> float:
        """||W*||."""
        return float(torch.linalg.matrix_norm(self.W_star))

    def __repr__(self) -> str:
        return (f"DataSubspace(dim={self.dim} of {self.ambient_dim}, compatible={self.compatible}, "
                f"||W*||={self.norm_W_star:.6g}, residual={self.compatibility_residual:.3g})")


def subspace(data: NTPData) -> DataSubspace:
    """The (cached) :class:`DataSubspace` of ``data``."""
    if "subspace" not in data._cache:
        data._cache["subspace"] = DataSubspace(data)
    return data._cache["subspace"]

