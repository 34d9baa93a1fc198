"""One vocabulary of implicit-bias metrics, shared by the three papers.

Every metric is a function of a batch of parameters (leading dimension = runs) returning one value per run.
:data:`DEFINITIONS` documents each name once; reports, CSV columns and the README use these names.
"""

from __future__ import annotations

import torch

from .data.ntp import NTPData
from .geometry.linear.loss import cross_entropy, cross_entropy_grad
from .geometry.linear.subspace import DataSubspace
from .geometry.margins.program import ntp_margin
from .geometry.norms import NORMS, matrix_norm

#: name -> definition (the columns of metrics.csv).
DEFINITIONS: dict[str, str] = {
    "loss": "training loss at the iterate (CE for NTP, logistic for classification)",
    "loss_gap": "CE(W_k) - H: excess over the entropy floor (-> 0, Lemma 2 of paper A)",
    "grad_norm": "||∇L(W_k)||: Frobenius norm of the full gradient",
    "norm": "||W_k||: parameter norm (-> ∞ for separable data)",
    "cos_mm": "<W_k, W^mm> / (||W_k|| ||W^mm||): alignment with the max-margin direction",
    "cos_mm_corrected": "<W_k - W*, W^mm> / (||W_k - W*|| ||W^mm||): alignment after removing the finite part",
    "F_error": "||P_F(W_k) - W*||: distance of the F-component to the finite solution W* (-> 0, Thm 2 of paper A)",
    "F_error_rel": "||P_F(W_k) - W*|| / ||W*||",
    "F_norm": "||P_F(W_k)|| (bounded, -> ||W*||)",
    "perp_norm": "||P_⊥(W_k)|| (-> ∞)",
    "margin_perp": "γ(P_⊥ W_k) ||W^mm|| / ||P_⊥ W_k||: normalized NTP margin of the F^⊥ part relative to the "
                   "maximum 1/||W^mm|| (-> 1)",
    "key_lemma": "CE(W_k) / CE(P_F W_k + (1+α)||P_⊥ W_k|| W^mm/||W^mm||) (eq. (14) of paper A, α = 0.5): at least 1 "
                 "where the inequality holds",
    # paper B (attention with trained embeddings)
    "p_norm": "||p||: norm of the <cls> embedding (paper B; -> ∞ in stage 2, Lemma C.1)",
    "class_accuracy": "fraction of training sequences classified correctly, sign f(X) = y (paper B)",
    "epoch": "step / steps per epoch (minibatch training)",
    "selection_accuracy": "fraction of sequences X whose relevant token s*_X is the unique maximiser of p^T E_s over "
                          "X, i.e. S_X(p) = {s*_X} (Thm 4.3, Lemma 4.5 of paper B)",
    "margin_mm": "min_X min_{s in X, s != s*_X} p^T(E_{s*_X} - E_s) ||p̂|| / ||p||: normalized selection margin "
                 "relative to the maximum 1/||p̂|| of Lemma 4.5's SVM (-> 1, paper B)",
    "loss_above_floor": "L(p) - Ê log(1 + exp(-y E_{s*_X}^T v)): excess over the loss with all attention on the "
                        "relevant tokens (-> 0 in stage 2 of paper B)",
    "pearson_v_pd": "Pearson correlation of <E_s, v> with PD(s) (eq. (18)) over the tokens that occur (right panels of "
                    "Figs. 1-3 of paper B)",
    "pearson_p_abs_pd": "Pearson correlation of <E_s, p> with |PD(s)| over the tokens that occur (left panels of "
                        "Figs. 1-3 of paper B)",
    # paper C (one-layer transformer, Algorithm 1)
    "loss_L0": "L_0(W_ov) = Σ_x CE(W_ov x, n(x)): the stage-1 loss over the collocation (paper C, Sec. 4.2)",
    "norm_ov": "||W_ov||: norm of the output-value matrix (= t η₀ in stage 1 under Assumption 2)",
    "cos_ov": "cos(W_ov, W_ov*): alignment with the max-margin W_ov* of eq. (2) of paper C (NaN at W_ov = 0)",
    "margin_ov": "min_{x, v≠n(x)} (e_n(x) - e_v)^T W_ov x: smallest logit gap on the collocation (Corollary 1's Δ)",
    "margin_spread_ov": "max_x (largest - smallest logit gap of x over wrong tokens v): 0 when wrong logits are equal "
                        "(Lemma 3 of paper C)",
    "norm_kq": "||W_kq||: norm of the key-query matrix (between tη/(2 L_max ||W_kq*||) and tη, Lemma 6 of paper C)",
    "cos_kq": "cos(W_kq, W_kq*): alignment with the max-margin W_kq* of eq. (3) (Theorem 1 of paper C; NaN at 0)",
    "cos_neg_grad_kq": "cos(W_kq, -∇_{W_kq} L): alignment of the iterate with the descent direction (paper C, Fig. 2)",
    "cos_grad_kq_star": "cos(∇_{W_kq} L, W_kq*): at most -min_n φ_+^(n)/(2||W_kq*||) (Lemma 6 of paper C)",
    "attn_opt_min": "min_n φ_+^(n): smallest attention mass on a sample's optimal positions (Lemma 5, Theorem 2)",
    "attn_opt_floor": "min over samples n and optimal positions l of φ_l^(n) - 1/L^(n): Lemma 5's floor per position",
    "order_gap": "Theorem 3's smallest class gap (optimal - non-comparable, non-comparable - non-optimal scores) over "
                 "the queries with non-comparable tokens",
    "attn_opt_mean": "Σ_n π^(n) φ_+^(n): mean attention mass on the optimal positions",
    "margin_kq": "min over relations u >_q v of (x_u - x_v)^T W_kq x_q: attention-score margin of the orders (Thm 3)",
    "accuracy": "Σ_n π^(n) 1[argmax T_θ(X^(n)) = label]: next-token accuracy on the training samples",
    "loss_floor": "L at full attention on the optimal tokens with W_ov frozen: the stage-2 infimum L* (paper C)",
    "loss_excess": "L(θ) - L*: excess over the stage-2 floor (-> 0 linearly in t, Theorem 2 of paper C)",
    # the log-bilinear (unconstrained-features) model, docs/ufm.md: logits L = W H^T (V x m)
    "objective": "CE(W H^T) + (λ/2)(||W||² + ||H||²): the ridge-regularized loss (docs/ufm.md)",
    "cos_perp_mm": "cos(P_⊥(L), L^mm): alignment of the logits' growing part with the nuclear-norm SVM (docs/ufm.md)",
    "logit_norm": "||L|| (Frobenius) of the logit matrix W H^T",
    "nuclear": "||L||_*: nuclear norm of the logits (= (||W||² + ||H||²)/2 at balanced factors)",
    "cos_word_gram": "cos(W W^T, (L^mm L^mm^T)^{1/2}): word-embedding Gram against its predicted limit direction",
    "cos_context_gram": "cos(H H^T, (L^mm^T L^mm)^{1/2}): context-embedding Gram against its predicted limit direction",
    "cos_word_gram_S": "cos(W W^T, U Σ U^T) for the SVD U Σ V^T of the centred support matrix S̃",
    "cos_context_gram_S": "cos(H H^T, V Σ V^T) for the SVD U Σ V^T of the centred support matrix S̃",
    "within_angle": "largest angle (degrees) between the embeddings of two contexts with the same support set",
    "between_angle": "smallest angle (degrees) between the mean directions of two support sets' context embeddings",
    "collapse_ratio": "within_angle / between_angle (-> 0 under collapse)",
    "sub_within_angle": "within_angle of the context embeddings' components in the support-pattern subspace W^T U",
    "sub_between_angle": "between_angle of the components in the support-pattern subspace span(W^T U)",
    "sub_collapse_ratio": "sub_within_angle / sub_between_angle (subspace collapse, docs/ufm.md)",
    "balance": "||W^T W - H^T H|| / ||W^T W|| (0 at stationary points of the ridge objective)",
    "dist_opt": "||W H^T - L_λ|| / ||L_λ||: distance of the logits to the certified optimum at the training λ",
    "grad_rel": "||∇f(W, H)|| / (λ ||(W, H)||): relative first-order residual of the ridge objective",
    "op_ratio": "||∇CE(W H^T)||_op / λ (<= 1 at a global minimum, docs/ufm.md)",
    "mode_<i>": "u_i^T L v_i for the i-th singular pair of D0 = -∇CE(0) (order of learning, docs/ufm.md)",
    "smode_<i>": "u_i^T L v_i for the i-th singular pair of the centred support matrix S̃",
    # the norms study (docs/optimizers.md)
    **{f"margin_ratio_{n}": f"γ(P_⊥ W_k) ||W^mm_{n}|| / ||P_⊥ W_k||_{n}: normalized NTP margin of the F^⊥ part in the "
                            f"{n} norm relative to its maximum 1/||W^mm_{n}|| (<= 1)" for n in NORMS},
    **{f"dist_{n}": f"||P_⊥ W_k / ||P_⊥ W_k||_{n} - W^mm_{n} / ||W^mm_{n}||_{n}||_{n}: distance of the normalized "
                    f"direction to the {n} NTP-SVM (only where that minimizer is unique)" for n in NORMS},
}


def frobenius(A: torch.Tensor) -> torch.Tensor:
    """Per-run Frobenius norm of A (B, ...): (B,)."""
    return torch.linalg.vector_norm(A.reshape(A.shape[0], -1), dim=1)


def cosine(A: torch.Tensor, B: torch.Tensor, *, norm_A: torch.Tensor | None = None,
           norm_B: torch.Tensor | None = None) -> torch.Tensor:
    """Per-run cosine <A, B> / (||A|| ||B||) for A (R, ...) and B broadcastable to it: (R,).

    ``norm_A``, ``norm_B``: the norms when already known (``frobenius`` of A and of B), to save computing them again.
    """
    B = B.expand_as(A)
    num = (A * B).reshape(A.shape[0], -1).sum(1)
    norm_A = frobenius(A) if norm_A is None else norm_A
    norm_B = frobenius(B) if norm_B is None else norm_B
    return num / (norm_A * norm_B).clamp_min(torch.finfo(A.dtype).tiny)


def linear_ntp_metrics(W: torch.Tensor, data: NTPData, F: DataSubspace, W_mm: torch.Tensor | None, *,
                       alpha: float = 0.5) -> dict[str, torch.Tensor]:
    """Every metric of :data:`DEFINITIONS` for linear NTP iterates W (B, V, d).

    ``W_mm`` may be None (non-separable data): the max-margin metrics are then omitted.
    """
    H = data.entropy
    loss, grad = cross_entropy_grad(W, data)
    W_F = F.project(W)
    W_perp = W - W_F
    out = {
        "loss": loss,
        "loss_gap": loss - H,
        "grad_norm": frobenius(grad),
        "norm": frobenius(W),
        "F_error": frobenius(W_F - F.W_star),
        "F_error_rel": frobenius(W_F - F.W_star) / max(F.norm_W_star, torch.finfo(W.dtype).tiny),
        "F_norm": frobenius(W_F),
        "perp_norm": frobenius(W_perp),
    }
    if W_mm is not None:
        mm_norm = float(torch.linalg.vector_norm(W_mm))
        perp_norm = out["perp_norm"]
        out["cos_mm"] = cosine(W, W_mm[None])
        out["cos_mm_corrected"] = cosine(W - F.W_star, W_mm[None])
        out["margin_perp"] = ntp_margin(W_perp, data) * mm_norm / perp_norm
        out["key_lemma"] = key_lemma_ratio(W_F, perp_norm, loss, data, W_mm / mm_norm, alpha)
    return out


def key_lemma_ratio(W_F: torch.Tensor, perp_norm: torch.Tensor, loss: torch.Tensor, data: NTPData,
                    direction: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """CE(W_k) / CE(P_F W_k + (1 + α) ||P_⊥ W_k|| direction) per run: the two sides of eq. (14) of paper A (Lemma 5),
    at least 1 where the inequality holds; ``direction`` is the unit W̄^mm (V, d) (a perturbed one for a control).

    ``W_F``: (B, V, d) the iterates' F parts; ``perp_norm``: (B,) the norms of their F^⊥ parts; ``loss``: (B,) CE(W_k).
    """
    genie = W_F + ((1 + alpha) * perp_norm)[:, None, None] * direction
    return loss / cross_entropy(genie, data)


def norm_margin_metrics(W: torch.Tensor, data: NTPData, F: DataSubspace, W_mm: dict[str, torch.Tensor],
                        unique: dict[str, bool] | None = None) -> dict[str, torch.Tensor]:
    """``margin_ratio_<norm>`` for every norm of ``W_mm`` and ``dist_<norm>`` where ``unique[norm]``
    (:data:`DEFINITIONS`), for linear NTP iterates W (B, V, d); ``W_mm`` maps a norm to its NTP-SVM solution
    (docs/optimizers.md#measurements).
    """
    W_perp = F.project_perp(W)
    gamma = ntp_margin(W_perp, data)
    out = {}
    for norm, mm in W_mm.items():
        size = matrix_norm(W_perp, norm)
        mm_size = matrix_norm(mm, norm)
        out[f"margin_ratio_{norm}"] = gamma * mm_size / size
        if unique is not None and unique.get(norm):
            out[f"dist_{norm}"] = matrix_norm(W_perp / size[:, None, None] - mm / mm_size, norm)
    return out
