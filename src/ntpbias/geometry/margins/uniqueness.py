"""Is the NTP-SVM of a norm unique? A certificate either way, or "undecided" (docs/optimizers.md#uniqueness).

The l1, linf, spectral and nuclear norms are not strictly convex, so (P_N) of :mod:`ntpbias.geometry.margins.norm_svm`
may have a whole face of minimizers. Two tests, from a certified solution W with dual multipliers (λ, μ) and
G = A_in^T λ + A_eq^T μ (||G||_* <= 1, <G, W> = ||W||):

**Unique (certified).** Every minimizer W' satisfies <G, W'> = ||G||_* ||W'|| (the dual certificate is tight for all
of them), A_in(W')_i = 1 where λ_i > 0, and A_eq(W') = 0. The first condition confines W' - W to a linear family
B(θ) that depends only on G:

* l1: W'_vc = 0 wherever |G_vc| < 1, so θ = the entries with |G_vc| = 1;
* linf: W'_vc = sign(G_vc) ||W|| wherever G_vc ≠ 0, so θ = the entries with G_vc = 0;
* spectral: W' v_i = ||W|| u_i for every singular pair (u_i, v_i) of G with σ_i > 0, so W' - W = U_⊥ X V_⊥^T;
* nuclear: W' = U_1 M V_1^T with M ⪰ 0 and (U_1, V_1) the singular vectors of G with σ_i = 1, so θ = M - M_W
  symmetric.

If the linear map θ ↦ (A_in(B θ)_{λ_i > 0}, A_eq(B θ)) is injective (full column rank, by an SVD), W is the only
minimizer. The thresholds that classify G's entries or singular values are chosen on the safe side (a doubtful
entry is left free, a doubtful multiplier is not counted as positive).

**Not unique (certified by example).** A direction D that keeps the norm constant near W (the entries of W off the
bound for linf, its support with <sign W, D> = 0 for l1, the complement of its top singular space for spectral,
U_W M V_W^T with tr M = 0 for nuclear) and keeps every active constraint (A_in(D)_i = 0 where A_in(W)_i = 1, and
A_eq(D) = 0) is found in the null space of the same kind of matrix; a step W' = W + s D short enough to keep the
inactive constraints and the norm's structure is then checked directly: W' feasible, ||W'|| <= ||W|| (1 + 1e-8), and
||W' - W|| >= 1e-4 ||W||. Such a W' is a second minimizer (to the solver's tolerance).

Neither test fires: ``unique`` is None ("undecided"). Dense matrices above :data:`MAX_ENTRIES` entries are not
formed (undecided, "too large").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..constraints import LogitGaps
from ..norms import matrix_norm

#: The rank tests form a dense (rows x family size) matrix; beyond this many entries they are skipped.
MAX_ENTRIES = 12_000_000
#: Injective (uniqueness certified) when the smallest singular value exceeds this times the largest: well above the
#: perturbation the solver's 1e-10-accurate multipliers can cause ...
INJECTIVE_RTOL = 1e-8
#: ... and a null direction (for a second minimizer) when a singular value is below this times the largest and the size.
NULL_RTOL = 1e-13
#: A second minimizer must be at least this far from W (relative, Frobenius) ...
MIN_DISTANCE = 1e-4
#: ... with a norm at most (1 + this) ||W|| and constraints met to this (plus W's own violation).
NORM_TOL = 1e-8
FEAS_TOL = 1e-9


@dataclass(frozen=True)
class Uniqueness:
    """``unique``: True (certified), False (a second minimizer found and checked) or None; ``reason`` in words."""

    unique: bool | None
    reason: str
    details: dict = field(default_factory=dict)


class _Rows:
    """The constraint rows of a test: a subset of the inequalities followed by every equality."""

    def __init__(self, ineq: LogitGaps, mask: torch.Tensor, eq: LogitGaps | None):
        rows = ineq.subset(mask)
        self.A = rows if eq is None or not len(eq) else rows.concat(eq)
        self.n = len(self.A)

    def coordinate_matrix(self, cols: torch.Tensor) -> torch.Tensor:
        """The dense (n, |cols|) matrix of the rows on the flat coordinates ``cols`` of vec(W) (row-major)."""
        mat = self.A.to_sparse()[:, cols.cpu().numpy()]
        return torch.as_tensor(mat.toarray(), dtype=self.A.H.dtype)

    def bilinear_matrix(self, U: torch.Tensor, Vr: torch.Tensor) -> torch.Tensor:
        """(n, a, b) tensor T[r, i, j] = A_r(U[:, i] Vr[:, j]^T) for U (V, a), Vr (d, b), without forming the basis."""
        A = self.A
        HV = A.H @ Vr  # (m, b)
        return U[A.a][:, :, None] * HV[A.j][:, None, :] - U[A.b][:, :, None] * HV[A.k][:, None, :]


def _too_large(n: int, k: int) -> bool:
    return n * k > MAX_ENTRIES


def _injective(M: torch.Tensor, scale: float) -> bool:
    """Full column rank, robustly: the smallest singular value above :data:`INJECTIVE_RTOL` times ``scale`` (the size
    of one constraint on a unit direction, max ||A_r||, so that a matrix of round-off is not called injective)."""
    n, k = M.shape
    if k == 0:
        return True
    if k > n:
        return False
    s = torch.linalg.svdvals(M)
    return bool(s.min() > INJECTIVE_RTOL * max(float(s.max()), scale))


def _null_vectors(M: torch.Tensor, scale: float, count: int = 3) -> torch.Tensor:
    """Up to ``count`` unit vectors of the (numerical) null space of M (n, k), as columns (k, c); (k, 0) when none."""
    n, k = M.shape
    if k == 0:
        return M.new_zeros(0, 0)
    _, s, Vh = torch.linalg.svd(M, full_matrices=True)
    tol = NULL_RTOL * max(float(s.max()) if s.numel() else 0.0, scale) * max(n, k)
    rank = int((s > tol).sum())
    return Vh[rank:rank + count].T


def _scale(ineq: LogitGaps) -> float:
    """max_r ||A_r|| <= sqrt(2) max_j ||h_j||: the size of a constraint on a unit direction."""
    return 2 ** 0.5 * float(torch.linalg.vector_norm(ineq.H, dim=1).max())


def _sym_basis(k: int, dtype) -> torch.Tensor:
    """A basis of symmetric k x k matrices, (k(k+1)/2, k, k)."""
    iu = torch.triu_indices(k, k)
    B = torch.zeros(iu.shape[1], k, k, dtype=dtype)
    idx = torch.arange(iu.shape[1])
    B[idx, iu[0], iu[1]] = 1.0
    B[idx, iu[1], iu[0]] = 1.0
    return B


def _svd(W: torch.Tensor):
    U, s, Vh = torch.linalg.svd(W, full_matrices=True)
    return U, s, Vh.mT


def uniqueness(ineq: LogitGaps, eq: LogitGaps | None, norm: str, W: torch.Tensor, lam: torch.Tensor,
               mu: torch.Tensor) -> Uniqueness:
    """Decide whether W is the only minimizer of (P_N) in ``norm`` (module docstring); (λ, μ) a feasible dual."""
    if norm == "l2":
        return Uniqueness(True, "the l2 norm is strictly convex")
    eq = eq if eq is not None and len(eq) else None
    G = ineq.adjoint(lam)
    if eq is not None:
        G = G + eq.adjoint(mu)
    lam_pos = lam > 1e-6 * max(float(lam.max()), 1e-300) if len(lam) else torch.zeros(0, dtype=torch.bool)
    unique = _certify_unique(ineq, eq, norm, W, G, lam_pos)
    if unique is not None:
        return unique
    return _find_second(ineq, eq, norm, W)


def _certify_unique(ineq, eq, norm, W, G, lam_pos) -> Uniqueness | None:
    rows = _Rows(ineq, lam_pos, eq)
    V, d = W.shape
    if norm in ("l1", "linf"):
        g = G.reshape(-1).abs()
        scale = max(float(g.max()), 1e-300)
        free = torch.nonzero(g >= (1 - 1e-4) * scale if norm == "l1" else g <= 1e-4 * scale).flatten()
        if _too_large(rows.n, len(free)):
            return Uniqueness(None, f"undecided: the rank test ({rows.n} x {len(free)}) is too large")
        M = rows.coordinate_matrix(free)
        what = (f"the {len(free)} entries where |G| = ||G||_inf" if norm == "l1"
                else f"the {len(free)} entries where G = 0")
    elif norm == "spectral":
        U, s, Vr = _svd(G)
        r = int((s > 1e-4 * max(float(s.max()), 1e-300)).sum())
        Uc, Vc = U[:, r:], Vr[:, r:]
        if _too_large(rows.n, Uc.shape[1] * Vc.shape[1]):
            return Uniqueness(None, "undecided: the rank test is too large")
        M = rows.bilinear_matrix(Uc, Vc).reshape(rows.n, -1)
        what = f"U_⊥ X V_⊥^T ({V - r} x {d - r} free block outside G's rank-{r} singular space)"
    else:  # nuclear
        U, s, Vr = _svd(G)
        k = int((s >= (1 - 1e-4) * float(s.max())).sum())
        T = rows.bilinear_matrix(U[:, :k], Vr[:, :k])  # (n, k, k)
        M = torch.einsum("rij,bij->rb", T, _sym_basis(k, T.dtype).to(T.device))
        what = f"U_1 M V_1^T with M symmetric ({k} x {k}; G's singular value 1 has multiplicity {k})"
    if _injective(M, _scale(ineq)):
        return Uniqueness(True, f"certified unique: every minimizer differs from W^mm by {what}, and the "
                                f"{rows.n} pinned constraints determine it (full column rank)",
                          {"uniqueness_test": "dual", "free_dimension": int(M.shape[1])})
    return None


def _find_second(ineq, eq, norm, W) -> Uniqueness:
    """Look for a second minimizer W + s D (module docstring)."""
    g = ineq.apply(W)
    active = g <= 1 + 1e-7
    rows = _Rows(ineq, active, eq)
    value = float(matrix_norm(W, norm))
    V, d = W.shape
    flat = W.reshape(-1)
    if norm in ("l1", "linf"):
        a = flat.abs()
        cols = torch.nonzero(a > 1e-7 * float(a.max()) if norm == "l1" else a < value * (1 - 1e-7)).flatten()
        if _too_large(rows.n + 1, len(cols)):
            return Uniqueness(None, "undecided: the search for a second minimizer is too large")
        M = rows.coordinate_matrix(cols)
        if norm == "l1":  # keep <sign W, D> = 0 so that the l1 norm stays constant
            M = torch.cat([M, torch.sign(flat[cols]).cpu().to(M.dtype)[None]], 0)

        def direction(theta):
            D = torch.zeros_like(flat)
            D[cols] = theta.to(D)
            return D.reshape(V, d)

        def longest(D):  # l1: no entry of the support changes sign; linf: no free entry reaches the bound
            Df, Wf = D.reshape(-1)[cols], flat[cols]
            if norm == "l1":
                return float((Wf.abs() / Df.abs().clamp(min=1e-300)).min())
            return float(((value - Wf.abs()) / Df.abs().clamp(min=1e-300)).min())
    elif norm == "spectral":
        U, s, Vr = _svd(W)
        k = int((s >= value * (1 - 1e-7)).sum())
        Uc, Vc = U[:, k:], Vr[:, k:]
        if _too_large(rows.n, Uc.shape[1] * Vc.shape[1]):
            return Uniqueness(None, "undecided: the search for a second minimizer is too large")
        M = rows.bilinear_matrix(Uc, Vc).reshape(rows.n, -1)
        R = Uc.T @ W @ Vc
        rest = float(torch.linalg.matrix_norm(R, ord=2)) if R.numel() else 0.0

        def direction(theta):
            return Uc @ theta.to(W).reshape(Uc.shape[1], Vc.shape[1]) @ Vc.T

        def longest(D):  # ||R + s X||_2 <= ||W||_2
            X = Uc.T @ D @ Vc
            return (value - rest) / max(float(torch.linalg.matrix_norm(X, ord=2)), 1e-300)
    else:  # nuclear
        U, s, Vr = _svd(W)
        k = int((s > 1e-6 * float(s.max())).sum())
        Uk, Vk = U[:, :k], Vr[:, :k]
        T = rows.bilinear_matrix(Uk, Vk)
        basis = _sym_basis(k, T.dtype).to(T.device)
        M = torch.cat([torch.einsum("rij,bij->rb", T, basis), torch.einsum("bii->b", basis)[None]], 0)

        def direction(theta):
            return Uk @ torch.einsum("b,bij->ij", theta.to(W), basis.to(W)) @ Vk.T

        def longest(D):  # Σ_k + s M stays positive semidefinite
            Mk = Uk.T @ D @ Vk
            return float(s[:k].min()) / max(float(torch.linalg.matrix_norm(Mk, ord=2)), 1e-300)
    nulls = _null_vectors(M, _scale(ineq))
    if not nulls.shape[1]:
        return Uniqueness(None, "undecided: no direction keeps the norm and the active constraints (and the dual "
                                "test did not certify uniqueness)", {"uniqueness_test": "none"})
    feas0 = max(float(torch.clamp(1 - g, min=0).max()), 0.0)
    for theta in nulls.T:
        D = direction(theta)
        D = D * (float(torch.linalg.vector_norm(W)) / max(float(torch.linalg.vector_norm(D)), 1e-300))
        AD = ineq.apply(D)
        for sign in (1.0, -1.0):
            shrink = ((sign * AD) < 0) & ~active  # inactive constraints that decrease along the step
            steps = [0.5 * longest(D)]
            if bool(shrink.any()):
                steps.append(0.5 * float(((g[shrink] - 1) / (-sign * AD[shrink])).min()))
            step = min(steps)
            W2 = W + sign * step * D
            g2 = ineq.apply(W2)
            feasible = float(g2.min()) >= 1 - FEAS_TOL - feas0
            if eq is not None:
                feasible &= float(eq.apply(W2).abs().max()) <= FEAS_TOL + float(eq.apply(W).abs().max())
            dist = float(torch.linalg.vector_norm(W2 - W)) / max(float(torch.linalg.vector_norm(W)), 1e-300)
            excess = float(matrix_norm(W2, norm)) / value - 1
            if feasible and excess <= NORM_TOL and dist >= MIN_DISTANCE:
                return Uniqueness(False, f"not unique: a second feasible W' with ||W'|| <= ||W^mm|| (1 + {NORM_TOL:g}) "
                                         f"lies at relative distance {dist:.3g} (checked directly)",
                                  {"uniqueness_test": "second minimizer", "second_minimizer_distance": dist,
                                   "second_minimizer_norm_excess": excess, "W_second": W2})
    return Uniqueness(None, "undecided: the candidate directions did not give a checked second minimizer",
                      {"uniqueness_test": "none"})
