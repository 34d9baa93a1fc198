"""The two layouts of the dual multipliers of a max-margin program (docs/paper-a-linear-ntp.md#objects), shared by
the dual method (:mod:`ntpbias.geometry.solvers.dual`) and the accelerated gradient of the workset method
(:mod:`ntpbias.geometry.solvers.apg`): one multiplier per constraint row (:class:`RowForm`, scatter by ``index_add``),
or grouped by the logit cell the rows share (:class:`GroupForm`, an exact projection per group; :class:`CellForm`, the
same laid out as the logit-cell matrix itself where the groups are its columns); :func:`dual_form` picks one."""

from __future__ import annotations

import math

import torch

from ...errors import SolverError
from .gram import ConstraintOps, sq_row_norms


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


class CellForm:
    """The grouped form (:class:`GroupForm`) laid out as the logit-cell matrix Λ (p, m) itself, when the groups are the
    columns of Λ and every cell is used exactly once: each context j has one group whose first cell (a_i, j) is shared
    by its rows and whose rows' second cells are the other cells of column j (the NTP reduced form on every row).

    Then the scatter X -> Λ is the identity and the gradient of -(D) is L + c (no gather either way: W = Λ H and
    L = W H^T are plain products), and the projection works along the columns (:meth:`project_from`). Free cells are
    the groups' first cells and the equality rows' second cells; the others belong to inequality rows (<= 0).
    """

    name = "grouped"

    def __init__(self, ops: ConstraintOps, first: torch.Tensor):
        p, m = ops.p, ops.H.shape[0]
        self.ops = ops
        self.shape = (p, m)
        dtype = ops.H.dtype
        free = first.clone()
        free[ops.b_cell[ops.n_in:]] = True
        self.free_idx = torch.nonzero(free).flatten()
        self.free_col = self.free_idx % m
        self.n_free = torch.zeros(m, dtype=dtype, device=free.device).index_add_(
            0, self.free_col, torch.ones_like(self.free_col, dtype=dtype))
        self.c = (~free).view(p, m).to(dtype)  # -(D) = ½||Λ H||² + Σ_ineq Λ[b_i, j_i]
        hh = sq_row_norms(ops.H)  # the Hessian's diagonal at every cell of column j: K_jj (as GroupForm's)
        floor = float(hh.max()) * 1e-12 if hh.numel() else 1.0
        self.scale = (1.0 / hh.clamp(min=max(floor, 1e-300)))[None, :]
        self.row_norm = float((2 * hh.max()).sqrt())  # max_i ||A_i||: ||(e_a - e_b) h_j^T||² = 2 K_jj

    @classmethod
    def detect(cls, ops: ConstraintOps) -> CellForm | None:
        """The cell layout when it applies (class doc), else None; by counting cells (no sort)."""
        p, m = ops.p, ops.H.shape[0]
        if ops.left is not None or ops.R == 0 or ops.R + m != p * m:
            return None
        if not bool(((ops.a_cell - ops.b_cell) % m == 0).all()):  # a row's two cells in one column
            return None
        first = torch.zeros(p * m, dtype=torch.bool, device=ops.a_cell.device)
        first[ops.a_cell] = True
        if not bool((first.view(p, m).sum(0) == 1).all()):  # one group per column
            return None
        if not bool((torch.bincount(ops.b_cell, minlength=p * m) + first == 1).all()):  # every cell exactly once
            return None
        return cls(ops, first)

    def zeros(self) -> torch.Tensor:
        return torch.zeros(self.shape, dtype=self.ops.H.dtype, device=self.ops.H.device)

    def scatter(self, X: torch.Tensor) -> torch.Tensor:
        return X.reshape(-1)

    def grad_quad(self, L: torch.Tensor) -> torch.Tensor:
        return L.view(self.shape)

    def grad(self, L: torch.Tensor) -> torch.Tensor:
        return L.view(self.shape) + self.c

    def duals(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = -X.reshape(-1).index_select(0, self.ops.b_cell)
        return y[: self.ops.n_in], y[self.ops.n_in:]

    def from_duals(self, lam: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        y = torch.cat([lam, mu]).to(self.c)
        X = torch.zeros(self.shape[0] * self.shape[1], dtype=y.dtype, device=y.device)
        X[self.ops.b_cell] = -y
        return X.index_add_(0, self.ops.a_cell, y).view(self.shape)

    def project(self, X: torch.Tensor) -> torch.Tensor:
        """Euclidean projection of each column onto {Σ x = 0, x <= 0 at inequality cells}, exactly."""
        return self.project_from(X)[0]

    def project_from(self, X: torch.Tensor, tau: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(:meth:`project` of X, the column roots τ (1, m)) by Newton's method on the roots, from ``tau``.

        Per column the projection is x - τ with inequality cells clipped at 0, τ the root of the decreasing concave
        φ(τ) = Σ_free (x - τ) + Σ_ineq min(x - τ, 0); Newton's step, τ_{k+1} = (Σ_free x + Σ_S x) / (n_free + |S|) with
        S = {inequality cells with x < τ_k}, is that of :class:`ntpbias.geometry.solvers.apg._Projection`. After the
        first step the iterates decrease to the root, so consecutive sets S are nested and equal exactly when their
        sizes are: then τ_k is the root and M = min(X - τ_k, 0), its free cells reset to x - τ_k, is the projection.
        A step is four passes over X (M, its column sums, the column sums of its sign), with no mask and no sort.
        ``tau=None`` starts from the column means (the step from S = every inequality cell: Michelot's algorithm).
        """
        m = self.shape[1]
        col = self.free_col
        xf = X.reshape(-1).index_select(0, self.free_idx)
        s_free = torch.zeros(m, dtype=X.dtype, device=X.device).index_add_(0, col, xf)
        tau = X.mean(0) if tau is None else tau.reshape(m)
        Xin = X.reshape(-1).index_fill(0, self.free_idx, math.inf).view(X.shape)  # free cells never enter S
        count = None
        for _ in range(self.shape[0] + 2):  # nested sets: at most one step per cell leaving, then one more
            M = (Xin - tau).clamp_(max=0)  # min(x - τ, 0) at inequality cells, 0 at free ones
            s_in = M.sum(0)
            n_in = M.sign().sum(0).neg_()  # M <= 0: its sign counts S
            if count is not None and torch.equal(n_in, count):
                break
            count = n_in
            tau_next = (s_free + s_in + tau * n_in) / (self.n_free + n_in)  # Σ_S x = Σ_S M + τ|S|
            if torch.equal(tau_next, tau):
                break
            tau = tau_next
        else:  # a rounding cycle (never seen): the last roots
            M = (Xin - tau).clamp_(max=0)
        M.view(-1)[self.free_idx] = xf - tau.index_select(0, col)
        return M, tau[None, :]


def dual_form(ops: ConstraintOps, form: str, row_sq_norms: torch.Tensor):
    if form not in ("auto", "grouped", "rows"):
        raise SolverError(f"unknown dual form {form!r}; choose auto, grouped or rows")
    grouped = None if form == "rows" else GroupForm.detect(ops)
    if form == "grouped" and grouped is None:
        raise SolverError("the grouped dual form needs every row's second logit cell to be its own; use form='rows'")
    return grouped or RowForm(ops, row_sq_norms)
