"""Theorem 3 and Example 2 of paper C: trained models on inputs they never saw."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..._tensor import to_numpy
from ...data.sentences import example2_inputs
from ...geometry.transformer import optimum as th
from ...geometry.transformer.optimum import KIND_NC, KIND_OPT, UnseenInputs, theorem3_inputs
from ...results import Check, Table, check_at_least
from ...training.transformer import (
    predict,
)
from ..claims import cite
from .checks import premises, seeds_note
from .runs import SeedRun


def evaluate_unseen(run: SeedRun, unseen: UnseenInputs) -> dict:
    """Predictions of a trained model on ``unseen``: predicted token, its probability, the expected token's
    probability, and the attention on the focus token."""
    E = run.task.E
    W_ov, W_kq = run.two_stage.W_ov[0], run.two_stage.W_kq[0]
    pred, prob, probs, attn = predict(W_ov, W_kq, E, unseen.ids.to(E.device), unseen.mask.to(E.device))
    on_focus = (attn * (unseen.ids.to(E.device) == unseen.focus.to(E.device)[:, None])).sum(1)
    return {"pred": to_numpy(pred), "prob": to_numpy(prob), "attn": to_numpy(on_focus),
            "p_expected": to_numpy(probs.gather(1, unseen.expected.to(E.device)[:, None])[:, 0])}


def extended_order_gap(run: SeedRun) -> float:
    """min over queries of (min score of optimal - max of non-comparable) and (min non-comparable - max
    non-optimal) in the token basis of W_kq^(T): > 0 iff O_q > M_q > N_q for every query ("extended partial
    order" after Theorem 3)."""
    st = run.task.structure
    A = to_numpy(th.token_basis(run.two_stage.W_kq[0], run.task.E))
    gaps = []
    for q in st.queries:
        tc = st.token_classes(q)
        col = A[:, q]
        groups = [list(g) for g in (tc.optimal, tc.non_comparable, tc.non_optimal)]
        gaps.extend(col[hi].min() - col[lo].max() for hi, lo in zip(groups, groups[1:], strict=False) if hi and lo)
    return float(min(gaps)) if gaps else math.nan


def generalization(label: str, runs: list[SeedRun]) -> tuple[list[Check], list[Table], list[str], list[dict]]:
    """Theorem 3 on every seed's dataset: checks, a summary table, an example table, and every prediction."""
    records, summary = [], {}
    for r in runs:
        unseen = theorem3_inputs(r.task.structure, seed=r.seed)
        if unseen.M == 0:
            continue
        ev = evaluate_unseen(r, unseen)
        s = r.task.samples
        for i in range(unseen.M):
            records.append({"seed": r.seed, "kind": unseen.kind[i], "input": s.text(unseen.ids[i][unseen.mask[i]]),
                            "expected": s.vocab[int(unseen.expected[i])],
                            "prediction": s.vocab[int(ev["pred"][i])], "probability": float(ev["prob"][i]),
                            "p_expected": float(ev["p_expected"][i]), "attention_on_focus": float(ev["attn"][i])})
    if not records:
        return [], [], [f"{label}: no query has non-comparable tokens and is non-optimal under its own order, so "
                        "Theorem 3 has no unseen input to test"], []
    for kind in (KIND_NC, KIND_OPT):
        sel = [x for x in records if x["kind"] == kind]
        if sel:
            correct = np.array([x["prediction"] == x["expected"] for x in sel])
            p = np.array([x["p_expected"] for x in sel])
            summary[kind] = (len(sel), float(correct.mean()), float(p.min()), float(np.median(p)))
    src = "Thm 3 of paper C"
    premise, met = premises(runs)["thm2"]
    thm3 = {"kind": "theorem", "premise": premise + " (Theorem 3's T, t = Ω(log(1/ε)): its proof follows Theorem 2's)",
            "premise_met": met}
    claims = {KIND_NC: ("C:thm3-prediction", "n(x_0)", "a non-comparable token x_0 and non-optimal tokens"),
              KIND_OPT: ("C:ex2-osp", "n(u)", "an optimal token u and a non-comparable token x_0")}
    checks = [check_at_least(f"{label}: Theorem 3 ({kind})", f"unseen inputs [{kind}, q] predict {claims[kind][1]}",
                             acc, 1.0, src, threshold_source="every input (the theorem's prediction)",
                             **cite(claims[kind][0]), metric=f"fraction of {n} unseen inputs made of "
                             f"{claims[kind][2]} under a query q whose argmax is {claims[kind][1]} "
                             f"({seeds_note(runs)}; the smallest probability of the expected token is in the table)",
                             **thm3)
              for kind, (n, acc, _, _) in summary.items()]
    gaps = [extended_order_gap(r) for r in runs]
    checks.append(check_at_least(f"{label}: extended order O > M > N", "after training, under every query the "
                                 "scores x^T W_kq x_q of optimal > non-comparable > non-optimal tokens",
                                 float(np.nanmin(gaps)), 1e-12, src, **cite("C:thm3-order"),
                                 metric="smallest gap between the classes' scores over every query, at the last step",
                                 threshold_source="strict order (round-off allowance)", **thm3))
    table = Table(f"{label}: Theorem 3 on unseen inputs (all seeds)",
                  ("kind", "inputs", "fraction correct", "min p(expected)", "median p(expected)"),
                  tuple((k, *v) for k, v in summary.items()))
    picks = np.random.default_rng(0).choice(len(records), size=min(12, len(records)), replace=False)
    examples = Table(f"{label}: examples of unseen inputs (Theorem 3)",
                     ("seed", "input", "kind", "expected", "predicted", "probability", "attention on x_0/u"),
                     tuple((x["seed"], x["input"], x["kind"], x["expected"], x["prediction"], x["probability"],
                            x["attention_on_focus"]) for x in (records[i] for i in sorted(picks))))
    return checks, [table, examples], [], records


def example2(run: SeedRun) -> tuple[list[Check], Table]:
    """Example 2 (Sec. 6): after training on Example 1, SP -> V, OSP -> P, VP -> O (Theorem 3;
    docs/paper-c-transformer.md#objects)."""
    ex = example2_inputs()
    n = run.task.structure.collocation.next_token
    inverse = torch.argsort(n)  # n is a permutation on Example 1
    focus = inverse[ex.y]
    unseen = UnseenInputs(ex.X, ex.mask, ex.y, focus, ("",) * ex.N)
    ev = evaluate_unseen(run, unseen)
    rows = tuple((ex.text(ex.input_ids(i)), ex.vocab[int(ex.y[i])], ex.vocab[int(ev["pred"][i])],
                  float(ev["prob"][i]), ex.vocab[int(focus[i])], float(ev["attn"][i])) for i in range(ex.N))
    premise, met = premises([run])["thm2"]
    thm3 = {"premise": premise, "premise_met": met}
    expected = {"S P": "C:ex2-sp", "O S P": "C:ex2-osp", "V P": "C:ex2-vp"}
    checks = [Check(f"example 2: {r[0].replace(' ', '')}", f"after training on Example 1, {r[0].replace(' ', '')} is "
                    f"completed with {r[1]} (Example 2)", f"{r[2]} (probability {r[3]:.3g})", r[1], r[1] == r[2],
                    "Example 2 of paper C", kind="paper-number", **cite(expected[r[0]]),
                    metric="the trained model's argmax on the unseen input, with its probability",
                    threshold_source="the paper's Example 2", **thm3) for r in rows]
    checks.append(check_at_least("example 2: confidence", "each prediction has probability > 0.99",
                                 min(r[3] for r in rows), 0.99, "Thm 3 of paper C", kind="theorem",
                                 **cite("C:thm3-prediction"), metric="smallest probability of the predicted token "
                                 "over SP, OSP, VP", threshold_source="'with high probability' read as > 0.99 (ours)",
                                 **thm3))
    A = to_numpy(th.token_basis(run.two_stage.W_kq[0], run.task.E))[:, 3]
    checks.append(Check("example 2: scores under query P", "score(O) > score(S) = score(V) = 0 > score(P) in "
                        "W_kq^(T)'s column P", "(" + ", ".join(f"{v:.4g}" for v in A) + ")", "O > S = V = 0 > P",
                        bool(A[2] > 0 and A[0] == 0 and A[1] == 0 and A[3] < 0), "Example 2 of paper C",
                        kind="paper-number", **cite("C:ex2-classes"), metric="the scores x_u^T W_kq^(T) x_P of "
                        "S, V, O, P", threshold_source="the paper's Example 2 with Prop. 2's signs", **thm3))
    table = Table("Example 2: unseen inputs after training on Example 1",
                  ("input", "expected (Thm 3)", "predicted", "probability", "token attended", "attention"), rows)
    return checks, table
