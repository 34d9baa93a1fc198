"""Statistics used by checks, figures and sweeps: correlations, binomial and median intervals, the DKW bound.

One copy of each: the training metrics, the theory checks and the figure titles all call these functions, so a
number printed in a figure is the number a check graded.
"""

from __future__ import annotations

import math

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
