"""The optimizers of the norms study (docs/optimizers.md): steepest-descent directions attain the dual norm with a
unit-norm step, the polar factor by SVD and by Newton-Schulz, and sign descent, normalized steepest descent, Muon,
Adam (β1 < β2 and β1 = β2) and Adagrad against hand computations and torch.optim."""

import pytest
import torch

from ntpbias.geometry.norms import DUAL, NORMS, matrix_norm
from ntpbias.training.config import OptimizerConfig
from ntpbias.training.optimizers import Optimizer
from ntpbias.training.steepest import polar, steepest_direction


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _inner(a: dict, b: dict) -> torch.Tensor:
    return sum((a[k] * b[k]).reshape(a[k].shape[0], -1).sum(1) for k in a)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape", [(3, 4, 7), (2, 7, 3)])
def test_direction_attains_the_dual_norm(norm, shape):
    G = _rand(*shape)
    D = steepest_direction({"W": G}, norm)["W"]
    assert torch.allclose(matrix_norm(D, norm), torch.ones(shape[0], dtype=G.dtype), rtol=1e-12)
    assert torch.allclose((G * D).sum((1, 2)), matrix_norm(G, DUAL[norm]), rtol=1e-12)
    # no unit-norm direction does better: random unit directions of the norm stay below ||G||_*
    R = _rand(200, *shape[1:], seed=5)
    R = R / matrix_norm(R, norm)[:, None, None]
    assert float((G[0] * R).sum((1, 2)).max()) <= float(matrix_norm(G[0], DUAL[norm])) + 1e-12


@pytest.mark.parametrize("norm", NORMS)
def test_direction_of_several_parameters(norm):
    """Entrywise norms on the concatenation; spectral = max of the blocks' spectral norms (dual: Σ nuclear);
    nuclear = Σ of the blocks' nuclear norms (dual: max spectral)."""
    G = {"A": _rand(3, 4, 5, seed=1), "B": _rand(3, 6, 2, seed=2)}
    D = steepest_direction(G, norm)
    if norm in ("l2", "linf", "l1"):
        flat = {k: v.reshape(3, 1, -1) for k, v in D.items()}
        unit = matrix_norm(torch.cat(list(flat.values()), -1), norm)
        dual = matrix_norm(torch.cat([v.reshape(3, 1, -1) for v in G.values()], -1), DUAL[norm])
    elif norm == "spectral":
        unit = torch.stack([matrix_norm(v, "spectral") for v in D.values()]).amax(0)
        dual = sum(matrix_norm(v, "nuclear") for v in G.values())
    else:
        unit = sum(matrix_norm(v, "nuclear") for v in D.values())
        dual = torch.stack([matrix_norm(v, "spectral") for v in G.values()]).amax(0)
    assert torch.allclose(unit, torch.ones(3, dtype=torch.float64), rtol=1e-12)
    assert torch.allclose(_inner(G, D), dual, rtol=1e-12)


def test_l1_direction_shares_ties_and_zero_gradient_gives_zero():
    G = torch.tensor([[[2.0, -2.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    D = steepest_direction({"W": G}, "l1")["W"]
    assert D[0].tolist() == [[0.5, -0.5], [0.0, 0.0]]
    assert D[1].abs().sum() == 0
    for norm in NORMS:
        assert float(steepest_direction({"W": G}, norm)["W"][1].abs().sum()) == 0


def test_polar_factor_svd_and_newton_schulz():
    G = _rand(4, 5, 9)
    exact = polar(G)
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    assert torch.allclose(exact, U @ Vh, atol=1e-13)
    assert torch.allclose(polar(G, "newton_schulz"), exact, atol=1e-10)
    assert torch.allclose(polar(G.mT, "newton_schulz"), exact.mT, atol=1e-10)  # tall matrices iterate on G^T
    quintic = torch.linalg.svdvals(polar(G, "quintic"))  # Muon's: singular values near 1, not exactly 1
    assert float(quintic.min()) > 0.6 and float(quintic.max()) < 1.3


def test_polar_of_a_rank_deficient_gradient_keeps_its_rank():
    """The linear NTP gradient has rows summing to zero; its polar factor must too (no garbage direction)."""
    G = _rand(1, 6, 10)
    G = G - G.mean(1, keepdim=True)  # 1^T G = 0: rank 5
    for method in ("svd", "newton_schulz", "quintic"):
        D = polar(G, method)
        assert float(D.sum(1).abs().max()) < 1e-9
    s = torch.linalg.svdvals(polar(G))
    assert torch.allclose(s[0, :5], torch.ones(5, dtype=G.dtype)) and float(s[0, 5]) < 1e-12


def test_sign_and_nsd_steps_by_hand():
    W, g = _rand(2, 3, 4), _rand(2, 3, 4, seed=1)
    out = Optimizer(OptimizerConfig(name="sign", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))["W"]
    assert torch.equal(out, W - 0.1 * torch.sign(g))
    out = Optimizer(OptimizerConfig(name="nsd", norm="linf", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))["W"]
    assert torch.equal(out, W - 0.1 * torch.sign(g))
    out = Optimizer(OptimizerConfig(name="nsd", norm="l2", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))["W"]
    ngd = Optimizer(OptimizerConfig(name="ngd", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))["W"]
    assert torch.allclose(out, ngd, rtol=1e-14)
    out = Optimizer(OptimizerConfig(name="nsd", norm="spectral", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))
    U, _, Vh = torch.linalg.svd(g, full_matrices=False)
    assert torch.allclose(out["W"], W - 0.1 * U @ Vh, atol=1e-14)
    out = Optimizer(OptimizerConfig(name="nsd", norm="nuclear", lr=0.1)).step({"W": W}, {"W": g}, torch.zeros(2))
    assert torch.allclose(out["W"], W - 0.1 * U[:, :, :1] @ Vh[:, :1, :], atol=1e-14)


def test_muon_by_hand():
    cfg = OptimizerConfig(name="muon", lr=0.05, momentum=0.9, polar="svd", lr_power=0.5)
    opt = Optimizer(cfg)
    W = _rand(1, 3, 5)
    g1, g2 = _rand(1, 3, 5, seed=1), _rand(1, 3, 5, seed=2)
    W1 = opt.step({"W": W}, {"W": g1}, torch.zeros(1))["W"]
    W2 = opt.step({"W": W1}, {"W": g2}, torch.zeros(1))["W"]
    m1 = 0.1 * g1
    m2 = 0.9 * m1 + 0.1 * g2
    expect = W - 0.05 * polar(m1) - 0.05 * 2 ** -0.5 * polar(m2)
    assert torch.allclose(W2, expect, atol=1e-14)
    # Muon's default: the quintic Newton-Schulz of the momentum
    q = Optimizer(OptimizerConfig(name="muon", lr=0.05)).step({"W": W}, {"W": g1}, torch.zeros(1))["W"]
    assert torch.allclose(q, W - 0.05 * polar(0.05 * g1, "quintic"), atol=1e-14)


def test_adagrad_matches_torch_optim():
    W0, grads = _rand(3, 4, 6), [_rand(3, 4, 6, seed=s) for s in range(1, 8)]
    ours = Optimizer(OptimizerConfig(name="adagrad", lr=0.1, eps=1e-10))
    params = {"W": W0.clone()}
    refs = [torch.nn.Parameter(W0[b].clone()) for b in range(3)]
    opts = [torch.optim.Adagrad([r], lr=0.1, eps=1e-10) for r in refs]
    for g in grads:
        params = ours.step(params, {"W": g}, torch.zeros(3))
        for b, (r, o) in enumerate(zip(refs, opts, strict=True)):
            r.grad = g[b].clone()
            o.step()
    for b in range(3):
        assert torch.allclose(params["W"][b], refs[b].detach(), atol=1e-15, rtol=1e-13)


@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.9, 0.9), (0.95, 0.95), (0.0, 0.99)])
def test_adam_beta1_le_beta2_and_equal_match_torch_optim(betas):
    W0, grads = _rand(2, 4, 6), [_rand(2, 4, 6, seed=s) for s in range(1, 10)]
    ours = Optimizer(OptimizerConfig(name="adam", lr=0.01, betas=betas, eps=1e-8))
    params = {"W": W0.clone()}
    refs = [torch.nn.Parameter(W0[b].clone()) for b in range(2)]
    opts = [torch.optim.Adam([r], lr=0.01, betas=betas, eps=1e-8) for r in refs]
    for g in grads:
        params = ours.step(params, {"W": g}, torch.zeros(2))
        for b, (r, o) in enumerate(zip(refs, opts, strict=True)):
            r.grad = g[b].clone()
            o.step()
    for b in range(2):
        assert torch.allclose(params["W"][b], refs[b].detach(), atol=1e-15, rtol=1e-12)


def test_decaying_step_schedule():
    opt = Optimizer(OptimizerConfig(name="sign", lr=0.5, lr_power=0.5, milestones=(4,), lr_decay=0.1))
    assert [opt.lr_at(t) for t in (0, 3, 4)] == pytest.approx([0.5, 0.25, 0.05 / 5 ** 0.5], rel=1e-14)


def test_guards_and_state_round_trip():
    W = _rand(2, 3, 4)
    g = _rand(2, 3, 4, seed=1)
    g[1] = float("nan")
    for name in ("sign", "nsd", "muon"):
        out = Optimizer(OptimizerConfig(name=name, norm="spectral")).step({"W": W}, {"W": g}, torch.zeros(2))["W"]
        assert torch.equal(out[1], W[1]) and not torch.equal(out[0], W[0])
    for name in ("muon", "adagrad"):
        a, b = Optimizer(OptimizerConfig(name=name, lr=0.01)), Optimizer(OptimizerConfig(name=name, lr=0.01))
        p = {"W": W}
        for s in range(3):
            p = a.step(p, {"W": _rand(2, 3, 4, seed=s + 2)}, torch.zeros(2))
        b.load_state_dict(a.state_dict())
        b.t = a.t
        g9 = {"W": _rand(2, 3, 4, seed=9)}
        assert torch.equal(a.step(p, g9, torch.zeros(2))["W"], b.step(p, g9, torch.zeros(2))["W"])


@pytest.mark.parametrize("bad", [{"name": "lion"}, {"norm": "l3"}, {"polar": "qr"}, {"momentum": 1.0},
                                 {"lr_power": -0.5}, {"ns_steps": -1}])
def test_config_validation(bad):
    with pytest.raises(ValueError):
        OptimizerConfig(**bad)
