"""The large-m study: thresholds per size m, their finite-size extrapolation, and the comparison with theory.

For each configuration (V, |S_j| = k) the empirical threshold at size m is the median of d*/m over the trials,
with a distribution-free 95% interval (:func:`~ntpbias.stats.median_ci`) and a standard error taken from it,
se = (high - low) / 3.92, floored at half the grid spacing 1/(2m) (d*/m lives on a grid). The thresholds are
extrapolated to m -> ∞ with t(m) = t_∞ + a/m (:func:`~ntpbias.stats.finite_size_fit`); the form is chosen before
looking at the data and its residuals are compared with those of t_∞ + a/sqrt(m):

* for one-hot binary labels the finite-m law is exact (Cover): the median of d*/m is (1 + median Bin(m-1, 1/2))/m
  = 1/2 + O(1/m), so the correction is 1/m;
* generally d* concentrates around its typical value with fluctuations of order sqrt(m) and an asymmetry of
  order 1, so the median of d*/m moves from its limit by O(1)/m (a fixed number of dimensions: for instance the
  ones the in-support ties and the common logit shift take), not by O(1/sqrt(m)).

A size whose median sits at d* = m (the ceiling of Lemma 1: more than half the datasets need every dimension) says
only that the threshold is at least 1 and is left out of the fit.

Each extrapolation is compared with the prediction δ*(V, k) of :mod:`ntpbias.geometry.separability.thresholds` (our
derivation; exact, by Cover's theorem, for V = 2, k = 1) by z = (t_∞ - δ*)/se(t_∞): "agrees" when |z| <= 1.96.
Compatibility is compared the same way with the counting bound (k - 1)/(V - 1) (a lower bound: our derivation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...data.synthetic import random_supports
from ...geometry.linear.subspace import counting_bound, support_count_bound
from ...geometry.separability.thresholds import separability_threshold
from ...stats import FiniteSizeFit, finite_size_fit, median_ci
from .runs import Guess, configurations, critical, predicted_guess

#: the finite-size form of the extrapolation, and the alternative its residuals are compared with
FORM, ALTERNATIVE = "1/m", "1/sqrt(m)"
#: |z| below this: the extrapolation agrees with the prediction (two-sided 95%)
Z_AGREE = 1.96


@dataclass(frozen=True)
class SizePoint:
    """The threshold of one (V, k, m): median of d*/m, its 95% interval, a standard error, the datasets."""

    m: int
    median: float
    low: float
    high: float
    se: float
    trials: int

    @property
    def at_ceiling(self) -> bool:
        """The median sits at d* = m (a lower bound only)."""
        return self.median >= 1.0


def size_points(rows: list[dict], V: int, k: int, which: str = "d_sep") -> list[SizePoint]:
    """The thresholds of (V, k) at every m present in the saved rows, by increasing m."""
    out = []
    for m in sorted({mm for VV, kk, mm in configurations(rows) if (VV, kk) == (V, k)}):
        ratios = critical(rows, V, k, m, which) / m
        med, lo, hi = median_ci(ratios)
        out.append(SizePoint(m, med, lo, hi, max((hi - lo) / 3.92, 0.5 / m), len(ratios)))
    return out


def extrapolate(points: list[SizePoint], form: str = FORM) -> FiniteSizeFit | None:
    """The finite-size fit of the points below the ceiling (None with fewer than two sizes)."""
    use = [p for p in points if not p.at_ceiling]
    if len({p.m for p in use}) < 2:
        return None
    return finite_size_fit([p.m for p in use], [p.median for p in use], [p.se for p in use], form)


def predicted(V: int, k: int, which: str = "d_sep") -> float:
    """δ*(V, k) for separability, the counting bound (k - 1)/(V - 1) for compatibility."""
    return separability_threshold(V, k) if which == "d_sep" else counting_bound(V, k)


@dataclass(frozen=True)
class Comparison:
    """One configuration's extrapolation against its prediction."""

    V: int
    k: int
    which: str
    points: list[SizePoint]
    fit: FiniteSizeFit | None
    alternative: FiniteSizeFit | None
    prediction: float

    @property
    def z(self) -> float:
        return math.nan if self.fit is None else (self.fit.t_inf - self.prediction) / self.fit.se

    @property
    def agrees(self) -> bool | None:
        """|z| <= 1.96 (None without a fit)."""
        return None if self.fit is None else bool(abs(self.z) <= Z_AGREE)

    @property
    def verdict(self) -> str:
        if self.fit is None:
            return "no fit (fewer than two sizes below d* = m)"
        if self.agrees:
            return f"agrees (|z| = {abs(self.z):.2f} <= {Z_AGREE})"
        return f"differs by {self.fit.t_inf - self.prediction:+.4f} ({self.z:+.1f} se)"


def compare(rows: list[dict], V: int, k: int, which: str = "d_sep") -> Comparison:
    """Extrapolate (V, k) from the saved rows and set it against the prediction."""
    points = size_points(rows, V, k, which)
    return Comparison(V, k, which, points, extrapolate(points), extrapolate(points, ALTERNATIVE),
                      predicted(V, k, which))


def excess(rows: list[dict], V: int, k: int, which: str = "d_sep") -> list[tuple[int, int, float, float]]:
    """(m, datasets, mean, standard deviation) of the excess dimensions d* - prediction x m at every size: flat in m
    for a correction a/m to d*/m (it would grow like sqrt(m) for a/sqrt(m)), while its spread grows like sqrt(m)."""
    out = []
    for m in sorted({mm for VV, kk, mm in configurations(rows) if (VV, kk) == (V, k)}):
        ex = critical(rows, V, k, m, which) - predicted(V, k, which) * m
        out.append((m, len(ex), float(ex.mean()), float(ex.std(ddof=1)) if len(ex) > 1 else 0.0))
    return out


def support_bound_ratio(V: int, k: int, m: int, draws: int = 4, seed: int = 0) -> float:
    """Mean over ``draws`` random support patterns (m contexts, uniform k-subsets of V tokens) of the support-count
    bound on d*_comp divided by m (:func:`~ntpbias.geometry.linear.subspace.support_count_bound`): no embeddings, no LP,
    so it reaches sizes far beyond the trials and shows how fast the bound approaches (k - 1)/(V - 1)."""
    gen = torch.Generator().manual_seed(seed)
    return float(np.mean([support_count_bound(random_supports(m, V, k, gen)) / m for _ in range(draws)]))


def pairs(rows: list[dict]) -> list[tuple[int, int]]:
    """The (V, k) present, by V then k."""
    return sorted({(V, k) for V, k, _ in configurations(rows)})


def next_guess(rows: list[dict], V: int, k: int, m: int) -> Guess:
    """Where to start the searches at size m from the trials of (V, k) at smaller sizes (the prediction when there
    are none): the thresholds extrapolated in 1/m from the prediction's limit (one smaller size) or by the fit (two
    or more), and a first step of about the standard deviation of d* at the largest smaller size, scaled by
    sqrt(m / m'). The guess changes the cost of a trial, never its result."""
    base = predicted_guess(V, k, m)
    smaller = [mm for VV, kk, mm in configurations(rows) if (VV, kk) == (V, k) and mm < m]
    if not smaller:
        return base
    m0 = max(smaller)
    guesses = []
    for which in ("d_sep", "d_comp"):
        pts = [p for p in size_points(rows, V, k, which) if p.m < m and not p.at_ceiling]
        fit = extrapolate(pts)
        if fit is not None:
            t = float(fit.predict(m))
        elif pts:
            t = predicted(V, k, which) + (pts[-1].median - predicted(V, k, which)) * pts[-1].m / m
        else:
            t = None
        guesses.append(None if t is None else min(max(1, round(t * m)), m))
    spread = float(np.std(critical(rows, V, k, m0), ddof=1)) if len(critical(rows, V, k, m0)) > 1 else 0.0
    return Guess(guesses[0] or base.sep, guesses[1] or base.comp,
                 max(1, round(spread * math.sqrt(m / m0))) if spread > 0 else base.step)
