"""The log-bilinear model's checks (docs/ufm.md#checks): pure functions of the reference objects, a solved path and
training histories.

Kinds: certificates and exact identities are ``sanity``; values that hold because of how they were computed (the
solver's symmetric start, the stationarity that the path's certificate already tests) are ``by-construction``;
statements we derive (U-1 ... U-6 of docs/ufm.md) and the trends the follow-up papers predict (Zhao, Behnia, Vakilian,
Thrampoulidis 2024) are ``theorem`` with their source; levels reached at a finite λ or step are ``calibrated`` on
planted datasets 1-8 (``calibration/ufm.py``) and graded on dataset 0, which the calibration never saw, at the
calibration's schedule only. Every graded check names its negative control, computed here by the same code on an input
that breaks what the statement is about: a wrong limit (the finite part of a wrong pairing of probabilities and
contexts, the competing predictions S̃ and D0), a wrong grouping of the contexts, data where S̃ is optimal, the optimum
at another λ, the learned order reversed.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import torch

from ...data.ntp import NTPData
from ...geometry.linear.loss import logit_cross_entropy_grad
from ...geometry.ufm.logits import (
    finite_logits,
    gram_alignment,
    logit_decomposition,
    predicted_grams,
    project_F,
    subspace_collapse,
)
from ...results import Check, check_at_least, check_at_most, with_control
from ...training.history import History
from ...training.ufm import UFMReference
from ..claims import cite
from .config import PLANTED_ADAM, PLANTED_GD, PLANTED_NGD, UFMConfig, scaled
from .runs import PathRun, half_times, order_statistics

#: the follow-up paper whose predictions the group checks
ZHAO = "Zhao, Behnia, Vakilian, Thrampoulidis (COLM 2024)"
#: planted data seeds of the calibration (calibration/ufm.py) and the worst values measured there
CALIBRATION_SEEDS = range(1, 9)
CALIBRATION_WORST: dict[str, float] = {
    "path_F_error_rel": 0.01507, "path_cos_perp_mm": 0.9911, "path_sub_collapse_ratio": 0.04149, "path_gram": 0.9772,
    "train_dist_gd": 0.006841, "train_dist_adam": 0.001383, "train_dist_ngd": 0.003552, "order_concordance": 0.75}
#: the levels graded on data seed 0 (docs/ufm.md, decision U-D9): twice the worst calibration value for errors, twice
#: its distance to 1 for cosines, the worst value minus 0.15 for the concordance
LEVELS: dict[str, float] = {
    "path_F_error_rel": 0.03, "path_cos_perp_mm": 0.982, "path_sub_collapse_ratio": 0.083, "path_gram": 0.954,
    "train_dist_gd": 0.014, "train_dist_adam": 0.0028, "train_dist_ngd": 0.0071, "order_concordance": 0.6}
#: the training presets the levels were calibrated for (quick scale), by optimizer
CALIBRATED_TRAINING = {"gd": PLANTED_GD, "adam": PLANTED_ADAM, "ngd": PLANTED_NGD}
EXACT = 1e-6
#: the training checks' negative control is the certified optimum at this multiple of the training λ (a smaller λ: a
#: larger one can exceed λ_0 = ||∇CE(0)||_op, where the optimum is 0)
WRONG_LAMBDA = 0.1


def calibrated(key: str, data_seed: int | None) -> str:
    """``threshold_source`` of a calibrated level: where it was set, and whether the graded dataset was held out."""
    worst = CALIBRATION_WORST.get(key)
    where = (f"calibrated on planted data seeds {CALIBRATION_SEEDS.start}-{CALIBRATION_SEEDS.stop - 1} "
             f"(calibration/ufm.json, quick scale; worst value {worst:.4g})" if worst is not None
             else "calibration/ufm.json")
    if data_seed is not None and data_seed in CALIBRATION_SEEDS:
        return where + "; this run's dataset is one of them (not held out)"
    return where + "; the graded dataset is held out"


def calibration_differs(cfg: UFMConfig, preset: UFMConfig, *, path: bool = False) -> str:
    """Why ``cfg`` is not at the schedule a level was calibrated for (``preset`` at quick scale; any planted data seed),
    in words, or "" when it is: the data generator, the model, and the training run (``path``: the λ grid)."""
    ref = scaled(preset, "quick")
    cfg = replace(cfg, data=replace(cfg.data, seed=ref.data.seed))
    parts = ("data", "model", "path") if path else ("data", "model", "optimizer", "train")
    diff = [f"{part}.{f.name}" for part in parts for f in fields(getattr(ref, part))
            if getattr(getattr(cfg, part), f.name) != getattr(getattr(ref, part), f.name)]
    return f"the level was calibrated at quick scale; this run's settings differ ({', '.join(diff)})" if diff else ""


def _exact(**kw) -> dict:
    return {"kind": "sanity", "threshold_source": "round-off and solver tolerance (ours)", **kw}


# ------------------------------------------------------------------------------------------------ wrong limits
def shuffled_finite_logits(data: NTPData, groups: torch.Tensor) -> torch.Tensor:
    """A wrong finite part: L* with each context's column taken from the next context of its support set (cyclically;
    the same supports and values, the probabilities paired with the wrong contexts). Equal to L* where every set has
    one context."""
    m = groups.shape[0]
    order = torch.argsort(groups, stable=True)
    counts = torch.bincount(groups)
    starts = torch.cumsum(counts, 0) - counts
    g = groups[order]
    nxt = starts[g] + (torch.arange(m) - starts[g] + 1) % counts[g]
    perm = torch.empty_like(order)
    perm[order] = order[nxt]
    return finite_logits(data)[:, perm]


def competing_limits(data: NTPData, ref: UFMReference) -> dict[str, torch.Tensor]:
    """The other limits the growing part and the Grams could follow (the negative controls of their trends): the
    centred support matrix S̃ (U-3's prediction) where it is not L^mm, and D0 = -∇CE(0) (U-6: the direction the path
    leaves λ_0 along)."""
    out = {}
    S = ref.support.S_tilde.to(ref.svm.L)
    if float(torch.linalg.matrix_norm(ref.svm.L - S) / torch.linalg.matrix_norm(S)) > EXACT:
        out["S̃"] = S
    _, G0 = logit_cross_entropy_grad(torch.zeros(data.V, data.m, dtype=data.P.dtype), data)
    out["D0"] = -G0
    return out


def merged_groups(groups: torch.Tensor) -> torch.Tensor:
    """A wrong grouping: support sets 2k and 2k + 1 labelled as one (the collapse check's negative control)."""
    return groups // 2


# ------------------------------------------------------------------------------------------------ the SVM
def geometry_checks(name: str, data: NTPData, ref: UFMReference, other_gap: float | None,
                    value_diff: float | None, *, control: tuple[str, float] | None = None) -> list[Check]:
    """The nuclear-norm SVM's certificate, the two solvers' agreement (when the other one ran: ``other_gap`` is its
    certified gap, ``value_diff`` the relative difference of the values), and the structure of L^mm (U-3, U-5).

    ``control``: (name, ||L^mm - S̃|| / ||S̃||) on data where the polar condition fails, the negative control of
    "L^mm = S̃"."""
    svm, s = ref.svm, ref.support
    from ...geometry.ufm.logit_svm import same_support_spread, svm_vs_centred_support

    out = [
        check_at_most(f"{name}: SVM certificate", f"the nuclear-norm NTP-SVM ({svm.solver}) is certified: relative "
                      "duality gap against the recomputed dual certificate (||Λ||_op <= 1, columns summing to 0, <= 0 "
                      "off the supports)", svm.certificate.duality_gap, svm.tol,
                      "docs/ufm.md, U-2 (our derivation of the dual)", **_exact()),
        check_at_most(f"{name}: same-support columns of L^mm", "contexts with the same support set have the same "
                      "column of L^mm (convexity and symmetry)", same_support_spread(svm.L, ref.groups), EXACT,
                      "docs/ufm.md, U-5 (our derivation)", kind="by-construction", **cite("docs:ufm-collapse"),
                      metric="largest relative spread of L^mm's columns within a support set",
                      construction="the solvers return the symmetric minimizer: ADMM starts at S̃, whose columns are "
                      "equal within every support set, and keeps that symmetry; Clarabel's interior point ends at the "
                      "analytic centre of the optimal face, which the permutations of contexts sharing a support set "
                      "leave fixed. That a symmetric minimizer exists follows from convexity (U-5); the limit's "
                      "collapse is graded along the path (subspace collapse)",
                      threshold_source="solver tolerance (ours)"),
    ]
    if value_diff is not None:
        out.insert(1, check_at_most(f"{name}: SDP and first-order agree", "||L^mm||_* from Clarabel (cvxpy SDP) and "
                                    f"from ADMM agree (the other is certified to {other_gap:.1e})", value_diff, EXACT,
                                    "two independent solvers", **_exact()))
    if s.svm_is_centred_support:
        claim = ("the centred support matrix solves the SVM when its polar factor is <= 0 off the supports (its polar "
                 "factor is then a dual certificate)")
        statement = {"kind": "theorem", "premise": f"polar factor of S̃ <= 0 off the supports (largest entry "
                   f"{s.polar_out_max:.3g})", "premise_met": s.svm_is_centred_support, **cite("docs:ufm-support"),
                   "metric": "||L^mm - S̃|| / ||S̃||", "threshold_source": "solver tolerance (ours)"}
        check = check_at_most(f"{name}: L^mm = S̃", claim, svm_vs_centred_support(svm, data), EXACT,
                              "docs/ufm.md, U-3 (our derivation)", **statement)
        if control is not None:
            check = with_control(check, f"the SVM of the {control[0]} data, where the polar condition fails",
                                 check_at_most(check.name, claim, control[1], EXACT))
        out.append(check)
    return out


def neural_collapse_check() -> Check:
    """One-hot balanced supports (|S_j| = 1, the same number of contexts per token): L^mm is the centred one-hot
    matrix, whose SVD is the simplex equiangular tight frame of neural collapse."""
    from ...data.planted import planted_supports
    from ...geometry.ufm.logit_svm import nuclear_svm, svm_vs_centred_support

    V = 5
    data = planted_supports(V, (1,) * V, 3, seed=0)
    svm = nuclear_svm(data, "admm")
    H = torch.linalg.svd(svm.L, full_matrices=False)[0][:, :V - 1]  # word directions of the SVD
    gram = H @ H.mT
    etf = torch.eye(V, dtype=gram.dtype) - 1.0 / V  # the simplex ETF's Gram (up to scale)
    err = max(svm_vs_centred_support(svm, data), float(torch.linalg.matrix_norm(gram - etf)))
    return check_at_most("one-hot balanced: simplex ETF", "with |S_j| = 1 and 3 contexts per token (V = 5), L^mm is "
                         "the centred one-hot matrix and the words' Gram is the simplex ETF I - 11^T/V (neural "
                         "collapse of the unconstrained-features model)", err, EXACT,
                         "unconstrained-features model of neural collapse (Mixon et al. 2020, ref. [59] of paper A)",
                         kind="by-construction", **cite("docs:ufm-etf"),
                         metric="larger of ||L^mm - S̃||/||S̃|| and ||H H^T - (I - 11^T/V)|| (word Gram of the SVD)",
                         construction="ADMM starts at S̃ with its polar factor, which certifies S̃ at once here (U-3); "
                         "the word Gram of the SVD of a centred balanced one-hot matrix is I - 11^T/V exactly (the "
                         "problem is invariant under permuting the tokens with their contexts)",
                         threshold_source="solver tolerance (ours)")


# ------------------------------------------------------------------------------------------------ the path
def _by_point(run: PathRun, metric: str) -> np.ndarray:
    """(points, seeds) values of ``metric`` along the path (λ decreasing)."""
    n = len(run.points)
    vals = [[r[metric] for r in run.rows if r["step"] == i] for i in range(n)]
    return np.array(vals, dtype=float)


def _along(run: PathRun, measure) -> np.ndarray:
    """(points, seeds) values of ``measure(point)`` (a (seeds,) tensor) along the path."""
    return np.stack([measure(p).detach().cpu().numpy() for p in run.points])


def path_premise(run: PathRun) -> tuple[str, bool]:
    d = run.points[0].W.shape[-1]
    ranks = [int((torch.linalg.svdvals(p.L) > 1e-9 * torch.linalg.svdvals(p.L)[..., :1]).sum(-1).max())
             for p in run.points]
    return (f"d = {d} >= rank of every path solution (largest {max(ranks)}): the factored problem equals min CE(L) + "
            "λ||L||_*"), d >= max(ranks)


def _closing(name: str, claim: str, distances: dict[str, np.ndarray], target: str, shown: np.ndarray,
             **kw) -> Check:
    """A limit statement along the path, graded against the competing limits: ``target``'s distance
    (``distances[target]``, (points,), worst seed) falls at every step of the λ grid, and at the smallest λ it is below
    every other candidate's by a lead (log10 of their ratio, decades) that grows over the smaller half of the grid (a
    distance levelling off at a positive value falls behind). ``shown``: the value reported (error or cosine)."""
    logd = {k: np.log10(np.maximum(v, EXACT)) for k, v in distances.items()}
    rivals = [k for k in logd if k != target]
    lead = np.min([logd[k] - logd[target] for k in rivals], axis=0)
    half = len(lead) // 2
    closest = min(rivals, key=lambda k: logd[k][-1])
    ok = bool(np.all(np.diff(distances[target]) < 0) and lead[-1] > 0 and lead[-1] > lead[half])
    return Check(name, claim, f"{shown[-1]:.4g}; lead {lead[-1]:+.3f} decades over {closest} (from {lead[half]:+.3f})",
                 "falls at every step; closest at the smallest λ, by a lead growing over the smaller half", ok, **kw)


def _limit_check(name: str, claim: str, distances: dict[str, np.ndarray], shown: dict[str, np.ndarray],
                 **kw) -> Check:
    """:func:`_closing` for the predicted limit (the first key of ``distances``), with its negative control: the same
    check with the closest competing limit taken as the limit (the predicted one among its rivals)."""
    target, *rivals = distances
    check = _closing(name, claim, distances, target, shown[target], **kw)
    rival = min(rivals, key=lambda k: distances[k][-1])
    on_control = _closing(name, claim, distances, rival, shown[rival])
    return with_control(check, f"the wrong limit: the closest competing limit ({rival}; candidates "
                        f"{', '.join(rivals)}) taken as the limit",
                        replace(on_control, measured=f"{rival}: {on_control.measured}"))


def path_checks(name: str, run: PathRun, data: NTPData, ref: UFMReference, *, levels: str | None = None,
                data_seed: int | None = None, collapse: bool = True) -> list[Check]:
    """Certificates, identities and the predicted trends along the path (the subspace collapse when ``collapse``),
    each trend with its negative control; the calibrated levels at its end when ``levels`` is not None ("" when the
    path is at the calibration's schedule, else why not: then they are shown, not graded)."""
    pts = run.points
    premise, met = path_premise(run)
    thm = {"kind": "theorem", "premise": premise, "premise_met": met}
    grad = max(float(p.certificate["grad_rel"].max()) for p in pts)
    op = max(float(p.certificate["op_ratio"].max()) for p in pts)
    gap = max(float(p.certificate["gap_rel"].max()) for p in pts)
    out = [
        check_at_most(f"{name}: first-order conditions", f"every path point and seed is stationary: ||∇f|| / (λ||(W, "
                      f"H)||) ({len(pts)} values of λ)", grad, pts[0].tol, "docs/ufm.md, U-1", **_exact()),
        check_at_most(f"{name}: global optimality", "||∇CE(W H^T)||_op <= λ at every point (a stationary point of the "
                      "factorization is then a global minimum): largest ||∇CE||_op / λ - 1", op - 1, EXACT,
                      "docs/ufm.md, U-1 (Burer-Monteiro)", **_exact()),
        check_at_most(f"{name}: convex duality gap", "relative duality gap of min CE(L) + λ||L||_* at L = W H^T",
                      gap, 1e-7, "docs/ufm.md, U-1 (our derivation of the dual)", **_exact()),
    ]
    var = max(float(p.certificate["variational_gap"].abs().max()) for p in pts)
    bal = max(float(p.certificate["balance"].max()) for p in pts)
    out.append(check_at_most(f"{name}: variational identity", "(||W||² + ||H||²)/2 = ||W H^T||_* and W^T W = H^T H at "
                             "every path point", max(var, bal), EXACT,
                             "variational form of the nuclear norm (docs/ufm.md, U-1)", kind="by-construction",
                             **cite("docs:ufm-balance"), metric="largest of the two relative errors over the path",
                             construction="both identities follow algebraically from the stationarity that 'first-"
                             "order conditions' certifies (G H = -λW and G^T W = -λH give W^T W = H^T H and "
                             "||W||² = ||H||² = -<G, L>/λ = ||L||_* when ||G||_op <= λ, U-1)",
                             threshold_source="round-off and solver tolerance (ours)"))
    spread = max(float((torch.linalg.matrix_norm(p.L - p.L[:1]) / torch.linalg.matrix_norm(p.L[:1])).max())
                 for p in pts)
    out.append(check_at_most(f"{name}: seeds agree", f"every seed ({pts[0].W.shape[0]}) reaches the same logits at "
                             "every λ (largest relative difference)", spread, 1e-5, "docs/ufm.md, U-1",
                             **_exact()))
    series = _path_series(run, data, ref)
    trend = {"source": f"{ZHAO}: regularization path of the NTP-UFM; docs/ufm.md, U-2",
             "threshold_source": "the predicted trend, over the whole λ grid", **thm}
    out.append(_limit_check(f"{name}: finite part -> L*", "||P_F(L_λ) - L*|| / ||L*|| decreases at every step as "
                            "λ -> 0 and ends closer to L* than to a wrong finite part (worst seed)",
                            series["F"], series["F"], **trend, **cite("docs:ufm-sparse-low-rank"),
                            metric="||P_F(L_λ) - X|| / ||L*|| over the λ grid for X = L* and X = L* with each "
                            "context's probabilities taken from the next context of its support set (wrong pairing): "
                            "strictly decreasing for L*, and smaller, by a growing lead (the value at the smallest λ "
                            "shown)"))
    out.append(_limit_check(f"{name}: growing part -> L^mm", "cos(P_⊥(L_λ), L^mm) increases at every step as λ -> 0 "
                            "and ends closer to 1 than the cosine with any competing limit (worst seed)",
                            _gaps(series["cos"]), series["cos"], **trend,
                            **cite("docs:ufm-sparse-low-rank"), metric="1 - cos(P_⊥(L_λ), X) over the λ grid for X = "
                            f"L^mm and the competing limits {', '.join(list(series['cos'])[1:])}: strictly "
                            "decreasing for L^mm, and smaller, by a growing lead (cos at the smallest λ shown)"))
    out.append(_limit_check(f"{name}: Gram alignment", "cos(W W^T, (L^mm L^mm^T)^{1/2}) and cos(H H^T, (L^mm^T "
                            "L^mm)^{1/2}) increase at every step as λ -> 0 and end closer to 1 than with the Grams "
                            "of any competing limit (smaller of the two, worst seed)", _gaps(series["gram"]),
                            series["gram"], **{**trend, "source": f"{ZHAO}; docs/ufm.md, U-4"},
                            **cite("docs:ufm-gram"), metric="1 - the smaller Gram cosine over the λ grid with the "
                            "Grams of L^mm and of the competing limits: strictly decreasing for L^mm, and smaller, by "
                            "a growing lead"))
    if collapse and not math.isnan(series["sub"][-1]):
        out.append(_collapse_check(name, run, series, trend))
    if levels is not None:
        out.extend(_path_levels(name, run, series, data_seed, thm, levels))
    return out


def _gaps(cosines: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: 1 - v for k, v in cosines.items()}


def _path_series(run: PathRun, data: NTPData, ref: UFMReference) -> dict:
    """The path's measurements (worst seed per point) against the predicted limit (first key) and the competing ones:
    ``F`` (relative errors), ``cos`` and ``gram`` (cosines), ``sub`` and ``sub_wrong`` (collapse ratios with the
    support sets and with a wrong grouping)."""
    L_wrong = shuffled_finite_logits(data, ref.groups)
    norm = torch.linalg.matrix_norm(finite_logits(data)).clamp_min(1e-300)
    rivals = competing_limits(data, ref)
    grams = {k: predicted_grams(v) for k, v in rivals.items()}

    def gram_cos(p, word, context):
        return torch.minimum(*gram_alignment(p.W, p.H, word, context).values())

    def collapse_ratio(p, groups):
        return subspace_collapse(p.W, p.H, groups, ref.mm_U)["sub_collapse_ratio"]

    return {
        "F": {"L*": _by_point(run, "F_error_rel").max(1),
              "L* (wrong pairing)": _along(run, lambda p: torch.linalg.matrix_norm(project_F(p.L, data) - L_wrong)
                                           / norm).max(1)},
        "cos": {"L^mm": _by_point(run, "cos_perp_mm").min(1),
                **{k: _along(run, lambda p, v=v: logit_decomposition(p.L, data, v)["cos_perp_mm"]).min(1)
                   for k, v in rivals.items()}},
        "gram": {"L^mm": np.minimum(_by_point(run, "cos_word_gram"), _by_point(run, "cos_context_gram")).min(1),
                 **{k: _along(run, lambda p, g=g: gram_cos(p, *g)).min(1) for k, g in grams.items()}},
        "sub": _by_point(run, "sub_collapse_ratio").max(1),
        "sub_wrong": _along(run, lambda p: collapse_ratio(p, merged_groups(ref.groups))).max(1),
    }


def _collapse(values: np.ndarray, name: str, claim: str, **kw) -> Check:
    """Decreasing at every step over the smaller half of the λ grid and below 1 at its end (the largest within-set
    angle smaller than the smallest angle between sets: the sets separate)."""
    half = len(values) // 2
    ok = bool(np.all(np.diff(values[half:]) < 0) and values[-1] < 1)
    return Check(name, claim, float(values[-1]), "decreasing over the smaller half, < 1 at the end", ok, **kw)


def _collapse_check(name: str, run: PathRun, series: dict, trend: dict) -> Check:
    half = len(run.points) // 2  # the limit statement: eventually decreasing (at large λ the solutions have low rank)
    claim = ("within-set angle spread / between-set angle of the context embeddings in the support-pattern subspace "
             f"decreases at every step over the smaller half of the λ grid (λ <= {run.points[half].lam:.2g}) and ends "
             "below 1 (the sets separate)")
    check = _collapse(series["sub"], f"{name}: subspace collapse", claim, **cite("docs:ufm-collapse"),
                      metric="the collapse ratio over the smaller half of the λ grid: strictly decreasing, and below "
                      "1 at the smallest λ",
                      **{**trend, "source": f"{ZHAO}: subspace collapse; docs/ufm.md, U-5",
                         "threshold_source": "the predicted trend over the smaller half of the λ grid; 1: the "
                         "within-set spread equals the between-set angle"})
    return with_control(check, "a wrong grouping: support sets 2k and 2k + 1 labelled as one",
                        _collapse(series["sub_wrong"], check.name, claim))


def _path_levels(name: str, run: PathRun, series: dict, data_seed: int | None, thm: dict, why_not: str
                 ) -> list[Check]:
    """Calibrated levels at the smallest λ (the limits are only approached), each with the negative control of its
    trend; graded only at the calibration's λ grid (``why_not`` says why not)."""
    lam = run.points[-1].lam
    level_fields = {"kind": "calibrated", "premise": thm["premise"], "premise_met": thm["premise_met"],
               "graded": not why_not, "ungraded_reason": why_not}

    def level(test, key, title, claim, value, control, on_control):
        check = test(f"{name}: {title} at λ = {lam:.2g}", claim, value, LEVELS[key], ZHAO,
                     threshold_source=calibrated(key, data_seed), **level_fields)
        return with_control(check, control, test(check.name, claim, on_control, LEVELS[key]))

    def closest(cosines):
        return max(list(cosines)[1:], key=lambda k: cosines[k][-1])

    rival_cos, rival_gram = closest(series["cos"]), closest(series["gram"])
    return [
        level(check_at_most, "path_F_error_rel", "finite part", "||P_F(L_λ) - L*|| / ||L*||", series["F"]["L*"][-1],
              "the wrong limit: L* with each context's probabilities taken from the next context of its support set",
              series["F"]["L* (wrong pairing)"][-1]),
        level(check_at_least, "path_cos_perp_mm", "growing part", "cos(P_⊥(L_λ), L^mm)", series["cos"]["L^mm"][-1],
              f"the closest competing limit, {rival_cos}: cos(P_⊥(L_λ), {rival_cos})",
              series["cos"][rival_cos][-1]),
        level(check_at_most, "path_sub_collapse_ratio", "subspace collapse", "within-set spread / between-set angle "
              "in the support-pattern subspace", series["sub"][-1], "a wrong grouping: support sets 2k and 2k + 1 "
              "labelled as one", series["sub_wrong"][-1]),
        level(check_at_least, "path_gram", "Gram alignment", "cos(W W^T, U Σ U^T) and cos(H H^T, V Σ V^T) for the "
              "SVD U Σ V^T of L^mm (smaller of the two)", series["gram"]["L^mm"][-1], f"the closest competing "
              f"limit, {rival_gram}: the Gram cosines with its Grams", series["gram"][rival_gram][-1]),
    ]


def limit_is_svm(path: PathRun, ref: UFMReference, control: PathRun | None) -> Check:
    """Where S̃ does not solve the SVM, the context Gram follows L^mm's prediction, not S̃'s: the excess of its cosine
    with L^mm's prediction over its cosine with S̃'s is above the path's accuracy at the smallest λ and grows over the
    smaller half of the λ grid. ``control``: a path on data where S̃ is L^mm (the two predictions coincide there)."""
    claim = (f"at λ = {path.points[-1].lam:.2g}, H H^T is closer in direction to (L^mm^T L^mm)^{{1/2}} than to V Σ "
             "V^T of S̃ by more than the path's accuracy, and the excess grows over the smaller half of the λ grid "
             "(S̃ does not solve the SVM here)")
    check = _excess(path, f"path {path.name}: the limit follows L^mm", claim, source=f"{ZHAO}; docs/ufm.md, U-3, U-4",
                    kind="theorem", **cite("docs:ufm-gram"), metric="cos of H H^T with (L^mm^T L^mm)^{1/2} minus "
                    "its cos with V Σ V^T of S̃ (worst seed) over the smaller half of the λ grid",
                    premise=f"S̃ is not optimal (largest polar entry off the supports {ref.support.polar_out_max:.3g} "
                    "> 0)", premise_met=not ref.support.svm_is_centred_support,
                    threshold_source=f"the path's accuracy ({EXACT:g}); the prediction's direction (no level)")
    if control is None:
        return check
    return with_control(check, f"the {control.name} data, where S̃ solves the SVM (the two predictions coincide)",
                        _excess(control, check.name, claim))


def _excess(path: PathRun, name: str, claim: str, **kw) -> Check:
    excess = (_by_point(path, "cos_context_gram") - _by_point(path, "cos_context_gram_S")).min(1)
    half = len(excess) // 2
    ok = bool(excess[-1] > EXACT and np.all(np.diff(excess[half:]) > 0))
    return Check(name, claim, float(excess[-1]), f"> {EXACT:g}, increasing over the smaller half", ok, **kw)


# ------------------------------------------------------------------------------------------------ training
def training_checks(run: str, cfg: UFMConfig, history: History, ref: UFMReference, *,
                    data_seed: int | None = None, control: tuple[float, torch.Tensor] | None = None) -> list[Check]:
    """The trained logits against the certified optimum at the training λ (calibrated levels, planted data only; not
    graded away from the calibrated preset's settings). ``control``: (λ', the certified optimum at λ'), the wrong
    target of the negative control."""
    out: list[Check] = []
    last = history.at()
    preset = CALIBRATED_TRAINING.get(cfg.optimizer.name)
    if "dist_opt" in last and cfg.data.source == "planted" and preset is not None:
        key = f"train_dist_{cfg.optimizer.name}"
        why_not = calibration_differs(cfg, preset)
        claim = (f"||W_k H_k^T - L_λ|| / ||L_λ|| at k = {history.step} ({cfg.optimizer.name}, λ = {cfg.model.lam:g}; "
                 "worst seed)")
        check = check_at_most(f"{run}: reaches the optimum", claim, max(last["dist_opt"]), LEVELS[key],
                              "docs/ufm.md, U-1", kind="calibrated", threshold_source=calibrated(key, data_seed),
                              graded=not why_not, ungraded_reason=why_not)
        if control is not None:
            lam, L = control
            W, H = history.params["W"], history.params["H"]
            dist = torch.linalg.matrix_norm(W @ H.mT - L.to(W)) / torch.linalg.matrix_norm(L)
            check = with_control(check, f"the wrong target: the certified optimum at λ = {lam:g}",
                                 check_at_most(check.name, claim, float(dist.max()), LEVELS[key]))
        out.append(check)
    return out


def reversed_order(sigma: np.ndarray, times: np.ndarray, *, share: float = 1 / 3) -> np.ndarray:
    """The half-times with the leading modes (σ_i >= share σ_1) in reverse order: the weakest learned first (the
    order-of-learning check's negative control)."""
    lead = np.flatnonzero(sigma >= share * sigma[0])
    out = times.copy()
    out[lead] = times[lead[::-1]]
    return out


def order_checks(run: str, cfg: UFMConfig, history: History, ref: UFMReference, *,
                 data_seed: int | None = None) -> list[Check]:
    """The order in which D0's singular directions are learned from a small initialisation (U-6), with the learned
    order reversed as its negative control; graded at the calibrated preset's settings only."""
    times, _ = half_times(history)
    sigma = ref.D0_sigma.cpu().numpy()
    stats = order_statistics(sigma, times)
    why_not = calibration_differs(cfg, PLANTED_GD)
    claim = (f"among the {stats['modes']} leading singular directions of D0 = -∇CE(0) (σ_i >= σ_1/3), the "
             f"{stats['pairs']} pairs with σ_i >= 1.2 σ_k are learned in the order of σ (t_i <= t_k, t_i: the step at "
             "which u_i^T L v_i reaches half its final value): fraction, worst seed")
    check = check_at_least(f"{run}: order of learning", claim, min(stats["concordance"]), LEVELS["order_concordance"],
                           "docs/ufm.md, U-6 (our derivation: small-initialisation linearization)", kind="calibrated",
                           threshold_source=calibrated("order_concordance", data_seed), graded=not why_not,
                           ungraded_reason=why_not)
    wrong = order_statistics(sigma, reversed_order(sigma, times))
    return [with_control(check, "the learned order reversed (the weakest leading direction learned first)",
                         check_at_least(check.name, claim, min(wrong["concordance"]), LEVELS["order_concordance"]))]
