"""The log-bilinear (unconstrained-features) model of next-token prediction and its logit-space objects
(docs/ufm.md#the-model and #predicted-geometry).

Every distinct context j has its own trainable embedding h_j (row j of H, (m, d)) next to the word embeddings W (V, d);
the logits are the (V, m) matrix L = W H^T (column j = logits of context j). The objective is the NTP cross-entropy in
distinct-context form (eq. (2) of paper A, :func:`~ntpbias.geometry.linear.loss.logit_cross_entropy_grad`) plus the
ridge penalty (λ/2)(||W||² + ||H||²) (docs/ufm.md, convention U-D1).

The logit-space objects the theory compares trained models with, all (V, m):

* the support matrix S (S[z, j] = 1 if p̂_{j,z} > 0) and the **centred support matrix** S̃ = (I_V - 11^T/V) S (every
  column sums to 0), with its SVD (:func:`support_svd`);
* the subspace F of logit matrices spanned by (e_z - e_z') e_j^T, z, z' in S_j, and its projections (:func:`project_F`;
  P_F keeps each context's in-support logits minus their mean, zero elsewhere);
* the **finite part** L* (:func:`finite_logits`): L*[z, j] = log p̂_{j,z} - mean_{z' in S_j} log p̂_{j,z'} on S_j, 0
  elsewhere, the unique point of F at which the softmax restricted to each support equals p̂_j;
* the nuclear-norm NTP-SVM L^mm (:mod:`ntpbias.geometry.ufm.logit_svm`).

Shapes: parameters may carry a leading batch dimension B (seeds): W (B, V, d), H (B, m, d), L (B, V, m).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._repr import short_repr
from ...data.ntp import NTPData, as_ntp_data
from ..linear.loss import logit_cross_entropy_grad

#: Singular values below this fraction of the largest count as zero (ranks, polar factors).
RANK_TOL = 1e-9


# ================================================================================================ the model
def ufm_logits(W: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
    """L = W H^T: (..., V, m) from W (..., V, d) and H (..., m, d)."""
    return W @ H.mT


def ufm_loss_grad(W: torch.Tensor, H: torch.Tensor, data: NTPData, lam: float
                  ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Objective f(W, H) = CE(W H^T) + (λ/2)(||W||² + ||H||²) and its closed-form gradient (docs/ufm.md#the-model).

    With G = ∇_L CE(L) (V, m): ∇_W f = G H + λ W and ∇_H f = G^T W + λ H.

    Returns (objective (...,), CE (...,), {"W": (..., V, d), "H": (..., m, d)}).

    >>> import torch
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> W, H = torch.ones(3, 2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64)
    >>> f, ce, g = ufm_loss_grad(W, H, data, 0.1)
    >>> round(float(f - ce), 6), tuple(g["W"].shape), tuple(g["H"].shape)  # ridge term (0.1/2) * 6
    (0.3, (3, 2), (2, 2))
    """
    ce, G = logit_cross_entropy_grad(ufm_logits(W, H), data)
    ridge = 0.5 * lam * (W.pow(2).sum((-2, -1)) + H.pow(2).sum((-2, -1)))
    return ce + ridge, ce, {"W": G @ H + lam * W, "H": G.mT @ W + lam * H}


def balanced_factors(L: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """W = U Σ^{1/2}, H = V Σ^{1/2} (padded or cut to d columns) for L = U Σ V^T (..., V, m).

    When d >= rank(L), W H^T = L and (||W||² + ||H||²)/2 = ||L||_*, the least value over all factorizations: the
    variational form of the nuclear norm that ties the ridge path to the nuclear-norm problems (docs/ufm.md, U-1).
    """
    U, s, Vh = torch.linalg.svd(L, full_matrices=False)
    root = s.sqrt()
    W, H = U * root[..., None, :], Vh.mT * root[..., None, :]
    k = W.shape[-1]
    if d >= k:
        pad = [0, d - k]
        return torch.nn.functional.pad(W, pad), torch.nn.functional.pad(H, pad)
    return W[..., :d], H[..., :d]


def nuclear_norm(L: torch.Tensor) -> torch.Tensor:
    """||L||_* (sum of singular values) of (..., V, m) matrices: (...,)."""
    return torch.linalg.svdvals(L).sum(-1)


def psd_sqrt(A: torch.Tensor) -> torch.Tensor:
    """The positive semi-definite square root of a symmetric PSD (..., n, n) matrix (negative round-off clipped)."""
    w, Q = torch.linalg.eigh(A)
    return (Q * w.clamp_min(0).sqrt()[..., None, :]) @ Q.mT


# ================================================================================================ supports
def support_matrix(data: NTPData) -> torch.Tensor:
    """S (V, m) of 0/1 (in H's dtype): S[z, j] = 1 iff p̂_{j,z} > 0."""
    return data.support.T.to(data.P.dtype)


def centred_support(data: NTPData) -> torch.Tensor:
    """S̃ = (I_V - 11^T/V) S (V, m): column j is the indicator of S_j minus |S_j|/V (columns sum to 0)."""
    S = support_matrix(data)
    return S - S.mean(0, keepdim=True)


def support_groups(data: NTPData) -> tuple[torch.Tensor, torch.Tensor]:
    """Contexts grouped by their support set: (group (m,) int64 in 0..K-1, in order of first appearance; sets (K, V)
    bool)."""
    sets, inverse = torch.unique(data.support, dim=0, return_inverse=True)
    first = torch.full((len(sets),), data.m, dtype=torch.int64).scatter_reduce(
        0, inverse, torch.arange(data.m), reduce="amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order))
    return rank[inverse], sets[order]


@short_repr
@dataclass(frozen=True, eq=False)
class SupportSVD:
    """The SVD of the centred support matrix S̃ = U diag(σ) V^T (thin, rank r) and what the geometry needs of it.

    Attributes
    ----------
    S_tilde : (V, m)
    U : (V, r), sigma : (r,), Vt : (r, m)
    polar : (V, m) the polar factor U V^T (the subgradient of ||·||_* at S̃)
    polar_out_max : the largest entry of the polar factor off the supports. When it is <= 0, S̃ itself solves the
        nuclear-norm NTP-SVM (docs/ufm.md, U-3: the polar factor is then a dual certificate), so the SVM's limit
        geometry is the SVD of S̃ exactly.
    """

    S_tilde: torch.Tensor
    U: torch.Tensor
    sigma: torch.Tensor
    Vt: torch.Tensor
    polar: torch.Tensor
    polar_out_max: float

    def _summary(self) -> dict:
        """What ``repr`` shows: the shape, the rank, the leading singular values and whether S̃ solves the SVM."""
        return {"shape": tuple(self.S_tilde.shape), "rank": self.rank,
                "singular_values": tuple(round(float(x), 6) for x in self.sigma),
                "svm_is_centred_support": self.svm_is_centred_support}

    @property
    def rank(self) -> int:
        return int(self.sigma.numel())

    @property
    def svm_is_centred_support(self) -> bool:
        """True when S̃ solves the nuclear-norm NTP-SVM (the polar factor is <= 0 off the supports, U-3)."""
        return self.polar_out_max <= 1e-12


def support_svd(data: NTPData) -> SupportSVD:
    """The thin SVD of the centred support matrix S̃ = (I - 11^T/V) S and its polar factor (docs/ufm.md, U-3).

    Parameters
    ----------
    data : NTPData
        The dataset; only its supports matter.

    Returns
    -------
    SupportSVD
        ``S_tilde``, ``U``, ``sigma``, ``Vt``, the polar factor and ``polar_out_max`` (when <= 0, S̃ itself solves
        the nuclear-norm NTP-SVM).

    Examples
    --------
    >>> import torch
    >>> data = NTPData.from_arrays(torch.eye(3), [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])  # one-hot: simplex ETF
    >>> s = support_svd(data)
    >>> s.rank, [round(x, 6) for x in s.sigma.tolist()], s.svm_is_centred_support
    (2, [1.0, 1.0], True)
    """
    St = centred_support(as_ntp_data(data, "support_svd"))
    U, s, Vt = torch.linalg.svd(St, full_matrices=False)
    r = int((s > RANK_TOL * s[0]).sum()) if s.numel() and s[0] > 0 else 0
    U, s, Vt = U[:, :r], s[:r], Vt[:r]
    polar = U @ Vt
    out = ~data.support.T
    return SupportSVD(St, U, s, Vt, polar, float(polar[out].max()) if bool(out.any()) else float("-inf"))


# ================================================================================================ F and L*
def project_F(L: torch.Tensor, data: NTPData) -> torch.Tensor:
    """P_F(L) (..., V, m): each context's in-support logits minus their in-support mean, zero off the support."""
    S = support_matrix(data).to(L)
    mean = (L * S).sum(-2, keepdim=True) / S.sum(0, keepdim=True)
    return (L - mean) * S


def project_perp(L: torch.Tensor, data: NTPData) -> torch.Tensor:
    """P_⊥(L) = L - P_F(L): the in-support logits of each context tied at their mean, the others unchanged."""
    return L - project_F(L, data)


def finite_logits(data: NTPData) -> torch.Tensor:
    """L* (V, m): the in-support log-odds, L*[z, j] = log p̂_{j,z} - mean_{z' in S_j} log p̂_{j,z'} (0 off S_j).

    Any L with P_F(L) = L* puts the softmax of each context restricted to its support at p̂_j; L* is the unique such
    point of F. Unlike paper A's W*, it always exists: free logits are always NTP_H-compatible.
    """
    logp = torch.log(torch.where(data.support, data.P, torch.ones_like(data.P))).T
    return project_F(logp, data)


# ================================================================================================ measurements
def _cos(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    num = (A * B).sum((-2, -1))
    den = torch.linalg.matrix_norm(A) * torch.linalg.matrix_norm(B)
    return num / den.clamp_min(torch.finfo(A.dtype).tiny)


def logit_decomposition(L: torch.Tensor, data: NTPData, L_mm: torch.Tensor) -> dict[str, torch.Tensor]:
    """The decomposition of logits L (..., V, m) into the finite part and the growing part (docs/ufm.md, U-2).

    Returns (each (...,)): ``F_error_rel`` = ||P_F(L) - L*|| / ||L*||, ``cos_perp_mm`` = cos(P_⊥(L), L^mm),
    ``cos_mm`` = cos(L, L^mm), ``perp_norm`` = ||P_⊥(L)||, ``logit_norm`` = ||L||, ``nuclear`` = ||L||_*.
    """
    L_star = finite_logits(data).to(L)
    PF = project_F(L, data)
    perp = L - PF
    return {
        "F_error_rel": torch.linalg.matrix_norm(PF - L_star) / torch.linalg.matrix_norm(L_star).clamp_min(1e-300),
        "cos_perp_mm": _cos(perp, L_mm.to(L)),
        "cos_mm": _cos(L, L_mm.to(L)),
        "perp_norm": torch.linalg.matrix_norm(perp),
        "logit_norm": torch.linalg.matrix_norm(L),
        "nuclear": nuclear_norm(L),
    }


def predicted_grams(L_mm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The limit directions of W W^T and H H^T predicted by L^mm: (L^mm L^mm^T)^{1/2} (V, V) and (L^mm^T L^mm)^{1/2}
    (m, m), i.e. U Σ U^T and V Σ V^T for L^mm = U Σ V^T (docs/ufm.md, U-4). Compared up to scale (cosines)."""
    return psd_sqrt(L_mm @ L_mm.mT), psd_sqrt(L_mm.mT @ L_mm)


def gram_alignment(W: torch.Tensor, H: torch.Tensor, word_gram: torch.Tensor, context_gram: torch.Tensor
                   ) -> dict[str, torch.Tensor]:
    """Cosines (Frobenius) of W W^T with ``word_gram`` (V, V) and of H H^T with ``context_gram`` (m, m): (...,) each.

    Gram matrices are invariant to the rotation W -> W R, H -> H R that leaves the logits unchanged, so they (and the
    logits) are what trained embeddings are compared by, never raw coordinates.
    """
    return {"cos_word_gram": _cos(W @ W.mT, word_gram.to(W)), "cos_context_gram": _cos(H @ H.mT, context_gram.to(H))}


def subspace_energy(W: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """||Q^T W||² / ||W||² for an orthonormal basis Q (n, r) and W (..., n, d): the share of W in span(Q), (...,)."""
    inside = (basis.mT.to(W) @ W).pow(2).sum((-2, -1))
    return inside / W.pow(2).sum((-2, -1)).clamp_min(torch.finfo(W.dtype).tiny)


def collapse(H: torch.Tensor, groups: torch.Tensor) -> dict[str, torch.Tensor]:
    """Subspace collapse of context embeddings H (..., m, d) with support-set labels ``groups`` (m,) (docs/ufm.md, U-5).

    Returns (each (...,), angles in degrees): ``within_angle`` = the largest angle between two contexts of the same
    support set (0 when every set has one context), ``between_angle`` = the smallest angle between the mean directions
    of two different sets, and their ratio ``collapse_ratio`` (-> 0 under collapse).
    """
    Hn = H / torch.linalg.vector_norm(H, dim=-1, keepdim=True).clamp_min(torch.finfo(H.dtype).tiny)
    cos = (Hn @ Hn.mT).clamp(-1, 1)
    same = groups[:, None] == groups[None, :]
    within = torch.rad2deg(torch.arccos(torch.where(same, cos, torch.ones_like(cos)))).amax((-2, -1))
    K = int(groups.max()) + 1
    onehot = torch.nn.functional.one_hot(groups, K).to(H)  # (m, K)
    means = onehot.mT @ Hn  # (..., K, d): sums of unit vectors per set
    means = means / torch.linalg.vector_norm(means, dim=-1, keepdim=True).clamp_min(torch.finfo(H.dtype).tiny)
    cm = (means @ means.mT).clamp(-1, 1)
    eye = torch.eye(K, dtype=torch.bool, device=H.device)
    between = torch.rad2deg(torch.arccos(torch.where(eye, -torch.ones_like(cm), cm).amax((-2, -1)))) if K > 1 \
        else torch.full(within.shape, float("nan"), dtype=H.dtype)
    return {"within_angle": within, "between_angle": between, "collapse_ratio": within / between}


def subspace_collapse(W: torch.Tensor, H: torch.Tensor, groups: torch.Tensor, U: torch.Tensor
                      ) -> dict[str, torch.Tensor]:
    """:func:`collapse` of the context embeddings' components in the support-pattern subspace (docs/ufm.md, U-5).

    The subspace of R^d is span(W^T U) for the left singular vectors U (V, r) of L^mm: the directions through which
    the word embeddings produce the growing, support-determined part of the logits. With Q an orthonormal basis of it,
    Q^T h_j = (U^T W W^T U)^{-1/2} U^T ℓ_j depends on the logits only through U^T ℓ_j, whose support-pattern part is
    the same for every context of a support set and grows without bound as λ -> 0, while the rest stays finite.
    Returns the keys of :func:`collapse` prefixed ``sub_``.
    """
    Q = torch.linalg.qr(W.mT @ U.to(W))[0]  # (..., d, r)
    return {f"sub_{k}": v for k, v in collapse(H @ Q, groups).items()}


def mode_strengths(L: torch.Tensor, U: torch.Tensor, Vt: torch.Tensor) -> torch.Tensor:
    """a_i = u_i^T L v_i for the singular pairs (U (V, r), Vt (r, m)) of a reference matrix: (..., r).

    Along training, the step at which a_i reaches half its final value is when direction i is learned (docs/ufm.md,
    U-6)."""
    return torch.einsum("vi,...vm,im->...i", U.to(L), L, Vt.to(L))


def optimality_certificate(W: torch.Tensor, H: torch.Tensor, data: NTPData, lam: float) -> dict[str, torch.Tensor]:
    """First-order and global optimality of (W, H) for the ridge objective at λ > 0 (docs/ufm.md, U-1).

    Returns (each (...,)):

    * ``grad_rel`` = ||∇f(W, H)|| / (λ ||(W, H)||): the relative gradient norm (0 at a stationary point, where
      G H = -λ W and G^T W = -λ H balance);
    * ``op_ratio`` = ||G||_op / λ with G = ∇CE(W H^T): a stationary point is a global minimum of the non-convex problem
      (and L = W H^T of the convex one, min CE(L) + λ ||L||_*) iff op_ratio <= 1;
    * ``gap_rel``: the duality gap of the convex problem at L = W H^T, (P - D)/P, with the dual point M = -G/max(λ,
      ||G||_op) (docs/ufm.md, U-1); a bound on how far CE(L) + λ||L||_* is from its minimum;
    * ``balance`` = ||W^T W - H^T H|| / ||W^T W|| (0 at every stationary point);
    * ``variational_gap`` = ((||W||² + ||H||²)/2 - ||W H^T||_*) / ||W H^T||_* (>= 0; 0 when balanced).
    """
    f, ce, g = ufm_loss_grad(W, H, data, lam)
    L = ufm_logits(W, H)
    _, G = logit_cross_entropy_grad(L, data)
    gnorm = (g["W"].pow(2).sum((-2, -1)) + g["H"].pow(2).sum((-2, -1))).sqrt()
    pnorm = (W.pow(2).sum((-2, -1)) + H.pow(2).sum((-2, -1))).sqrt()
    op = torch.linalg.matrix_norm(G, ord=2)
    nuc = nuclear_norm(L)
    primal = ce + lam * nuc
    dual = convex_dual_value(G, data, lam)
    WtW, HtH = W.mT @ W, H.mT @ H
    sq = 0.5 * (W.pow(2).sum((-2, -1)) + H.pow(2).sum((-2, -1)))
    return {"grad_rel": gnorm / (lam * pnorm).clamp_min(1e-300), "op_ratio": op / lam,
            "gap_rel": (primal - dual) / primal.abs().clamp_min(1e-300),
            "balance": torch.linalg.matrix_norm(WtW - HtH) / torch.linalg.matrix_norm(WtW).clamp_min(1e-300),
            "variational_gap": (sq - nuc) / nuc.clamp_min(1e-300)}


def convex_dual_value(G: torch.Tensor, data: NTPData, lam: float) -> torch.Tensor:
    """D(M) = Σ_j π̂_j Ent(q_j) at the dual point M = -G / max(λ, ||G||_op) built from a CE gradient G (..., V, m).

    The dual of min_L CE(L) + λ||L||_* is max_{||M||_op <= 1} Σ_j π̂_j Ent(p̂_j - λ M_j / π̂_j) (the conjugate of
    log-sum-exp is the negative entropy); with G[:, j] = π̂_j (s_j - p̂_j), q_j = p̂_j + t (s_j - p̂_j) with
    t = λ / max(λ, ||G||_op) lies in the simplex, so D is a valid lower bound (docs/ufm.md, U-1).
    """
    op = torch.linalg.matrix_norm(G, ord=2)
    t = lam / torch.maximum(op, torch.full_like(op, lam))
    P = data.P.T.to(G)  # (V, m)
    pi = data.pi.to(G)
    Q = (P + t[..., None, None] * G / pi).clamp_min(0.0)
    return -(pi * torch.special.xlogy(Q, Q).sum(-2)).sum(-1)
