"""The language model's geometry (geometry/lm.py, docs/lm.md#what-is-measured) against independent computations on
tiny cases: loops over contexts and token pairs, an explicit basis of F with a pseudo-inverse, the NTP-SVM and the
nuclear-norm SVM written as their own cvxpy programs (Clarabel) with pairwise constraints."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

from ntpbias.data.ntp import NTPData
from ntpbias.data.planted import planted_supports
from ntpbias.geometry.lm import centred, logit_reference, model_geometry

pytestmark = pytest.mark.filterwarnings("ignore:Solution may be inaccurate")


def _random(seed: int, m: int = 5, V: int = 6, d: int = 7) -> tuple[NTPData, torch.Tensor]:
    """Random supports (sizes 1-3), Dirichlet probabilities, Gaussian H (d > m: separable and compatible) and W."""
    rng = np.random.default_rng(seed)
    P = np.zeros((m, V))
    for j in range(m):
        S = rng.choice(V, size=rng.integers(1, 4), replace=False)
        P[j, S] = rng.dirichlet(np.ones(len(S)))
    H = rng.normal(size=(m, d))
    W = torch.as_tensor(rng.normal(size=(V, d)) * 3 + rng.normal(size=(1, d)), dtype=torch.float64)
    return NTPData.from_arrays(H, P, rng.dirichlet(np.ones(m))), W


def _supports(data: NTPData) -> list[list[int]]:
    return [list(np.nonzero(row)[0]) for row in data.P.numpy()]


def _naive(data: NTPData, W: torch.Tensor | None = None, logits: np.ndarray | None = None) -> dict:
    """Loops: the logit-space finite part (unweighted and π p-weighted), the margin, the separated share of the
    contexts with a non-trivial support, the loss; of W's logits or of given logits (V, m)."""
    H, P, pi = data.H.numpy(), data.P.numpy(), data.pi.numpy()
    Wc = None if W is None else W.numpy() - W.numpy().mean(0)
    err2 = norm2 = err2_w = norm2_w = perp2 = total2 = 0.0
    gaps, separated, nontrivial, loss = [], 0.0, 0.0, 0.0
    for j, S in enumerate(_supports(data)):
        ell = Wc @ H[j] if logits is None else logits[:, j] - logits[:, j].mean()
        logp = np.log(P[j, S])
        for z in S:
            a = ell[z] - np.mean(ell[S])
            b = logp[S.index(z)] - np.mean(logp)
            err2 += (a - b) ** 2
            norm2 += b * b
            err2_w += pi[j] * P[j, z] * (a - b) ** 2
            norm2_w += pi[j] * P[j, z] * b * b
        out = [v for v in range(data.V) if v not in S]
        perp2 += len(S) * np.mean(ell[S]) ** 2 + sum(ell[v] ** 2 for v in out)  # in-support logits tied at their mean
        total2 += float(ell @ ell)
        pair = [ell[z] - ell[v] for z in S for v in out]
        gaps += pair
        if pair:
            nontrivial += pi[j]
            separated += pi[j] * (min(pair) > 0)
        lse = np.log(np.sum(np.exp(ell - ell.max()))) + ell.max()
        loss += pi[j] * sum(P[j, z] * (lse - ell[z]) for z in S)
    return {"finite_rel_error": np.sqrt(err2 / norm2), "finite_rel_error_weighted": np.sqrt(err2_w / norm2_w),
            "margin": None if Wc is None else min(gaps) / np.linalg.norm(Wc),
            "separated_fraction": separated / nontrivial, "loss": loss, "logit_perp_share": np.sqrt(perp2 / total2)}


def _ntp_svm_cvxpy(data: NTPData) -> np.ndarray:
    """min ||W||² s.t. in-support logits tied, >= 1 above out-of-support ones: every constraint written out."""
    H = data.H.numpy()
    W = cp.Variable((data.V, data.d))
    cons = []
    for j, S in enumerate(_supports(data)):
        for z, zp in itertools.combinations(S, 2):
            cons.append((W[z] - W[zp]) @ H[j] == 0)
        cons += [(W[z] - W[v]) @ H[j] >= 1 for z in S for v in range(data.V) if v not in S]
    cp.Problem(cp.Minimize(cp.sum_squares(W)), cons).solve(solver=cp.CLARABEL)
    return W.value


def _cos(a, b) -> float:
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paper_a_quantities_against_loops_and_clarabel(seed, pair_generators):
    data, W = _random(seed)
    g = model_geometry(data, W, logit_reference(data, nuclear=False)).values
    naive = _naive(data, W)
    for key in ("finite_rel_error", "finite_rel_error_weighted", "margin", "separated_fraction", "loss",
                "logit_perp_share"):
        assert g[key] == pytest.approx(naive[key], rel=1e-9, abs=1e-12), key
    assert g["loss_gap"] == pytest.approx(naive["loss"] - data.entropy, abs=1e-12)
    A, b = pair_generators(data)
    Wc = W.numpy() - W.numpy().mean(0)
    proj = np.linalg.pinv(A) @ A if len(A) else np.zeros((data.V * data.d,) * 2)  # P_F on vec(W)
    W_star = np.linalg.pinv(A) @ b if len(A) else np.zeros(data.V * data.d)
    assert g["dim_F"] == np.linalg.matrix_rank(A)
    assert g["F_error_rel"] == pytest.approx(np.linalg.norm(proj @ W.numpy().ravel() - W_star)
                                             / np.linalg.norm(W_star), rel=1e-7)
    W_mm = _ntp_svm_cvxpy(data)
    assert g["separable"] and g["svm_norm"] == pytest.approx(np.linalg.norm(W_mm), rel=1e-6)
    perp = Wc.ravel() - proj @ Wc.ravel()
    assert g["cos_perp_mm"] == pytest.approx(_cos(perp, W_mm), abs=1e-6)
    assert g["margin_ratio"] == pytest.approx(naive["margin"] * np.linalg.norm(W_mm), rel=1e-6)


def test_log_bilinear_quantities_against_clarabel_and_numpy():
    """Planted disjoint sets: L^mm (cvxpy normNuc, pairwise constraints) is S̃; Gram directions from numpy's SVD;
    collapse angles by loops over pairs of contexts."""
    data = planted_supports(8, (2, 3), (3, 2), seed=3)
    rng = np.random.default_rng(0)
    data = NTPData.from_arrays(rng.normal(size=(data.m, 6)), data.P)
    W = torch.as_tensor(rng.normal(size=(data.V, 6)), dtype=torch.float64)
    g = model_geometry(data, W, logit_reference(data, solver="clarabel")).values
    S = (data.P.numpy() > 0).T.astype(float)  # (V, m)
    L = cp.Variable(S.shape)
    cons = []
    for j in range(data.m):
        inside, out = np.nonzero(S[:, j])[0], np.nonzero(S[:, j] == 0)[0]
        cons += [L[z, j] == L[inside[0], j] for z in inside[1:]]
        cons += [L[z, j] >= L[v, j] + 1 for z in inside for v in out]
    cp.Problem(cp.Minimize(cp.normNuc(L)), cons).solve(solver=cp.CLARABEL)
    L_mm = L.value - L.value.mean(0)
    St = S - S.mean(0)
    assert np.linalg.norm(L_mm - St) / np.linalg.norm(St) < 1e-4  # the polar condition holds for disjoint sets
    Wc = W.numpy() - W.numpy().mean(0)
    Lc = Wc @ data.H.numpy().T
    perp = Lc.copy()
    for j in range(data.m):  # tie each context's in-support logits at their mean
        inside = S[:, j] > 0
        perp[inside, j] = Lc[inside, j].mean()
    assert g["logit_cos_perp_S"] == pytest.approx(_cos(perp, St), abs=1e-10)
    assert g["logit_cos_perp_mm"] == pytest.approx(_cos(perp, L_mm), abs=1e-4)
    U, s, Vt = np.linalg.svd(St)
    r = int((s > 1e-9).sum())
    word, context = (U[:, :r] * s[:r]) @ U[:, :r].T, (Vt[:r].T * s[:r]) @ Vt[:r]
    H = data.H.numpy()
    assert g["cos_word_gram_S"] == pytest.approx(_cos(Wc @ Wc.T, word), abs=1e-10)
    assert g["cos_context_gram_S"] == pytest.approx(_cos(H @ H.T, context), abs=1e-10)
    groups = [tuple(np.nonzero(S[:, j])[0]) for j in range(data.m)]

    def angle(a, b):
        return np.degrees(np.arccos(np.clip(_cos(a, b), -1, 1)))

    within = max(angle(H[i], H[k]) for i in range(data.m) for k in range(data.m) if groups[i] == groups[k])
    means = {gr: sum(H[j] / np.linalg.norm(H[j]) for j in range(data.m) if groups[j] == gr) for gr in set(groups)}
    between = min(angle(means[a], means[b]) for a, b in itertools.combinations(means, 2))
    assert g["within_angle"] == pytest.approx(within, abs=1e-5)
    assert g["between_angle"] == pytest.approx(between, abs=1e-5)
    pi = data.pi.numpy()
    to_mean = [angle(H[j], means[groups[j]]) for j in range(data.m)]
    assert g["within_mean"] == pytest.approx(np.dot(pi, to_mean) / pi.sum(), abs=1e-5)
    nearest = {a: min(angle(means[a], means[b]) for b in means if b != a) for a in means}
    mass = {a: sum(pi[j] for j in range(data.m) if groups[j] == a) for a in means}
    assert g["between_mean"] == pytest.approx(sum(mass[a] * nearest[a] for a in means) / sum(mass.values()),
                                              abs=1e-5)
    assert g["collapse_sets"] == len(means) and g["collapse_contexts"] == data.m
    assert g["sub_collapse_ratio"] == pytest.approx(g["sub_within_angle"] / g["sub_between_angle"])
    assert g["sub_collapse_mean_ratio"] == pytest.approx(g["sub_within_mean"] / g["sub_between_mean"])


def test_collapse_is_null_where_every_support_set_has_one_context():
    """Nothing to collapse: the angles are None (not 0, which would read as perfect collapse)."""
    data, W = _random(0)
    assert len({tuple(r) for r in data.support.tolist()}) == data.m
    g = model_geometry(data, W, logit_reference(data, nuclear=False)).values
    for key in ("within_angle", "collapse_ratio", "within_mean", "collapse_mean_ratio", "sub_within_angle"):
        assert g[key] is None, key
    assert g["collapse_sets"] == 0


def test_baselines_against_loops():
    """The count baselines (add-α smoothed log-probabilities, unigram log-frequencies) measured by loops, and the
    separated fraction of a full-support context left out of both numerator and denominator."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 4, size=(6, 5)) * (rng.random((6, 5)) < 0.6)
    counts[:, 0] += 1
    counts[0] = [3, 1, 2, 1, 5]  # a full support
    n_j = counts.sum(1)
    data = NTPData.from_arrays(rng.normal(size=(6, 3)), counts / n_j[:, None], n_j / n_j.sum(),
                               n_samples=int(counts.sum()))
    ref = logit_reference(data, nuclear=False)
    for alpha in (0.1, 1.0):
        logits = np.log((counts + alpha) / (n_j[:, None] + data.V * alpha)).T
        naive = _naive(data, logits=logits)
        got = ref.baselines[f"add_{alpha:g}"]
        for key in ("finite_rel_error", "finite_rel_error_weighted", "separated_fraction", "loss", "logit_perp_share"):
            assert got[key] == pytest.approx(naive[key], rel=1e-9), (alpha, key)
    unigram = np.log(counts.sum(0) / counts.sum())[:, None].repeat(data.m, 1)
    assert ref.baselines["unigram"]["finite_rel_error"] == pytest.approx(_naive(data, logits=unigram)[
        "finite_rel_error"], rel=1e-9)
    assert ref.baselines["add_1"]["full_support_mass"] == pytest.approx(n_j[0] / n_j.sum())
    assert ref.baselines["add_1"]["nontrivial_contexts"] == data.m - 1


def test_softmax_invariant_direction_changes_nothing():
    """Adding 1 w^T to W leaves every logit difference, hence every measured quantity, unchanged (W is centred)."""
    data, W = _random(4)
    ref = logit_reference(data)
    shifted = W + 7.0 * torch.randn(1, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a, b = model_geometry(data, W, ref).values, model_geometry(data, shifted, ref).values
    for key, v in a.items():
        if key != "mean_row_share" and isinstance(v, float):
            assert b[key] == pytest.approx(v, rel=1e-6, abs=1e-5), key  # angles: arccos round-off near 0
    assert torch.allclose(centred(shifted), centred(W))


def test_non_separable_features_are_a_finding():
    """d = 1 < m: no W separates every support (the support graph ties context 3); the max-margin quantities are None,
    the rest is measured, and the longest separable prefix by frequency is the two most frequent contexts."""
    data = NTPData.from_arrays([[1.0], [-2.0], [-1.0]], [[0.3, 0.7, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
                               [0.5, 0.3, 0.2])
    W = torch.tensor([[1.0], [0.5], [-1.0]], dtype=torch.float64)
    g = model_geometry(data, W, logit_reference(data)).values
    assert g["separable"] is False and g["separability_method"] == "structure"
    assert g["prefix_contexts"] == 2 and g["prefix_mass"] == pytest.approx(0.8) and g["prefix_maximal"]
    assert g["svm_norm"] is None and g["cos_perp_mm"] is None and g["margin_ratio"] is None
    assert g["separated_fraction"] == pytest.approx(_naive(data, W)["separated_fraction"])
    assert g["finite_rel_error"] == pytest.approx(_naive(data, W)["finite_rel_error"])


def test_a_prefix_svm_that_fails_is_reported_uncertified(monkeypatch):
    """The longest separable prefix's NTP-SVM raising (no margin found at the numerical edge) leaves the prefix_*
    max-margin values null with prefix_svm_certified False, so the report's note names it."""
    import importlib

    from ntpbias.errors import SolverError

    module = importlib.import_module("ntpbias.geometry.lm.paper_a")  # the module, not the function of that name

    data = NTPData.from_arrays([[1.0], [-2.0], [-1.0]], [[0.3, 0.7, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
                               [0.5, 0.3, 0.2])
    W = torch.tensor([[1.0], [0.5], [-1.0]], dtype=torch.float64)
    assert model_geometry(data, W, logit_reference(data)).values["prefix_svm_certified"] is True  # the control

    def fails(*args, **kwargs):
        raise SolverError("no margin found")

    monkeypatch.setattr(module, "ntp_svm", fails)
    g = model_geometry(data, W, logit_reference(data)).values
    assert g["prefix_contexts"] == 2 and g["prefix_svm_certified"] is False and g["prefix_svm_norm"] is None
