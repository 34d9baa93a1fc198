"""``reproduce ufm`` (the log-bilinear model on planted supports and on Shakespeare, docs/ufm.md#what-the-runs-show)
and ``ntpbias train`` of a ``ufm`` config."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..._tensor import to_numpy
from ...geometry.ufm.logit_svm import svm_vs_centred_support
from ...geometry.ufm.logits import finite_logits
from ...io import ensure_dir, write_npz
from ...results import Check, FigureSpec, RunResult, Section, Table
from ..base import RunContext, raise_if_failed
from ..catalog import GROUPS
from .checks import (
    WRONG_LAMBDA,
    ZHAO,
    calibration_differs,
    geometry_checks,
    limit_is_svm,
    neural_collapse_check,
    order_checks,
    path_checks,
    training_checks,
)
from .config import OVERLAP, PLANTED_ADAM, PLANTED_GD, PLANTED_NGD, SHAKESPEARE, UFMConfig, scaled
from .runs import (
    PathRun,
    cross_check,
    data_for,
    half_times,
    optimum_at,
    order_statistics,
    prepare,
    reference,
    run_path,
    train_run,
)

FIGURES = GROUPS["ufm"].figures
PATH_METRICS = ("F_error_rel", "cos_perp_mm", "cos_mm", "nuclear", "within_angle", "sub_within_angle",
                "between_angle", "cos_word_gram", "cos_context_gram", "cos_word_gram_S", "cos_context_gram_S",
                "grad_rel", "op_ratio")


def run_group(ctx: RunContext) -> RunResult:
    """Reproduce the log-bilinear model's experiments into ``ctx.out`` (a run directory)."""
    out = ensure_dir(ctx.out)
    ensure_dir(out / "data")
    section = Section("ufm", "Beyond paper A: trained context embeddings (the log-bilinear model)",
                      description="Paper A's future work: context embeddings trained jointly with the word embeddings, "
                                  "logits L = W H^T, CE plus the ridge (λ/2)(||W||² + ||H||²). The follow-up theory "
                                  f"({ZHAO}) predicts, as λ -> 0, logits = finite in-support log-odds + a growing part "
                                  "in the direction of the nuclear-norm NTP-SVM, collapse of contexts that share a "
                                  "support set, and embeddings aligned with the SVD of the support pattern.")
    section.checks.append(neural_collapse_check())
    configs: dict[str, UFMConfig] = {}
    histories, rows, support_rows = [], [], []
    paths: dict[str, PathRun] = {}

    planted_figs = ("ufm-path", "ufm-training", "ufm-modes", "ufm-geometry", "ufm-support")
    overlap_cfg = prepare(scaled(OVERLAP, ctx.scale), ctx)
    overlap_data = data_for(overlap_cfg)
    ctx.say("overlapping supports: nuclear-norm SVM")
    overlap_ref, _ = reference(overlap_data, overlap_cfg)  # also the negative control of "L^mm = S̃"
    if any(ctx.wants(f) for f in planted_figs):
        base = prepare(scaled(PLANTED_GD, ctx.scale), ctx)
        data = data_for(base)
        ctx.say("planted supports: nuclear-norm SVM (Clarabel and ADMM)")
        ref, facts = reference(data, base)
        section.facts.update({f"planted: {k}": v for k, v in facts.items()})
        section.checks.extend(_geometry(data, ref, "planted", section,
                                        control=("overlap", svm_vs_centred_support(overlap_ref.svm, overlap_data))))
        data.save(out / "data" / "planted.npz")
        support_rows.append(_support_row("planted", data, ref))
        arrays = {"L_mm": ref.svm.L, "S_tilde": ref.support.S_tilde, "L_star": finite_logits(data),
                  "Lam": ref.svm.Lam}
        if any(ctx.wants(f) for f in ("ufm-path", "ufm-geometry")):
            path = run_path(base, data, ref, ctx, "planted")
            paths["planted"] = path
            configs["path-planted"] = base
            rows.extend(path.rows)
            section.seconds += path.seconds
            section.checks.extend(path_checks("path planted", path, data, ref, data_seed=base.data.seed,
                                              levels=calibration_differs(base, PLANTED_GD, path=True)))
            section.tables.append(_path_table("Regularization path, planted supports", path))
            arrays.update({"path_lambdas": np.array([p.lam for p in path.points]), "path_W": path.points[-1].W,
                           "path_H": path.points[-1].H})
            if ctx.wants("ufm-path"):
                section.plots.append(_path_figure("ufm-path", "The regularization path on planted supports", path,
                                                  data.entropy))
            if ctx.wants("ufm-geometry"):
                section.plots.append(_geometry_figure(ref, path))
        if any(ctx.wants(f) for f in ("ufm-training", "ufm-modes")):
            ctx.say(f"planted supports: the optimum at λ = {base.model.lam:g}")
            opt = optimum_at(base, data, base.model.lam)
            section.checks.append(check_optimum(opt))
            ref_t = replace(ref, L_opt=opt.L[0])
            wrong_lam = WRONG_LAMBDA * base.model.lam  # the wrong target of the training checks' control
            wrong = (wrong_lam, optimum_at(base, data, wrong_lam).L[0])
            train_rows = []
            for run, preset in (("gd", PLANTED_GD), ("adam", PLANTED_ADAM), ("ngd", PLANTED_NGD)):
                cfg = prepare(scaled(preset, ctx.scale), ctx)
                configs[f"planted-{run}"] = cfg
                ctx.say(f"planted supports: training ({run})")
                history = train_run(cfg, data, ref_t, ctx, f"planted-{run}")
                raise_if_failed(history)
                histories.append(history)
                section.seconds += history.seconds
                section.checks.extend(training_checks(f"planted {run}", cfg, history, ref_t,
                                                      data_seed=cfg.data.seed, control=wrong))
                last = history.at()
                train_rows.append((run, cfg.optimizer.lr, history.step, *(float(np.max(last[k])) for k in (
                    "dist_opt", "F_error_rel")), *(float(np.min(last[k])) for k in ("cos_perp_mm", "cos_word_gram",
                                                                                   "cos_context_gram")),
                    float(np.max(last["loss_gap"])), round(history.seconds, 1)))
            gd = histories[-3]
            if ctx.scale != "smoke":
                section.checks.extend(order_checks("planted gd", configs["planted-gd"], gd, ref_t,
                                                   data_seed=base.data.seed))
            section.tables.append(Table(f"Training at λ = {base.model.lam:g} (planted supports; worst seed)", (
                "optimizer", "η", "steps", "||L_k - L_λ|| / ||L_λ||", "F-part error", "cos(P_⊥ L, L^mm)",
                "cos Gram (words)", "cos Gram (contexts)", "CE - H", "seconds"), tuple(train_rows)))
            section.tables.append(_order_table(gd, ref_t))
            rows_gd = [r for h in histories[-3:] for r in h.rows()]
            if ctx.wants("ufm-training"):
                section.plots.append(FigureSpec(
                    "ufm-training", f"Training at λ = {base.model.lam:g} (planted supports)",
                    "GD, Adam and normalized GD from a small initialisation: distance of the logits to the certified "
                    "optimum L_λ, the finite part's error, the growing part's alignment with L^mm, the Gram "
                    "matrices' alignment with their predicted limits, and the collapse of contexts that share a "
                    "support set (raw and in the support-pattern subspace).", "ufm.training",
                    {"rows": rows_gd, "runs": [h.run for h in histories[-3:]]}))
            if ctx.wants("ufm-modes"):
                section.plots.append(_modes_figure(gd, ref_t))
        write_npz(out / "data" / "planted_geometry.npz", **arrays)

    if ctx.wants("ufm-support"):
        cfg, data, ref = overlap_cfg, overlap_data, overlap_ref
        configs["path-overlap"] = cfg
        ctx.say("overlapping supports: path")
        section.checks.extend(_geometry(data, ref, "overlap", section))
        path = run_path(cfg, data, ref, ctx, "overlap")
        paths["overlap"] = path
        rows.extend(path.rows)
        section.seconds += path.seconds
        section.checks.extend(path_checks("path overlap", path, data, ref))
        section.checks.append(limit_is_svm(path, ref, paths.get("planted")))
        support_rows.append(_support_row("overlap", data, ref, path))
        data.save(out / "data" / "overlap.npz")

    if ctx.wants("ufm-shakespeare"):
        cfg = prepare(scaled(SHAKESPEARE, ctx.scale), ctx)
        configs["shakespeare"] = cfg
        data = data_for(cfg)
        ctx.say(f"Shakespeare: m = {data.m} contexts, V = {data.V}: nuclear-norm SVM")
        ref, facts = reference(data, cfg)
        section.facts.update({f"shakespeare: {k}": v for k, v in facts.items()
                              if not k.startswith("singular values")})
        section.checks.extend(_geometry(data, ref, "shakespeare", section))
        path = run_path(cfg, data, ref, ctx, "shakespeare", extra_lambdas=(cfg.model.lam,))
        paths["shakespeare"] = path
        rows.extend(path.rows)
        section.seconds += path.seconds
        section.checks.extend(path_checks("path shakespeare", path, data, ref, collapse=False))
        section.notes.append("Shakespeare: no collapse check. L^mm has rank V - 1 here, so the support-pattern "
                             "subspace is the whole word space, and many support sets differ in one token, so "
                             "between-set angles are near 0; the within-set spreads are reported in the path table")
        section.tables.append(_path_table(f"Regularization path, Shakespeare (T = {cfg.data.max_context}, V = "
                                          f"{data.V}, m = {data.m})", path))
        at = [i for i, p in enumerate(path.points) if p.lam == cfg.model.lam][0]
        ref_t = replace(ref, L_opt=path.points[at].L[0])
        ctx.say(f"Shakespeare: training ({cfg.optimizer.name})")
        history = train_run(cfg, data, ref_t, ctx, f"shakespeare-{cfg.optimizer.name}")
        raise_if_failed(history)
        histories.append(history)
        section.seconds += history.seconds
        support_rows.append(_support_row("shakespeare", data, ref, path))
        last = history.at()
        section.facts.update({f"shakespeare: {cfg.optimizer.name} at λ = {cfg.model.lam:g}, ||L_k - L_λ|| / ||L_λ|| "
                              "(worst seed)": max(last["dist_opt"]), "shakespeare: training steps": history.step})
        section.plots.append(_path_figure("ufm-shakespeare", f"Shakespeare's short contexts (T = "
                                          f"{cfg.data.max_context}, V = {data.V}, m = {data.m})", path,
                                          data.entropy, history.rows(), history.run))
        data.save(out / "data" / "shakespeare.npz")

    if support_rows:
        section.tables.append(Table("The centred support matrix S̃ against the nuclear-norm SVM L^mm", (
            "data", "m", "V", "support sets", "rank S̃", "rank L^mm", "largest polar entry off supports",
            "||L^mm - S̃|| / ||S̃||", "||S̃||_*", "||L^mm||_*", "cos Gram(H) with L^mm / with S̃ at the smallest λ"),
            tuple(r[:-1] for r in support_rows)))
        if ctx.wants("ufm-support"):
            section.plots.append(FigureSpec(
                "ufm-support", "Support matrix and nuclear-norm SVM",
                "Singular values of the centred support matrix S̃ and of the nuclear-norm NTP-SVM L^mm. They coincide "
                "when the polar factor of S̃ is <= 0 off the supports (planted disjoint sets); otherwise the SVM is "
                "the prediction and S̃ an approximation.", "ufm.support", {"rows": [r[-1] for r in support_rows]}))
    section.tables.append(_claims_table())
    return RunResult(section, configs, histories, {"scale": ctx.scale, "seeds": ctx.seeds,
                                                   "figures": list(FIGURES if ctx.figures is None else ctx.figures)},
                     rows=rows)


# ------------------------------------------------------------------------------------------------ helpers
#: the SDP cross-check runs while V + m is at most this (Clarabel takes about a minute at 96 on one core)
CROSS_CHECK_MAX = 64


def _geometry(data, ref, name: str, section: Section, control: tuple[str, float] | None = None) -> list[Check]:
    """The SVM's checks, with the other backend's solution as a cross-check when the SDP is affordable (``control``:
    the negative control of "L^mm = S̃", :func:`~.checks.geometry_checks`)."""
    if data.V + data.m <= CROSS_CHECK_MAX:
        other, diff = cross_check(data, ref.svm)
        return geometry_checks(name, data, ref, other.certificate.duality_gap, diff, control=control)
    section.notes.append(f"{name}: V + m = {data.V + data.m} > {CROSS_CHECK_MAX}: the nuclear-norm SVM is solved by "
                         "ADMM only (the SDP cross-check is for smaller sizes); its own certificate is checked")
    return geometry_checks(name, data, ref, None, None, control=control)


def check_optimum(opt) -> Check:
    from ...results import check_at_most

    return check_at_most(f"optimum at λ = {opt.lam:g}", "the training target is certified: ||∇f|| / (λ||(W, H)||) and "
                         "||∇CE||_op / λ - 1 (larger of the two)",
                         max(float(opt.certificate["grad_rel"].max()), float(opt.certificate["op_ratio"].max()) - 1),
                         1e-6, "docs/ufm.md, U-1", kind="sanity", threshold_source="solver tolerance (ours)")


def _support_row(name: str, data, ref, path: PathRun | None = None) -> tuple:
    St = ref.support.S_tilde
    gram = ""
    if path is not None:
        last = [r for r in path.rows if r["step"] == len(path.points) - 1]
        gram = (f"{min(r['cos_context_gram'] for r in last):.4f} / "
                f"{min(r.get('cos_context_gram_S', float('nan')) for r in last):.4f}")
    plot = {"name": name, "sigma_S": to_numpy(ref.support.sigma), "sigma_mm": to_numpy(ref.svm.singular_values)}
    return (name, data.m, data.V, int(ref.groups.max()) + 1, ref.support.rank, ref.svm.rank,
            round(ref.support.polar_out_max, 4), svm_vs_centred_support(ref.svm, data),
            float(torch.linalg.svdvals(St).sum()), ref.svm.norm, gram, plot)


def _path_table(title: str, path: PathRun) -> Table:
    cols = ("F_error_rel", "cos_perp_mm", "nuclear", "within_angle", "sub_within_angle", "between_angle",
            "cos_word_gram", "cos_context_gram", "grad_rel", "op_ratio")
    body = []
    for i, p in enumerate(path.points):
        sel = [r for r in path.rows if r["step"] == i]
        body.append((f"{p.lam:.3g}", *(float(np.mean([r[c] for r in sel])) for c in cols), p.newton_steps,
                     round(p.seconds, 2)))
    return Table(title + " (mean over seeds)", ("λ", "F-part error", "cos(P_⊥ L, L^mm)", "||L||_*",
                                                "within-set angle (°)", "within-set angle, subspace (°)",
                                                "between-set angle (°)", "cos Gram (words)", "cos Gram (contexts)",
                                                "grad_rel", "||∇CE||_op / λ", "Newton steps", "seconds"),
                 tuple(body))


def _order_table(history, ref) -> Table:
    times, final = half_times(history)
    sigma = to_numpy(ref.D0_sigma)
    stats = order_statistics(sigma, times)
    body = tuple((i + 1, float(sigma[i]), float(times[i, 0]), float(times[i, 0] * sigma[i] / (times[0, 0] * sigma[0])),
                  float(final[i, 0])) for i in range(len(sigma)))
    return Table(f"Order of learning (GD, seed {history.seeds[0]}; over the {stats['modes']} leading modes, per seed: "
                 f"separated pairs in order {', '.join(f'{r:.3f}' for r in stats['concordance'])}, Spearman "
                 f"{', '.join(f'{r:.3f}' for r in stats['spearman'])})",
                 ("mode i", "σ_i(D0)", "t_i (half of final strength)", "t_i σ_i / (t_1 σ_1)", "final u_i^T L v_i"),
                 body)


def _path_figure(fig_id: str, title: str, path: PathRun, entropy: float, train_rows=None,
                 train_run: str = "") -> FigureSpec:
    right = ("right: the training run at a fixed λ over its iterations (finite part, growing part, distance to the "
             "certified optimum)." if train_rows else "right: the largest angle between contexts sharing a support set "
             "(raw, and in the support-pattern subspace) against the smallest angle between sets.")
    return FigureSpec(fig_id, title,
                      "Along the regularization path (λ decreasing to the right), mean and range over seeds: the "
                      "finite part's relative error ||P_F(L) - L*|| / ||L*||, the growing part's cosine with the "
                      "nuclear-norm SVM L^mm, the Gram matrices' cosines with their predicted limits "
                      "(L^mm L^mm^T)^{1/2} and (L^mm^T L^mm)^{1/2} (dashed: against the SVD of S̃); " + right,
                      "ufm.path", {"rows": path.rows, "run": f"path-{path.name}", "train_rows": train_rows or [],
                                   "train_run": train_run})


def _geometry_figure(ref, path: PathRun) -> FigureSpec:
    p = path.points[-1]
    order = torch.argsort(ref.groups, stable=True)
    return FigureSpec("ufm-geometry", "Sparse plus low rank: the learned geometry",
                      f"Columns ordered by support set. S̃ (centred support matrix), L^mm (nuclear-norm SVM), the "
                      f"learned logits L_λ at λ = {p.lam:.2g} (seed {path.rows[0]['seed']}), the learned context Gram "
                      "H H^T and its predicted limit (L^mm^T L^mm)^{1/2} (each scaled to unit maximum).",
                      "ufm.geometry", {"S_tilde": to_numpy(ref.support.S_tilde[:, order]),
                                       "L_mm": to_numpy(ref.svm.L[:, order]), "L": to_numpy(p.L[0][:, order]),
                                       "HHt": to_numpy((p.H[0] @ p.H[0].T)[order][:, order]),
                                       "predicted": to_numpy(ref.context_gram[order][:, order])})


def _modes_figure(history, ref) -> FigureSpec:
    times, final = half_times(history)
    names = sorted((n for n in history.names if n.startswith("mode_")), key=lambda n: int(n[5:]))
    strengths = np.stack([history[n][:, 0] for n in names])  # (r, steps), seed 0
    return FigureSpec("ufm-modes", "Order of learning from a small initialisation",
                      "Left: strength u_i^T L_k v_i of the singular directions of D0 = -∇CE(0), divided by its final "
                      "value (seed 0; darker = larger σ_i). Right: the step t_i at which each reaches half its final "
                      "value against 1/σ_i; the line is the small-initialisation prediction t_i = t_1 σ_1 / σ_i.",
                      "ufm.modes", {"steps": history.steps, "strengths": strengths, "final": final[:, 0],
                                    "times": times, "sigma": to_numpy(ref.D0_sigma)})


def _claims_table() -> Table:
    return Table("Follow-up papers vs ntpbias: what is checked, and how", ("claim", "source", "ntpbias"), (
        ("logits -> L* (finite, in-support log-odds) + a part growing in the direction of the nuclear-norm SVM L^mm "
         "as λ -> 0", ZHAO, "trends along the certified path (theorem checks, controlled by a wrong L* and by the "
         "competing limits S̃ and D0) and calibrated levels at the smallest λ"),
        ("L^mm depends only on the support pattern; contexts sharing a support set collapse", ZHAO,
         "same-support columns of the solvers' L^mm (by construction: symmetric starts); subspace collapse along the "
         "path (trend controlled by a wrong grouping, calibrated level); raw embeddings collapse only like "
         "(log 1/λ)^(-1/2) (finding, docs/ufm.md U-5)"),
        ("embeddings align with the SVD of the centred support matrix", ZHAO,
         "exact when S̃'s polar factor is <= 0 off the supports (our derivation U-3, checked); otherwise the limit "
         "follows L^mm, not S̃ (overlap data, checked)"),
        ("singular directions are learned in the order of the singular values", "incremental learning of "
         "factorized models", "D0 = -∇CE(0)'s directions, our small-initialisation linearization U-6 (calibrated "
         "Spearman); S̃'s order reported"),
    ))


# ------------------------------------------------------------------------------------------------ `ntpbias train`
def train_ufm(cfg: UFMConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for a log-bilinear config: training at λ, compared with the certified optimum at that λ."""
    out = ensure_dir(ctx.out)
    data = data_for(cfg)
    ctx.say("nuclear-norm NTP-SVM and the support matrix")
    ref, facts = reference(data, cfg)
    wrong = None
    if cfg.model.lam > 0:
        ctx.say(f"the optimum at λ = {cfg.model.lam:g}")
        opt = optimum_at(cfg, data, cfg.model.lam)
        ref = replace(ref, L_opt=opt.L[0])
        facts["optimum at λ: certified"] = opt.certified
        if cfg.data.source == "planted":  # the wrong target of the training check's negative control
            wrong = (WRONG_LAMBDA * cfg.model.lam, optimum_at(cfg, data, WRONG_LAMBDA * cfg.model.lam).L[0])
    history = train_run(cfg, data, ref, ctx, "train")
    section = Section("train", f"Log-bilinear model: {cfg.optimizer.name} on {cfg.data.source} data, λ = "
                      f"{cfg.model.lam:g}", facts=facts, seconds=history.seconds)
    section.plots.append(FigureSpec("training", "Training dynamics",
                                    "Loss above the entropy, the logits' decomposition (finite part and growing part "
                                    "against L^mm), Gram alignment and collapse, over the iterations.",
                                    "ufm.training", {"rows": history.rows(), "runs": ["train"]}))
    if history.status == "completed":
        section.checks.extend(training_checks("train", cfg, history, ref, control=wrong))
    else:
        section.notes.append(history.message)
    write_npz(out / "ufm.npz", L_mm=ref.svm.L, S_tilde=ref.support.S_tilde, W=history.params["W"],
              H=history.params["H"], **({} if ref.L_opt is None else {"L_opt": ref.L_opt}))
    return RunResult(section, cfg, [history],
                     {"status": history.status, "message": history.message, "final": history.at()}, failure=history)
