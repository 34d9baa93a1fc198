"""A stage-2 trajectory of paper C and what the checks measure on it (docs/paper-c-transformer.md#theory-checks).

Every measurement is a pure function of a :class:`Trajectory` (one seed's stage-2 history with its constants), so
that :mod:`~ntpbias.experiments.transformer.stage2` computes each check on Algorithm 1's runs and on its negative
control with the same code. Asymptotic statements are measured on the window [t_0, T] past Lemma 7's t_0 by
:func:`power_fit`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...geometry.transformer import bounds as tb
from ...geometry.transformer import optimum as th
from ...training.history import History
from .runs import SeedRun, series

#: the rate fits use the checkpoints where L - L* is above this fraction of L (round-off below)
EXCESS_FLOOR = 1e-10
#: the smallest gradient norm at which a stage-2 step is exact to float64 precision: below it the gradient's entries
#: near float64's subnormal range (2.2e-308) lose digits and the direction drifts (on the Fig. 2 data from t ≈ 205,000,
#: where 1 - cos stops decaying like t^-2); the windows end at the last logged step above it
GRADIENT_FLOOR = 1e-290
#: asymptotic statements are graded on [t_0, T] when T >= WINDOW t_0 (Lemma 7's t_0: where the proof's asymptotic
#: argument starts)
WINDOW = 2.0


@dataclass
class Trajectory:
    """One seed's stage-2 history (Algorithm 1's or a control's) with the constants its checks need."""

    run: SeedRun
    history: History

    def __getitem__(self, metric: str) -> np.ndarray:
        return series(self.history, metric)[1]

    @cached_property
    def steps(self) -> np.ndarray:
        return series(self.history, "loss")[0]

    @property
    def eta(self) -> float:
        return self.run.eta

    @property
    def L_max(self) -> int:
        return self.run.task.samples.L_max

    @property
    def star(self) -> float:
        """||W_kq*||."""
        return self.run.task.W_kq_star.norm

    @property
    def t0(self) -> int:
        return self.run.t0

    @property
    def C(self) -> tuple[float, float]:
        """Theorem 2's (C_0, C_1)."""
        r = self.run
        return tb.thm2_constants(r.eta0, r.eta, r.task.W_ov_star.norm, self.star, self.L_max)

    @cached_property
    def exact(self) -> np.ndarray:
        """The logged steps whose gradient norm is above :data:`GRADIENT_FLOOR` (decision C-D7)."""
        return self["grad_norm"] > GRADIENT_FLOOR

    @cached_property
    def end(self) -> float:
        """The last logged step whose gradient is above :data:`GRADIENT_FLOOR`: T, unless the run is long enough for
        the attention on non-optimal tokens to underflow (decision C-D7)."""
        return float(self.steps[self.exact][-1]) if self.exact.any() else 0.0

    def window(self) -> np.ndarray:
        """The steps of [t_0, end]."""
        return (self.steps >= self.t0) & (self.steps <= self.end)


def power_fit(steps: np.ndarray, values: np.ndarray, lo: float, hi: float, x=np.log, *, blocks: int = 6,
              points: int = 240) -> tuple[float, float, float]:
    """(slope, smallest, largest local slope) of log(values) against x(t) over lo <= t <= hi.

    log(values) is interpolated (linearly in log t) at ``points`` log-equal steps, so that every part of the window
    weighs the same whatever the logging; the local slopes are the least-squares slopes over ``blocks`` consecutive
    log-equal sub-windows. The trajectory is deterministic: its uncertainty is how the exponent drifts over the window,
    which [smallest, largest] bounds (a statistical interval from the residuals would only measure the curvature).

    >>> t = np.arange(1.0, 1001.0)
    >>> [round(v, 6) for v in power_fit(t, 3 * t ** -2.0, 10, 1000)]
    [-2.0, -2.0, -2.0]
    """
    keep = (steps >= 1) & np.isfinite(values) & (values > 0)
    grid = np.exp(np.linspace(math.log(lo), math.log(hi), points))
    y = np.interp(np.log(grid), np.log(steps[keep]), np.log(values[keep]))
    xs = x(grid)
    local = [np.polyfit(a, b, 1)[0] for a, b in zip(np.array_split(xs, blocks), np.array_split(y, blocks),
                                                    strict=True)]
    return float(np.polyfit(xs, y, 1)[0]), float(min(local)), float(max(local))


def log2t_over_t(t: np.ndarray) -> np.ndarray:
    """log(log²t/t), the abscissa of Theorem 1's rate."""
    return 2 * np.log(np.log(t)) - np.log(t)


# ---------------------------------------------------------------------------------------------- measurements
def lemma6_lower(s: Trajectory) -> float:
    """Smallest ||W^(t)|| / (t η/(2 L_max ||W*||)) over t >= 1 (Lemma 6's lower bound: >= 1)."""
    pos = s.steps >= 1
    return float((s["norm_kq"][pos] / (s.steps[pos] * s.eta / (2 * s.L_max * s.star))).min(initial=math.inf))


def thm1_lower(s: Trajectory) -> float:
    """Smallest ||W^(t)|| / (t η/(2||W*||)) over t >= 1 (Theorem 1's stated lower bound: >= 1)."""
    pos = s.steps >= 1
    return float((s["norm_kq"][pos] / (s.steps[pos] * s.eta / (2 * s.star))).min(initial=math.inf))


def norm_upper(s: Trajectory) -> float:
    """Largest ||W^(t)||/(t η) over t >= 1 (<= 1: every normalized step has length η)."""
    pos = s.steps >= 1
    return float((s["norm_kq"][pos] / (s.steps[pos] * s.eta)).max(initial=0.0))


def lemma5(s: Trajectory) -> float:
    """Smallest φ_l^(n,t) - 1/L^(n) over every logged step, sample and optimal position."""
    return float(np.nanmin(s["attn_opt_floor"]))


def lemma6_direction(s: Trajectory) -> float:
    """Largest cos(∇L, W*) + min_n φ_+/(2||W*||) over every logged step with an exact gradient (Lemma 6's proof:
    <= 0)."""
    return float(np.nanmax(s["cos_grad_kq_star"][s.exact] + s["attn_opt_min"][s.exact] / (2 * s.star)))


def thm2_attention(s: Trajectory) -> float:
    """Smallest min_n φ_+^(n,t) - 1/(1 + L_max e^{-C_1 t}) over the logged steps t >= t_c (NaN when none)."""
    C1 = s.C[1]
    keep = s.steps >= tb.thm2_attention_content_start(C1, s.L_max)
    if not keep.any():
        return math.nan
    return float((s["attn_opt_min"][keep] - tb.thm2_attention_lower(s.steps[keep], C1, s.L_max)).min())


def thm2_loss(s: Trajectory) -> float:
    """Largest L(θ^(t)) - eq. (4)'s bound over every logged step."""
    C0, C1 = s.C
    bound = tb.thm2_loss_upper(s.steps, int(s.run.two_stage.stage1.step), C0, C1, s.L_max, s.run.task.V)
    return float((s["loss"] - bound).max())


def linear_rate(s: Trajectory) -> tuple[float, float]:
    """(least-squares slope of -log(L - L*) in units of C_1, R² of the fit) over the last two thirds of the steps
    where L - L* is above round-off; (NaN, NaN) with fewer than 3 such steps."""
    excess, loss = s["loss_excess"], s["loss"]
    above = np.isfinite(excess) & (excess > EXCESS_FLOOR * loss) & (s.steps <= s.end)
    if above.sum() < 3:
        return math.nan, math.nan
    last = s.steps[above][-1]
    fit = above & (s.steps >= last / 3)
    if fit.sum() < 3:
        return math.nan, math.nan
    y = np.log(excess[fit])
    slope, icpt = np.polyfit(s.steps[fit], y, 1)
    r2 = 1 - ((y - slope * s.steps[fit] - icpt) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return float(-slope / s.C[1]), float(r2)


def thm1_rate(s: Trajectory) -> tuple[float, float, float] | None:
    """Theorem 1's rate on [t_0, end]: the fitted power of log²t/t in 1 - cos and its interval (None when the run
    does not reach WINDOW t_0 with an exact gradient)."""
    if s.end < WINDOW * s.t0:
        return None
    return power_fit(s.steps, 1 - s["cos_kq"], s.t0, s.end, log2t_over_t)


def thm3_growth(s: Trajectory) -> tuple[float, float, float, float] | None:
    """Theorem 3's growth on [t_0, end]: the fitted exponent of the smallest class gap in t, its interval, and the gap
    at the last step (None when the run does not reach WINDOW t_0 or has no non-comparable tokens)."""
    gap = s["order_gap"]
    if s.end < WINDOW * s.t0 or not np.isfinite(gap).all():
        return None
    if (gap[s.window()] <= 0).any():
        return -math.inf, -math.inf, -math.inf, float(gap[-1])
    return (*power_fit(s.steps, gap, s.t0, s.end), float(gap[-1]))


def lemma7(s: Trajectory) -> tuple[float, float]:
    """(smallest cos(∇L, W) - (1 + α_t) cos(∇L, W*) over [t_0, end], smallest (1 + α_t)|cos(∇L, W*)| there): the
    inequality holds for every W wherever the second is >= 1 (its right side is then <= -1)."""
    w = s.window()
    if not w.any():
        return math.nan, math.nan
    alpha = tb.lemma7_alpha(s["norm_kq"][w], s.run.task.samples.N, s.L_max, s.star)
    g_star = s["cos_grad_kq_star"][w]
    return float((-s["cos_neg_grad_kq"][w] - (1 + alpha) * g_star).min()), float(((1 + alpha) * np.abs(g_star)).min())


def lemma7_content_norm(N: int, L_max: int, star: float) -> float:
    """The ||W_kq^(t)|| from which Lemma 7's α_t < 1 (below it the lemma holds for every W when |cos(∇L, W*)| >=
    1/2), by bisection on the decreasing α(||W||)."""
    lo, hi = 1.0, 1e12
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if tb.lemma7_alpha(mid, N, L_max, star) >= 1 else (lo, mid)
    return hi


def gap_star(s: Trajectory) -> float:
    """Theorem 3's smallest class gap of W_kq* itself (the gap* of the proof's bound)."""
    t = s.run.task
    A = th.token_basis(t.W_kq_star.W, t.E.cpu())[None]
    return float(th.theorem3_gap(A, t.structure)[0])


def thm3_bound(s: Trajectory) -> tuple[float, float]:
    """(smallest order_gap(t) - the proof's bound over t >= 2, the bound at the last step): the gap of every pair
    is at least t η gap*/(2 L_max ||W*||²) - sqrt(108 t η N L_max² ||W*||² log²t), so the smallest gap is at least
    that bound with the smallest gap* (:func:`~ntpbias.geometry.transformer.bounds.thm3_gap_lower`)."""
    two = s.steps >= 2
    bound = tb.thm3_gap_lower(s.steps[two], s.eta, s.run.task.samples.N, s.L_max, s.star, gap_star(s))
    if not two.any():
        return math.nan, -math.inf
    return float((s["order_gap"][two] - bound).min()), float(bound[-1])
