"""Statistics used by checks, figures and sweeps: correlations, binomial and median intervals, the DKW bound.

One copy of each: the training metrics, the theory checks and the figure titles all call these functions, so a
number printed in a figure is the number a check graded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats as _sp


def pearson(x, y):
    """Pearson correlation of ``x`` and ``y`` along the last axis (batched); NaN for a constant input.

    Accepts torch tensors (returns a tensor, e.g. per seed on the GPU) or numpy arrays / sequences (returns a float
    for 1-D inputs, an array otherwise).

    >>> round(pearson([1.0, 2.0, 3.0], [2.0, 4.0, 7.0]), 6)
    0.993399
    """
    if isinstance(x, torch.Tensor):
        xc = x - x.mean(-1, keepdim=True)
        yc = y - y.mean(-1, keepdim=True)
        return (xc * yc).sum(-1) / torch.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(-1) / np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    return float(r) if np.ndim(r) == 0 else r


def spearman(x, y) -> float:
    """Spearman rank correlation of two 1-D samples (Pearson correlation of their average ranks).

    >>> spearman([1.0, 2.0, 3.0, 4.0], [1.0, 4.0, 9.0, 16.0])
    1.0
    """
    return pearson(_sp.rankdata(np.asarray(x, dtype=float)), _sp.rankdata(np.asarray(y, dtype=float)))


def wilson(successes, n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion ``successes / n``, vectorized over ``successes``.

    >>> [round(float(v), 4) for v in wilson(5, 10)]
    [0.2366, 0.7634]
    """
    z = _sp.norm.ppf(0.5 + level / 2)
    p = np.asarray(successes, dtype=float) / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(center - half, 0, 1), np.clip(center + half, 0, 1)


def median_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): a distribution-free interval for the median from order statistics.

    [x_(i), x_(j)] with i, j binomial(n, 1/2) quantiles covers the median with probability at least ``level``
    for a continuous distribution (and is conservative for discrete ones).

    >>> median_ci(np.arange(1.0, 12.0))
    (6.0, 2.0, 10.0)
    """
    x = np.sort(np.asarray(values, dtype=float))
    n, alpha = len(x), 1 - level
    i = int(_sp.binom.ppf(alpha / 2, n, 0.5))
    j = int(_sp.binom.isf(alpha / 2, n, 0.5))
    return float(np.median(x)), float(x[max(i - 1, 0)]), float(x[min(j, n - 1)])


def fraction_curve(d_star, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(d = 0..m, fraction of trials with d* <= d): the empirical CDF of critical dimensions on the grid 0..m.

    >>> fraction_curve(np.array([1, 2, 2]), 3)[1].tolist()
    [0.0, 0.3333333333333333, 1.0, 1.0]
    """
    d = np.arange(m + 1)
    return d, (np.asarray(d_star)[None, :] <= d[:, None]).mean(axis=1)


def dkw_bound(n: int, alpha: float = 1e-3) -> float:
    """Dvoretzky-Kiefer-Wolfowitz: the ε with P(sup |F_n - F| > ε) <= 2 exp(-2 n ε²) = ``alpha``.

    >>> round(dkw_bound(200), 4)
    0.1378
    """
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def cover_cdf(m: int, d) -> np.ndarray:
    """Cover (1965): P(m Gaussian points with random ±1 labels are homogeneously separable in R^d) = P(d* <= d).

    C(m, d) / 2^m with C(m, d) = 2 Σ_{i<d} binom(m-1, i), i.e. P(Bin(m-1, 1/2) <= d-1) (0 at d = 0).

    >>> float(cover_cdf(3, np.array(2)))  # 3 points in the plane: 6 of the 8 labelings are separable
    0.75
    """
    d = np.asarray(d)
    return np.where(d >= 1, _sp.binom.cdf(d - 1, m - 1, 0.5), 0.0)


def cover_median_ratios(m: int) -> tuple[float, float]:
    """The medians of d*/m under Cover's law (:func:`cover_cdf`): every value in [low, high].

    For odd m the law of d* is symmetric about (m + 1)/2 and the median is unique; for even m, P(d* <= m/2) = 1/2
    exactly, so every value between m/2 and m/2 + 1 is a median (the sample median hops between the two).

    >>> cover_median_ratios(100), [round(x, 4) for x in cover_median_ratios(101)]
    ((0.5, 0.51), [0.505, 0.505])
    """
    d = np.arange(1, m + 1)
    F = cover_cdf(m, d)
    tie = np.isclose(F, 0.5, rtol=0.0, atol=1e-12)  # F(d) = 1/2 exactly, up to round-off
    low = int(d[np.argmax((F >= 0.5) | tie)])
    high = low + 1 if tie[low - 1] else low
    return low / m, high / m


#: finite-size forms t(m) = t_inf + a x(m) of :func:`finite_size_fit`
FINITE_SIZE_FORMS = {"1/m": lambda m: 1.0 / m, "1/sqrt(m)": lambda m: 1.0 / np.sqrt(m)}


@dataclass(frozen=True)
class FiniteSizeFit:
    """t(m) = t_inf + a x(m) fitted by weighted least squares (:func:`finite_size_fit`).

    ``se`` and ``slope_se`` are the standard errors of t_inf and a, inflated by sqrt(chi2 / dof) when the scatter
    exceeds the error bars (the Birge ratio; never deflated). ``residuals``: (t - fit) / se per point.
    """

    form: str
    t_inf: float
    se: float
    slope: float
    slope_se: float
    chi2: float
    dof: int
    m: np.ndarray
    residuals: np.ndarray

    @property
    def p_value(self) -> float:
        """P(chi2_dof >= chi2): how probable scatter this large is if the form is right (NaN without dof)."""
        return float(_sp.chi2.sf(self.chi2, self.dof)) if self.dof > 0 else math.nan

    def predict(self, m) -> np.ndarray:
        """t_inf + a x(m)."""
        return self.t_inf + self.slope * FINITE_SIZE_FORMS[self.form](np.asarray(m, dtype=float))


def finite_size_fit(m, t, se, form: str = "1/m") -> FiniteSizeFit:
    """Extrapolate thresholds t measured at sizes m (standard errors se) to m -> ∞ with t = t_inf + a x(m).

    ``form``: ``"1/m"`` (x = 1/m) or ``"1/sqrt(m)"``. Weighted least squares with weights 1/se²; the covariance of
    (t_inf, a) is (X^T W X)^{-1}, scaled by max(1, chi2/dof). Needs at least two distinct sizes.

    >>> fit = finite_size_fit([50, 100, 200, 400], [0.52, 0.51, 0.505, 0.5025], [0.01, 0.01, 0.01, 0.01])
    >>> round(fit.t_inf, 6), round(fit.slope, 6), round(fit.chi2, 12)
    (0.5, 1.0, 0.0)
    """
    if form not in FINITE_SIZE_FORMS:
        raise ValueError(f"unknown finite-size form {form!r}; choose {', '.join(FINITE_SIZE_FORMS)}")
    m, t, se = (np.asarray(a, dtype=float) for a in (m, t, se))
    if len(np.unique(m)) < 2:
        raise ValueError("a finite-size fit needs thresholds at two or more sizes m")
    x = FINITE_SIZE_FORMS[form](m)
    X = np.stack([np.ones_like(x), x], axis=1)
    w = 1.0 / se ** 2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ (X.T @ (w * t))
    resid = (t - X @ coef) / se
    chi2 = float(resid @ resid)
    dof = len(t) - 2
    inflate = max(1.0, chi2 / dof) if dof > 0 else 1.0
    return FiniteSizeFit(form, float(coef[0]), float(math.sqrt(cov[0, 0] * inflate)), float(coef[1]),
                         float(math.sqrt(cov[1, 1] * inflate)), chi2, dof, m, resid)
