"""Paper B's errata as checks (docs/paper-b-attention.md#errata): each statement measured as printed, kind
``erratum`` (verdict "holds" or "refuted", never a failure), with the corrected statement's value in its metric.

The negative control of an erratum check is an input on which the printed statement must come out false for a reason
of its own (a deliberately broken law or size list, data whose tokens are known to occur unequally, a wrong solution
in place of Lemma 4.5's p̂, the roles of p̂ and its nearest alternative swapped, the review's setting of the Lemma
4.4 counterexample): it shows that the measurement says "refuted" where it must. The corrected statements are
checked beside them (``Lemma 4.5: margin gap``; the law and the sizes by the tests of the data generator).
"""

from __future__ import annotations

import torch

from ...data.config import KLevelLaw, power_level_sizes
from ...data.tokens import TokenSequences, token_statistics
from ...geometry.attention import selection as gs
from ...results import Check, with_control
from ..claims import cite

SRC = "paper B (docs/paper-b-attention.md#errata)"
#: "≈" of the heuristic after Lemma 4.5 read as within 0.1 (scores), within 10% (the norm); tokens "the same number of
#: times" as mean counts within 10% (ours)
APPROX = 0.1


def printed_law(law: KLevelLaw) -> torch.Tensor:
    """(2, |S|) the law (15) as printed (row 0: y = -1, row 1: y = +1): the opposite-polarity case δ_k/N, without the
    factor δ~ of the corrected :meth:`~ntpbias.data.config.KLevelLaw.probabilities` (erratum B-E1)."""
    P = law.probabilities()
    opposite = law.polarity[None, :] * torch.tensor([-1, 1])[:, None] < 0
    return torch.where(opposite, P / law.delta_tilde, P)


def _normalization(P: torch.Tensor) -> float:
    """largest |Σ_s p(s|y) - 1| over y."""
    return float((P.sum(1) - 1).abs().max())


def law_erratum(law: KLevelLaw) -> Check:
    """B-E1: the law (15) as printed sums to 1 (control: the corrected law with its last level's tokens dropped)."""
    corrected = _normalization(law.probabilities())

    def check(P: torch.Tensor) -> Check:
        value = _normalization(P)
        return Check("Erratum B-E1: law (15) sums to 1", "the law (15) as printed is a probability law on the tokens",
                     value, "<= 1e-12", value <= 1e-12, SRC, kind="erratum", **cite("B:law15"),
                     metric=f"largest |Σ_s p(s|y) - 1| over y of (15) as printed at Fig. 2's values (the corrected "
                            f"law, with δ~ δ_k/N on the opposite polarity: {corrected:.1e})",
                     threshold_source="a probability law sums to 1 (round-off allowance)")

    kept = law.level != law.K
    return with_control(check(printed_law(law)), "the corrected law with the tokens of its last level dropped (a "
                        "broken implementation path)", check(law.probabilities()[:, kept]))


def sizes_erratum(law: KLevelLaw, stated: int = 2048) -> Check:
    """B-E2: the printed level sizes 4 + 2^{k-1} with |S~| = 964 give the stated |S| = 2048 (control: the corrected
    sizes 4 + 2^k with the last level dropped)."""
    corrected = law.irrelevant_size + 2 * sum(power_level_sizes(law.K))

    def check(sizes: tuple[int, ...]) -> Check:
        total = law.irrelevant_size + 2 * sum(sizes)
        return Check("Erratum B-E2: level sizes give |S| = 2048", "|S~| + 2 Σ_k |S_k^{+1}| with the printed sizes "
                     f"equals the stated |S| = {stated}", total, f"= {stated}", total == stated, SRC, kind="erratum",
                     **cite("B:level-sizes"), metric=f"|S~| + 2 Σ_k (4 + 2^(k-1)) with |S~| = {law.irrelevant_size}, "
                     f"K = {law.K} (the sizes 4 + 2^k give {corrected})",
                     threshold_source="the stated vocabulary size")

    return with_control(check(power_level_sizes(law.K, exponent_shift=1)), "the corrected sizes 4 + 2^k with the "
                        "last level dropped (a broken implementation path)", check(power_level_sizes(law.K)[:-1]))


def _count_ratio(ds: TokenSequences, irrelevant: torch.Tensor, relevant: torch.Tensor) -> float:
    """Mean count of an irrelevant token over the mean count of a relevant one ((|S|,) masks; absent tokens count 0:
    the estimate of the law's frequencies)."""
    count = token_statistics(ds).count.double()
    return float(count[irrelevant.to(count.device)].mean() / count[relevant.to(count.device)].mean())


def same_counts_erratum(ds: TokenSequences, level: torch.Tensor,
                        control: tuple[str, TokenSequences, torch.Tensor, torch.Tensor]) -> Check:
    """B-E6: on data sampled from (15) every token appears the same number of times. Measured on ``ds`` (K-level data,
    ``level`` (|S|,) 0 = irrelevant) as the mean count of an irrelevant token over the mean count of a relevant one;
    the corrected statement (only the relevant tokens do) as the spread of the mean counts over the relevant levels.
    ``control``: (in words, data, their irrelevant and relevant token masks) where tokens are known to occur
    unequally."""
    count = token_statistics(ds).count.double()
    level = level.to(count.device)
    per_level = torch.stack([count[level == k].mean() for k in range(1, int(level.max()) + 1)])
    relevant_spread = float(per_level.max() / per_level.min())

    def check(data: TokenSequences, irrelevant: torch.Tensor, relevant: torch.Tensor) -> Check:
        ratio = _count_ratio(data, irrelevant, relevant)
        return Check("Erratum B-E6: tokens appear equally often", "on data sampled from (15) every token appears the "
                     "same number of times", ratio, f"in [{1 - APPROX:g}, {1 + APPROX:g}]",
                     abs(ratio - 1) <= APPROX, SRC, kind="erratum", **cite("B:same-counts"),
                     metric="mean count of an irrelevant token divided by the mean count of a relevant one on Fig. 2's "
                            f"data (the corrected statement, relevant tokens only: the mean counts of the K levels "
                            f"within a factor {relevant_spread:.3f})",
                     threshold_source=f"equal counts up to {APPROX:.0%} (ours; the sampling noise of these means is "
                                      "far smaller)")

    return with_control(check(ds, level == 0, level > 0), control[0], check(*control[1:]))


def lemma45_printed_erratum(gap: gs.GapCondition) -> Check:
    """B-E3: Lemma 4.5's gap condition as printed, ||p̂'|| < (1 - μ)||p̂|| for every other selection's p̂' (some
    μ > 0), over the feasible alternatives of ``gap`` (control: the roles of p̂ and its nearest alternative swapped)."""
    norms = torch.cat([gap.alternative_norms, gap.sampled_norms])
    feasible = norms[torch.isfinite(norms)]

    def check(largest: float, what: str) -> Check:
        return Check("Erratum B-E3: Lemma 4.5's condition as printed", "||p̂'|| < (1 - μ)||p̂|| for every other "
                     "selection's max-margin solution p̂', some μ > 0", largest, "< 1", largest < 1, SRC,
                     kind="erratum", **cite("B:lemma45-printed"),
                     metric=f"largest ||p̂'||/||p̂|| over {what} (the corrected condition ||p̂|| <= (1 - μ)||p̂'|| "
                            f"holds with μ = {gap.mu:.3g}: 'Lemma 4.5: margin gap')",
                     threshold_source="the printed condition needs every ratio below 1")

    main = check(float(feasible.max()) / gap.norm, f"the {len(feasible)} feasible alternatives of 'Lemma 4.5: margin "
                 "gap' (seed 0)")
    if gap.nearest is None:
        return main
    others = torch.cat([feasible[feasible != gap.nearest.norm], torch.tensor([gap.norm], dtype=feasible.dtype)])
    return with_control(main, "the roles swapped: the nearest alternative p̂' taken as p̂, p̂ and the other "
                        "alternatives as its alternatives", check(float(others.max()) / gap.nearest.norm,
                                                                  "p̂ and the other alternatives"))


def lemma44_erratum(tie: gs.PartialTie, where: str, control: tuple[str, gs.PartialTie]) -> Check:
    """B-E9: with one irrelevant token, Thm 4.3 and Lemma 4.4 leave only {s*_X}: refuted by a partial tie (the
    irrelevant token tied with s*_X in some sequences only) that is feasible and its own max-margin direction
    (:func:`~ntpbias.geometry.attention.selection.partial_tie`). ``where``: the setting of ``tie``; ``control``: (in
    words, another partial tie) where the statement must be refuted too."""
    def check(t: gs.PartialTie, setting: str) -> Check:
        found = t.self_consistent
        measured = (f"self-consistent partial tie: ||p̂'|| = {t.svm.norm:.4g} against ||p̂|| = {t.important.norm:.4g}"
                    if found else f"no self-consistent partial tie ((12) {t.svm.status})")
        return Check("Erratum B-E9: Lemma 4.4's corollary", "with one irrelevant token, Thm 4.3 and Lemma 4.4 leave "
                     "{s*_X} as the only selection a limit direction can make", measured, "no self-consistent "
                     "selection besides {s*_X} (and all tokens, which Lemma 4.4 excludes)", not found, SRC,
                     kind="erratum", **cite("B:lemma44"),
                     metric=f"the selection tying the irrelevant token with s*_X wherever s*_X is token 0 ({setting}): "
                            f"(12) feasible, p̂' selects exactly it (ties within {1e-6:g} of the normalized score) and "
                            "is its own max-margin direction; only Lemma 4.5's gap (||p̂|| < ||p̂'||) excludes it",
                     threshold_source="Thm 4.3 items 1-2 and Lemma 4.4 as stated")

    return with_control(check(tie, where), control[0], check(control[1], control[0]))


def heuristic_errata(h: gs.Heuristic, control: tuple[str, gs.Heuristic]) -> list[Check]:
    """B-E10: the heuristic after Lemma 4.5 at Lemma 4.5's p̂ (``h``, :func:`~ntpbias.geometry.attention.selection.
    lemma45_heuristic`): scores ≈ 1 on the selected tokens and ≈ 0 on the others, and ||p̂|| ≈ sqrt(|S_sel|); the
    centred prediction (scores m/(k + m) and its complement, ||p̂|| ≈ sqrt(k m/(k + m))) in the metrics. ``control``:
    (in words, the quantities at a wrong solution)."""
    def scores(x: gs.Heuristic) -> Check:
        return Check("Erratum B-E10: heuristic scores 1 and 0", "p̂^T E_s ≈ 1 on the selected tokens and ≈ 0 on the "
                     "others", x.printed_score_error, f"<= {APPROX:g}", x.printed_score_error <= APPROX, SRC,
                     kind="erratum", **cite("B:lemma45-heuristic-scores"),
                     metric=f"largest |p̂^T E_s - 1| over the {x.n_selected} selected and |p̂^T E_s| over the "
                            f"{x.n_other} other present tokens (p̂^T v = {x.p_dot_v:.2g}; the centred scores "
                            f"{x.centred_score:.4f} and {x.centred_score - 1:.4f} are met within "
                            f"{x.centred_score_error:.2g})",
                     threshold_source=f"'≈' read as within {APPROX:g} (ours)")

    def norm(x: gs.Heuristic) -> Check:
        ratio = x.norm / x.printed_norm
        return Check("Erratum B-E10: heuristic norm sqrt(|S|)", "||p̂|| ≈ sqrt(|S_X(p̂)|)", ratio,
                     f"in [{1 - APPROX:g}, {1 + APPROX:g}]", abs(ratio - 1) <= APPROX, SRC, kind="erratum",
                     **cite("B:lemma45-heuristic-norm"),
                     metric=f"||p̂|| / sqrt(k) with k = {x.n_selected} selected tokens (||p̂|| = {x.norm:.4g}; the "
                            f"centred prediction sqrt(k m/(k + m)) = {x.centred_norm:.4g} is met within "
                            f"{abs(x.norm / x.centred_norm - 1):.1%})",
                     threshold_source=f"'≈' read as within {APPROX:.0%} (ours)")

    return [with_control(scores(h), control[0], scores(control[1])),
            with_control(norm(h), control[0], norm(control[1]))]
