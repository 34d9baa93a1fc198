"""Models (1) and (17): forward against naive per-sequence loops, padding invariance, closed-form gradients
against autograd (B-C1 of docs/paper-b-attention.md#theory-checks), loss, parameters."""

import numpy as np
import pytest
import torch

from ntpbias.data.tokens import TokenSequences
from ntpbias.errors import DataError
from ntpbias.geometry.attention.stage_one import loss_and_grad_p, loss_and_gradients, readout, theory_init
from ntpbias.models.attention import OneLayerAttention, TwoLayerAttention, _StableReadout, logistic_loss


def _random_ds(n=16, T=8, S=20, *, variable=False, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, T + 1, size=n) if variable else np.full(n, T)
    seqs = [rng.integers(0, S, size=m).tolist() for m in lengths]
    return TokenSequences.from_lists(seqs, rng.choice([-1, 1], size=n), num_tokens=S)


def _naive_one_layer(E, p, v, seq):
    EX = E[torch.tensor(seq)]  # (m, d)
    q = torch.softmax(EX @ p, dim=0)
    return q @ (EX @ v)


def _naive_two_layer(E, p, v, seq, weight, bias, eps):
    EX = E[torch.tensor(seq)]
    Z = torch.softmax(EX @ EX.T, dim=1) @ EX + EX
    mu = Z.mean(1, keepdim=True)
    var = ((Z - mu) ** 2).mean(1, keepdim=True)
    H = (Z - mu) / torch.sqrt(var + eps) * weight + bias
    q = torch.softmax(H @ p, dim=0)
    return q @ (H @ v)


def _sequences(ds):
    return [ds.X[k, ds.mask[k]].tolist() for k in range(ds.n)]


def test_theory_init_has_the_stated_law_and_the_models_use_it():
    """E_s, p ~ N(0, I/d) and v uniform on the sphere: unit v, moments of E and p within sampling error, and a
    seed determines the draw (the models take their parameters from the same function)."""
    E, p, v = theory_init(400, 64, seed=5)
    assert torch.linalg.vector_norm(v).item() == pytest.approx(1.0, abs=1e-15)
    se = (2 / E.numel()) ** 0.5  # relative standard error of a variance estimate
    assert E.var().item() * 64 == pytest.approx(1.0, abs=5 * se)
    assert abs(E.mean().item()) < 5 / (E.numel() * 64) ** 0.5
    assert torch.equal(theory_init(400, 64, seed=5)[1], p) and not torch.equal(theory_init(400, 64, seed=6)[1], p)
    for cls in (OneLayerAttention, TwoLayerAttention):
        model = cls(400, 64, seed=5)
        assert torch.equal(model.E, E) and torch.equal(model.p, p) and torch.equal(model.v, v)
        assert model.E.dtype == torch.float64


def test_one_layer_forward_matches_a_naive_loop_on_variable_length_data():
    ds = _random_ds(variable=True, seed=1)
    model = OneLayerAttention(20, 12, seed=2)
    f = model(ds.X, ds.mask)
    naive = torch.stack([_naive_one_layer(model.E, model.p, model.v, s) for s in _sequences(ds)])
    assert torch.allclose(f, naive, rtol=0, atol=1e-14)
    # the closed-form readout of the geometry module agrees
    assert torch.allclose(readout(model.E.detach(), model.p.detach(), model.v, ds), f.detach(), rtol=0, atol=1e-14)


@pytest.mark.parametrize("affine", [True, False])
def test_two_layer_forward_matches_a_naive_loop_on_variable_length_data(affine):
    ds = _random_ds(n=10, T=7, variable=True, seed=3)
    model = TwoLayerAttention(20, 12, seed=4, layer_norm_affine=affine)
    if affine:  # make the affine part non-trivial
        with torch.no_grad():
            model.norm.weight.normal_(1.0, 0.3)
            model.norm.bias.normal_(0.0, 0.3)
        weight, bias = model.norm.weight, model.norm.bias
    else:
        weight, bias = 1.0, 0.0
    f = model(ds.X, ds.mask)
    naive = torch.stack([_naive_two_layer(model.E, model.p, model.v, s, weight, bias, 1e-5) for s in _sequences(ds)])
    assert torch.allclose(f, naive, rtol=0, atol=1e-13)


@pytest.mark.parametrize("cls", [OneLayerAttention, TwoLayerAttention])
def test_padding_changes_nothing(cls):
    ds = _random_ds(n=12, T=9, variable=True, seed=5)
    assert not bool(ds.mask.all())
    model = cls(20, 16, seed=6)
    f = model(ds.X, ds.mask)
    # each sequence alone, without padding
    alone = torch.cat([model(torch.tensor([s])) for s in _sequences(ds)])
    assert torch.allclose(f, alone, rtol=0, atol=1e-14)
    # other ids and more padding at the padded positions
    X2 = torch.where(ds.mask, ds.X, torch.randint(0, 20, ds.X.shape, generator=torch.Generator().manual_seed(0)))
    X2 = torch.cat([X2, torch.full((ds.n, 3), 7)], 1)
    mask2 = torch.cat([ds.mask, torch.zeros(ds.n, 3, dtype=torch.bool)], 1)
    assert torch.allclose(model(X2, mask2), f, rtol=0, atol=1e-14)
    # and the gradient does not see the padding either
    loss_a = logistic_loss(model(ds.X, ds.mask), ds.y)
    ga = torch.autograd.grad(loss_a, [model.E, model.p])
    loss_b = logistic_loss(model(X2, mask2), ds.y)
    gb = torch.autograd.grad(loss_b, [model.E, model.p])
    for a, b in zip(ga, gb, strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-14)
    q = model.attention(X2, mask2)
    assert bool((q[~mask2] == 0).all())
    assert torch.allclose(q.sum(1), torch.ones(ds.n, dtype=torch.float64))


@pytest.mark.parametrize("variable", [False, True])
def test_closed_form_gradients_match_autograd(variable):
    """B-C1 (docs/paper-b-attention.md#theory-checks): n=16, T=8, |S|=20, d=32, random y; max abs difference < 1e-12."""
    ds = _random_ds(variable=variable, seed=7)
    model = OneLayerAttention(20, 32, seed=8)
    with torch.no_grad():  # move away from the near-uniform initialisation
        model.p.mul_(10.0)
        model.E.add_(0.3 * torch.randn(20, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    loss = model.loss(ds)
    gE, gp = torch.autograd.grad(loss, [model.E, model.p])
    E, p, v = model.E.detach(), model.p.detach(), model.v
    cf = loss_and_gradients(E, p, v, ds)
    assert abs(float(cf.loss) - float(loss.detach())) < 1e-14
    assert float((cf.grad_E - gE).abs().max()) < 1e-12
    assert float((cf.grad_p - gp).abs().max()) < 1e-12
    loss_p, grad_p = loss_and_grad_p(E, p, v, ds)
    assert float(loss_p) == float(cf.loss) and torch.equal(grad_p, cf.grad_p)
    # structure (Lemma A.1 of paper B): every row of grad_E lies in span(p, v)
    basis = torch.linalg.qr(torch.stack([p, v], 1)).Q
    assert float((cf.grad_E - cf.grad_E @ basis @ basis.T).abs().max()) < 1e-15


def test_logistic_loss_is_bce_with_logits():
    f = torch.tensor([-40.0, -1.0, 0.0, 2.5, 800.0], dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0], dtype=torch.float64)
    ref = torch.nn.functional.binary_cross_entropy_with_logits(f, (y + 1) / 2)
    assert float(logistic_loss(f, y)) == pytest.approx(float(ref), rel=1e-14)


def test_train_v_and_parameters():
    fixed, trained = OneLayerAttention(5, 4), OneLayerAttention(5, 4, train_v=True)
    assert {n for n, _ in fixed.named_parameters()} == {"E", "p"}
    assert "v" in dict(fixed.named_buffers())
    assert {n for n, _ in trained.named_parameters()} == {"E", "p", "v"}
    two = TwoLayerAttention(5, 4)
    assert {n for n, _ in two.named_parameters()} == {"E", "p", "norm.weight", "norm.bias"}
    ds = TokenSequences.from_lists([[0, 1], [2, 3, 4]], [1, -1])
    trained.loss(ds).backward()
    assert trained.v.grad is not None and float(trained.v.grad.abs().sum()) > 0
    zp, zv = fixed.embedding_dots()
    assert torch.allclose(zp, fixed.E @ fixed.p) and torch.allclose(zv, fixed.E @ fixed.v) and not zp.requires_grad
    fixed.load_params(torch.zeros(5, 4, dtype=torch.float64), torch.ones(4, dtype=torch.float64),
                      torch.ones(4, dtype=torch.float64))
    assert float(fixed.E.detach().abs().sum()) == 0 and float(fixed.p.detach().sum()) == 4
    with pytest.raises(DataError, match="shape"):
        fixed.load_params(torch.zeros(3, 4), torch.ones(4), torch.ones(4))


def test_vocabulary_mismatch_is_a_data_error():
    ds = TokenSequences.from_lists([[0, 7]], [1], num_tokens=8)
    with pytest.raises(DataError, match="only 5"):
        OneLayerAttention(5, 4).loss(ds)
    with pytest.raises(DataError, match="\\|S\\| >= 8"):
        loss_and_gradients(*theory_init(5, 4), ds)


def test_float32_option():
    model = OneLayerAttention(6, 4, dtype=torch.float32)
    ds = TokenSequences.from_lists([[0, 1], [2, 3, 4]], [1, -1])
    assert model.loss(ds).dtype == torch.float32


def test_stable_readout_backward_passes_gradcheck():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    u = torch.randn(4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_StableReadout.apply, (a, u))
    ref = (torch.softmax(a, -1) * u).sum(-1)
    assert torch.allclose(_StableReadout.apply(a, u), ref, rtol=0, atol=1e-15)
