"""One-layer transformer of paper C: forwards, eq. (1) loss, closed-form stable gradients (C-C1 of
docs/paper-c-transformer.md)."""

import math

import pytest
import torch

from ntpbias.data.generators import generate_samples, generate_sentences
from ntpbias.data.sentences import NTPSamples, example1
from ntpbias.data.structure import analyze_structure
from ntpbias.errors import ConfigError, DataError
from ntpbias.geometry.transformer.optimum import wov_star_closed_form
from ntpbias.models.transformer import (
    TransformerInputs,
    attention,
    cross_entropy,
    factorize,
    forward_original,
    forward_reparam,
    grads_original,
    logits,
    loss,
    loss_and_grad_L0,
    loss_and_grads,
    loss_L0,
    reparameterize,
    token_embeddings,
)

F64 = torch.float64


def _rand(*shape, seed, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _datasets():
    return [("example1", example1()), ("sentences", generate_sentences(7, L_max=5, r_max=3, seed=3)),
            ("samples", generate_samples(6, seed=2))]


def _autograd(W_ov, W_kq, inputs):
    """Loss eq. (1) through torch's own cross-entropy, differentiated by autograd."""
    W_ov = W_ov.clone().requires_grad_(True)
    W_kq = W_kq.clone().requires_grad_(True)
    ce = torch.nn.functional.cross_entropy(logits(W_ov, W_kq, inputs), inputs.y, reduction="none")
    total = inputs.pi @ ce
    g_ov, g_kq = torch.autograd.grad(total, [W_ov, W_kq])
    return total.detach(), g_ov, g_kq


@pytest.mark.parametrize("kind", ["onehot", "orthonormal", "unit"])
@pytest.mark.parametrize("name,ds", _datasets())
def test_gradients_match_autograd(name, ds, kind):
    d = ds.V if kind == "onehot" else ds.V + 2
    E = token_embeddings(ds.V, kind=kind, d=d, seed=1)
    inputs = TransformerInputs.from_samples(ds, E)
    W_ov, W_kq = _rand(ds.V, d, seed=5), _rand(d, d, seed=6)
    out = loss_and_grads(W_ov, W_kq, inputs)
    ref_loss, ref_ov, ref_kq = _autograd(W_ov, W_kq, inputs)
    assert abs(float(out.loss - ref_loss)) <= 1e-13 * abs(float(ref_loss))
    assert torch.allclose(out.grad_W_ov, ref_ov, rtol=0, atol=1e-13 * float(ref_ov.abs().max()))
    assert torch.allclose(out.grad_W_kq, ref_kq, rtol=0, atol=1e-12 * float(ref_kq.abs().max()))
    assert float(ref_kq.abs().max()) > 1e-3  # the W_kq gradient is not trivially zero
    assert float(loss(W_ov, W_kq, inputs)) == float(out.loss)


def test_gradients_match_central_differences():
    """C-C1: eq. (5) and eq. (6) against central differences (h = 1e-6) on non-zero entries."""
    ds = generate_sentences(6, L_max=4, seed=0)
    E = token_embeddings(ds.V)
    inputs = TransformerInputs.from_samples(ds, E)
    W_ov, W_kq = _rand(ds.V, ds.V, seed=1), _rand(ds.V, ds.V, seed=2)
    out = loss_and_grads(W_ov, W_kq, inputs)
    n = analyze_structure(ds).collocation.next_token
    _, g0 = loss_and_grad_L0(W_ov, E, n)
    h = 1e-6
    for (i, j) in [(0, 1), (2, 3), (4, 4), (1, 5)]:
        step = torch.zeros_like(W_kq)
        step[i, j] = h
        fd = (loss(W_ov, W_kq + step, inputs) - loss(W_ov, W_kq - step, inputs)) / (2 * h)
        if abs(float(out.grad_W_kq[i, j])) > 1e-6:
            assert abs(float(fd) - float(out.grad_W_kq[i, j])) < 1e-6 * abs(float(out.grad_W_kq[i, j]))
        fd0 = (loss_L0(W_ov + step, E, n) - loss_L0(W_ov - step, E, n)) / (2 * h)
        assert abs(float(fd0) - float(g0[i, j])) < 1e-6 * max(abs(float(g0[i, j])), 1e-3)


def _naive_grad_kq(W_ov, W_kq, ds, E):
    """eq. (6) literally, one sample at a time: Σ π X (diag φ - φφ^T) X^T W_ov^T (T - p) x_L^T."""
    G = torch.zeros_like(W_kq)
    pi = ds.pi
    for n in range(ds.N):
        Xn = E[:, ds.input_ids(n)]
        xq = Xn[:, -1]
        phi = torch.softmax(Xn.T @ W_kq @ xq, 0)
        T = torch.softmax(W_ov @ Xn @ phi, 0)
        p = torch.nn.functional.one_hot(ds.y[n], ds.V).to(F64)
        G += pi[n] * torch.outer(Xn @ (torch.diag(phi) - torch.outer(phi, phi)) @ Xn.T @ W_ov.T @ (T - p), xq)
    return G


def test_stable_equals_naive_where_naive_is_accurate():
    ds = generate_samples(7, seed=4)
    E = token_embeddings(ds.V, kind="orthonormal", seed=3)
    W_ov, W_kq = _rand(ds.V, ds.V, seed=8), _rand(ds.V, ds.V, seed=9)
    out = loss_and_grads(W_ov, W_kq, TransformerInputs.from_samples(ds, E))
    naive = _naive_grad_kq(W_ov, W_kq, ds, E)
    assert float((out.grad_W_kq - naive).abs().max()) < 1e-12 * float(naive.abs().max())


def test_attention_backward_is_stable_when_one_weight_is_one():
    """φ = (1 - ε, ε) with ε ≈ 2e-22: c_1 = φ_1 φ_2 (a_1 - a_2) exactly; (diag φ - φφ^T) a loses it entirely."""
    V = 3
    E = token_embeddings(V)
    ds = NTPSamples.from_samples([[0, 1]], [2], vocab=["a", "b", "c"])
    inputs = TransformerInputs.from_samples(ds, E)
    W_kq = torch.zeros(V, V, dtype=F64)
    W_kq[0, 1] = 50.0  # score of key 0 under query 1 is 50, key 1 scores 0
    W_ov = _rand(V, V, seed=0)
    out = loss_and_grads(W_ov, W_kq, inputs)
    _, g = cross_entropy(logits(W_ov, W_kq, inputs), inputs.y)
    a = (W_ov.T @ g[0])[:2]  # a_l = x_l^T W_ov^T g for x_0 = e_0, x_1 = e_1
    phi1phi2 = math.exp(-50.0) / (1 + math.exp(-50.0)) ** 2
    c0 = phi1phi2 * float(a[0] - a[1])
    assert out.grad_W_kq[0, 1] == pytest.approx(c0, rel=1e-12, abs=0)
    assert out.grad_W_kq[1, 1] == pytest.approx(-c0, rel=1e-12, abs=0)
    phi = attention(W_kq, inputs)[0]
    naive = phi * (a - phi @ a)  # (diag φ - φφ^T) a
    assert abs(float(naive[0]) - c0) > 0.5 * abs(c0)  # the naive form is wrong here, so the check above has teeth


def test_cross_entropy_is_accurate_for_confident_logits():
    z = torch.tensor([[60.0, 0.0, 0.0], [0.0, 5.0, 1.0]], dtype=F64)
    y = torch.tensor([0, 0])
    loss_n, g = cross_entropy(z, y)
    assert float(loss_n[0]) == pytest.approx(math.log1p(2 * math.exp(-60.0)), rel=1e-14, abs=0)
    assert float(g[0, 0]) == pytest.approx(-2 * math.exp(-60.0) / (1 + 2 * math.exp(-60.0)), rel=1e-14, abs=0)
    ref = torch.nn.functional.cross_entropy(z, y, reduction="none")
    assert float(loss_n[1]) == pytest.approx(float(ref[1]), rel=1e-14, abs=0)
    assert torch.allclose(g.sum(1), torch.zeros(2, dtype=F64), atol=1e-16)


def test_L0_gradient_matches_autograd_and_skips_undefined_tokens():
    V = 6
    E = token_embeddings(V, kind="unit", d=4, seed=0)
    n = torch.tensor([3, 0, -1, 5, 1, 2])
    W = _rand(V, 4, seed=1).requires_grad_(True)
    tokens = torch.tensor([0, 1, 3, 4, 5])
    ref = torch.nn.functional.cross_entropy((W @ E[:, tokens]).T, n[tokens], reduction="sum")
    (g_ref,) = torch.autograd.grad(ref, [W])
    value, g = loss_and_grad_L0(W.detach(), E, n)
    assert float(value) == pytest.approx(float(ref.detach()), rel=1e-14, abs=0)
    assert torch.allclose(g, g_ref, atol=1e-14)


def test_distinct_loss_equals_mean_over_multiset():
    """C-C1: eq. (1) over distinct samples with π equals the per-sample mean over D_0 (1e-12)."""
    sentences = [["a", "b", "c", "d"], ["b", "c", "d"], ["a", "b", "c", "d"], ["c", "d", "a"], ["d", "a"]]
    ds = NTPSamples.from_sentences(sentences, counts=[1, 2, 1, 3, 1])
    assert ds.N < ds.total
    E = token_embeddings(ds.V, kind="orthonormal", d=6, seed=0)
    W_ov, W_kq = _rand(ds.V, 6, seed=3), _rand(6, 6, seed=4)
    values = []
    for s, c in zip(sentences, [1, 2, 1, 3, 1], strict=True):
        for l in range(1, len(s)):
            one = NTPSamples.from_samples([s[:l]], [s[l]], vocab=ds.vocab)
            values += [float(loss(W_ov, W_kq, TransformerInputs.from_samples(one, E)))] * c
    mean = sum(values) / len(values)
    assert float(loss(W_ov, W_kq, TransformerInputs.from_samples(ds, E))) == pytest.approx(mean, rel=1e-12, abs=0)


def test_batched_padding_equals_one_sample_at_a_time():
    ds = generate_sentences(8, L_max=6, seed=5)
    assert (ds.lengths < ds.L_max).any()
    E = token_embeddings(ds.V)
    W_ov, W_kq = _rand(ds.V, ds.V, seed=0), _rand(ds.V, ds.V, seed=1, scale=3.0)
    out = loss_and_grads(W_ov, W_kq, TransformerInputs.from_samples(ds, E))
    for n in range(ds.N):
        one = TransformerInputs.from_ids([ds.input_ids(n)], torch.ones(1, int(ds.lengths[n]), dtype=torch.bool), E,
                                         y=ds.y[n:n + 1], pi=[1.0])
        ref = loss_and_grads(W_ov, W_kq, one)
        assert float(ref.per_sample[0]) == pytest.approx(float(out.per_sample[n]), rel=1e-13, abs=1e-15)
        assert torch.allclose(ref.attention[0], out.attention[n, : int(ds.lengths[n])], atol=1e-15)
        assert float(out.attention[n, int(ds.lengths[n]):].abs().sum()) == 0.0


def test_original_form_matches_reparameterized():
    """C-C1: four-factor forward (d1 != d2 != d) equals the reparameterized one (1e-12)."""
    ds = generate_samples(6, seed=1)
    d, d1, d2 = 7, 3, 5
    E = token_embeddings(ds.V, kind="unit", d=d, seed=2)
    inputs = TransformerInputs.from_samples(ds, E)
    W_o, W_v, W_k, W_q = _rand(ds.V, d2, seed=1), _rand(d2, d, seed=2), _rand(d, d1, seed=3), _rand(d1, d, seed=4)
    W_ov, W_kq = reparameterize(W_o, W_v, W_k, W_q)
    assert torch.allclose(forward_original(W_o, W_v, W_k, W_q, inputs), forward_reparam(W_ov, W_kq, inputs),
                          atol=1e-12)
    assert torch.allclose(forward_original(*factorize(W_ov, W_kq), inputs), forward_reparam(W_ov, W_kq, inputs),
                          atol=1e-14)
    # chain-rule gradients of the factors against autograd through the four-factor forward
    params = [w.clone().requires_grad_(True) for w in (W_o, W_v, W_k, W_q)]
    probs = forward_original(*params, inputs)
    total = -(inputs.pi @ torch.log(probs.gather(1, inputs.y[:, None])[:, 0]))
    refs = torch.autograd.grad(total, params)
    value, *grads = grads_original(W_o, W_v, W_k, W_q, inputs)
    assert float(value) == pytest.approx(float(total.detach()), rel=1e-12, abs=0)
    for g, r in zip(grads, refs, strict=True):
        assert torch.allclose(g, r, atol=1e-12 * float(r.abs().max()))


def test_lemma4_projection_identity():
    """Lemma 4 of paper C: with W_ov = Δ W_ov*, <∇_{W_kq} L, W'> equals Lemma 4's two-term expression (1e-10)."""
    ds = generate_sentences(7, L_max=5, seed=1)
    n = analyze_structure(ds).collocation.next_token
    E = token_embeddings(ds.V, kind="orthonormal", d=9, seed=4)
    delta = 3.7
    W_ov = delta * wov_star_closed_form(n, E)
    W_kq, W_prime = _rand(9, 9, seed=1), _rand(9, 9, seed=2)
    out = loss_and_grads(W_ov, W_kq, TransformerInputs.from_samples(ds, E))
    lhs = float((out.grad_W_kq * W_prime).sum())
    T = torch.softmax(out.logits, 1)
    rhs = 0.0
    for i in range(ds.N):
        ids = ds.input_ids(i)
        X = E[:, ids]
        phi = out.attention[i, : len(ids)]
        xbar = X @ phi
        proj = [float((X[:, l] - xbar) @ W_prime @ X[:, -1]) for l in range(len(ids))]
        label = int(ds.y[i])
        for l, tok in enumerate(ids):
            if int(n[tok]) == label:  # l in l(n)
                rhs += delta * float(ds.pi[i]) * (float(T[i, label]) - 1) * float(phi[l]) * proj[l]
            else:
                rhs += delta * float(ds.pi[i]) * float(T[i, int(n[tok])]) * float(phi[l]) * proj[l]
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=0)
    assert abs(lhs) > 1e-6


def test_embeddings():
    E = token_embeddings(5, kind="orthonormal", d=8, seed=3)
    assert torch.allclose(E.T @ E, torch.eye(5, dtype=F64), atol=1e-14)
    assert not torch.equal(E, token_embeddings(5, kind="orthonormal", d=8, seed=4))
    assert torch.equal(E, token_embeddings(5, kind="orthonormal", d=8, seed=3))
    U = token_embeddings(5, kind="unit", d=3, seed=0)
    assert torch.allclose(torch.linalg.vector_norm(U, dim=0), torch.ones(5, dtype=F64))
    assert torch.equal(token_embeddings(4), torch.eye(4, dtype=F64))
    with pytest.raises(ConfigError, match="d >= "):
        token_embeddings(5, kind="orthonormal", d=3)
    with pytest.raises(ConfigError, match="unknown embedding"):
        token_embeddings(5, kind="gaussian")


def test_input_validation():
    ds = example1()
    with pytest.raises(DataError, match=r"\(d, \|V\|\)"):
        TransformerInputs.from_samples(ds, torch.eye(3, dtype=F64))
    with pytest.raises(DataError, match="0..3"):
        TransformerInputs.from_ids([[0, 7]], [[True, True]], torch.eye(4, dtype=F64))
    unlabeled = TransformerInputs.from_ids([[0, 3]], [[True, True]], torch.eye(4, dtype=F64))
    assert forward_reparam(torch.zeros(4, 4, dtype=F64), torch.zeros(4, 4, dtype=F64), unlabeled).shape == (1, 4)
    with pytest.raises(DataError, match="labels"):
        loss_and_grads(torch.zeros(4, 4, dtype=F64), torch.zeros(4, 4, dtype=F64), unlabeled)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu():
    ds = generate_sentences(10, L_max=6, seed=2)
    E = token_embeddings(ds.V, kind="orthonormal", seed=0)
    W_ov, W_kq = _rand(ds.V, ds.V, seed=0), _rand(ds.V, ds.V, seed=1)
    cpu = loss_and_grads(W_ov, W_kq, TransformerInputs.from_samples(ds, E))
    gpu = loss_and_grads(W_ov.cuda(), W_kq.cuda(), TransformerInputs.from_samples(ds, E.cuda()))
    assert gpu.grad_W_kq.device.type == "cuda"
    assert torch.allclose(gpu.grad_W_kq.cpu(), cpu.grad_W_kq, atol=1e-13)
    assert torch.allclose(gpu.grad_W_ov.cpu(), cpu.grad_W_ov, atol=1e-13)
    n = analyze_structure(ds).collocation.next_token
    assert torch.allclose(loss_and_grad_L0(W_ov.cuda(), E.cuda(), n.cuda())[1].cpu(), loss_and_grad_L0(W_ov, E, n)[1])
