"""Algorithm 1's training problems (paper C): gradients vs autograd of naive losses, NGD steps, metrics vs naive
references, batched runs, resume == uninterrupted, prediction, the Theorem-3 input builder, configs."""

import math
import signal

import numpy as np
import pytest
import torch

from ntpbias.data.generators import generate_samples, generate_sentences
from ntpbias.data.sentences import NTPSamples, example1
from ntpbias.data.structure import analyze_structure
from ntpbias.errors import DataError
from ntpbias.experiments import transformer as ex
from ntpbias.geometry.transformer import optimum as th
from ntpbias.metrics import DEFINITIONS
from ntpbias.models.transformer import TransformerInputs, forward_reparam, token_embeddings
from ntpbias.training.config import OptimizerConfig, TrainConfig, paper_step_sizes
from ntpbias.training.optimizers import Optimizer
from ntpbias.training.transformer import (
    JointProblem,
    Stage1Problem,
    Stage2Problem,
    TransformerTask,
    predict,
    train_two_stage,
)

F64 = torch.float64


def _naive_L0(W_ov, E, n):
    """Σ_x -log softmax(W_ov x)[n(x)] over tokens with n(x) defined (test-only loop)."""
    return sum(-torch.log_softmax(W_ov @ E[:, x], 0)[n[x]] for x in range(E.shape[1]) if n[x] >= 0)


def _naive_loss(W_ov, W_kq, ds, E):
    """eq. (1) by a loop over samples: Σ_n π_n CE(W_ov X φ(X^T W_kq x_L), label) (test-only)."""
    total = 0.0
    for i in range(ds.N):
        X = E[:, ds.input_ids(i)]
        phi = torch.softmax(X.T @ W_kq @ X[:, -1], 0)
        total = total + ds.pi[i] * -torch.log_softmax(W_ov @ X @ phi, 0)[ds.y[i]]
    return total


def _rand(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.fixture(scope="module")
def random_task():
    ds = generate_samples(7, seed=3)
    return TransformerTask.build(ds, token_embeddings(7, kind="orthonormal", d=9, seed=2))


# ---------------------------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("B", [1, 3])
def test_stage1_gradient_matches_autograd(random_task, B):
    t = random_task
    W = _rand(B, t.V, t.d, seed=B)
    loss, grads = Stage1Problem(t).loss_and_grad({"W_ov": W}, 0, [])
    for b in range(B):
        Wb = W[b].clone().requires_grad_(True)
        ref = _naive_L0(Wb, t.E, t.next_token)
        (g,) = torch.autograd.grad(ref, Wb)
        assert float(loss[b]) == pytest.approx(float(ref.detach()), rel=1e-12)
        assert torch.allclose(grads["W_ov"][b], g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("B", [1, 2])
def test_stage2_gradient_matches_autograd(random_task, B):
    t = random_task
    W_ov, W_kq = _rand(B, t.V, t.d, seed=5, scale=2.0), _rand(B, t.d, t.d, seed=6, scale=2.0)
    loss, grads = Stage2Problem(t, W_ov).loss_and_grad({"W_kq": W_kq}, 0, [])
    for b in range(B):
        Wb = W_kq[b].clone().requires_grad_(True)
        ref = _naive_loss(W_ov[b], Wb, t.samples, t.E)
        (g,) = torch.autograd.grad(ref, Wb)
        assert float(loss[b]) == pytest.approx(float(ref.detach()), rel=1e-12)
        assert torch.allclose(grads["W_kq"][b], g, rtol=1e-9, atol=1e-12)


def test_joint_gradient_matches_autograd(random_task):
    t = random_task
    W_ov = _rand(2, t.V, t.d, seed=7).requires_grad_(False)
    W_kq = _rand(2, t.d, t.d, seed=8)
    loss, grads = JointProblem(t).loss_and_grad({"W_ov": W_ov, "W_kq": W_kq}, 0, [])
    for b in range(2):
        a, k = W_ov[b].clone().requires_grad_(True), W_kq[b].clone().requires_grad_(True)
        ga, gk = torch.autograd.grad(_naive_loss(a, k, t.samples, t.E), (a, k))
        assert torch.allclose(grads["W_ov"][b], ga, rtol=1e-9, atol=1e-12)
        assert torch.allclose(grads["W_kq"][b], gk, rtol=1e-9, atol=1e-12)


def test_joint_first_step_moves_W_ov_only(random_task):
    """From zero, ∇_{W_kq} L = 0 (uniform attention is a stationary point in W_kq while W_ov = 0)."""
    prob = JointProblem(random_task)
    p0 = prob.init_params([0])
    loss, g = prob.loss_and_grad(p0, 0, [])
    assert float(g["W_kq"].abs().max()) == 0.0 and float(g["W_ov"].abs().max()) > 0
    p1 = Optimizer(OptimizerConfig(name="ngd", lr=0.3)).step(p0, g, loss)
    assert float(torch.linalg.vector_norm(p1["W_ov"])) == pytest.approx(0.3, rel=1e-14)


def test_ngd_steps_have_length_eta(random_task):
    """Every step of eq. (7) / eq. (10) moves the iterate by exactly η in Frobenius norm."""
    t = random_task
    opt = Optimizer(OptimizerConfig(name="ngd", lr=0.07))
    prob = Stage2Problem(t, _rand(t.V, t.d, seed=1, scale=3.0))
    params = prob.init_params([0])
    for step in range(5):
        loss, g = prob.loss_and_grad(params, step, [])
        new = opt.step(params, g, loss)
        assert float(torch.linalg.vector_norm(new["W_kq"] - params["W_kq"])) == pytest.approx(0.07, rel=1e-13)
        assert torch.allclose(new["W_kq"] - params["W_kq"], -0.07 * g["W_kq"] / torch.linalg.vector_norm(g["W_kq"]))
        params = new


def test_batched_runs_equal_single_runs(random_task):
    """B runs through vmap give the numbers of B separate B=1 problems (loss, gradient, every metric)."""
    t = random_task
    W_ov, W_kq = _rand(2, t.V, t.d, seed=11), _rand(2, t.d, t.d, seed=12)
    both = Stage2Problem(t, W_ov)
    loss, g = both.loss_and_grad({"W_kq": W_kq}, 0, [])
    m = both.metrics({"W_kq": W_kq})
    for b in range(2):
        one = Stage2Problem(t, W_ov[b])
        lb, gb = one.loss_and_grad({"W_kq": W_kq[b:b + 1]}, 0, [])
        assert torch.allclose(loss[b:b + 1], lb, rtol=1e-13) and torch.allclose(g["W_kq"][b], gb["W_kq"][0])
        mb = one.metrics({"W_kq": W_kq[b:b + 1]})
        assert set(mb) == set(m)
        for k in m:
            assert float(m[k][b]) == pytest.approx(float(mb[k][0]), rel=1e-10, abs=1e-14), k


# ---------------------------------------------------------------------------------------------- metrics
def test_stage1_metrics_against_naive(random_task):
    t = random_task
    W = _rand(2, t.V, t.d, seed=21)
    m = Stage1Problem(t).metrics({"W_ov": W})
    for b in range(2):
        gaps = [float((W[b, t.next_token[x]] - W[b, v]) @ t.E[:, x])
                for x in range(t.V) if t.next_token[x] >= 0 for v in range(t.V) if v != t.next_token[x]]
        per_x = {}
        for x in range(t.V):
            g = [float((W[b, t.next_token[x]] - W[b, v]) @ t.E[:, x]) for v in range(t.V) if v != t.next_token[x]]
            per_x[x] = max(g) - min(g)
        assert float(m["margin_ov"][b]) == pytest.approx(min(gaps), rel=1e-12)
        assert float(m["margin_spread_ov"][b]) == pytest.approx(max(per_x.values()), rel=1e-12)
        assert float(m["norm_ov"][b]) == pytest.approx(float(torch.linalg.vector_norm(W[b])), rel=1e-14)
        Ws = t.W_ov_star.W
        cos = float((W[b] * Ws).sum() / (torch.linalg.vector_norm(W[b]) * torch.linalg.vector_norm(Ws)))
        assert float(m["cos_ov"][b]) == pytest.approx(cos, rel=1e-12)
    zero = Stage1Problem(t).metrics({"W_ov": torch.zeros(1, t.V, t.d, dtype=F64)})
    assert math.isnan(float(zero["cos_ov"][0]))  # the cosine is undefined at W = 0


def test_stage2_metrics_against_naive(random_task):
    t = random_task
    ds, st, E = t.samples, t.structure, t.E
    W_ov, W_kq = _rand(t.V, t.d, seed=31, scale=2.0), _rand(1, t.d, t.d, seed=32, scale=2.0)
    m = Stage2Problem(t, W_ov).metrics({"W_kq": W_kq})
    W = W_kq[0]
    phi_plus, correct = [], []
    for i in range(ds.N):
        ids = ds.input_ids(i)
        X = E[:, ids]
        phi = torch.softmax(X.T @ W @ X[:, -1], 0)
        nxt = st.collocation.next_token
        phi_plus.append(float(sum(phi[l] for l, tok in enumerate(ids) if nxt[tok] == ds.y[i])))
        correct.append(int((W_ov @ X @ phi).argmax()) == int(ds.y[i]))
    pi = ds.pi.numpy()
    assert float(m["attn_opt_min"][0]) == pytest.approx(min(phi_plus), rel=1e-12)
    assert float(m["attn_opt_mean"][0]) == pytest.approx(float(np.dot(pi, phi_plus)), rel=1e-12)
    assert float(m["accuracy"][0]) == pytest.approx(float(np.dot(pi, correct)), rel=1e-12)
    margins = [float((E[:, u] - E[:, v]) @ W @ E[:, q]) for q, u, v in st.relations.tolist()]
    assert float(m["margin_kq"][0]) == pytest.approx(min(margins), rel=1e-12)
    Wr = W.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(_naive_loss(W_ov, Wr, ds, E), Wr)
    Ws = t.W_kq_star.W

    def cos(a, b):
        return float((a * b).sum() / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b)))

    assert float(m["cos_neg_grad_kq"][0]) == pytest.approx(cos(W, -g), rel=1e-10)
    assert float(m["cos_grad_kq_star"][0]) == pytest.approx(cos(g, Ws), rel=1e-10)
    assert float(m["cos_kq"][0]) == pytest.approx(cos(W, Ws), rel=1e-12)
    assert float(m["loss_excess"][0]) == pytest.approx(float(m["loss"][0] - m["loss_floor"][0]), rel=1e-12)


def test_loss_floor_is_the_limit_of_full_attention_and_the_closed_form():
    """L at full attention on the optimal tokens: (a) = L(W_ov, c W_kq*) as c -> ∞, (b) = log(1 + (|V|-1)e^{-Δ})
    for stage 1's equal margins Δ under Assumption 2 (docs/paper-c-transformer.md#objects, object 4), down to
    1e-22 (stable CE)."""
    ds = generate_sentences(8, L_max=5, seed=4)
    E = token_embeddings(8, kind="orthonormal", seed=3)
    task = TransformerTask.build(ds, E)
    eta0 = paper_step_sizes(8)[0]
    for T, c in ((300, 400.0), (2000, 4000.0)):
        W_ov = th.stage1_exact_W(T, eta0=eta0, next_token=task.next_token, E=E)
        floor = float(task.loss_floor(W_ov[None])[0])
        closed = float(th.stage2_loss_infimum(th.stage1_exact(T, eta0=eta0, V=8).margin, 8))
        assert floor == pytest.approx(closed, rel=1e-10)
        far = float(Stage2Problem(task, W_ov).loss_and_grad({"W_kq": c * task.W_kq_star.W[None]}, 0, [])[0][0])
        assert far == pytest.approx(floor, rel=1e-6)
    assert floor < 1e-20


def test_every_metric_is_defined(random_task):
    t = random_task
    names = set(Stage1Problem(t).metrics(Stage1Problem(t).init_params([0])))
    names |= set(Stage2Problem(t, _rand(t.V, t.d)).metrics({"W_kq": _rand(1, t.d, t.d)}))
    names |= set(JointProblem(t).metrics(JointProblem(t).init_params([0])))
    assert names <= set(DEFINITIONS), names - set(DEFINITIONS)


def test_lecun_init_is_seeded_per_run(random_task):
    p = Stage1Problem(random_task, init="lecun_normal").init_params([4, 5])
    q = Stage1Problem(random_task, init="lecun_normal").init_params([5])
    assert torch.equal(p["W_ov"][1], q["W_ov"][0]) and not torch.equal(p["W_ov"][0], p["W_ov"][1])


# ---------------------------------------------------------------------------------------------- resume
def _arrays(histories):
    return {(h.run, k): h[k] for h in histories for k in h.names}, [h.run for h in histories]


def test_resume_equals_uninterrupted(tmp_path, monkeypatch):
    task = TransformerTask.build(example1(), token_embeddings(4))
    cfg = TrainConfig(steps=60, log_points=0, log_every=1, checkpoint_every=10)
    kw = {"eta0": 0.1, "eta": 0.025, "stage1": cfg, "stage2": cfg, "seeds": [0]}
    full = train_two_stage(task, **kw)
    original = Stage2Problem.loss_grad_metrics  # a logged step's gradient (every step here) comes from it

    def interrupted(self, params, step, generators):
        if step == 25:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # SIGTERM: step 25 ends, then it stops
        return original(self, params, step, generators)

    monkeypatch.setattr(Stage2Problem, "loss_grad_metrics", interrupted)
    part = train_two_stage(task, checkpoint_dir=tmp_path, **kw)
    assert part.stage2.status == "interrupted" and part.stage2.step == 26
    monkeypatch.setattr(Stage2Problem, "loss_grad_metrics", original)
    resumed = train_two_stage(task, checkpoint_dir=tmp_path, resume=True, **kw)
    assert resumed.status == "completed"
    assert torch.equal(resumed.W_kq, full.W_kq) and torch.equal(resumed.W_ov, full.W_ov)
    (a, runs_a), (b, runs_b) = _arrays(full.histories), _arrays(resumed.histories)
    assert runs_a == runs_b and a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ---------------------------------------------------------------------------------------------- prediction
def test_predict_matches_the_model(random_task):
    t = random_task
    W_ov, W_kq = _rand(t.V, t.d, seed=41), _rand(t.d, t.d, seed=42)
    ds = t.samples
    pred, prob, probs, attn = predict(W_ov, W_kq, t.E, ds.X, ds.mask)
    ref = forward_reparam(W_ov, W_kq, TransformerInputs.from_samples(ds, t.E))
    assert torch.allclose(probs, ref, rtol=1e-13) and torch.equal(pred, ref.argmax(1))
    assert torch.allclose(prob, ref.max(1).values) and torch.allclose(attn.sum(1), torch.ones(ds.N, dtype=F64))
    assert bool((attn[~ds.mask] == 0).all())


def test_theorem3_inputs_on_example1():
    """Under Example 1 only query P is non-optimal under its own order, with M_P = {S, V}, O_P = {O}: the inputs
    are SP -> V, VP -> O and O with S or V (either order) before P -> P (Example 2, Sec. 6 of paper C; C-C8)."""
    st = analyze_structure(example1())
    unseen = ex.theorem3_inputs(st, seed=0)
    s = st.samples
    got = {(s.text(unseen.ids[i][unseen.mask[i]]).replace(" ", ""), s.vocab[int(unseen.expected[i])])
           for i in range(unseen.M)}
    canon = {(x if x in ("SP", "VP") else "O" + x.replace("O", "")[:-1] + "P", y) for x, y in got}
    assert canon == {("SP", "V"), ("VP", "O"), ("OSP", "P"), ("OVP", "P")}
    assert len(got) == unseen.M == 4


def test_theorem3_inputs_on_random_data_are_unseen_and_well_formed():
    ds = generate_sentences(12, L_max=6, seed=7)
    st = analyze_structure(ds)
    unseen = ex.theorem3_inputs(st, seed=1)
    assert unseen.M > 0
    seen = {tuple(ds.input_ids(i)) for i in range(ds.N)}
    n = st.collocation.next_token
    for i in range(unseen.M):
        ids = unseen.ids[i][unseen.mask[i]].tolist()
        q, focus = ids[-1], int(unseen.focus[i])
        tc = st.token_classes(q)
        assert tuple(ids) not in seen and len(set(ids)) == len(ids)
        assert q in tc.non_optimal and int(unseen.expected[i]) == int(n[focus])
        body = set(ids[:-1])
        if unseen.kind[i] == ex.KIND_NC:
            assert focus in tc.non_comparable and body - {focus} <= set(tc.non_optimal)
        else:
            assert focus in tc.optimal and len(body - {focus}) == 1 and (body - {focus}) <= set(tc.non_comparable)


# ---------------------------------------------------------------------------------------------- configs
def test_config_defaults_are_the_papers():
    cfg = ex.TransformerConfig()
    assert (cfg.stage_steps, cfg.model.embedding, cfg.model.init, cfg.data.V) == ((900, 900), "onehot", "zeros", 20)
    assert cfg.step_sizes(20) == pytest.approx((0.2 / math.sqrt(20), 0.05 / math.sqrt(20)), rel=1e-15)
    assert ex.TransformerConfig(stage1=ex.StageConfig(lr=0.3)).step_sizes(4) == pytest.approx((0.3, 0.025))
    # train.steps sets both stages; a stage's own steps override it
    both = ex.TransformerConfig(train=ex.TransformerTrainConfig(steps=50), stage2=ex.Stage2Config(steps=7))
    assert both.stage_steps == (50, 7) and both.stage2_steps(2080) == 7
    # stage2.past_t0 runs stage 2 to a multiple of Lemma 7's t_0 (Example 1: t_0 = 2080)
    assert ex.TransformerConfig(stage2=ex.Stage2Config(steps=7, past_t0=6)).stage2_steps(2080) == 12480


@pytest.mark.parametrize("kwargs", [{"model": {"algorithm": "three-stage"}}, {"model": {"embedding": "random"}},
                                    {"model": {"init": "ones"}}, {"stage2": {"steps": -1}}, {"seeds": 0},
                                    {"stage2": {"lr": -1.0}}, {"dtype": "float32"}, {"steps1": 5},
                                    {"stage2": {"past_t0": -1.0}},
                                    {"model": {"algorithm": "joint"}, "stage2": {"past_t0": 3.0}}])
def test_bad_configs_are_rejected(kwargs):
    from ntpbias.config import from_dict

    with pytest.raises(ValueError):
        from_dict(ex.TransformerConfig, kwargs)
    with pytest.raises(ValueError):
        ex.TransformerDataConfig(source="file")


def test_violating_data_is_refused_unless_allowed(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("a b c\na b d\nb c\nc d\nd a\n")
    data = ex.TransformerDataConfig(source="file", path=str(path))
    with pytest.raises(DataError, match="realizable.*allow_violations"):
        ex.load_dataset(data, 0)
    samples, st = ex.load_dataset(ex.TransformerDataConfig(source="file", path=str(path), allow_violations=True), 0)
    assert isinstance(samples, NTPSamples) and not st.assumptions_hold
