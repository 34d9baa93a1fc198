"""The data subspace F, its projections, and the finite component W* (docs/paper-a-linear-ntp.md#objects).

F = span{(e_z - e_z') h̄_j^T : z ≠ z' ∈ S_j, j ∈ [m]} (eq. (5) of paper A) ⊂ R^{V x d} is spanned by the
Σ_j (S_j - 1) anchor rows A of :class:`~ntpbias.geometry.constraints.NTPConstraints`. Everything goes
through the Gram operator G = A A^T (size Σ(S_j - 1)), never through a dense (Vd x Vd) projector:

* P_F(W) = A^T G^† A(W) and P_⊥(W) = W - P_F(W);
* dim F = rank G;
* W* = A^T G^† b, the minimum-norm solution of the compatibility equations A(W) = b (eq. (4)), which lies
  in F; the data are NTP_H-compatible iff the residual ||A(W*) - b|| vanishes.

Two methods. ``"exact"`` assembles G from H H^T and eigendecomposes it (small problems). ``"iterative"``
(used above :data:`EXACT_MAX_ROWS` rows) never forms G: P_F and W* come from preconditioned conjugate
gradients on G applied as A(A^T ·) (:func:`~ntpbias.geometry.solvers.gram.gram_solve`, two matrix products per
iteration), with CGLS (:func:`~ntpbias.geometry.solvers.gram.min_norm_lstsq`) for W* when the equations turn out
inconsistent; dim F comes from the structure F = {U H : U ∈ 𝒟}, 𝒟 = {U (V x m): column j supported on S_j and
summing to 0}, dim 𝒟 = Σ_j (S_j - 1) (see :func:`dim_F`).
"""

from __future__ import annotations

import torch

from ..._repr import short_repr
from ...data.ntp import NTPData
from ...errors import ConfigError
from ..constraints import constraints
from ..scaling import in_user_units, normalized, stable_norm
from ..solvers.gram import gram_solve, min_norm_lstsq

#: Relative tolerance (to ||b||, at least 1) on the compatibility residual.
COMPATIBILITY_TOL = 1e-8
#: ``method="auto"`` eigendecomposes the Gram matrix up to this many rows Σ_j (S_j - 1), and is matrix-free beyond.
EXACT_MAX_ROWS = 1500
#: Relative residual of the conjugate-gradient solves of the iterative method.
CG_RTOL = 1e-12
#: Steps of iterative refinement of W* (:meth:`DataSubspace._refine`).
REFINE_STEPS = 2
#: Singular values of H[J_v] below this times the largest count as zero in :func:`dim_F` (as the exact
#: method's eigenvalue cutoff 1e-10 on G, in singular values).
RANK_RTOL = 1e-5
#: how F is computed (``method`` of :class:`DataSubspace`)
METHODS = ("auto", "exact", "iterative")


@short_repr
class DataSubspace:
    """F for one dataset; use :func:`subspace` to get the cached instance.

    ``method``: ``"exact"``, ``"iterative"`` or ``"auto"`` (exact up to :data:`EXACT_MAX_ROWS` rows; module doc).
    Attributes: ``dim``, ``W_star``, ``compatibility_residual``, ``compatible``, ``method`` (the one used),
    ``cg_iterations`` (of the iterative W* solve).

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

    def __init__(self, data: NTPData, method: str = "auto"):
        self.data = data
        data, scale = normalized(data)  # computed at unit scale (F is the same for every scale of H; W* ∝ 1/scale)
        cons = constraints(data)
        self.A = cons.eq
        self.log_odds = cons.log_odds
        R = len(self.A)
        if method not in METHODS:
            raise ConfigError(f"unknown subspace method {method!r}; choose {', '.join(METHODS)}")
        self.method = method if method != "auto" else ("exact" if R <= EXACT_MAX_ROWS else "iterative")
        self.cg_iterations = 0
        if R == 0:  # every support has one token (one-hot labels): F = {0}
            self.dim = 0
            self._pinv = torch.zeros(0, 0, dtype=data.H.dtype, device=data.H.device)
        elif self.method == "iterative":
            self._pinv = None
            self.dim = dim_F(data)
            if self.dim == R:  # G is nonsingular: the equations are consistent (compatible data)
                nu, _, self.cg_iterations = gram_solve(self.A, self.log_odds, rtol=CG_RTOL)
                W_star = self.A.adjoint(nu)
            else:  # possibly inconsistent: the minimum-norm least-squares solution
                W_star, self.cg_iterations = min_norm_lstsq(self.A, self.log_odds, rtol=CG_RTOL)
        else:
            G = self.A.gram()
            evals, evecs = torch.linalg.eigh(G)
            cutoff = max(1e-10, R * torch.finfo(G.dtype).eps) * float(evals.abs().max())
            keep = evals > cutoff
            self.dim = int(keep.sum())
            Q = evecs[:, keep]
            self._pinv = (Q / evals[keep]) @ Q.T
        if self.method == "exact" or R == 0:
            W_star = self.A.adjoint(self.log_odds @ self._pinv) if R else torch.zeros(
                data.V, data.d, dtype=data.H.dtype, device=data.H.device)
        tol = COMPATIBILITY_TOL * max(1.0, float(torch.linalg.vector_norm(self.log_odds)))
        residual = self._residual(W_star)
        if residual > tol and R and (self.method == "exact" or self.dim == R):
            W_star = self._refine(W_star)
            residual = self._residual(W_star)
        self.W_star = in_user_units(W_star, scale, what="W*")
        self.compatibility_residual = residual
        self.compatible = residual <= tol

    def _residual(self, W_star: torch.Tensor) -> float:
        """||A(W*) - b||, the residual of the compatibility equations (4)."""
        return float(torch.linalg.vector_norm(self.A.apply(W_star) - self.log_odds if len(self.A) else self.log_odds))

    def _refine(self, W_star: torch.Tensor) -> torch.Tensor:
        """:data:`REFINE_STEPS` steps of iterative refinement W* += A^T G^† (b - A W*), taken when the residual is
        above the tolerance: when the equations are only just independent (d at the compatibility threshold, cond(G)
        up to 1e13) the first solve leaves a residual of about cond(G) x eps x ||b|| (1e-7 to 1e-3 relative), which
        the compatibility test would read as inconsistent equations; one step brings it to round-off. Inconsistent
        equations keep their least-squares residual."""
        for _ in range(REFINE_STEPS):
            r = self.log_odds - self.A.apply(W_star)
            step = r @ self._pinv if self.method == "exact" else gram_solve(self.A, r, rtol=CG_RTOL)[0]
            W_star = W_star + self.A.adjoint(step)
        return W_star

    @property
    def ambient_dim(self) -> int:
        """V d, the dimension of the parameter space."""
        return self.data.V * self.data.d

    def project(self, W: torch.Tensor) -> torch.Tensor:
        """P_F(W) for W (..., V, d) (iterative method: one batched conjugate-gradient solve)."""
        if self.dim == 0:
            return torch.zeros_like(W)
        if self._pinv is None:
            return self.A.adjoint(gram_solve(self.A, self.A.apply(W), rtol=CG_RTOL)[0])
        return self.A.adjoint(self.A.apply(W) @ self._pinv)

    def project_perp(self, W: torch.Tensor) -> torch.Tensor:
        """P_⊥(W) = W - P_F(W), the component in F^⊥ (where in-support logits are tied)."""
        return W - self.project(W)

    @property
    def norm_W_star(self) -> float:
        """||W*||."""
        return stable_norm(self.W_star)

    def _summary(self) -> dict:
        """What ``repr`` shows: dim F (of V d), the compatibility verdict, ||W*|| and the method."""
        return {"dim": f"{self.dim} of {self.ambient_dim}", "compatible": self.compatible,
                "norm_W_star": self.norm_W_star, "residual": self.compatibility_residual, "method": self.method}


def subspace(data: NTPData, method: str = "auto") -> DataSubspace:
    """The (cached) :class:`DataSubspace` of ``data``; ``method``: ``"auto"``, ``"exact"`` or ``"iterative"``."""
    key = "subspace" if method == "auto" else f"subspace:{method}"
    if key not in data._cache:
        data._cache[key] = DataSubspace(data, method)
    return data._cache[key]


def dim_F(data: NTPData) -> int:
    """dim F without the Gram matrix: Σ_j (S_j - 1) minus the dimension of the kernel of U ↦ U H on 𝒟.

    With J_v = {j : v ∈ S_j}, row v of U H is U[v, J_v] H[J_v], so U is in the kernel iff each U[v, J_v] lies in
    the left null space N_v of H[J_v] (dimension n_v = |J_v| - rank H[J_v]) and the columns of U sum to zero.
    With U[v, J_v] = B_v c_v (B_v an orthonormal basis of N_v) the kernel is {(c_v) : M c = 0},
    M = [E_1 B_1 ... E_V B_V] (E_v embeds R^{J_v} in R^m), so its dimension is Σ_v n_v - rank M, and
    rank M = rank M M^T with M M^T = Σ_v E_v B_v B_v^T E_v^T (m x m). The bases come from
    :func:`_left_null_basis` (one Householder QR per token where H[J_v] has full rank, as Gaussian embeddings have);
    when every n_v is 0, dim F = Σ_j (S_j - 1) without forming M M^T.

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> dim_F(NTPData.from_arrays(torch.ones(2, 1), [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]))  # h_1 = h_2: one direction
    1
    """
    S, H = data.support, data.H
    R = int(S.sum()) - data.m
    nz = H != 0
    if bool((nz.sum(1) == 1).all()) and torch.unique(nz.to(torch.int8).argmax(1)).numel() == data.m:
        return R  # one-hot (scaled) embeddings of distinct contexts: H has full row rank
    MMt = None
    n_null = 0
    for v in torch.nonzero(S.sum(0) > 0).flatten().tolist():  # one factorization per token: setup, not a hot path
        J = torch.nonzero(S[:, v]).flatten()
        B = _left_null_basis(H[J])
        if B.shape[1]:
            n_null += B.shape[1]
            if MMt is None:
                MMt = torch.zeros(data.m, data.m, dtype=H.dtype, device=H.device)
            rows = torch.zeros(len(J), data.m, dtype=H.dtype, device=H.device).index_copy_(1, J, B @ B.T)
            MMt.index_add_(0, J, rows)  # E_v B_v B_v^T E_v^T on the J_v x J_v cells (3x faster than MMt[J, J] +=)
    if MMt is None:
        return R
    return R - (n_null - int(torch.linalg.matrix_rank(MMt, hermitian=True, rtol=RANK_RTOL ** 2)))


def _left_null_basis(X: torch.Tensor) -> torch.Tensor:
    """An orthonormal basis (n, n - rank X) of the left null space of X (n, d), rank X counting the singular values
    above :data:`RANK_RTOL` times the largest.

    The rank comes from the eigenvalues of the smaller Gram matrix (σ_i² > RANK_RTOL² σ_1²: its rounding, about
    n eps σ_1², is five orders below that cutoff). At full rank min(n, d), the basis is the last n - d columns of
    X's Householder Q (geqrf and ormqr: several times cheaper than the SVD, measured 0.6 against 1.7 s at
    (1520, 1518)); a rank-deficient X takes the trailing n - rank left singular vectors of its full SVD.
    """
    n, d = X.shape
    ev = torch.linalg.eigvalsh(X.T @ X if n > d else X @ X.T)
    top = float(ev.max()) if ev.numel() else 0.0
    rank = int((ev > RANK_RTOL ** 2 * top).sum()) if top > 0 else 0
    if rank == min(n, d):
        if n <= d:
            return X.new_zeros(n, 0)
        a, tau = torch.geqrf(X)
        tail = X.new_zeros(n, n - d)
        tail[d:] = torch.eye(n - d, dtype=X.dtype, device=X.device)
        return torch.ormqr(a, tau, tail)
    return torch.linalg.svd(X)[0][:, rank:]


def counting_bound(V: int, k: int) -> float:
    """(k - 1)/(V - 1): the smallest d/m at which data with |S_j| = k and generic probabilities can be NTP_H-compatible.

    Every generator (e_z - e_z') h̄_j^T of F has zero column sums, so dim F <= (V - 1) d, while compatibility with
    generic in-support probabilities needs dim F = m (k - 1) (our derivation; see docs/paper-a-linear-ntp.md).

    >>> counting_bound(10, 6)
    0.5555555555555556
    """
    return (k - 1) / (V - 1)


def support_count_bound(support: torch.Tensor) -> int:
    """A lower bound on the smallest d at which data with these supports can be NTP_H-compatible (our derivation).

    support: (m, V) bool, row j = S_j. For embeddings in general position (every set of rows of H, m x d, has full
    rank) the equations (4) are independent, which compatibility with generic probabilities needs, only if
    d >= this bound, the larger of:

    * Σ_v (n_v - d)_+ <= m - d, with n_v = #{j : v ∈ S_j}. The kernel of (a_j) ↦ Σ_j a_j h̄_j^T (a_j supported on
      S_j, 1^T a_j = 0) contains every U whose row v restricted to the contexts J_v = {j : v ∈ S_j} lies in the left
      null space of H[J_v] (dimension (n_v - d)_+) and whose column sums 1^T U vanish; those column sums lie in the
      left null space of H (dimension m - d), so the kernel has dimension >= Σ_v (n_v - d)_+ - (m - d).
    * d >= c for c >= 2 contexts sharing one support of size >= 2 (their equations span (k - 1) min(c, d)
      dimensions).

    With random supports of size k, n_v / m -> k/V and the first condition tends to d/m >= (k - 1)/(V - 1)
    (:func:`counting_bound`), with a correction from the fluctuations of n_v of order sqrt(m k/V) that matters
    while m/(V (V - 1)) is below it (k near V). Singleton supports give 0 (F = {0}). The tests compare it with the
    rank of eq. (4) (:func:`dim_F`) on random data.

    >>> support_count_bound(torch.tensor([[1, 1, 0], [1, 1, 0], [0, 1, 1]], dtype=torch.bool))  # a support twice
    2
    """
    S = support.to(torch.bool)
    m = S.shape[0]
    n = S.sum(0)
    # f(d) = Σ_v (n_v - d)_+ - (m - d) for d = 0..m from the histogram of n (suffix sums): non-increasing in d
    hist = torch.bincount(n, minlength=m + 1).to(torch.float64)
    t = torch.arange(m + 1, dtype=torch.float64)
    above = hist.flip(0).cumsum(0).flip(0) - hist  # #{v : n_v > d}
    mass = (hist * t).flip(0).cumsum(0).flip(0) - hist * t  # Σ_{n_v > d} n_v
    f = mass - t * above - (m - t)
    d_all = int(torch.nonzero(f <= 0)[0])
    shared = S[S.sum(1) >= 2]
    repeats = int(torch.unique(shared, dim=0, return_counts=True)[1].max()) if len(shared) else 0
    return max(d_all, repeats if repeats >= 2 else 0)
