"""Products restricted to a face: the constraint operator of a few rows per context, without the dense logits.

The face refinement of :mod:`ntpbias.geometry.solvers.workset` solves (A_F A_F^T) ν = r by conjugate gradients, two
products per iteration. Through the dense logit matrix each costs V·m·d multiply-adds whatever the face; but an NTP row
(a, j) - (b, j) touches two cells of one context's column, and a face holds a few rows per context (on the one-hot
benchmark sizes 5-8 of V - 1 = 19-99), so only its cells are needed:

* **apply** (W ↦ A_F W): the logits at the face's cells, L[v, j] = <W_v, h_j>, by a sampled dense-dense product
  (``torch.sparse.sampled_addmm`` on the cells' pattern, contexts as rows: each h_j is read once and dotted with
  its few rows of W);
* **adjoint** (y ↦ A_F^T y): the cell values Λ (a scatter of ±y) times H, context by context (a COO matrix whose
  entries are listed context by context: each h_j is read once and added into its few rows of W, which stay in
  cache). CSR products walk the classes instead and were 6-20x slower; SciPy's compressed-column product 1.3x.

At (m, d, V) = (20000, 2000, 100) with 8 cells per context, measured on one CPU thread: 24 ms and 26 ms against 77
and 81 ms for the dense float32 products; at (5000, 2000, 50) with 9 per context, 7 and 8 ms against 13 and 12 ms.
:func:`face_operator` returns this operator where it applies (CPU, no left factor, both cells of every row in one
context, float32 or float64) and pays (cells at most :data:`MAX_DENSITY` of the logit matrix), else the rows
themselves (their dense products).
"""

from __future__ import annotations

import warnings

import torch

from ..constraints import LogitGaps

#: The face operator is used when its cells are at most this fraction of the (V, m) logit matrix (measured, one
#: conjugate-gradient product pair: 2.0x faster than dense at 18% of the cells, 1.4x at 29%).
MAX_DENSITY = 0.35
#: :func:`cells_times_H` goes through the nonzero cells when they are at most this fraction (measured: 2-3x faster
#: than dense at 8%, 1.4x at 18%, and no faster at 30%, where the products pass the face operator's threshold
#: only in pairs).
SPARSE_W_MAX_DENSITY = 0.2
#: ... and when the dense product has at least this many multiply-adds (below, finding the cells costs more than the
#: product: 1.8 against 0.9 ms at (V, m, d) = (20, 2000, 1000)).
SPARSE_W_MIN_WORK = 1e8


def face_operator(A: LogitGaps, *, max_density: float | None = None):
    """``A`` itself, or a :class:`FaceRows` with the same ``apply`` and ``adjoint`` where that is faster (module
    doc): cells at most ``max_density`` (default :data:`MAX_DENSITY`) of the logit matrix."""
    max_density = MAX_DENSITY if max_density is None else max_density
    if (A.left is not None or A.H.device.type != "cpu" or A.H.dtype not in (torch.float32, torch.float64)
            or len(A) == 0 or not bool((A.j == A.k).all())):
        return A
    cells = torch.unique(torch.cat([A.j * A.rows + A.a, A.k * A.rows + A.b]))
    if cells.numel() > max_density * A.rows * A.H.shape[0]:
        return A
    return FaceRows(A)


class FaceRows:
    """The rows of ``A`` (every row's two cells in one context, no left factor), applied through their cells only.

    ``apply(W)`` for W (rows, c) -> (R,) and ``adjoint(y)`` for y (R,) -> (rows, c), as :class:`LogitGaps`
    (one-dimensional y only)."""

    def __init__(self, A: LogitGaps):
        self.A = A
        V, m = A.rows, A.H.shape[0]
        keys = torch.cat([A.j * V + A.a, A.k * V + A.b])  # context-major cell keys
        cells, inverse = torch.unique(keys, return_inverse=True)
        R = len(A)
        self.pos_a, self.pos_b = inverse[:R], inverse[R:]
        ctx, cls = cells // V, cells % V
        crow = torch.zeros(m + 1, dtype=torch.long)
        crow[1:] = torch.cumsum(torch.bincount(ctx, minlength=m), 0)
        self.n_cells = int(cells.numel())
        self.H = A.H.contiguous()
        with warnings.catch_warnings():  # "sparse CSR support is in beta": the two calls used here are tested
            warnings.simplefilter("ignore", UserWarning)
            self.pattern = torch.sparse_csr_tensor(crow, cls, torch.zeros(self.n_cells, dtype=A.H.dtype),
                                                   size=(m, V), check_invariants=False)
        self.cells = torch.stack([cls, ctx])  # (class, context) of each cell, context-major
        self.shape = (V, m)

    def __len__(self) -> int:
        return len(self.A)

    def apply(self, W: torch.Tensor) -> torch.Tensor:
        vals = torch.sparse.sampled_addmm(self.pattern, self.H, W.T, beta=0.0).values()
        return vals.index_select(0, self.pos_a) - vals.index_select(0, self.pos_b)

    def adjoint(self, y: torch.Tensor) -> torch.Tensor:
        vals = torch.zeros(self.n_cells, dtype=y.dtype).index_add_(0, self.pos_a, y).index_add_(0, self.pos_b, -y)
        return _coo_times(self.cells, vals, self.shape, self.H)


def cells_times_H(Lam: torch.Tensor, H: torch.Tensor, *, max_density: float | None = None) -> torch.Tensor:
    """Λ H for a logit-cell matrix Λ (V, m) on the CPU: context by context through its nonzero cells when they are at
    most ``max_density`` (default :data:`SPARSE_W_MAX_DENSITY`) of it (a projected dual iterate is zero off its
    face), else the dense product. Same dtype as ``Lam``."""
    max_density = SPARSE_W_MAX_DENSITY if max_density is None else max_density
    if (Lam.device.type != "cpu" or Lam.dtype not in (torch.float32, torch.float64) or H.dtype != Lam.dtype
            or Lam.numel() * H.shape[1] < SPARSE_W_MIN_WORK):
        return Lam @ H
    LT = Lam.T  # (m, V): its nonzeros come out context-major
    ctx, cls = torch.nonzero(LT, as_tuple=True)
    if ctx.numel() > max_density * Lam.numel():
        return Lam @ H
    return _coo_times(torch.stack([cls, ctx]), LT[ctx, cls], tuple(Lam.shape), H)


def _coo_times(cells: torch.Tensor, vals: torch.Tensor, shape: tuple[int, int], H: torch.Tensor) -> torch.Tensor:
    """Λ H for Λ with values ``vals`` at ``cells`` (2, n) = (class, context), listed context by context: torch's
    COO product walks them in that order, so each h_j is read once (measured faster than SciPy's compressed-column
    product, and than any CSR product, which walk the classes)."""
    Lam = torch.sparse_coo_tensor(cells, vals, shape, check_invariants=False)
    return torch.sparse.mm(Lam, H)
