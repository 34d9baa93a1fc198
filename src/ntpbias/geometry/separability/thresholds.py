"""Predicted large-m thresholds of NTP-separability for Gaussian embeddings (open question of paper A, Remark 1).

Setting: m contexts with embeddings h̄_j ~ N(0, I_d) i.i.d., each with a uniformly random support S_j of size k
in a vocabulary of V tokens, supports independent of the embeddings, no bias term; d/m -> δ as m -> ∞. The data
are NTP-separable (Def. 2, eqs. (6a)-(6b) of paper A) iff some W (V, d) puts every logit vector z_j = W h̄_j in the
cone

    K_S = {z ∈ R^V : z_a = z_b for a, b ∈ S,  z_a >= z_v for a ∈ S, v ∉ S}     (S = S_j).

k = 1 is one-hot (multiclass, "argmax") separability; V = 2, k = 1 is homogeneous binary separability, whose
threshold 1/2 is Cover's (1965).

**Prediction [our derivation; not a published equation].** Every K_S contains the all-ones direction (a common
shift of the logits), so the problem lives in 1^⊥ ≅ R^{V-1}. Counting dimensions as in the kinematic formula of
conic integral geometry (Amelunxen, Lotz, McCoy and Tropp 2014) for the subspace {(W h̄_j)_j} of dimension
(V - 1) d against the product cone of the m rows, or equivalently a Gordon / replica-symmetric computation taken
at the permutation-symmetric overlap W W^T ∝ I on 1^⊥, separability switches at

    δ*(V, k) = E[dist(g, K_S)^2] / (V - 1) = (k - 1 + E|A|) / (V - 1),       g ~ N(0, I_V),

where E[dist(g, K_S)^2] is the statistical dimension of the polar cone of K_S and A is the set of out-of-support
tokens tied with the support in the projection of g onto K_S: projecting g sets z_S = t*, z_v = min(g_v, t*), with
t* the root of k (t - ḡ_S) = Σ_{v∉S} (g_v - t)_+, and A = {v ∉ S : g_v > t*} (the face of K_S that receives the
projection has dimension V - k - |A|; the statistical dimension is the expected face dimension). For V = 2, k = 1
this is P(g_2 > g_1) = 1/2, Cover's threshold; for k = V - 1 it is (V - 3/2)/(V - 1); always
(k - 1)/(V - 1) < δ* <= (k - 1 + (V - k)/2)/(V - 1), and for k = 1, 1/V <= δ* <= 1/2.

E|A| = (V - k) P(v ∈ A) is evaluated as a one-dimensional Gaussian integral over u = g_v,

    P(v ∈ A) = ∫ φ(u) P(√k N + Σ_{i=1}^{V-k-1} (g_i - u)_+ < k u) du,

whose inner probability is inverted from the characteristic function (Gil-Pelaez): with
c(t, u) = E exp(i t (g - u)_+) = Φ(u) + ½ exp(-u²/2) w((t + i u)/√2) (w: the Faddeeva function),
E exp(i t Y) = exp(-k t²/2) c(t, u)^{V-k-1}. :func:`separability_threshold_mc` estimates the same quantity by
projecting Gaussian samples onto K_S directly, with a standard error.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, wofz

from ...errors import ConfigError

#: Gauss-Legendre nodes per panel of the composite quadratures
_NODES = 16
#: the outer integral runs over u in [_U_LO, _U_HI]; the neglected tails weigh below 1e-12
_U_LO, _U_HI = -7.0, 7.5


def _check(V: int, k: int) -> None:
    if not (isinstance(V, (int, np.integer)) and isinstance(k, (int, np.integer)) and 1 <= k < V):
        raise ConfigError(f"need integers 1 <= k < V (some token out of every support), got V={V!r}, k={k!r}")


def _panels(a: float, b: float, n_panels: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes and weights on [a, b] with ``n_panels`` panels of :data:`_NODES` nodes."""
    x, w = np.polynomial.legendre.leggauss(_NODES)
    edges = np.linspace(a, b, n_panels + 1)
    half = np.diff(edges)[:, None] / 2
    nodes = (edges[:-1, None] + half * (x[None] + 1)).ravel()
    return nodes, (half * w[None]).ravel()


def tie_probability(V: int, k: int) -> float:
    """P(v ∈ A): probability that a given out-of-support token is tied with the support in the projection of a
    standard Gaussian onto K_S (module docstring), by a 1-D integral over g_v and Gil-Pelaez inversion.

    Returns exactly the value of the integral up to quadrature error (below 1e-9 for V <= 200).
    """
    _check(V, k)
    n = V - k - 1  # other out-of-support tokens
    u, wu = _panels(_U_LO, _U_HI, 24)
    if n == 0:  # Y = √k N: P(√k N < k u) = Φ(√k u)
        return float(np.sum(wu * np.exp(-u ** 2 / 2) / math.sqrt(2 * math.pi) * ndtr(math.sqrt(k) * u)))
    T = math.sqrt(2 * 40 / k)  # exp(-k T²/2) = e^-40
    omega = k * max(abs(_U_LO), _U_HI) + n * (abs(_U_LO) + 1) + 6 * math.sqrt(k + n)  # largest phase rate
    t, wt = _panels(0.0, T, int(math.ceil(T * omega / (2 * math.pi))) + 2)
    inner = np.empty_like(u)
    for s in range(0, len(u), _NODES):  # chunks of u bound the (u, t) grid's memory
        uc = u[s:s + _NODES, None]
        c = ndtr(uc) + 0.5 * np.exp(-uc ** 2 / 2) * wofz((t[None] + 1j * uc) / math.sqrt(2))
        log_cf = -k * t[None] ** 2 / 2 + n * np.log(c) - 1j * t[None] * (k * uc)
        integrand = np.imag(np.exp(log_cf)) / t[None]
        inner[s:s + _NODES] = 0.5 - integrand @ wt / math.pi
    return float(np.sum(wu * np.exp(-u ** 2 / 2) / math.sqrt(2 * math.pi) * inner))


def expected_ties(V: int, k: int) -> float:
    """E|A| = (V - k) P(v ∈ A): expected number of out-of-support tokens tied with the support."""
    return (V - k) * tie_probability(V, k)


def separability_threshold(V: int, k: int = 1) -> float:
    """Predicted large-m critical ratio d/m of NTP-separability, δ*(V, k) = (k - 1 + E|A|)/(V - 1).

    Our derivation (module docstring), exact for V = 2, k = 1 (Cover's 1/2). ``k = |S_j|``; ``k = 1`` is one-hot.

    Examples
    --------
    >>> round(separability_threshold(2), 6)
    0.5
    """
    _check(V, k)
    return (k - 1 + expected_ties(V, k)) / (V - 1)


def project_support_cone(g: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean projection of the rows of ``g`` onto K_S with S = the first k tokens.

    Parameters
    ----------
    g : (n, V) array
    k : support size

    Returns
    -------
    z : (n, V) array, the projections (z_S = t*, z_v = min(g_v, t*))
    ties : (n,) int array, |A| = number of out-of-support tokens with g_v > t*
    """
    g = np.asarray(g, dtype=np.float64)
    V = g.shape[1]
    _check(V, k)
    gbar = g[:, :k].mean(axis=1)
    out = -np.sort(-g[:, k:], axis=1)  # out-of-support coordinates, descending
    csum = np.concatenate([np.zeros((len(g), 1)), np.cumsum(out, axis=1)], axis=1)
    a = np.arange(V - k + 1)
    t_a = (k * gbar[:, None] + csum) / (k + a[None])  # candidate t* when the top a are tied
    above = np.concatenate([np.full((len(g), 1), np.inf), out], axis=1)  # out[a-1] (inf for a = 0)
    below = np.concatenate([out, np.full((len(g), 1), -np.inf)], axis=1)  # out[a] (-inf for a = V-k)
    valid = (above > t_a) & (t_a >= below)
    ties = np.argmax(valid, axis=1)  # the unique consistent a (the root of a monotone equation)
    t = t_a[np.arange(len(g)), ties]
    z = np.minimum(g, t[:, None])
    z[:, :k] = t[:, None]
    return z, ties


def separability_threshold_mc(V: int, k: int = 1, samples: int = 200_000, seed: int = 0) -> tuple[float, float]:
    """Monte-Carlo estimate of δ*(V, k) = E[dist(g, K_S)^2]/(V - 1) by projecting Gaussian samples onto K_S.

    Returns
    -------
    (estimate, standard error)
    """
    _check(V, k)
    g = np.random.default_rng(seed).standard_normal((samples, V))
    z, _ = project_support_cone(g, k)
    dist2 = np.sum((g - z) ** 2, axis=1) / (V - 1)
    return float(dist2.mean()), float(dist2.std(ddof=1) / math.sqrt(samples))
