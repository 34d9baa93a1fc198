"""CE - H and its gradient without cancellation (ntpbias.geometry.linear.excess) against the direct formula, autograd
and a 400-digit mpmath computation far into the separable regime; the bound on ||P_F(W) - W*|| from the per-context
excess loss (ntpbias.geometry.linear.fbound, docs/optimizers.md#f-bound) against the measured distance."""

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.linear.excess import context_excess, excess_loss_grad
from ntpbias.geometry.linear.fbound import f_error_bound, psi_inverse
from ntpbias.geometry.linear.loss import cross_entropy, cross_entropy_grad, kl_terms
from ntpbias.geometry.linear.subspace import subspace
from ntpbias.geometry.margins.program import ntp_svm

mpmath = pytest.importorskip("mpmath")


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_equals_direct_formula_and_autograd(k):
    data = random_ntp(m=7, d=5, V=4, support_size=k, seed=k)
    W = _rand(3, 4, 5, seed=k)
    gap, grad = excess_loss_grad(W, data)
    loss, ref = cross_entropy_grad(W, data)
    assert torch.allclose(gap, loss - data.entropy, rtol=1e-10, atol=1e-13)
    assert torch.allclose(grad, ref, rtol=1e-10, atol=1e-14)
    Wg = W.clone().requires_grad_(True)
    cross_entropy(Wg, data).sum().backward()
    assert torch.allclose(grad, Wg.grad, rtol=1e-10, atol=1e-14)
    assert torch.allclose(context_excess(W, data), kl_terms(W, data), rtol=1e-9, atol=1e-13)


def _mp_reference(W: torch.Tensor, data) -> tuple[float, np.ndarray]:
    """CE - H and ∇CE at W (V, d) in 400-digit arithmetic, straight from eq. (2) of paper A."""
    mpmath.mp.dps = 400  # resolves 1 - S_y down to 1e-300
    H, P, pi = data.H.tolist(), data.P.tolist(), data.pi.tolist()
    Wl = W.tolist()
    V, d = len(Wl), len(Wl[0])
    gap = mpmath.mpf(0)
    grad = [[mpmath.mpf(0)] * d for _ in range(V)]
    for j in range(len(H)):
        logits = [mpmath.fsum(mpmath.mpf(Wl[v][c]) * H[j][c] for c in range(d)) for v in range(V)]
        top = max(logits)
        Z = mpmath.fsum(mpmath.exp(x - top) for x in logits)
        probs = [mpmath.exp(x - top) / Z for x in logits]
        gap += pi[j] * mpmath.fsum(P[j][v] * mpmath.log(P[j][v] / probs[v]) for v in range(V) if P[j][v] > 0)
        for v in range(V):
            r = pi[j] * (probs[v] - P[j][v])
            for c in range(d):
                grad[v][c] += r * H[j][c]
    return float(gap), np.array([[float(x) for x in row] for row in grad])


@pytest.mark.parametrize("k, scale", [(1, 40.0), (1, 300.0), (2, 30.0)])
def test_far_into_the_separable_regime(k, scale):
    """W = W* + scale W^mm: logit gaps of `scale`. The direct formula rounds CE - H to 0 there."""
    data = random_ntp(m=6, d=8, V=4, support_size=k, seed=0)
    W = subspace(data).W_star + scale * ntp_svm(data).W
    gap, grad = excess_loss_grad(W, data)
    ref_gap, ref_grad = _mp_reference(W, data)
    assert float(gap) == pytest.approx(ref_gap, rel=1e-8)
    tol = 1e-8 * np.abs(ref_grad).max() + (0 if k == 1 else 1e-15)  # |S_j| > 1: the log-odds floor of float64
    assert np.abs(grad.numpy() - ref_grad).max() <= tol
    direct = float(cross_entropy(W, data) - data.entropy)
    assert k > 1 or abs(direct - ref_gap) > 0.5 * ref_gap or ref_gap > 1e-12  # the direct formula has lost it


def test_psi_inverse():
    y = np.array([0.0, 1e-30, 1e-12, 1e-3, 0.5, 10.0, 800.0])
    D = psi_inverse(y)
    expected = [0, 2 ** 0.5 * 1e-15, 2 ** 0.5 * 1e-6 * (1 + 2 ** 0.5 * 1e-6 / 6), 0.04505719227, 1.198290437,
                10.99998330, 801.0]  # sqrt(2y)(1 + sqrt(2y)/6) for small y; the others solve ψ(Δ) = y to 10 digits
    assert np.allclose(D, expected, rtol=1e-8, atol=1e-17)


@pytest.mark.parametrize("seed", range(4))
def test_f_error_bound_holds_and_shrinks(seed):
    data = random_ntp(m=8, d=10, V=5, support_size=3, seed=seed)
    F = subspace(data)
    W_mm = ntp_svm(data).W
    R = _rand(5, 10, seed=seed + 10)
    prev = np.inf
    for eps in (1.0, 0.3, 0.1, 1e-2, 1e-3, 1e-5):
        for grow in (0.0, 5.0, 50.0):
            W = F.W_star + eps * R + grow * W_mm
            err = float(torch.linalg.vector_norm(F.project(W) - F.W_star))
            bound = float(f_error_bound(W, data))
            assert err <= bound * (1 + 1e-9) + 1e-12, (eps, grow, err, bound)
        if eps <= 1e-2:
            assert bound < prev
        prev = bound
    assert bound < 1e-3  # the bound goes to 0 with the excess loss
    assert f_error_bound(W, random_ntp(m=8, d=10, V=5, support_size=1, seed=0)) is None  # one-hot: F = {0}
