"""Paper A's errata that a measurement can decide (docs/paper-a-linear-ntp.md#errata), each measured as printed (kind
``erratum``: "holds" or "refuted" here) beside its corrected statement where one exists (kind ``theorem``).

Every check carries a negative control: an input on which the measurement must come out false (for the corrected
statements, an input that breaks them: a perturbed W*, a flat direction, sequences of unequal length).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from ...data.corpus import corpus_statistics
from ...data.ntp import NTPData
from ...data.sequences import autoregressive_id_samples
from ...geometry.linear.loss import cross_entropy, cross_entropy_F
from ...metrics import frobenius
from ...results import Check, check_at_least, check_at_most, with_control
from ...training.linear import LinearReference
from ..claims import cite
from .checks import moved_W_star

#: a round-off allowance for identities between values of CE of order 1 (float64)
ROUND_OFF = 1e-9
#: the random directions of the convexity checks
DIRECTIONS = 8


def geometry_errata(data: NTPData, ref: LinearReference, W: torch.Tensor) -> list[Check]:
    """A-E1, A-E2, A-E3 and A-E11 on the dataset of Figs. 3-5 (``W``: (V, d), an iterate with both parts nonzero, the
    final GD iterate), with Lemma 4's claim 1 and CE's convexity as corrected."""
    F, W_star, W_mm = ref.F, ref.F.W_star, ref.W_mm
    H = data.entropy
    out = []

    # A-E1: with the printed inner sum (every z' != z) log(1 + Σ e^{-(l_z - l_z')}) = -log S_z: CE_F is CE itself
    def printed_cef(at: torch.Tensor, name: str) -> Check:
        return check_at_most("A-E1: CE_F as printed, CE_F(W*) = H", "with the printed inner sum over every z' != z, "
                             f"CE_F(W*) = H (Lemma 4, claim 1): CE_F({name}) - H", float(cross_entropy(at, data)) - H,
                             ROUND_OFF, "eq. (12) of paper A", kind="erratum", **cite("A:cef-definition"),
                             metric=f"CE_F({name}) - H with CE_F as printed (the sum over every z' != z makes CE_F = "
                                    "CE)", threshold_source="round-off allowance (ours)")

    out.append(with_control(printed_cef(W_star, "W*"), "W = 0 (CE_F as printed is CE, above H at every W)",
                            printed_cef(torch.zeros_like(W_star), "0")))

    def lemma4(at: torch.Tensor, name: str) -> Check:
        return check_at_most("Lemma 4, claim 1: CE_F(W*) = H", f"|CE_F({name}) - H| with the in-support sum",
                             abs(float(cross_entropy_F(at, data)) - H), ROUND_OFF, "Lemma 4 of paper A",
                             kind="theorem", **cite("A:lemma4-cef"), premise="NTP_H-compatible data",
                             premise_met=bool(F.compatible), threshold_source="round-off allowance (ours)",
                             metric=f"|CE_F({name}) - H|, CE_F with the inner sum over z' in S_j (A-E1 corrected)")

    out.append(with_control(lemma4(W_star, "W*"), "a wrong W*: W* moved by 1% of its norm inside F",
                            lemma4(moved_W_star(ref), "W* + δ")))

    # A-E2: W^d = -W^mm lies in F^⊥ and satisfies (6a), yet pushes in-support logits below out-of-support ones
    def limit(at: torch.Tensor, name: str) -> Check:
        R = 30.0
        cef = float(cross_entropy_F(at, data))
        gaps = {s: abs(float(cross_entropy(at + s * R * W_mm, data)) - cef) for s in (1, -1)}
        return check_at_most("A-E2: CE_F as a limit along any W^d with (6a)", f"CE(W + R W^d) -> CE_F(W) for every "
                             f"W^d in F^⊥ (W = {name}; W^d = ± W^mm, R = {R:g})", max(gaps.values()), 1e-6,
                             "App. E of paper A", kind="erratum", **cite("A:cef-limit"),
                             metric=f"the larger of |CE({name} + R W^d) - CE_F({name})| over W^d = W^mm "
                                    f"({gaps[1]:.3g}: (6b) holds) and W^d = -W^mm ({gaps[-1]:.3g}: (6a) only), "
                                    f"R = {R:g}",
                             threshold_source="e^{-R} up to the number of tokens (ours)")

    out.append(with_control(limit(W_star, "W*"), "W = 0 instead of W*", limit(torch.zeros_like(W_star), "0")))

    # A-E3: the norms of the two parts add only in squares
    def split(at: torch.Tensor, name: str) -> Check:
        whole, part_F = frobenius(at[None])[0], frobenius(F.project(at)[None])[0]
        part_perp = frobenius(F.project_perp(at)[None])[0]
        return check_at_most("A-E3: ||W|| = ||P_F W|| + ||P_⊥ W||", f"the norms of the two parts add ({name})",
                             float((part_F + part_perp - whole).abs() / whole), ROUND_OFF,
                             "proof of Lemma 4 of paper A", kind="erratum", **cite("A:lemma4-norms"),
                             metric=f"| ||P_F W|| + ||P_⊥ W|| - ||W|| | / ||W|| at W = {name} (the squares add: "
                                    f"{float(part_F ** 2 + part_perp ** 2 - whole ** 2):.2g} = ||P_F W||² + "
                                    "||P_⊥ W||² - ||W||²)", threshold_source="round-off allowance (ours)")

    out.append(with_control(split(W, "the final GD iterate"), "W = W* + W^mm", split(W_star + W_mm, "W* + W^mm")))
    out += _convexity(data, W)
    return out


def _midpoint_gap(data: NTPData, W: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """(CE(W + D) + CE(W - D))/2 - CE(W) per direction D (n, V, d): positive for every unit D exactly when CE is
    strictly convex along it."""
    return (cross_entropy(W + D, data) + cross_entropy(W - D, data)) / 2 - cross_entropy(W[None], data)


def _unit(D: torch.Tensor) -> torch.Tensor:
    return D / frobenius(D)[:, None, None]


def flat_directions(data: NTPData, gen: torch.Generator) -> torch.Tensor:
    """Unit directions (n, V, d) along which CE is flat: 1 u^T (the same vector added to every row) and, when the
    contexts do not span R^d, N with N H̄ = 0 (docs/paper-a-linear-ntp.md, erratum A-E11)."""
    V, d = data.V, data.d
    u = torch.randn(d, generator=gen, dtype=torch.float64)
    out = [torch.ones(V, 1, dtype=torch.float64) * u]
    Q, _ = torch.linalg.qr(data.H.T.double())  # span of the contexts (d, m)
    N = torch.randn(V, d, generator=gen, dtype=torch.float64)
    N = N - (N @ Q) @ Q.T
    if float(frobenius(N[None])[0]) > 1e-8:
        out.append(N)
    return _unit(torch.stack(out))


def _convexity(data: NTPData, W: torch.Tensor, seed: int = 0) -> list[Check]:
    """A-E11 ("CE is strictly convex") at W along CE's flat directions, and the corrected statement: strictly convex
    along every direction off the flat space (random directions with zero column sums inside the span of the contexts,
    where the flat space's complement lies)."""
    W = W.double()
    gen = torch.Generator().manual_seed(seed)
    flat = flat_directions(data, gen)
    Q, _ = torch.linalg.qr(data.H.T.double())
    R = torch.randn(DIRECTIONS, data.V, data.d, generator=gen, dtype=torch.float64)
    R = _unit((R - R.mean(1, keepdim=True)) @ Q @ Q.T)  # 1^T D = 0 and D (I - Π_H) = 0
    off = _midpoint_gap(data, W, R)

    def printed(at: torch.Tensor, name: str) -> Check:
        gap = float(_midpoint_gap(data, at, flat).min())
        return check_at_least("A-E11: CE is strictly convex", f"the midpoint gap of CE along its flat directions at "
                              f"{name} (positive for a strictly convex function)", gap, 1e-12, "Sec. 4 of paper A",
                              kind="erratum", **cite("A:strictly-convex"),
                              metric=f"min over the {len(flat)} flat directions D (1 u^T"
                                     f"{' and N with N H̄ = 0' if len(flat) > 1 else ''}; ||D|| = 1) of "
                                     f"(CE(W + D) + CE(W - D))/2 - CE(W) at W = {name} (along {DIRECTIONS} random "
                                     f"directions off them it is at least {float(off.min()):.3g})",
                              threshold_source="round-off allowance (ours)")

    def corrected(directions: torch.Tensor, what: str) -> Check:
        gap = float(_midpoint_gap(data, W, directions).min())
        return check_at_least("CE strictly convex off its flat directions", "the midpoint gap of CE is positive along "
                              f"every direction off its flat space ({what})", gap, 1e-12,
                              "docs/paper-a-linear-ntp.md (A-E11 corrected)", kind="theorem", **cite("docs:ce-flat"),
                              metric=f"min over {what} D (||D|| = 1) of (CE(W + D) + CE(W - D))/2 - CE(W) at the final "
                                     "GD iterate", threshold_source="round-off allowance (ours)")

    return [with_control(printed(W, "the final GD iterate"), "the same at W = 0",
                         printed(torch.zeros_like(W), "W = 0")),
            with_control(corrected(R, f"{DIRECTIONS} random directions with zero column sums in the span of the "
                                      "contexts"), "a flat direction (1 u^T)", corrected(flat[:1], "the flat "
                                                                                              "direction 1 u^T"))]


# ------------------------------------------------------------------------------------------------ the 2D example
def support_patterns(k: int, m: int = 3, V: int = 5) -> np.ndarray:
    """Every support pattern of ``m`` contexts with supports of size ``k`` among ``V`` tokens: (C(V, k)^m, m, V)."""
    one = np.array([[v in s for v in range(V)] for s in itertools.combinations(range(V), k)])
    idx = np.array(list(itertools.product(range(len(one)), repeat=m)))
    return one[idx]


def _fits_captions(patterns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which patterns (n, 3, 5) of contexts A, B, C fit Fig. 1's caption (word 3 follows only A; every other word
    follows two contexts) and Fig. 2's (words 1 and 5 both follow exactly A and B)."""
    follows = patterns.transpose(0, 2, 1)  # (n, token, context)
    only_A = np.array([True, False, False])
    others = [0, 1, 3, 4]
    fig1 = (follows[:, 2] == only_A).all(1) & (follows[:, others].sum(2) == 2).all(1)
    A_and_B = np.array([True, True, False])
    fig2 = (follows[:, 0] == A_and_B).all(1) & (follows[:, 4] == A_and_B).all(1)
    return fig1, fig2


def two_d_errata() -> list[Check]:
    """A-E13: no support pattern of the 2D example (m = 3 contexts, V = 5, |S_j| = 3) fits both Fig. 1's caption and
    Fig. 2's, counted over every pattern; the control counts patterns of supports of size 2 (Fig. 1's caption alone
    needs 1 + 4 x 2 = 9 memberships, three supports of size 2 hold 6)."""
    def count(k: int) -> Check:
        fig1, fig2 = _fits_captions(support_patterns(k))
        return Check("A-E13: Figs. 1-2 captions on one support pattern", "some support pattern (|S_j| = "
                     f"{k}) fits Fig. 1's caption and Fig. 2's", f"{int((fig1 & fig2).sum())} of {len(fig1)} "
                     f"patterns ({int(fig1.sum())} fit Fig. 1's alone, {int(fig2.sum())} Fig. 2's alone)",
                     "at least one", bool((fig1 & fig2).any()), "Figs. 1-2 captions of paper A", kind="erratum",
                     **cite("A:fig2-supports"),
                     metric=f"support patterns of contexts A, B, C (every choice of {k} of the 5 tokens per context) "
                            "where word 3 follows only A, every other word exactly two contexts (Fig. 1), and words 1 "
                            "and 5 both follow exactly A and B (Fig. 2)", threshold_source="exhaustive count (exact)")

    return [with_control(count(3), "supports of size 2 (too few memberships for Fig. 1's caption)", count(2))]


# ------------------------------------------------------------------------------------------------ App. C
def sequence_statistics(sequences: np.ndarray, lengths: np.ndarray | None = None) -> tuple[list[int], list[float]]:
    """m_t (distinct contexts of length t followed by a token) and H_t (their entropy, App. C of paper A) for
    t = 1..T-1, for token sequences (N, T) cut to ``lengths`` (N,) (default: all T tokens)."""
    N, T = sequences.shape
    lengths = np.full(N, T) if lengths is None else np.asarray(lengths)
    keep = np.arange(T)[None, :] < lengths[:, None]
    V = int(sequences.max()) + 1
    samples = autoregressive_id_samples(sequences[keep], lengths, np.array([str(v) for v in range(V)]),
                                        context_strings=False)
    stats = corpus_statistics(samples).lengths
    return [s.distinct_contexts for s in stats], [s.entropy for s in stats]


def random_sequences(seed: int, n: int = 300, T: int = 6, V: int = 8) -> np.ndarray:
    """``n`` sequences of ``T`` i.i.d. uniform tokens (a stationary source) over ``V`` tokens: (n, T) int64."""
    return np.random.default_rng(seed).integers(0, V, size=(n, T))


def autoregressive_errata(seed: int = 0) -> list[Check]:
    """A-E12 on equal-length sequences of i.i.d. tokens (data seed ``seed``): App. C's m_1 >= ... >= m_{T-1} as
    printed, and corrected (m_t <= m_{t+1} for equal lengths; control: lengths made unequal); Remark 2's
    H_t >= H_{t+1} as printed (control: a source whose second token copies the first: H_1 = 0 < H_2)."""
    seqs = random_sequences(seed)
    N, T = seqs.shape
    source = f"{N} sequences of {T} i.i.d. uniform tokens (data seed {{}})"

    def printed(m_t: list[int], what: str) -> Check:
        return Check("A-E12: m_1 >= m_2 >= ... >= m_{T-1}", "distinct contexts do not grow with their length t",
                     " ".join(map(str, m_t)), "non-increasing in t", all(a >= b for a, b in itertools.pairwise(m_t)),
                     "App. C of paper A", kind="erratum", **cite("A:ar-contexts"),
                     metric=f"m_t for t = 1..{len(m_t)} on {what}", threshold_source="the statement (exact)")

    def corrected(m_t: list[int], what: str) -> Check:
        return Check("m_t <= m_{t+1} for equal-length sequences", "every context of length t + 1 extends one of "
                     "length t, onto", " ".join(map(str, m_t)), "non-decreasing in t",
                     all(a <= b for a, b in itertools.pairwise(m_t)), "docs/paper-a-linear-ntp.md (A-E12 corrected)",
                     kind="theorem", **cite("docs:ar-contexts-grow"), premise="sequences of equal length",
                     premise_met=True, metric=f"m_t for t = 1..{len(m_t)} on {what}",
                     threshold_source="the statement (exact)")

    def shannon(H_t: list[float], what: str) -> Check:
        worst = max(b - a for a, b in itertools.pairwise(H_t))
        return Check("A-E12: H_t >= H_{t+1}", "the entropy of the next token does not grow with the context's length",
                     " ".join(f"{h:.3g}" for h in H_t), "non-increasing in t (round-off allowance 1e-12)",
                     worst <= 1e-12, "Remark 2 of paper A", kind="erratum", **cite("A:ar-shannon"),
                     metric=f"H_t (nats) for t = 1..{len(H_t)} on {what} (guaranteed for stationary sources only)",
                     threshold_source="the statement (exact, up to round-off)")

    m_t, H_t = sequence_statistics(seqs)
    other, _ = sequence_statistics(random_sequences(seed + 1))
    cut = np.where(np.arange(N) % 10 == 0, T, 3)  # nine sequences in ten cut to 3 tokens
    m_cut, _ = sequence_statistics(seqs, cut)
    copied = seqs.copy()
    copied[:, 1] = copied[:, 0]
    _, H_copied = sequence_statistics(copied)
    return [
        with_control(printed(m_t, source.format(seed)), f"another draw (data seed {seed + 1})",
                     printed(other, source.format(seed + 1))),
        with_control(corrected(m_t, source.format(seed)), "the same sequences, nine in ten cut to 3 tokens (unequal "
                     "lengths)", corrected(m_cut, "the sequences of unequal length")),
        with_control(shannon(H_t, source.format(seed)), "the same sequences with the second token a copy of the first "
                     "(not stationary: H_1 = 0)", shannon(H_copied, "the sequences whose second token copies the "
                                                                    "first")),
    ]

