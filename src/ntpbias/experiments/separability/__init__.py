"""The NTP-separability phase transition (open question 1 of paper A, Sec. 7; Lemma 1 and Remark 1 of paper A;
docs/paper-a-linear-ntp.md#objects and docs/separability.md).

For Gaussian context embeddings h̄_j ~ N(0, I_d) and uniformly random supports S_j of size k = |S_j| in a
vocabulary of V tokens (Dirichlet(1) probabilities on them), how does the probability that the data are
NTP-separable (Def. 2, eqs. (6a)-(6b)) and NTP_H-compatible (Def. 1, eq. (4)) depend on d/m? Paper A proves only
the sufficient condition d >= m (Lemma 1) and recalls Cover's threshold d/m = 1/2 for one-hot binary labels
(Remark 1: k = 1, V = 2, where NTP-separability is homogeneous linear separability); exact thresholds are open.

Design (decisions where the paper is silent):

* **Nested dimensions.** Trial t draws one dataset with d = m (``random_ntp(m, m, V, k)``) and uses its first d
  embedding coordinates for every d. Both properties are monotone in d along a trial (pad W with zero columns),
  so each trial has a critical dimension d*: separable iff d >= d*_sep, compatible iff d >= d*_comp, found by
  bisection on 0..m (about log2(m) verdicts instead of m). d = 0 is not separable (all logits are 0) and
  compatible only when k = 1 (no equations); d = m is both (Lemma 1: H is square and invertible almost surely),
  checked on the scanned trials. For every d the first d coordinates are an i.i.d. Gaussian m x d matrix, so
  the fraction of trials with d* <= d estimates the probability at d without bias (the curve over d is an
  empirical CDF, its points correlated).
* **Verdicts.** Separability by :func:`ntpbias.geometry.separability.verdict.ntp_separability` (an LP with a certificate
  either way: a separating W checked to margin 1, or Gordan multipliers); compatibility by
  :func:`ntpbias.geometry.linear.subspace.subspace` (residual of the minimum-norm solution of eq. (4)). The number of
  certified separability verdicts is reported; compatibility residuals of the two verdict classes are reported
  side by side (a wide gap means the tolerance decides nothing).
* **Threshold.** The empirical threshold is the median of the critical ratios r* = d*/m (the d/m at which half
  the datasets are separable), with a distribution-free confidence interval from binomial order statistics;
  pointwise bands use Wilson score intervals.
* **Consistency scan.** On the first ``scan`` trials of each configuration, verdicts are also computed at every
  d within 3 of d* and at d = m: they must switch exactly once, at d*.
* **Exact reference.** For k = 1, V = 2, Cover (1965): m Gaussian points with random ±1 labels are homogeneously
  separable in R^d with probability C(m, d) / 2^m = P(Bin(m-1, 1/2) <= d-1); hence d* - 1 ~ Bin(m-1, 1/2), a
  finite-m law the measured d* are tested against (Dvoretzky-Kiefer-Wolfowitz bound), with median threshold
  -> 1/2.
* **Counting bound [derived].** Every generator (e_z - e_z') h̄^T of F has zero column sums, so
  dim F <= (V - 1) d, while compatibility with generic probabilities needs dim F = m (k - 1): d*_comp/m >=
  (k - 1)/(V - 1). It is drawn on the figures and checked on every trial.
* **The large-m study (paper scale).** Every V in {2, 3, 5, 10, 20} with k in {1, 2, V/2, V - 1} at m = 50, 100,
  200, 400 (800 for some): the thresholds are extrapolated to m -> ∞ with t_∞ + a/m and compared with the prediction
  δ*(V, k) of :mod:`ntpbias.geometry.separability.thresholds` (our derivation; Cover's 1/2 at V = 2, the one graded
  comparison) and with the counting bound (:mod:`.scaling`; docs/separability.md).
"""

from .checks import config_checks
from .config import METHODS, SeparabilityConfig
from .group import FIGURES, SCALE_GRID, check_grid, grid_points, group_configs, run_group, train_separability
from .runs import (
    Trial,
    TrialResult,
    configurations,
    critical,
    critical_dimensions,
    read_trials,
    run_trials,
    summarize,
    trial_dataset,
    trial_seed,
    trials_csv,
)

__all__ = ["FIGURES", "METHODS", "SCALE_GRID", "SeparabilityConfig", "Trial", "TrialResult", "check_grid",
           "config_checks", "configurations", "critical", "critical_dimensions", "grid_points", "group_configs",
           "read_trials", "run_group",
           "run_trials", "summarize", "train_separability", "trial_dataset", "trial_seed", "trials_csv"]
