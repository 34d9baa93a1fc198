"""The two layouts of the dual multipliers of a max-margin program (docs/paper-a-linear-ntp.md#objects), shared by
the dual method (:mod:`ntpbias.geometry.solvers.dual`) and the accelerated gradient of the workset method
(:mod:`ntpbias.geometry.solvers.apg`): one multiplier per constraint row (:class:`RowForm`, scatter by ``index_add``),
or grouped by the logit cell the rows share (:class:`GroupForm`, an exact projection per group); :func:`dual_form`
picks one."""

from __future__ import annotations

import math

import torch

from ...errors import SolverError
from .gram import ConstraintOps


class RowForm:
    """Multipliers y = (λ, μ) (R,), λ = y[:n_in] >= 0; scatter by index_add of ±y."""

    name = "rows"

    def __init__(self, ops: ConstraintOps, diag: torch.Tensor):
        self.ops = ops
        floor = float(diag.max()) * 1e-12 if diag.numel() else 1.0
        self.scale = 1.0 / diag.clamp(min=max(floor, 1e-300))
        self.c = torch.zeros(ops.R, dtype=diag.dtype, device=diag.device)
        self.c[: ops.n_in] = 1.0  # -(D) = ½||A^T y||² - Σλ has gradient A(A^T y) - c

    def zeros(self) -> torch.Tensor:
        return torch.zeros_like(self.c)

    def scatter(self, X: torch.Tensor) -> torch.Tensor:
        ops = self.ops
        Lam = torch.zeros(ops.p * ops.H.shape[0], dtype=X.dtype, device=X.device)
        Lam.index_add_(0, ops.a_cell, X)
        Lam.index_add_(0, ops.b_cell, -X)
        return Lam

    def grad_quad(self, L: torch.Tensor) -> torch.Tensor:
        return self.ops.gaps(L)

    def grad(self, L: torch.Tensor) -> torch.Tensor:
        return self.ops.gaps(L) - self.c

    def project(self, X: torch.Tensor) -> torch.Tensor:
        n = self.ops.n_in
        return torch.cat([X[:n].clamp(min=0), X[n:]])

    def center(self, X: torch.Tensor) -> torch.Tensor:
        return X

    def duals(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.ops.n_in
        return X[:n], X[n:]

    def from_duals(self, lam: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        return torch.cat([lam, mu]).to(self.c)


class GroupForm:
    """Multipliers as the logit-cell values Λ, laid out as a padded (groups, 1 + max group size) matrix.

    Column 0 of a group is its shared first cell (free); the other columns are the rows' second cells: <= 0 for
    inequality rows, free for equality rows; padding is 0. Feasible set: each group sums to zero.
    """

    name = "grouped"

    def __init__(self, ops: ConstraintOps, groups: torch.Tensor, gid: torch.Tensor):
        self.ops = ops
        R, G = ops.R, int(groups.shape[0])
        dev = ops.H.device
        counts = torch.bincount(gid, minlength=G)
        order = torch.argsort(gid, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.empty(R, dtype=torch.long, device=dev)
        pos[order] = torch.arange(R, device=dev) - starts[gid[order]] + 1
        self.shape = (G, 1 + int(counts.max()))
        s = self.shape[1]
        self.row_flat = gid * s + pos  # (R,) where row i's second cell sits in the padded matrix
        cell = torch.full((G * s,), -1, dtype=torch.long, device=dev)
        cell[self.row_flat] = ops.b_cell
        cell[torch.arange(G, device=dev) * s] = groups
        self.valid = (cell >= 0).view(G, s)
        self.cell = cell.clamp(min=0).view(G, s)
        ineq = torch.zeros(G * s, dtype=torch.bool, device=dev)
        ineq[self.row_flat[: ops.n_in]] = True
        self.ineq = ineq.view(G, s)
        self.free = self.valid & ~self.ineq
        dtype = ops.H.dtype
        self.c = self.ineq.to(dtype)  # -(D) = ½||E^T Λ H||² + Σ_ineq Λ[b_i, k_i]
        self.n_valid = self.valid.sum(1, keepdim=True).to(dtype)
        diag = torch.where(self.valid, ops.cell_sq_norms()[self.cell], 0).sum(1, keepdim=True) / self.n_valid
        floor = float(diag.max()) * 1e-12 if diag.numel() else 1.0
        self.scale = 1.0 / diag.clamp(min=max(floor, 1e-300))  # one scalar per group keeps the projection exact

    @classmethod
    def detect(cls, ops: ConstraintOps) -> GroupForm | None:
        """The grouped form when the scatter y -> Λ is injective (module doc) and the groups are not so uneven
        that padding them would cost more than 4x the cells, else None."""
        if ops.R == 0 or ops.cells_shared():
            return None
        groups, gid = torch.unique(ops.a_cell, return_inverse=True)
        if len(groups) * (1 + int(torch.bincount(gid).max())) > 4 * (ops.R + len(groups)):
            return None  # very uneven groups: the padded layout would not be linear in the number of rows
        return cls(ops, groups, gid)

    def zeros(self) -> torch.Tensor:
        return torch.zeros(self.shape, dtype=self.ops.H.dtype, device=self.ops.H.device)

    def scatter(self, X: torch.Tensor) -> torch.Tensor:
        ops = self.ops
        Lam = torch.zeros(ops.p * ops.H.shape[0], dtype=X.dtype, device=X.device)
        return Lam.index_add_(0, self.cell.reshape(-1), torch.where(self.valid, X, 0).reshape(-1))

    def grad_quad(self, L: torch.Tensor) -> torch.Tensor:
        return torch.where(self.valid, L.reshape(-1).index_select(0, self.cell.view(-1)).view(self.shape), 0)

    def grad(self, L: torch.Tensor) -> torch.Tensor:
        return self.grad_quad(L) + self.c

    def project(self, X: torch.Tensor) -> torch.Tensor:
        """Euclidean projection of each group onto {Σ x = 0, x <= 0 at inequality cells}, exactly.

        Per group, x - τ (inequality cells clipped at 0) with the unique root τ of the decreasing piecewise-linear
        φ(τ) = Σ_free (x - τ) + Σ_ineq min(x - τ, 0); its breakpoints are the inequality values, sorted once.
        """
        G, s = self.shape
        n_free = self.free.sum(1, keepdim=True).to(X.dtype)
        n_in = self.ineq.sum(1, keepdim=True)
        s_free = torch.where(self.free, X, 0).sum(1, keepdim=True)
        t, _ = torch.sort(torch.where(self.ineq, X, -math.inf), dim=1, descending=True)
        idx = torch.arange(s, device=X.device)
        live = idx[None, :] < n_in  # the first n_in sorted entries are the breakpoints
        t0 = torch.where(live, t, 0)
        total = t0.sum(1, keepdim=True)
        top = torch.cumsum(t0, 1)  # top[:, i] = sum of the i + 1 largest breakpoints
        # φ at breakpoint t_(i+1) (0-based i): s_free - n_free t + (total - top_i) - (n_in - i - 1) t
        phi = s_free - n_free * t0 + (total - top) - (n_in - idx[None, :] - 1).to(X.dtype) * t0
        c = (live & (phi < 0)).sum(1, keepdim=True)  # breakpoints right of the root
        top_c = torch.where(c > 0, top.gather(1, (c - 1).clamp(min=0)), 0)
        tau = (s_free + total - top_c) / (n_free + (n_in - c).to(X.dtype))
        Y = X - tau
        return torch.where(self.free, Y, torch.where(self.ineq, Y.clamp(max=0), 0))

    def center(self, X: torch.Tensor) -> torch.Tensor:
        X = torch.where(self.valid, X, 0)
        return torch.where(self.valid, X - X.sum(1, keepdim=True) / self.n_valid, 0)

    def duals(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = -X.reshape(-1).index_select(0, self.row_flat)
        return y[: self.ops.n_in], y[self.ops.n_in:]

    def from_duals(self, lam: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        G, s = self.shape
        y = torch.cat([lam, mu]).to(self.c)
        X = torch.zeros(G * s, dtype=y.dtype, device=y.device)
        X[self.row_flat] = -y
        X.view(G, s)[:, 0] = torch.zeros(G, dtype=y.dtype, device=y.device).index_add_(0, self.row_flat // s, y)
        return X.view(G, s)


def dual_form(ops: ConstraintOps, form: str, row_sq_norms: torch.Tensor):
    if form not in ("auto", "grouped", "rows"):
        raise SolverError(f"unknown dual form {form!r}; choose auto, grouped or rows")
    grouped = None if form == "rows" else GroupForm.detect(ops)
    if form == "grouped" and grouped is None:
        raise SolverError("the grouped dual form needs every row's second logit cell to be its own; use form='rows'")
    return grouped or RowForm(ops, row_sq_norms)
