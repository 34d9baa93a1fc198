"""The exact finite-m law of d* when every support leaves out one token (|S_j| = V - 1), from the kinematic formula.

Setting: m contexts, embeddings h̄_j ~ N(0, I_d) i.i.d., supports S_j = [V] \\ {o_j} with the left-out token o_j
uniform on [V] and independent of the embeddings (:func:`~ntpbias.data.synthetic.random_ntp` with support size
V - 1); n = m - d. The derivation is in docs/separability.md ("Supports of size V - 1"); in short:

1. Writing the logits as Z = c 1^T - diag(s) E (E_{j,·} = e_{o_j}, s > 0), the data are NTP-separable iff the V cones
   C_a = pos{π(e_j) : o_j = a}, π the orthogonal projection onto range(H)^⊥ (dimension n), share a point of their
   relative interiors. Up to one common linear map, which changes no intersection, the generators may be taken i.i.d.
   N(0, I_n): the C_a are *independent* cones, each with a rotation-invariant law.
2. The conic kinematic formula, iterated over the V cones, gives the expected intrinsic volumes of their intersection
   D from those of each cone: E v_k(D) = P(Σ_a I_a = (V - 1) n + k) for k >= 1, with I_a independent and distributed
   as the intrinsic volumes of C_a, and D ≠ {0} with probability 2 Σ_{k odd} E v_k(D) (Gauss-Bonnet: a cone that
   is not a subspace has Σ_{k odd} v_k = 1/2) up to the cases where D is a subspace.
3. The polar of C_a is the intersection of N_a = #{j : o_j = a} independent random half-spaces, so by the same
   formula its intrinsic volumes, averaged over the generators, are those of (n - N_a + Bin(N_a, 1/2))_+; hence
   I_a = min(n, B_a) with B_a ~ Bin(N_a, 1/2).

So, with (B_1, ..., B_V) the first V cells of a multinomial of m trials with probabilities 1/(2V) each (a context
counts in cell a when o_j = a and a fair coin falls heads) and S = Σ_a min(n, B_a),

    P(separable at d) = 2 Σ_{k >= 1 odd} P(S = (V - 1) n + k) + P(every C_a ∈ {{0}, R^n}) - 2 [n odd] P(every C_a = R^n)

(the last two terms: when every cone is a subspace, 0 is a common relative-interior point while D may be {0} or
R^n), with P(C_a = R^n | N_a) = P(Bin(N_a - 1, 1/2) >= n) (Wendel 1962) and C_a = {0} when N_a = 0.
For V = 2 this is Cover's law; as m -> ∞ the
threshold is S ≈ m / 2 = (V - 1) n, i.e. d/m -> (V - 3/2)/(V - 1), the value δ*(V, V - 1) of
:func:`~ntpbias.geometry.separability.thresholds.separability_threshold`. The probabilities are computed exactly by
Poissonization: independent Poisson cells conditioned on their total, the V-fold convolution of one cell's joint law
of (B_a, min(n, B_a)) taken by a 2-D FFT.

References
----------
* The conic kinematic formula and the Gauss-Bonnet relation for intrinsic volumes: R. Schneider and W. Weil,
  *Stochastic and Integral Geometry* (Springer 2008), chapter 6.5 (spherical integral geometry); D. Amelunxen, M. Lotz,
  M. B. McCoy and J. A. Tropp, "Living on the edge", Inf. Inference 3 (2014), the exact kinematic
  formula and the Gauss-Bonnet relation in its section on intrinsic volumes.
* Wendel's probability that N random half-spaces through 0 cover R^n: J. G. Wendel, Math. Scand. 10 (1962) 109-111.
* The case V = 2: T. M. Cover, IEEE Trans. Electron. Comput. 14 (1965), Theorem 1; Remark 1 of paper A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, poisson

from ...errors import ConfigError

#: the law is computed for every d whose probability lies in (CDF_TAIL, 1 - CDF_TAIL); beyond, it is 0 or 1
CDF_TAIL = 1e-12


def _check(m: int, V: int) -> None:
    if not (isinstance(m, (int, np.integer)) and isinstance(V, (int, np.integer)) and m >= 1 and V >= 2):
        raise ConfigError(f"need integers m >= 1 and V >= 2, got m={m!r}, V={V!r}")


def separable_probability(m: int, V: int, d: int) -> float:
    """P(the data restricted to d coordinates are NTP-separable) for m contexts with supports of size V - 1
    (module docstring), exact up to floating-point round-off.

    Parameters
    ----------
    m : number of contexts (>= 1)
    V : vocabulary size (>= 2); every support leaves out one uniformly random token
    d : embedding dimension; d >= m gives 1 (Lemma 1 of paper A), d <= 0 gives 0

    Returns
    -------
    float
        2 Σ_{k odd} P(S = (V - 1) n + k) plus the subspace terms of the module docstring, clipped to [0, 1].

    Raises
    ------
    ConfigError
        m or V not integers with m >= 1, V >= 2.

    Examples
    --------
    >>> round(separable_probability(10, 2, 5), 6)  # Cover: P(Bin(9, 1/2) <= 4)
    0.5
    """
    _check(m, V)
    n = m - int(d)
    if n <= 0:
        return 1.0
    if d <= 0:
        return 0.0
    cells = _cell_law(m, V, n)  # P_Poisson(H = h, S = s) over the V heads cells, (m + 1, V n + 1)
    tails = poisson.pmf(m - np.arange(m + 1), m / 2)  # the tails cell takes the rest of the m contexts
    S = cells.T @ tails / poisson.pmf(m, m)  # P(S = s) under the multinomial
    k = np.arange(len(S)) - (V - 1) * n
    odd = (k >= 1) & (k % 2 == 1)
    subspaces = _all_cones(m, V, n, empty=True) - 2 * (n % 2) * _all_cones(m, V, n, empty=False)
    return float(np.clip(2 * S[odd].sum() + subspaces, 0.0, 1.0))


def _cell_law(m: int, V: int, n: int) -> np.ndarray:
    """The joint law of (H, S) = (Σ_a B_a, Σ_a min(n, B_a)) for V independent Poisson(m / (2V)) cells, truncated
    to H <= m: the V-th power of one cell's law in Fourier space."""
    b = np.arange(m + 1)
    cell = np.zeros((m + 1, n + 1))
    cell[b, np.minimum(b, n)] = poisson.pmf(b, m / (2 * V))
    # S <= V n exactly; H wraps around beyond the FFT length, which holds m + m/2 + 12 sqrt(m) + 50: the mass that
    # folds back into H <= m is P(Poisson(m/2) > that length) < 1e-15
    shape = (m + 1 + math.ceil(m / 2 + 12 * math.sqrt(m) + 50), n * V + 1)
    fft_shape = tuple(int(2 ** math.ceil(math.log2(s))) for s in shape)
    out = np.fft.irfft2(np.fft.rfft2(cell, fft_shape) ** V, fft_shape)[:m + 1, :n * V + 1]
    return np.maximum(out, 0.0)


def _all_cones(m: int, V: int, n: int, *, empty: bool) -> float:
    """P(every C_a is R^n), or with ``empty`` P(every C_a is R^n or {0}), = E Π_a w(N_a) over (N_a) multinomial(m, 1/V)
    with w(N) = P(Bin(N - 1, 1/2) >= n) (Wendel 1962) for N >= 1 and w(0) = [empty], by Poissonization."""
    N = np.arange(m + 1)
    w = np.where(N >= 1, binom.sf(n - 1, np.maximum(N - 1, 0), 0.5), float(empty))
    size = int(2 ** math.ceil(math.log2(m * V + 1)))
    total = np.fft.irfft(np.fft.rfft(poisson.pmf(N, m / V) * w, size) ** V, size)[m]
    return float(max(total, 0.0) / poisson.pmf(m, m))


@dataclass(frozen=True)
class CriticalLaw:
    """The law of d* for m contexts with supports of size V - 1: ``cdf[i]`` = P(d* <= d[i]).

    Attributes
    ----------
    m, V : the setting
    d : 1, ..., m
    cdf : P(d* <= d), nondecreasing, 1 at d = m
    """

    m: int
    V: int
    d: np.ndarray
    cdf: np.ndarray

    @property
    def pmf(self) -> np.ndarray:
        return np.diff(np.concatenate([[0.0], self.cdf]))

    @property
    def mean(self) -> float:
        return float(self.d @ self.pmf)

    def quantile(self, q: float) -> int:
        """The smallest d with P(d* <= d) >= q."""
        return int(self.d[np.searchsorted(self.cdf, q - 1e-12)])

    @property
    def median(self) -> int:
        return self.quantile(0.5)


def critical_law(m: int, V: int) -> CriticalLaw:
    """The law of d* (module docstring) at every d where it is neither 0 nor 1 to :data:`CDF_TAIL`, computed outward
    from the large-m threshold (V - 3/2) m / (V - 1).

    Parameters
    ----------
    m : number of contexts (>= 1)
    V : vocabulary size (>= 2)

    Returns
    -------
    CriticalLaw
        ``cdf[i]`` = P(d* <= i + 1) = :func:`separable_probability` (m, V, i + 1), made monotone against round-off.

    Examples
    --------
    >>> law = critical_law(40, 2)
    >>> law.median, round(law.mean, 6)  # Cover: d* - 1 ~ Bin(39, 1/2)
    (20, 20.5)
    """
    _check(m, V)
    start = min(m, max(1, round((V - 1.5) / (V - 1) * m)))
    values = {start: separable_probability(m, V, start)}
    d = start
    while d > 1 and values[d] > CDF_TAIL:
        d -= 1
        values[d] = separable_probability(m, V, d)
    d = start
    while d < m and values[d] < 1 - CDF_TAIL:
        d += 1
        values[d] = separable_probability(m, V, d)
    ds = np.arange(1, m + 1)
    cdf = np.array([values.get(x, 0.0 if x < start else 1.0) for x in ds])
    return CriticalLaw(m, V, ds, np.maximum.accumulate(cdf))
