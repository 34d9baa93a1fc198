"""Paper A's checks: pure functions of a run's history, its dataset and its reference objects."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import torch

from ...data.ntp import NTPData
from ...geometry.linear.loss import cross_entropy, cross_entropy_grad, smoothness_bound
from ...metrics import key_lemma_ratio
from ...results import Check, check_at_least, check_at_most, with_control
from ...training.history import History
from ...training.linear import LinearNTPProblem, LinearReference
from ..claims import cite
from .config import FIG4, FIG5_ADAM, FIG5_NGD, LinearConfig

#: the calibration of the finite-step levels (calibration/linear_ntp.py): data seeds and worst values measured there
CALIBRATION_SEEDS = range(1, 9)
CALIBRATION_WORST = {"loss_gap": 2.40e-3, "cos_mm": 0.896, "cos_mm_corrected": 0.928, "F_error_rel": 0.355,
                     "2d_cos_mm": 0.914, "2d_F_error_rel": 0.0281, "2d_loss_gap": 1.50e-3, "regpath_cos_B20": 0.961,
                     "2d_paper_cos_mm": 0.961, "2d_paper_F_error_rel": 0.0022, "2d_paper_loss_gap": 1.50e-4}
#: the 2D example's levels per schedule (steps), each set from the calibration at that schedule: 10^4 steps (quick),
#: 10^5 (paper); a run of another length grades none of them
TWO_D_LEVELS = {10_000: {"cos_mm": 0.9, "F_error_rel": 0.05, "loss_gap": 1e-2, "key": "2d"},
                100_000: {"cos_mm": 0.95, "F_error_rel": 0.004, "loss_gap": 1e-3, "key": "2d_paper"}}


def calibrated(key: str | None, data_seed: int | None = None) -> str:
    """``threshold_source`` of a calibrated level (``key`` of :data:`CALIBRATION_WORST`, or None for a trend seen on
    every calibration dataset): where it was set, and whether the graded dataset was held out."""
    worst = "held on all of them" if key is None else f"worst value {CALIBRATION_WORST[key]:.3g}"
    where = (f"calibrated on data seeds {CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1} "
             f"(calibration/linear_ntp.json; {worst})")
    if data_seed is not None and data_seed in CALIBRATION_SEEDS:
        return where + "; this run's dataset is one of them (not held out)"
    return where + "; the graded dataset is held out"


def theorem_premise(cfg: LinearConfig, data: NTPData, ref: LinearReference) -> tuple[str, bool]:
    """Lemma 2 and Thm 2 of paper A: NTP_H-compatible and NTP-separable data, full-batch GD with η <= 1/(2L)."""
    L = smoothness_bound(data)
    met = (ref.F.compatible and ref.W_mm is not None and cfg.optimizer.name == "gd" and not cfg.train.batch_size
           and cfg.optimizer.lr <= 1 / (2 * L))
    return (f"NTP_H-compatible and NTP-separable data; full-batch GD with η <= 1/(2L) = {1 / (2 * L):.3g} "
            f"(this run: {cfg.optimizer.name}, η = {cfg.optimizer.lr:g}"
            f"{', minibatch ' + str(cfg.train.batch_size) if cfg.train.batch_size else ''})"), bool(met)


def calibration_schedule(cfg: LinearConfig, steps: int) -> str:
    """Why the finite-step levels do not grade this run ("" when they do): they were set on the Figs. 4-5 presets'
    generator, optimizers and 10^4 steps (calibration/linear_ntp.py), and grade only a run of that schedule."""
    calibrated_runs = {(p.optimizer, p.model.init, p.train.batch_size) for p in (FIG4, FIG5_NGD, FIG5_ADAM)}
    same_data = cfg.data.source == "random" and replace(cfg.data, seed=FIG4.data.seed) == FIG4.data
    if same_data and (cfg.optimizer, cfg.model.init, cfg.train.batch_size) in calibrated_runs \
            and steps == FIG4.train.steps:
        return ""
    return (f"the levels were calibrated on the Figs. 4-5 presets (their generator, GD / NGD / Adam and "
            f"{FIG4.train.steps:,} steps); this run ({cfg.data.source} data, {cfg.optimizer.name}, {steps:,} steps) "
            "is another schedule")


def early_step(history: History, factor: int = 100) -> int:
    """The logged step nearest (in log-step) to the last one divided by ``factor``: where the negative control of a
    finite-step level stops the run."""
    steps = history.steps
    target = math.log(max(1.0, steps[-1] / factor))
    return int(steps[np.argmin(np.abs(np.log(np.maximum(steps, 1)) - target))])


def _at(history: History, column: np.ndarray, step: float) -> np.ndarray:
    """Per-seed values of ``column`` (n_steps, n_seeds) at ``step``, interpolated linearly in log-step."""
    x = np.log(np.maximum(history.steps, 1).astype(float))
    return np.array([np.interp(math.log(step), x, column[:, b]) for b in range(column.shape[1])])


def decade_increases(history: History, column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per seed, the increase of ``column`` over the decade of steps k/100 -> k/10 and over the last one, k/10 -> k
    (interpolated in log-step). Growth like log k keeps them equal, linear growth makes the later ten times larger, a
    quantity settling to a finite limit shrinks them."""
    k = float(history.steps[-1])
    a, b, c = (_at(history, column, k / f) for f in (100, 10, 1))
    return b - a, c - b


def _descent_control(cfg: LinearConfig, data: NTPData, steps: int = 100) -> float:
    """The largest increase of CE over ``steps`` steps of GD from the run's W_0 with η = 16/L, well past the descent
    regime (the negative control of "monotone loss")."""
    W = LinearNTPProblem(data, None, init=cfg.model.init).init_params([cfg.seed + b for b in range(cfg.seeds)])["W"]
    eta = 16 / smoothness_bound(data)
    worst = -math.inf
    loss, grad = cross_entropy_grad(W, data)
    for _ in range(steps):
        W = W - eta * grad
        new, grad = cross_entropy_grad(W, data)
        worst = max(worst, float((new - loss).max()))
        loss = new
    return worst


def moved_W_star(ref: LinearReference, fraction: float = 0.01, seed: int = 0) -> torch.Tensor:
    """W* moved by ``fraction`` of its norm along a random direction of F (seeded): a wrong finite part, the negative
    control of the statements about W*."""
    F = ref.F
    gen = torch.Generator().manual_seed(seed)
    wiggle = F.project(torch.randn(F.W_star.shape, generator=gen, dtype=F.W_star.dtype))
    return F.W_star + fraction * F.norm_W_star * wiggle / torch.linalg.vector_norm(wiggle)


def perturbed_direction(ref: LinearReference, seed: int = 0) -> torch.Tensor:
    """W̄^mm moved by a random unit direction of F^⊥ (seeded), renormalized: cos about 0.7 with W̄^mm (a wrong
    max-margin direction, the negative control of the key lemma)."""
    gen = torch.Generator().manual_seed(seed)
    Z = ref.F.project_perp(torch.randn(ref.W_mm.shape, generator=gen, dtype=ref.W_mm.dtype))
    unit = ref.W_mm / torch.linalg.vector_norm(ref.W_mm)
    moved = unit + Z / torch.linalg.vector_norm(Z)
    return moved / torch.linalg.vector_norm(moved)


def run_checks(run: str, cfg: LinearConfig, history: History, data: NTPData, ref: LinearReference) -> list[Check]:
    """Checks of one training run (docs/paper-a-linear-ntp.md#theory-checks), evaluated on the worst seed, each graded
    check with its negative control.

    Lemma 2 and Thm 2 are asymptotic: at a finite step they are held to levels calibrated on other datasets
    (:data:`CALIBRATION_SEEDS`), so their kind is ``calibrated``, graded only at the calibration's schedule
    (:func:`calibration_schedule`), with the same run stopped 100 times earlier as control; the premise says whether
    the theorem applies.
    """
    last = history.at()
    k_end = int(history.steps[-1])
    k_early = early_step(history)
    early = history.at(k_early)
    stopped = f"the same run stopped at k = {k_early} (100 times earlier)"
    out: list[Check] = []
    name = cfg.optimizer.name
    premise, met = theorem_premise(cfg, data, ref)
    seed = cfg.data.seed if cfg.data.source == "random" else None
    thm = {"premise": premise, "premise_met": met}
    reason = calibration_schedule(cfg, k_end)
    schedule = {"graded": not reason, "ungraded_reason": reason}
    src_lemma2, src_thm2 = "Lemma 2 of paper A", "Thm 2 of paper A"
    # GD's run is Fig. 4's; NGD's and Adam's are Fig. 5's ("Both exhibit the same implicit bias")
    figure = "A:fig5" if name in ("ngd", "adam") else "A:fig4"

    def level(check_name, claim, key, bound, source, metric, cal_key, worst=max):
        """A calibrated level of ``key`` at the last step (an upper bound when ``worst`` is max), with its control."""
        check = check_at_most if worst is max else check_at_least
        fields = {"kind": "calibrated", **cite(figure), "metric": metric, **thm, **schedule,
                  "threshold_source": calibrated(cal_key, seed)}
        return with_control(check(check_name, claim, worst(last[key]), bound, source, **fields), stopped,
                            check(check_name, claim, worst(early[key]), bound, source, **fields))

    out.append(level(f"{run}: loss gap", f"CE(W_k) - H -> 0 ({name}, k = {history.step})", "loss_gap", 5e-3,
                     src_lemma2, "CE(W_k) - H at the last step (worst seed)", "loss_gap"))
    if name == "gd" and not cfg.train.batch_size:
        inc = max(history.max_loss_increase or [0.0])
        bound = 1 / (2 * smoothness_bound(data))

        def descent(increase: float, eta: str) -> Check:
            return check_at_most(f"{run}: monotone loss", f"GD decreases CE at every step (η = {eta})", increase,
                                 1e-12, "descent lemma (Sec. 4 of paper A)", kind="theorem", **cite("A:descent"),
                                 metric="largest increase of CE between consecutive steps",
                                 premise=f"η <= 1/(2L) = {bound:.3g}", premise_met=cfg.optimizer.lr <= bound,
                                 threshold_source="round-off allowance (ours)")

        out.append(with_control(
            descent(inc, f"{cfg.optimizer.lr:g} {'<=' if cfg.optimizer.lr <= bound else '>'} 1/(2L) = {bound:.3g}"),
            "100 steps of GD from the same W_0 with η = 16/L, past the descent regime",
            descent(_descent_control(cfg, data), f"16/L = {32 * bound:.3g}")))
        out.extend(_invariant_checks(run, cfg, history, data))
    out.append(_norm_growth(run, history, thm))
    out.append(level(f"{run}: F-part", "P_F(W_k) -> W* (relative error)", "F_error_rel", 0.4, src_thm2,
                     "||P_F(W_k) - W*||/||W*|| at the last step (worst seed)", "F_error_rel"))
    if ref.W_mm is not None:
        out.append(level(f"{run}: alignment (corrected)", "cos(W_k - W*, W^mm) -> 1", "cos_mm_corrected", 0.9, src_thm2,
                         "cos(W_k - W*, W^mm) at the last step (worst seed)", "cos_mm_corrected", worst=min))
        out.append(level(f"{run}: alignment", "cos(W_k, W^mm) -> 1", "cos_mm", 0.88, src_thm2,
                         "cos(W_k, W^mm) at the last step (worst seed)", "cos_mm", worst=min))
        out.append(_margin_rise(run, history, thm))
        out.append(_key_lemma(run, history, data, ref, thm["premise"]))
    return out


#: the step after which Thm 2's normalized margin is graded as rising (ours: the first phase ends well before it)
MARGIN_FROM = 1000


def _norm_growth(run: str, history: History, thm: dict) -> Check:
    """Lemma 2's ||W_k|| -> ∞ at a finite step: the norm keeps growing, its increase over the last decade of steps at
    least half that over the decade before (:func:`decade_increases`); control: the bounded part ||P_F(W_k)|| of the
    same run (Lemma 4: it converges to ||W*||). Graded from 1000 steps (two decades after step 10)."""
    k = int(history.steps[-1])

    def growth(column: str, what: str) -> Check:
        early, late = decade_increases(history, history[column])
        grew = early > 0
        measured = (float(np.min(late / early)) if grew.all() else
                    f"no increase over k = {k // 100}..{k // 10} ({float(early.min()):.3g})")
        return Check(f"{run}: norm growth", f"{what} increases without bound: its increase over k = {k // 10}..{k} at "
                     f"least half that over k = {k // 100}..{k // 10}", measured, ">= 0.5",
                     bool((grew & (late >= 0.5 * early)).all()), "Lemma 2 of paper A", kind="theorem",
                     **cite("A:lemma2"),
                     metric=f"increase of {what} over the last decade of steps / its increase over the decade before "
                            f"(worst seed; increases {float(early.min()):.4g} and {float(late.min()):.4g}; {what} at "
                            f"k = {k}: {float(history[column][-1].min()):.4g})",
                     threshold_source="ours: growth like log k (GD on separable data) gives about 1, a norm settling "
                                      "to a finite limit faster than k^-0.3 at most 0.5",
                     graded=k >= 1000, ungraded_reason="" if k >= 1000 else
                     f"the run stops at k = {k}: two decades of steps after k = 10 are needed", **thm)

    return with_control(growth("norm", "||W_k||"), "the bounded part ||P_F(W_k)|| of the same run (Lemma 4: it "
                        "converges to ||W*||)", growth("F_norm", "||P_F(W_k)||"))


def _margin_rise(run: str, history: History, thm: dict) -> Check:
    """Thm 2's normalized margin of P_⊥(W_k) rising after k = 1000 (not graded when the run stops before); control:
    the run stopped at k = 1000 (its margin no longer moves)."""
    steps = history.steps
    margins = history["margin_perp"]
    start = int(np.searchsorted(steps, MARGIN_FROM))
    reaches = bool(steps[-1] > MARGIN_FROM and start < len(steps))
    at_start = margins[min(start, len(steps) - 1)]

    def rise(end: np.ndarray) -> Check:
        return Check(f"{run}: margin of P_perp(W_k)", "normalized NTP margin of P_⊥(W_k) increases toward "
                     "1/||W^mm|| (ratio shown; slow)", float(end.min()), f"increases after k = {MARGIN_FROM}",
                     bool((end - at_start).min() > 0), "Thm 2 of paper A", kind="theorem", **cite("A:thm2"),
                     metric="normalized NTP margin of P_⊥(W_k) times ||W^mm|| at the last step, and whether it rose "
                            f"since k = {MARGIN_FROM} (worst seed)",
                     threshold_source=f"the theorem's trend (any increase after k = {MARGIN_FROM})", graded=reaches,
                     ungraded_reason="" if reaches else f"the run stops at k = {int(steps[-1])}, before the step range "
                                                        f"of the statement (after k = {MARGIN_FROM})", **thm)

    return with_control(rise(margins[-1]), f"the same run stopped at k = {MARGIN_FROM}", rise(at_start))


def _key_lemma(run: str, history: History, data: NTPData, ref: LinearReference, premise: str) -> Check:
    """Lemma 5's inequality (14) at the last step as the ratio CE(W_k)/CE(genie) (>= 1 where it holds); control: the
    genie built on a perturbed W̄^mm (:func:`perturbed_direction`)."""
    W = history.params["W"]
    W_F = ref.F.project(W)
    perp = torch.linalg.vector_norm((W - W_F).reshape(W.shape[0], -1), dim=1)
    wrong = float(key_lemma_ratio(W_F, perp, cross_entropy(W, data), data, perturbed_direction(ref)).min())
    first = float(history["key_lemma"][0].min())

    def lemma(ratio: float, direction: str) -> Check:
        return check_at_least(f"{run}: key lemma (α = 0.5)", f"CE(P_F W_k + 1.5 ||P_⊥ W_k|| {direction}) <= CE(W_k) "
                              "at the end", ratio, 1.0, "Lemma 5 of paper A, eq. (14)", kind="theorem",
                              **cite("A:key-lemma"),
                              metric=f"CE(W_k) / CE(P_F W_k + 1.5 ||P_⊥ W_k|| {direction}) at the last step (>= 1: the "
                                     f"inequality holds; worst seed; {first:.6g} at the first logged step)",
                              threshold_source="the lemma's inequality (a ratio of at least 1)",
                              premise=premise + "; k >= k_0(R(α)), which the lemma does not give (not verifiable: "
                                                "counted as not met)", premise_met=False)

    return with_control(lemma(float(history["key_lemma"][-1].min()), "W̄^mm"),
                        "the genie built on a perturbed W̄^mm (moved by a random unit direction of F^⊥: cos 0.7)",
                        lemma(wrong, "W̄'"))


def _invariant_checks(run: str, cfg: LinearConfig, history: History, data: NTPData) -> list[Check]:
    """GD never changes 1^T W nor the part of W orthogonal to span{h̄_j} (the gradient's form, eq. (3) of paper A)."""
    W0 = LinearNTPProblem(data, None, init=cfg.model.init).init_params([cfg.seed + b for b in range(cfg.seeds)])["W"]
    dW = history.params["W"] - W0
    col = float(dW.sum(dim=1).abs().max())
    Q, _ = torch.linalg.qr(data.H.T)  # orthonormal basis of span{h̄_j} (d, rank)
    off = float(torch.linalg.vector_norm(dW - (dW @ Q) @ Q.T))
    scale = max(1.0, float(torch.linalg.vector_norm(dW)))
    fields = {"kind": "sanity", "threshold_source": "round-off allowance relative to ||W_k - W_0|| (ours)"}
    return [
        check_at_most(f"{run}: invariant 1^T W", "1^T W_k = 1^T W_0 under GD (max deviation)", col, 1e-10 * scale,
                      "eq. (3) of paper A", **fields),
        check_at_most(f"{run}: invariant W (I - Π_H)", "W_k (I - Π_span h) = W_0 (I - Π_span h) under GD", off,
                      1e-10 * scale, "eq. (3) of paper A", **fields),
    ]


def geometry_checks(data: NTPData, ref: LinearReference) -> list[Check]:
    """Facts of the dataset's geometry (Sec. 3 of paper A): exact identities and Prop. 1's e^{-γ} rate."""
    F, W_mm = ref.F, ref.W_mm
    exact = {"kind": "sanity", "threshold_source": "round-off allowance (ours)"}
    checks = [check_at_most("W* in F", "||P_⊥(W*)|| = 0 (W* lies in F)", float(torch.linalg.vector_norm(
        F.project_perp(F.W_star))), 1e-9, "eq. (4) of paper A", **exact)]
    if W_mm is None:
        return checks
    checks.append(check_at_most("W^mm in F^⊥", "||P_F(W^mm)|| = 0", float(torch.linalg.vector_norm(F.project(W_mm))),
                                1e-9, "eq. (6) of paper A", **exact))
    checks.append(check_at_most("W* ⟂ W^mm", "|<W*, W^mm>| = 0", abs(float((F.W_star * W_mm).sum())), 1e-9,
                                "Sec. 3 of paper A", **exact))
    checks.append(_prop1_rate(data, ref))
    return checks


def _prop1_rate(data: NTPData, ref: LinearReference) -> Check:
    """Prop. 1's e^{-γ} rate along W* + γ W^mm as a least-squares slope; control: a wrong W* (moved by 1% of its norm
    inside F), where CE - H stops at the wrong point's excess instead of decaying."""
    F, W_mm = ref.F, ref.W_mm
    gammas = np.linspace(5, 20, 7)

    def rate(W_star: torch.Tensor) -> Check:
        gaps = np.array([float(cross_entropy(W_star + g * W_mm, data)) - data.entropy for g in gammas])
        slope = float(np.polyfit(gammas, np.log(np.maximum(gaps, 1e-300)), 1)[0])
        return Check("Prop. 1 rate", "CE(W* + γ W^mm) - H decays like e^{-γ}", slope, "within 0.02 of -1",
                     bool(abs(slope + 1) <= 0.02), "Prop. 1 of paper A; docs/paper-a-linear-ntp.md (A-C8)",
                     kind="theorem", **cite("docs:prop1-rate"),
                     metric="least-squares slope of log(CE(W* + γ W^mm) - H) in γ over 7 points of [5, 20]",
                     premise="NTP_H-compatible and NTP-separable data", premise_met=bool(F.compatible),
                     threshold_source="fit tolerance (ours)")

    return with_control(rate(F.W_star), "a wrong W*: W* moved by 1% of its norm inside F", rate(moved_W_star(ref)))


def two_d_checks(data: NTPData, ref: LinearReference) -> list[Check]:
    """Fig. 2's messages: W^mm depends only on supports (w_1 = w_5), W* on probabilities (w*_1 ≠ w*_5), orthogonal."""
    W_mm, W_star = ref.W_mm, ref.F.W_star
    if W_mm is None:
        return [Check("2D: separable", "the 2D example is NTP-separable", "no", "separable", False,
                      "Fig. 1 of paper A", kind="sanity")]
    same = float(torch.linalg.vector_norm(W_mm[0] - W_mm[4]))
    differ = float(torch.linalg.vector_norm(W_star[0] - W_star[4]))
    shared = bool(torch.equal(data.P[:, 0] > 0, data.P[:, 4] > 0))
    return [
        check_at_most("2D: w^mm_1 = w^mm_5", "tokens 1 and 5 share a support pattern, so their W^mm rows coincide",
                      same, 1e-8, "Fig. 2 of paper A", kind="by-construction", **cite("A:fig2-mm"),
                      metric="||w^mm_1 - w^mm_5|| (rows of the certified NTP-SVM solution)",
                      construction="tokens 1 and 5 were given one support pattern (decision A-D8; "
                                   f"{'shared' if shared else 'NOT shared'} here), and swapping two tokens with one "
                                   "pattern maps the NTP-SVM, a strictly convex QP, to itself: its unique solution has "
                                   "equal rows whatever the data (only a wrong solver can fail this)",
                      threshold_source="solver tolerance (ours)"),
        check_at_least("2D: w*_1 ≠ w*_5", "W* rows depend on the in-support probabilities", differ, 1e-3,
                       "Fig. 2 of paper A", kind="by-construction", **cite("A:fig2-star"), metric="||w*_1 - w*_5||",
                       construction="the in-support probabilities are Dirichlet draws, so tokens 1 and 5 follow "
                                    "their contexts with different probabilities almost surely, and W* (fixed by the "
                                    "log-odds) then has different rows: no draw of the generator makes them equal",
                       threshold_source="clearly above round-off (ours)"),
        check_at_most("2D: W* ⟂ W^mm", "|<W*, W^mm>| = 0", abs(float((W_star * W_mm).sum())), 1e-9,
                      "Fig. 2 of paper A", kind="sanity", threshold_source="round-off allowance (ours)"),
        *_figure1_statements(data, W_mm),
    ]


#: how the 2D example's contexts were placed (decision A-D8): the caption's statements about W^mm hold by construction
FIGURE1_CONSTRUCTION = ("the contexts' angles (90°, 205°, 300°) were chosen so that the caption's statements hold "
                        "(decision A-D8 of docs/paper-a-linear-ntp.md); W^mm depends only on them and the supports")


def _figure1_statements(data: NTPData, W_mm: torch.Tensor) -> list[Check]:
    """The statements of Fig. 1's caption about the 2D example, measured: they hold because the contexts were placed
    to make them hold, so they are ``by-construction`` (shown, never counted).

    Word 3 follows only context A: w_3 (almost) aligns with A and its hyperplane separates A from B and C. Every
    other word follows two contexts: w_v lies in their cone, and a wider cone gives a larger ||w_v||.
    """
    H, W = data.H.double(), W_mm.double()
    support = data.P > 0  # (m, V)
    only_A = [v for v in range(data.V) if support[:, v].tolist() == [True, False, False]]
    pairs = {v: torch.nonzero(support[:, v])[:, 0].tolist() for v in range(data.V) if int(support[:, v].sum()) == 2}
    fields = {"kind": "by-construction", "source": "Fig. 1 caption of paper A", "construction": FIGURE1_CONSTRUCTION}
    out = []
    if only_A:
        w = W[only_A[0]]
        cos = float(w @ H[0] / (torch.linalg.vector_norm(w) * torch.linalg.vector_norm(H[0])))
        signs = (H @ w).tolist()
        out.append(check_at_least("2D: w_3 aligns with A", "the word following only A (almost) aligns with A: cosine",
                                  cos, 0.99, threshold_source="'almost aligns' read as cosine >= 0.99 (ours)",
                                  **cite("A:fig1-w3"), metric="cos(w^mm_3, h_A)", **fields))
        out.append(Check("2D: w_3 separates A", "its hyperplane separates A from B and C (signs of <w_3, h>)",
                         " ".join(f"{s:+.3g}" for s in signs), "+, -, -",
                         signs[0] > 0 and signs[1] < 0 and signs[2] < 0, threshold_source="the caption",
                         **cite("A:fig1-w3"), metric="signs of <w^mm_3, h_A>, <w^mm_3, h_B>, <w^mm_3, h_C>", **fields))
    coef = {v: torch.linalg.solve(H[[i, j]].T, W[v]) for v, (i, j) in pairs.items()}
    in_cone = min(float(c.min()) for c in coef.values())
    out.append(check_at_least("2D: words in their cones", "each word following two contexts lies in their cone",
                              in_cone, -1e-9, threshold_source="the caption (round-off allowance)",
                              **cite("A:fig1-cones"), metric="the smallest coefficient of w^mm_v on the embeddings "
                              "of its two contexts", **fields))
    angle = {v: math.degrees(math.acos(float(H[i] @ H[j] / (H[i].norm() * H[j].norm()))))
             for v, (i, j) in pairs.items()}
    norm = {v: float(torch.linalg.vector_norm(W[v])) for v in pairs}
    distinct = sorted({round(a, 6): v for v, a in angle.items()}.items())  # one word per cone angle
    increasing = len(distinct) > 1 and all(norm[b] > norm[a] for (_, a), (_, b) in itertools.pairwise(distinct))
    out.append(Check("2D: wider cone, larger norm", "the wider the cone of a word's two contexts, the larger ||w_v||",
                     ", ".join(f"{a:.0f}°: {norm[v]:.3g}" for a, v in distinct), "increasing in the angle",
                     increasing, threshold_source="the caption (needs at least two distinct cone angles)",
                     **cite("A:fig1-norms"), metric="||w^mm_v|| against the angle of its two contexts", **fields))
    return out


#: entropies the paper states for its single random draws (App. A: Fig. 1's 2D example, Figs. 3-5's dataset)
PAPER_ENTROPY = {"two_d": 0.8811, "random": 1.445}
#: datasets drawn to show where the paper's single draw lies
ENTROPY_DRAWS = 300
#: the rule for a dataset the paper describes by a number but not by its draw: data seed 0, always (never a seed
#: searched to match the number); the paper's number is then graded as a draw of our generator
SEED_RULE = ("data seed 0, the same rule for every dataset the paper gives a number of but not its draw: never a seed "
             "searched to match the paper's number")


def entropy_check(name: str, key: str, paper: float, draws: np.ndarray, ours: float, seed: int,
                  control: tuple[str, np.ndarray]) -> Check:
    """The paper's entropy graded as a draw of our generator: its quantile among ``draws`` (data seeds
    0..len-1) must lie in the central 99%; the value of the graded dataset (``seed``) is shown beside it. ``control``:
    (another generator in words, its draws), where the paper's value must fall in a tail."""
    def check(sample: np.ndarray) -> Check:
        quantile = float(np.mean(sample <= paper))
        return Check(f"{name}: entropy", f"the paper's H = {paper} is a typical draw of our generator (a different "
                     "generator would put it in a tail)", quantile, "in [0.005, 0.995]", 0.005 <= quantile <= 0.995,
                     "App. A of paper A", kind="paper-number", **cite(key),
                     metric=f"fraction of {len(sample)} draws of the generator (data seeds 0-{len(sample) - 1}) with H "
                            f"at or below the paper's; draws range {sample.min():.4f}-{sample.max():.4f} (mean "
                            f"{sample.mean():.4f}, sd {sample.std():.4f}); our dataset (data seed {seed}): H = "
                            f"{ours:.4f}", premise="the paper's generator as App. A describes it", premise_met=None,
                     threshold_source="the central 99% of the draws (ours); " + SEED_RULE)

    return with_control(check(draws), control[0], check(control[1]))


def two_d_training_checks(history: History, data_seed: int) -> list[Check]:
    """Fig. 1's right panel on the 2D example at the levels calibrated for this run's number of steps (none when no
    calibration was made at that schedule), each with the same run stopped 100 times earlier as control."""
    levels = TWO_D_LEVELS.get(int(history.step))
    if levels is None:
        return []
    last, k_early = history.at(), early_step(history)
    early = history.at(k_early)
    key = levels["key"]
    fields = {"kind": "calibrated", **cite("A:thm2"),
              "premise": "the 2D example is NTP_H-compatible and NTP-separable; GD, η = 0.5 (ours: the paper does not "
                         "give Fig. 1's step size)"}
    stopped = f"the same run stopped at k = {k_early} (100 times earlier)"

    def level(name, claim, column, bound, metric, worst=max):
        check = check_at_most if worst is max else check_at_least
        args = {"metric": metric, "threshold_source": calibrated(f"{key}_{column}", data_seed), **fields}
        return with_control(check(name, claim, worst(last[column]), levels[column], "Fig. 1 of paper A", **args),
                            stopped, check(name, claim, worst(early[column]), levels[column], "Fig. 1 of paper A",
                                           **args))

    return [
        level("2d-gd: alignment", "cos(W_k, W^mm) -> 1 on the 2D example", "cos_mm", levels["cos_mm"],
              "cos(W_k, W^mm) at the last step", worst=min),
        level("2d-gd: F-part", "P_F(W_k) -> W* (relative error)", "F_error_rel", levels["F_error_rel"],
              "||P_F(W_k) - W*||/||W*|| at the last step"),
        level("2d-gd: loss gap", "CE(W_k) - H -> 0", "loss_gap", levels["loss_gap"], "CE(W_k) - H at the last step"),
    ]
