"""The bounds of the transformer paper's theorems as functions of their constants (docs/paper-c-transformer.md#objects).

Every bound of Proposition 1, Lemmas 1, 6, 7, Corollary 1 and Theorems 1-3, in numpy and vectorized over the
iteration t, so that checks and plots share one source; the constant mismatches of docs/paper-c-transformer.md#decisions
are options. The optimum they are stated about (W_ov*, W_kq*) is in :mod:`ntpbias.geometry.transformer.optimum`.
"""

from __future__ import annotations

import numpy as np


def _t(t) -> np.ndarray:
    return np.asarray(t, dtype=np.float64)


def ngd_norm_bounds(t, eta: float, norm_star: float, *, L_max: int = 1, norm_init: float = 0.0):
    """(lower, upper) bounds on ||W^(t)|| under normalized GD with step η.

    upper = t η + ||W^(0)||; lower = t η/(2 L_max ||W*||) - ||W^(0)||. With L_max = 1 this is Lemma 1
    (Proposition 1's t η₀/(2||W_ov*||) <= ||W_ov^(t)|| <= t η₀ at W^(0) = 0, and Theorem 1's stated
    t η/(2||W_kq*||)); with the data's L_max it is the weaker bound Lemma 6 proves for W_kq
    (docs/paper-c-transformer.md#decisions).
    """
    t = _t(t)
    return t * eta / (2 * L_max * norm_star) - norm_init, t * eta + norm_init


def prop1_cos_lower(t, eta0: float, norm_wov_star: float, V: int, *, constant: float = 12.0):
    """Proposition 1: cos(W_ov^(t), W_ov*) >= 1 - c ||W_ov*||^3 log(2|V|) log t/(t η₀), t >= 2.

    c = 12 is what App. B (Prop. 3) proves; the main text states c = 5 (docs/paper-c-transformer.md#decisions). Vacuous
    at the experiment's scale (about -618 at |V| = 20, t = 900).
    """
    t = _t(t)
    return 1 - constant * norm_wov_star ** 3 * np.log(2 * V) * np.log(t) / (t * eta0)


def prop1_loss_upper(t, eta0: float, norm_wov_star: float, V: int, *, rate: str = "exact"):
    """Proposition 1's stage-1 loss bound L_0(W_ov^(t)) <= |V|(|V|-1) exp(-r t η₀/||W_ov*||).

    ``rate="exact"``: r = 1 (from the exact margin t η₀/||W_ov*|| under Assumption 2, [DERIVED]);
    ``rate="stated"``: r = 1/4, the paper's O(exp(-η₀ t/(4||W_ov*||))). The first implies the second.
    """
    r = {"exact": 1.0, "stated": 0.25}[rate]
    return V * (V - 1) * np.exp(-r * _t(t) * eta0 / norm_wov_star)


def corollary1_delta(T, eta0: float, norm_wov_star: float):
    """Corollary 1's margin Δ = T η₀/(4||W_ov*||^2): every logit gap of W_ov^(T) exceeds Δ.

    The stated upper end 3Δ is wrong (the exact gap is 4||W_ov*|| Δ, docs/paper-c-transformer.md#decisions); only the
    lower end is usable.
    """
    return _t(T) * eta0 / (4 * norm_wov_star ** 2)


def corollary1_condition(T, eta0: float, norm_wov_star: float, V: int, *, c0: float = 384.0):
    """Corollary 1 / Theorem 2 requirement on the stage-1 length: T >= c0 ||W_ov*||^5 log(2|V|) log T/η₀."""
    T = _t(T)
    return T >= c0 * norm_wov_star ** 5 * np.log(2 * V) * np.log(T) / eta0


def thm1_cos_lower(t, eta: float, N: int, L_max: int, norm_wkq_star: float):
    """Theorem 1: cos(W_kq^(t), W_kq*) >= 1 - 54 N L_max^4 ||W_kq*||^4 log^2 t/(t η), t >= 2."""
    t = _t(t)
    return 1 - 54 * N * L_max ** 4 * norm_wkq_star ** 4 * np.log(t) ** 2 / (t * eta)


def thm1_step_ok(eta: float, norm_wkq_star: float) -> bool:
    """Theorem 1's step-size condition as used in its proof: η <= ||W_kq*||/e
    (docs/paper-c-transformer.md#decisions)."""
    return eta <= norm_wkq_star / np.e


def lemma6_direction_upper(min_attention_plus, norm_wkq_star: float):
    """Lemma 6: <∇L/||∇L||, W_kq*/||W_kq*||> <= -min_n φ_+^(n,t)/(2||W_kq*||) (<= -1/(2 L_max ||W_kq*||))."""
    return -np.asarray(min_attention_plus, dtype=np.float64) / (2 * norm_wkq_star)


def lemma7_t0(eta: float, L_max: int, norm_wkq_star: float) -> int:
    """Lemma 7's start t_0 = ceil(8 L_max ||W_kq*||^2/η)."""
    return int(np.ceil(8 * L_max * norm_wkq_star ** 2 / eta))


def lemma7_alpha(norm_W, N: int, L_max: int, norm_wkq_star: float):
    """Lemma 7's α_t = 4 N L_max^2 ||W*||^2 (1 + log(2 L_max ||W^(t)||))/||W^(t)||.

    For t >= t_0: <∇L, W^(t)> >= (1 + α_t) <∇L, W*> ||W^(t)||/||W*||.
    """
    n = np.asarray(norm_W, dtype=np.float64)
    return 4 * N * L_max ** 2 * norm_wkq_star ** 2 * (1 + np.log(2 * L_max * n)) / n


def thm2_constants(eta0: float, eta: float, norm_wov_star: float, norm_wkq_star: float, L_max: int):
    """(C_0, C_1) = (η₀/(4||W_ov*||^2), η/(4 L_max ||W_kq*||^2)) of Theorem 2."""
    return eta0 / (4 * norm_wov_star ** 2), eta / (4 * L_max * norm_wkq_star ** 2)


def thm2_attention_lower(t, C_1: float, L_max: int):
    """Theorem 2: min_n Σ_{l* ∈ l(n)} φ_{l*}^(n,t) >= 1/(1 + L_max exp(-C_1 t))."""
    return 1.0 / (1.0 + L_max * np.exp(-C_1 * _t(t)))


def thm2_attention_content_start(C_1: float, L_max: int) -> float:
    """The first t at which Theorem 2's attention bound exceeds Lemma 5's 1/L_max: t_c = log(L_max/(L_max - 1))/C_1.

    Before t_c, 1/(1 + L_max e^{-C_1 t}) <= 1/L_max <= min_n φ_+^(n,t) already by Lemma 5 (docs/paper-c-transformer.md
    #theory-checks); with L_max = 1 the bound never says more (inf).

    >>> round(thm2_attention_content_start(0.01, 4), 2)
    28.77
    """
    return float(np.log(L_max / (L_max - 1)) / C_1) if L_max > 1 else float("inf")


def thm2_loss_upper(t, T: int, C_0: float, C_1: float, L_max: int, V: int):
    """Theorem 2, eq. (4): L(θ^(t)) <= |V| exp(-T C_0 (1 - 2 L_max/(L_max + exp(C_1 t)))).

    Vacuous (above the initial loss) at the experiment's scale (docs/paper-c-transformer.md#objects).
    """
    return V * np.exp(-T * C_0 * (1 - 2 * L_max / (L_max + np.exp(C_1 * _t(t)))))


def thm2_condition(t, eta: float, N: int, L_max: int, norm_wkq_star: float, *, c0: float = 1696.0):
    """Theorem 2 requirement on the stage-2 iteration: t >= c0 N L_max^4 ||W_kq*||^6 log^2 t/η (c0 of App. C.6)."""
    t = _t(t)
    return t >= c0 * N * L_max ** 4 * norm_wkq_star ** 6 * np.log(t) ** 2 / eta


def thm2_condition_start(eta: float, N: int, L_max: int, norm_wkq_star: float, *, c0: float = 1696.0) -> float:
    """The smallest t meeting :func:`thm2_condition` (t >= K log^2 t, K = c0 N L_max^4 ||W_kq*||^6/η), by the
    fixed-point iteration t <- K log^2 t from t = K (increasing to the largest root).

    >>> t = thm2_condition_start(0.025, 9, 3, 1.4719601444)  # Example 1
    >>> f"{t:.3g}", [bool(thm2_condition(t * f, 0.025, 9, 3, 1.4719601444)) for f in (0.999, 1.001)]
    ('3.56e+11', [False, True])
    """
    K = c0 * N * L_max ** 4 * norm_wkq_star ** 6 / eta
    t = max(K, np.e)
    for _ in range(200):
        t_next = K * np.log(t) ** 2
        if abs(t_next - t) <= 1e-12 * t:
            break
        t = t_next
    return float(t)


def footnote3_min_loss(T: int, C_0: float, V: int) -> float:
    """The paper's "minimum loss" |V| exp(-T C_0) (footnote 3): the limit of eq. (4), not the infimum
    (docs/paper-c-transformer.md#decisions)."""
    return V * float(np.exp(-T * C_0))


def thm3_gap_lower(t, eta: float, N: int, L_max: int, norm_wkq_star: float, gap_star: float):
    """Theorem 3's proof bound on a token-pair gap of W_kq^(t) under query x_q:

    (x - x')^T W^(t) x_q >= t η/(2 L_max ||W*||^2) gap* - sqrt(108 t η N L_max^2 ||W*||^2 log^2 t),
    with gap* = (x - x')^T W_kq* x_q.
    """
    t = _t(t)
    return (t * eta / (2 * L_max * norm_wkq_star ** 2) * gap_star
            - np.sqrt(108 * t * eta * N * L_max ** 2 * norm_wkq_star ** 2 * np.log(t) ** 2))
