"""The planted control's checks (docs/lm.md#checks): pure functions of an analysis over checkpoints, the planted chain
and the frozen-feature run.

What each kind proves here:

* ``sanity``: the certificates behind the numbers (the NTP-SVMs' KKT residuals, the nuclear-norm SVM's duality gap),
  the features reproducing the model's logits, and the planted supports being those of the text;
* ``theorem`` (premise evaluated): paper A's statements for GD on a linear decoder over *fixed* features, on the
  model's own final features (the frozen-feature run: NTP_H-compatible and NTP-separable H, full-batch GD with
  η <= 1/(2L) from W = 0: every premise is checked, not assumed);
* ``calibrated``: levels reached by the jointly trained model (Adam on every parameter, where no theorem applies) on
  the planted chain, set on chains ``CALIBRATION_SEEDS`` by ``calibration/lm.py`` (``calibration/lm.json``) and graded
  on chain 0, which the calibration never saw.

Every graded check carries its negative control: the same model at its first checkpoint, the frozen-feature run
stopped 100 times earlier (a level the model already meets there shows nothing about training).
"""

from __future__ import annotations

import numpy as np

from ...data.ntp import NTPData
from ...results import Check, check_at_least, check_at_most, with_control
from ..linear.checks import early_step

#: planted chains (data.seed = seed) of the calibration, and the worst values measured there (calibration/lm.json)
CALIBRATION_SEEDS = range(1, 5)
#: (rounded outward: errors up, cosines and fractions down)
CALIBRATION_WORST: dict[str, float] = {
    "loss_gap": 0.01100, "finite_rel_error": 0.2603, "logit_cos_perp_mm": 0.9846, "cos_perp_mm": 0.9173,
    "cos_word_gram": 0.9751, "cos_context_gram": 0.9138, "sub_collapse_ratio": 0.1090, "separated_fraction": 1.0,
    "frozen_loss_gap": 2.327e-4, "frozen_F_error_rel": 0.1066, "frozen_cos_mm_corrected": 0.9606}
#: the quantities whose level is an upper bound (errors); the others are lower bounds (cosines, fractions)
ERRORS = ("loss_gap", "finite_rel_error", "sub_collapse_ratio", "frozen_loss_gap", "frozen_F_error_rel")


def level_of(key: str) -> float:
    """The graded level of ``key`` (decision LM-D7): twice the worst calibration value for an error, the worst value's
    distance to 1 doubled for a cosine or a fraction."""
    worst = CALIBRATION_WORST[key]
    return 2 * worst if key in ERRORS else 1 - 2 * (1 - worst)


def calibrated(key: str, data_seed: int) -> dict:
    """The fields of a calibrated check: kind, and where its level was set (whether the graded chain was held out)."""
    held = "this run's chain is one of them (not held out)" if data_seed in CALIBRATION_SEEDS else \
        "the graded chain is held out"
    return {"kind": "calibrated", "threshold_source": f"calibrated on planted chains {CALIBRATION_SEEDS.start}-"
            f"{CALIBRATION_SEEDS.stop - 1} (calibration/lm.json; worst value {CALIBRATION_WORST[key]:.4g}); {held}"}


#: what each calibrated quantity of the jointly trained model claims
CLAIMS = {
    "loss_gap": "CE - H on the length-1 contexts at the last checkpoint",
    "finite_rel_error": "finite part: ||P_F(L_c) - L*|| / ||L*|| at the last checkpoint (in-support logit differences "
                        "against the log-odds)",
    "logit_cos_perp_mm": "growing part: cos(P_⊥(L_c), L^mm) with the nuclear-norm SVM (log-bilinear model)",
    "cos_perp_mm": "growing part: cos(P_⊥(W_c), W^mm) with the NTP-SVM on the model's own features (paper A)",
    "cos_word_gram": "word Gram W_c W_c^T aligned with (L^mm L^mm^T)^{1/2}",
    "cos_context_gram": "context Gram H H^T aligned with (L^mm^T L^mm)^{1/2}",
    "sub_collapse_ratio": "contexts sharing a support collapse in the support-pattern subspace (within / between "
                          "angle)",
    "separated_fraction": "share of contexts (π̂-weighted) whose in-support logits all exceed their out-of-support ones",
}


def model_checks(rows: list[dict], data_seed: int) -> list[Check]:
    """Calibrated levels of the jointly trained model at its last checkpoint, and the growth of the two alignments
    from the first checkpoint to the last (held on every calibration chain); control: the model at its first
    checkpoint."""
    last, first = rows[-1], rows[0]
    src = "docs/lm.md (paper A's Thm 2 and the log-bilinear model of docs/ufm.md, read on the model's features)"
    control = f"the model at its first checkpoint (step {first.get('step', 0)})"
    out = []
    for key, claim in CLAIMS.items():
        def level(row: dict, key: str = key, claim: str = claim) -> Check:
            value = row.get(key)
            if value is None:
                return Check(f"planted: {key}", claim, "undefined", "defined", False, src,
                             **calibrated(key, data_seed))
            check = check_at_most if key in ERRORS else check_at_least
            return check(f"planted: {key}", claim, value, level_of(key), src, **calibrated(key, data_seed))

        out.append(with_control(level(last), control, level(first)))
    for key in ("cos_perp_mm", "logit_cos_perp_mm"):
        def grows(a, b, key: str = key) -> Check:
            return Check(f"planted: {key} grows", f"{CLAIMS[key]} increases from the first checkpoint to the last",
                         f"{a if a is None else round(a, 4)} -> {b if b is None else round(b, 4)}", "increases",
                         a is not None and b is not None and b > a, src, kind="calibrated",
                         threshold_source="a trend that held on every calibration chain (calibration/lm.json)")

        out.append(with_control(grows(first.get(key), last.get(key)), f"{control}: no training after it",
                                grows(first.get(key), first.get(key))))
    return out


def support_check(data: NTPData, chain: NTPData) -> Check:
    """The empirical supports of the length-1 contexts are the planted ones (every planted transition was seen)."""
    index = {name: k for k, name in enumerate(chain.vocab)}
    rows = np.array([index[c] for c in data.contexts])
    cols = np.array([index[v] for v in data.vocab])
    wrong = int((data.support.numpy() != chain.support.numpy()[np.ix_(rows, cols)]).sum())
    return check_at_most("planted: supports", "the text's next-token supports (length-1 contexts) are the chain's "
                         "planted ones: (context, token) pairs that differ", wrong, 0, "docs/lm.md#the-planted-control",
                         kind="sanity", threshold_source="exact (ours)")


def frozen_checks(history, data_seed: int) -> list[Check]:
    """Calibrated levels of the frozen-feature run (GD on W alone over the model's final features); control: the same
    run stopped 100 times earlier."""
    last, k_early = history.at(), early_step(history)
    early = history.at(k_early)
    src = "Thm 2 of paper A (GD on fixed features)"
    fields = {"premise": "the model's final features, NTP_H-compatible and NTP-separable; full-batch GD, "
                         "η = 1/(2L), from W = 0"}
    control = f"the same run stopped at k = {k_early} (100 times earlier)"

    def level(name, claim, column, key, upper, at):
        check, worst = (check_at_most, max) if upper else (check_at_least, min)
        return check(name, claim, worst(at[column]), level_of(key), src, **fields, **calibrated(key, data_seed))

    specs = (("frozen: loss gap", "CE(W_k) - H at the last step", "loss_gap", "frozen_loss_gap", True),
             ("frozen: F-part", "||P_F(W_k) - W*|| / ||W*|| at the last step", "F_error_rel", "frozen_F_error_rel",
              True),
             ("frozen: alignment (corrected)", "cos(W_k - W*, W^mm) at the last step", "cos_mm_corrected",
              "frozen_cos_mm_corrected", False))
    return [with_control(level(*spec, at=last), control, level(*spec, at=early)) for spec in specs]


def calibration_values(rows: list[dict], frozen_last: dict) -> dict[str, float]:
    """The values ``calibration/lm.py`` records for one chain (the keys of :data:`CALIBRATION_WORST`), and the two
    growth trends."""
    last, first = rows[-1], rows[0]
    out = {key: last.get(key) for key in CLAIMS}
    out.update({"frozen_loss_gap": max(frozen_last["loss_gap"]), "frozen_F_error_rel": max(frozen_last["F_error_rel"]),
                "frozen_cos_mm_corrected": min(frozen_last["cos_mm_corrected"])})
    for key in ("cos_perp_mm", "logit_cos_perp_mm"):
        out[f"{key}_grows"] = bool(first.get(key) is not None and last.get(key) is not None
                                   and last[key] > first[key])
    return out
