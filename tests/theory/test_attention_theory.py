"""Numerical checks of paper B's theory (B-C1 to B-C14 of docs/paper-b-attention.md#theory-checks), stage-2 library."""

import math

import numpy as np
import pytest
import scipy.optimize
import torch

from ntpbias.data.tokens import (
    KLevelLaw,
    TokenSequences,
    power_level_sizes,
    relevant_tokens,
    sample_assumption1,
    sample_k_level,
    token_statistics,
)
from ntpbias.errors import DataError
from ntpbias.geometry.attention import selection as gs
from ntpbias.geometry.attention import stage_one as ga
from ntpbias.models.attention import OneLayerAttention
from ntpbias.training.attention import train_stage_two

# the "A1-base" stage-2 configuration of docs/paper-b-attention.md#experiments-and-figures (n=16, T=6, 4+4 relevant,
# 12 irrelevant)
A1_D, A1_ETA0 = 1024, 200.0


@pytest.fixture(scope="module")
def a1_runs():
    """Stage 1 and a normalized-GD stage 2 (h = 0.5, 4000 steps, on the training engine) on A1-base for two seeds
    (B-C10). Yields (ds, stage one, final p, history)."""
    runs = []
    for seed in (0, 1):
        ds = sample_assumption1(seed=seed)
        st = ga.stage_one(ds, d=A1_D, eta0=A1_ETA0, seed=seed)
        history = train_stage_two(st, ds, method="ngd", lr=0.5, steps=4000)
        runs.append((ds, st, history.params["p"][0], history))
    return runs


def _random_problem(seed=0, n=16, T=8, S=20, d=32, p_scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randint(0, S, (n, T), generator=gen)
    y = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    ds = TokenSequences.from_arrays(X, y, num_tokens=S)
    E = torch.randn(S, d, generator=gen, dtype=torch.float64)
    p = p_scale * torch.randn(d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    v = torch.randn(d, generator=gen, dtype=torch.float64)
    return ds, E, p, v / v.norm()


def _double_sum_grad_p(E, p, v, ds):
    """∇_p L by the pairwise form of Lemma A.1 of paper B: -Ê[y g Σ_i Σ_{j≠i} q_i q_j (E_{x_i} - E_{x_j}) u_i]."""
    a = (E @ p)[ds.X].masked_fill(~ds.mask, -math.inf)
    q = torch.softmax(a, 1)
    u = (E @ v)[ds.X]
    EX = E[ds.X]  # (n, T, d)
    pair = q[:, :, None] * q[:, None, :] * (u[:, :, None] - u[:, None, :])  # q_i q_j (u_i - u_j), antisymmetric
    f = ga.readout(E, p, v, ds)
    g = torch.sigmoid(-ds.y * f)
    # Σ_i Σ_j q_i q_j (E_i - E_j) u_i = Σ_{i,j} q_i q_j (u_i - u_j) E_i   (symmetrise over (i, j))
    inner = torch.einsum("kij,kid->kd", pair, EX)
    return -((ds.y * g)[:, None] * inner).mean(0)


# ----------------------------------------------------------------------------------------------------------------
# Gradients: Lemma A.2 (N1), stable weights, Lemma 4.4's identity
# ----------------------------------------------------------------------------------------------------------------


def test_n1_lemma_a2_directional_derivative():
    ds, E, p, v = _random_problem(seed=1)
    p_hat = torch.randn(E.shape[1], generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    _, grad = ga.loss_and_grad_p(E, p, v, ds)
    lhs = float(-p_hat @ grad)
    # double loop of Lemma A.2: Ê[g Σ_i Σ_{j>i} (â_i - â_j) q_i q_j (γ_i - γ_j)], γ_i = y E_{x_i}^T v
    f = ga.readout(E, p, v, ds)
    total = 0.0
    for k in range(ds.n):
        xs = ds.X[k].tolist()
        a = torch.tensor([float(p @ E[s]) for s in xs], dtype=torch.float64)
        q = torch.softmax(a, 0).tolist()
        y = float(ds.y[k])
        g = 1.0 / (1.0 + math.exp(y * float(f[k])))
        acc = 0.0
        for i in range(len(xs)):
            for j in range(i + 1, len(xs)):
                ah_i, ah_j = float(p_hat @ E[xs[i]]), float(p_hat @ E[xs[j]])
                ga_i, ga_j = y * float(E[xs[i]] @ v), y * float(E[xs[j]] @ v)
                acc += (ah_i - ah_j) * q[i] * q[j] * (ga_i - ga_j)
        total += g * acc
    rhs = total / ds.n
    assert abs(lhs - rhs) <= 1e-10 * abs(rhs)


def test_stable_weights_keep_full_relative_accuracy_at_large_norm(a1_runs):
    """At ||p|| ≈ 800 (selected q ≈ 1, gradient ~1e-150) the library gradient matches the cancellation-free
    pairwise sum to 1e-10 relative, while the naive q_i (u_i - f) form is off by orders of magnitude (B-C3)."""
    ds, st, p_final, _ = a1_runs[0]
    p = p_final * 0.6  # inside the range where the tails have not underflowed
    _, grad = ga.loss_and_grad_p(st.E1, p, st.v, ds)
    ref = _double_sum_grad_p(st.E1, p, st.v, ds)
    assert float(ref.norm()) > 0
    assert float((grad - ref).norm() / ref.norm()) < 1e-10
    # the torch module's autograd uses the same stable backward
    model = OneLayerAttention(ds.num_tokens, st.E1.shape[1]).load_params(st.E1, p, st.v)
    grad_autograd = torch.autograd.grad(model.loss(ds), model.p)[0]
    assert float((grad_autograd - ref).norm() / ref.norm()) < 1e-10
    # the naive weights, for contrast
    a = (st.E1 @ p)[ds.X]
    q = torch.softmax(a, 1)
    u = (st.E1 @ st.v)[ds.X]
    f = (q * u).sum(1, keepdim=True)
    g = torch.sigmoid(-ds.y * f[:, 0])
    c = (ds.y * g)[:, None] * q * (u - f) / ds.n
    naive = -(torch.zeros(ds.num_tokens, dtype=torch.float64).index_add_(0, ds.X.reshape(-1), c.reshape(-1)) @ st.E1)
    assert float((naive - ref).norm() / ref.norm()) > 1e-3


def test_lemma44_all_token_direction_has_zero_directional_derivative():
    """Lemma 4.4: if p̂^T E_{x_i} is constant within every sequence, -p̂^T ∇_p L(E, p) = 0 for every p."""
    ds, E, _, v = _random_problem(seed=2, d=64)
    p_hat = torch.linalg.lstsq(E, torch.ones(E.shape[0], 1, dtype=torch.float64)).solution[:, 0]  # E p̂ = 1
    assert torch.allclose(E @ p_hat, torch.ones(E.shape[0], dtype=torch.float64), atol=1e-12)
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        p = 3 * torch.randn(E.shape[1], generator=gen, dtype=torch.float64) / 8
        _, grad = ga.loss_and_grad_p(E, p, v, ds)
        assert abs(float(p_hat @ grad)) < 1e-14 * float(p_hat.norm() * grad.norm()) + 1e-300


# ----------------------------------------------------------------------------------------------------------------
# Stage 1: N2-N5
# ----------------------------------------------------------------------------------------------------------------


def test_n2_initialisation_event():
    """Event (22) with |S| = 20, d = 1024, δ = 0.01 (bound 0.144) holds in (at least) 1-δ of the seeds."""
    results = [ga.init_event(*ga.theory_init(20, 1024, seed=s), delta=0.01) for s in range(100)]
    assert results[0].bound == pytest.approx(math.sqrt(2 * math.log(400 / 0.01) / 1024))
    assert results[0].bound == pytest.approx(0.144, abs=5e-4)
    assert sum(not r.holds for r in results) <= 1


def test_n3_lemma41_one_step_on_k_level_data():
    """Lemma 4.1 on the small K-level data of N3: error under 11 η₀ d^{-1/4}, decreasing ~d^{-1/2}, and
    <E¹_s - E⁰_s, v> proportional to α_s with slope η₀/2."""
    law = KLevelLaw(irrelevant_size=64, level_sizes=power_level_sizes(4, offset=2), deltas=(0.4, 0.3, 0.2, 0.05),
                    delta_tilde=0.3)
    ds = sample_k_level(law, n=512, T=32, seed=0)
    assert ds.num_tokens == 140
    dims = (256, 1024, 4096, 16384)
    for eta0 in (1.0, 100.0):
        errors = []
        for d in dims:
            st = ga.stage_one(ds, d=d, eta0=eta0, seed=1)
            assert st.within_bound and st.max_error <= 11 * eta0 * d ** -0.25
            assert st.correlation >= 0.995
            assert 0.97 <= st.slope_ratio <= 1.03
            errors.append(st.max_error)
        slope = np.polyfit(np.log(dims), np.log(errors), 1)[0]
        assert -0.75 <= slope <= -0.3, (errors, slope)


@pytest.mark.parametrize("eta0", [1.0, 100.0])
def test_n4_n5_output_after_step_one_and_lemma_b1(eta0):
    ds = sample_assumption1(seed=0)
    st = ga.stage_one(ds, d=A1_D, eta0=eta0, seed=0)
    yf = ds.y * ga.readout(st.E1, st.p1, st.v, ds)
    assert float((yf - st.predicted_margins(ds)).abs().max()) < 0.1  # N4
    assert st.loss1 < st.loss0
    assert float(torch.linalg.vector_norm(st.E1, dim=1).max()) <= 2 * (1 + 2 * eta0)  # N5 (Lemma B.1)
    assert float(st.p1.norm()) <= 2 + 11 * eta0 * A1_D ** -0.25
    # the independent leading-order prediction: (η₀/(2T)) Σ_i y α_{x_i}
    alpha = token_statistics(ds).alpha
    pred = eta0 / (2 * ds.T) * (ds.y[:, None] * alpha[ds.X]).sum(1)
    assert torch.allclose(st.predicted_margins(ds), pred, atol=1e-15)


def test_n6_lemma_c1_construction():
    """p̂ ⊥ span(v, p⁰) with E⁰ p̂ = e_{s+}; E¹ p̂ = e_{s+}; -p̂^T ∇_p L(E¹, p) > 0 for random ||p|| <= 3."""
    ds = sample_assumption1(seed=0)
    st = ga.stage_one(ds, d=A1_D, eta0=A1_ETA0, seed=0)
    s_plus = 0  # completely positive
    A = torch.cat([st.E0, st.v[None], st.p0[None]])
    rhs = torch.zeros(A.shape[0], dtype=torch.float64)
    rhs[s_plus] = 1.0
    p_hat = torch.linalg.lstsq(A, rhs[:, None]).solution[:, 0]
    e = torch.zeros(ds.num_tokens, dtype=torch.float64)
    e[s_plus] = 1.0
    assert float((st.E1 @ p_hat - e).abs().max()) < 1e-12
    basis = torch.linalg.qr(torch.stack([st.p0, st.v], 1)).Q
    diff = st.E1 - st.E0
    assert float((diff - diff @ basis @ basis.T).abs().max()) < 1e-12
    gen = torch.Generator().manual_seed(0)
    worst = math.inf
    for _ in range(300):
        p = torch.randn(A1_D, generator=gen, dtype=torch.float64)
        p = p / p.norm() * 3 * float(torch.rand(1, generator=gen))
        _, grad = ga.loss_and_grad_p(st.E1, p, st.v, ds)
        worst = min(worst, float(-p_hat @ grad))
    assert worst > 0


def test_n7_plain_gd_diverges_with_monotone_loss():
    ds = sample_assumption1(seed=0)
    st = ga.stage_one(ds, d=A1_D, eta0=A1_ETA0, seed=0)
    history = train_stage_two(st, ds, method="gd", lr=1.0, steps=10_000, log_points=0, log_every=1)
    assert max(history.max_loss_increase) <= 1e-15  # non-increasing at every step
    steps, norm = history.steps, history.seed_column("p_norm", 0)
    assert steps.tolist() == list(range(10_001))
    loss, grad_norm = history.seed_column("loss", 0), history.seed_column("grad_norm", 0)
    assert np.all(np.diff(loss) <= 1e-15)  # the logged losses agree
    assert int((norm[1:] < norm[:-1]).sum()) <= 3  # increasing after a short transient
    assert float(norm[-1]) > 10 * float(norm[0])
    assert float(norm[10_000] - norm[1_000]) > 0.5 * float(norm[1_000] - norm[100])  # ≈ log t growth
    assert float(grad_norm[-1]) < 1e-2 * float(grad_norm[100])
    floor = gs.selection_loss_floor(st.E1, st.v, ds)
    assert 0 < float(loss[-1]) - floor < 1e-3


# ----------------------------------------------------------------------------------------------------------------
# Stage 2: N8-N11
# ----------------------------------------------------------------------------------------------------------------


def test_n8_selection_and_max_margin_direction(a1_runs):
    for ds, st, p, history in a1_runs:
        assert history.status == "completed"
        assert history.last("grad_norm").max() < 1e-200  # the gradient reached the floor: the iterate froze
        sel = gs.important_selection(st.E1, p, ds)
        assert sel.all_relevant_selected and sel.all_only_relevant and sel.covers_important
        imp = gs.important_svm(st.E1, ds)
        assert imp.status == "optimal" and imp.certified
        cos = float(p @ imp.p_hat / (p.norm() * imp.norm))
        assert cos >= 0.9999
        dc = gs.directional_convergence(st.E1, p, ds)
        assert dc.cosine == pytest.approx(cos, abs=1e-12)  # its own selection is the important-only one
        assert dc.normalized_margin == pytest.approx(imp.margin, rel=0.01)
        assert dc.normalized_margin <= imp.margin + 1e-12
        assert history.last("loss")[-1] == pytest.approx(gs.selection_loss_floor(st.E1, st.v, ds), rel=1e-9)


def test_directional_convergence_can_fail(a1_runs):
    """The same check at the start of stage 2 (p¹) is far from its max-margin direction."""
    ds, st, _, _ = a1_runs[0]
    dc = gs.directional_convergence(st.E1, st.p1, ds)
    assert dc.svm.feasible and dc.cosine < 0.5
    assert not gs.important_selection(st.E1, st.p1, ds).all_relevant_selected


def test_n9_one_irrelevant_token():
    for seed in (0, 1):
        ds = sample_assumption1(n_irr=1, seed=seed)
        st = ga.stage_one(ds, d=16384, eta0=A1_ETA0, seed=seed)
        p = train_stage_two(st, ds).params["p"][0]
        assert gs.important_selection(st.E1, p, ds).all_only_relevant
        limit = gs.one_irrelevant_limit(st.E1, ds)
        assert limit.certified
        assert float(p @ limit.p_hat / (p.norm() * limit.norm)) >= 0.9999
    with pytest.raises(DataError, match="exactly one irrelevant"):
        gs.one_irrelevant_limit(ga.theory_init(20, 64)[0], sample_assumption1(seed=0))


def test_n10_lemma45_gap_condition(a1_runs):
    ds, st, _, _ = a1_runs[0]
    gap = gs.lemma45_gap(st.E1, ds)
    assert gap.mu > 0  # ||p̂|| <= (1 - μ)||p̂'||, μ > 0 (the corrected direction)
    s_star = relevant_tokens(ds)
    # infeasible alternatives, derived independently: u also occurs in another sequence with the same s*
    for (k, u), norm in zip(gap.alternatives.tolist(), gap.alternative_norms.tolist(), strict=True):
        other = (s_star == s_star[k]) & (ds.X == u).any(1)
        other[k] = False
        assert math.isinf(norm) == bool(other.any())
    assert 0 < gap.n_infeasible < len(gap.alternatives)


def test_lemma45_gap_samples_selections_with_several_irrelevant_tokens(a1_runs):
    """The lemma quantifies over every selection adding irrelevant tokens: random multi-token ones are solved too,
    and none has a smaller norm than p̂ (the lemma's conclusion on this data); the count of all alternatives is
    computed independently."""
    ds, st, _, _ = a1_runs[0]
    gap = gs.lemma45_gap(st.E1, ds, samples=30, seed=1)
    assert len(gap.sampled_norms) == 30 and gap.n_checked == len(gap.alternatives) + 30
    assert (gap.sampled_norms >= gap.norm).all() and gap.mu > 0
    s_star = relevant_tokens(ds)
    per_sequence = [len({int(t) for t in ds.X[k, ds.mask[k]].tolist()} - {int(s_star[k])}) for k in range(ds.n)]
    assert gap.n_possible == 2.0 ** sum(per_sequence) - 1  # every non-empty choice of irrelevant tokens
    again = gs.lemma45_gap(st.E1, ds, samples=30, seed=1)
    assert torch.equal(again.sampled_norms, gap.sampled_norms)  # seeded


def _slsqp_selection(E, ds, selected):
    """(12) solved independently: all (s, s') pairs and all tie pairs, p = E^T c, scipy SLSQP."""
    En = E.numpy()
    G = En @ En.T
    ineq, eq = set(), set()
    for k in range(ds.n):
        toks = ds.X[k].tolist()
        sel = {t for t, m in zip(toks, selected[k].tolist(), strict=True) if m}
        rest = set(toks) - sel
        ineq |= {(s, r) for s in sel for r in rest}
        sel = sorted(sel)
        eq |= {(sel[0], s) for s in sel[1:]}
    Ain = np.array([G[s] - G[r] for s, r in sorted(ineq)])
    cons = [{"type": "ineq", "fun": lambda c: Ain @ c - 1, "jac": lambda c: Ain}]
    if eq:
        Aeq = np.array([G[s] - G[r] for s, r in sorted(eq)])
        cons.append({"type": "eq", "fun": lambda c: Aeq @ c, "jac": lambda c: Aeq})
    x0 = np.linalg.lstsq(Ain, np.full(len(Ain), 2.0), rcond=None)[0]
    res = scipy.optimize.minimize(lambda c: 0.5 * c @ G @ c, x0, jac=lambda c: G @ c, constraints=cons,
                                  method="SLSQP", options={"ftol": 1e-16, "maxiter": 2000})
    return torch.from_numpy(En.T @ res.x)


def test_n11_qp_sanity_with_an_independent_solver(a1_runs):
    ds, st, _, _ = a1_runs[0]
    s_star = relevant_tokens(ds)
    base = (ds.X == s_star[:, None]) & ds.mask
    # tie with s*_X one irrelevant u of sequence 0 that no other sequence with the same s* contains (else (12)
    # is infeasible, see N10)
    twins = (s_star == s_star[0]) & (torch.arange(ds.n) != 0)
    u = next(t for t in ds.X[0][~base[0]].tolist() if not bool((ds.X[twins] == t).any()))
    tied = base.clone()
    tied[0] |= ds.X[0] == u
    for sel, n_eq in ((base, 0), (tied, 1)):
        res = gs.max_margin_selection(st.E1, ds, sel)
        assert res.certified and res.n_eq == n_eq
        p = res.p_hat
        gaps = []
        for k in range(ds.n):
            a = st.E1[ds.X[k]] @ p
            gaps.append(a[sel[k]].min() - a[~sel[k]].max())
            assert float(a[sel[k]].max() - a[sel[k]].min()) < 1e-9  # ties hold
        gaps = torch.stack(gaps)
        assert float(gaps.min()) >= 1 - 1e-9 and abs(float(gaps.min()) - 1) < 1e-8  # feasible, one tight
        assert res.norm <= 4 * ds.n  # Lemma C.8
        other = _slsqp_selection(st.E1, ds, sel)
        assert float((other - p).norm()) < 1e-6 * max(1.0, res.norm)


def test_n12_lemma_a4_softmax_bounds():
    gen = torch.Generator().manual_seed(0)
    model = OneLayerAttention(30, 8, seed=0)
    X = torch.randint(0, 30, (2000, 7), generator=gen)
    with torch.no_grad():
        model.p.mul_(torch.rand(1, generator=gen).item() * 20)
        a = (model.E @ model.p)[X]
        q = model.attention(X)
    T = X.shape[1]
    top = a.argmax(1, keepdim=True)
    q_top = q.gather(1, top)
    assert bool((q_top >= 1 / T - 1e-15).all()) and bool((q_top <= 1).all())
    gap = a.gather(1, top) - a  # p^T(E_{x_i*} - E_{x_j}) >= 0
    not_sel = gap > 0
    for tau in (0.1, 1.0, 3.0):
        hi = not_sel & (gap >= tau)
        assert bool((q[hi] <= 1 / (1 + math.exp(tau)) + 1e-15).all())
        lo = not_sel & (gap <= tau)
        assert bool((q[lo] >= 1 / (T * math.exp(tau)) - 1e-15).all())


# ----------------------------------------------------------------------------------------------------------------
# Stage-2 library: bad selections
# ----------------------------------------------------------------------------------------------------------------


def test_infeasible_and_degenerate_selections_are_reported():
    ds = TokenSequences.from_lists([[0, 1], [0, 1, 2]], [1, -1])
    E = torch.randn(3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # 0 above 1 in the first sequence, 1 above 0 in the second: no p does both
    sel = torch.tensor([[True, False, False], [False, True, False]])
    res = gs.max_margin_selection(E, ds, sel)
    assert res.status == "infeasible" and not res.feasible and res.p_hat is None and math.isinf(res.norm)
    # the same token selected at one position and not at another
    ds2 = TokenSequences.from_lists([[0, 0, 1]], [1])
    res = gs.max_margin_selection(E, ds2, torch.tensor([[True, False, False]]))
    assert res.status == "infeasible" and "both selected and not selected" in res.message
    # every token selected everywhere: no inequality, p = 0
    res = gs.max_margin_selection(E, ds, ds.mask)
    assert res.status == "degenerate" and not res.feasible
    with pytest.raises(DataError, match="picks no token of sequence 1"):
        gs.max_margin_selection(E, ds, torch.tensor([[True, False, False], [False, False, False]]))
    with pytest.raises(DataError, match="boolean mask"):
        gs.max_margin_selection(E, ds, torch.ones(2, 5, dtype=torch.bool))
    # ties: selected tokens 0 and 2 tied in the second sequence -> one equality row, satisfied by the solution
    sel = torch.tensor([[True, False, False], [True, False, True]])
    res = gs.max_margin_selection(E, ds, sel)
    assert res.certified and res.n_eq == 1 and res.n_ineq == 1
    assert abs(float(res.p_hat @ (E[0] - E[2]))) < 1e-9 and float(res.p_hat @ (E[0] - E[1])) == pytest.approx(1)


def test_token_selection_tolerance():
    ds = TokenSequences.from_lists([[0, 1, 2]], [1])
    E = torch.tensor([[1.0, 0.0], [0.999, 0.0], [0.0, 1.0]], dtype=torch.float64)
    p = torch.tensor([10.0, 0.0], dtype=torch.float64)
    assert gs.token_selection(E, p, ds).tolist() == [[True, False, False]]
    assert gs.token_selection(E, p, ds, tol=1e-2).tolist() == [[True, True, False]]
