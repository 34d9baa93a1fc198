"""``ntpbias lm analyze``: the NTP geometry of a language model at every checkpoint (docs/lm.md#what-is-measured).

The text's NTP data at context length T (every window of T tokens inside a line is a context, the token after it its
label: :func:`~ntpbias.data.sequences.kgram_id_samples`, the reader of ``ntpbias analyze --context-length``), the
model's features H (m, d) of those contexts (each fed alone at positions 0..T-1) and its unembedding W (V, d) at every
checkpoint, measured by :func:`~ntpbias.geometry.lm.model_geometry`. The models are a run directory of ``ntpbias lm
train`` (:class:`RunModels`: its checkpoints at the logged steps) or local Hugging Face models (:class:`HFModels`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..._tensor import resolve_device, to_numpy
from ...config import load_toml
from ...data.corpus import first_tokens
from ...data.lm_text import TextTokenizer
from ...data.ntp import NTPData
from ...data.sequences import kgram_id_samples
from ...errors import DataError
from ...geometry.lm import BLOCK, NUCLEAR_MAX_SVD, LogitReference, logit_reference, model_geometry, nuclear_cost
from ...geometry.separability.structure import CERT_TOL
from ...geometry.ufm.logit_svm import svm_record, svm_vs_centred_support
from ...io import input_file
from ...limits import check_memory, nbytes
from ...results import Check, FigureSpec, Section, Table, check_at_most
from ...training.snapshots import load_snapshot, snapshot_steps
from .config import LMConfig
from .runs import SNAPSHOT_DIR, TOKENIZER_FILE

#: contexts per forward pass when the features are computed
CHUNK = 512
#: the quantities of the per-checkpoint table (and the curves figure), in order
TABLE = ("loss_gap", "finite_rel_error", "finite_rel_error_weighted", "separable", "svm_norm", "cos_perp_mm",
         "margin_ratio", "separated_fraction", "prefix_mass", "logit_cos_perp_S", "logit_cos_perp_mm", "cos_word_gram",
         "cos_context_gram", "sub_collapse_ratio")


class RunModels:
    """The checkpoints of a run directory of ``ntpbias lm train`` (run ``seed_index`` of its seeds)."""

    def __init__(self, run_dir: str | Path, *, seed_index: int = 0, device=None):
        run_dir = Path(run_dir)
        self.cfg = load_toml(LMConfig, input_file(run_dir / "config.toml", "the run's config"))
        record = json.loads(input_file(run_dir / TOKENIZER_FILE, "the run's vocabulary").read_text(encoding="utf-8"))
        self.tokenizer = TextTokenizer.from_dict(record, source=str(run_dir / TOKENIZER_FILE))
        self.snapshots = snapshot_steps(run_dir / SNAPSHOT_DIR)
        if not self.snapshots:
            raise DataError(f"{run_dir}: no checkpoints in {SNAPSHOT_DIR}/; train with `ntpbias lm train` first")
        if not 0 <= seed_index < self.cfg.seeds:
            raise DataError(f"--seed-index {seed_index}: the run trained {self.cfg.seeds} seed(s) "
                            f"(0..{self.cfg.seeds - 1})")
        self.seed_index, self.device = seed_index, resolve_device(device)
        self.seed = self.cfg.seed + seed_index
        self.vocab, self.context, self.source = self.tokenizer.vocab, self.cfg.model.context, str(run_dir)
        self.steps = [s for s, _ in self.snapshots]

    def encode(self, lines: list[str], source: str) -> tuple[np.ndarray, np.ndarray]:
        return self.tokenizer.encode(lines, source=source)

    def training_text(self) -> tuple[list[str], int]:
        """The lines the run trained on and its token limit (``data.max_tokens``)."""
        return self.cfg.data.read_lines(), self.cfg.data.max_tokens

    def features(self, i: int, contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(H (m, d), W (V, d), relative logit reconstruction error) of checkpoint i, in float64."""
        from ...models.gpt import GPT

        params = load_snapshot(self.snapshots[i][1])["params"]
        module = GPT(len(self.vocab), dtype=torch.float64, device=self.device, **self.cfg.model.kwargs())
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(params[name][self.seed_index])
            W = module.unembedding.detach()
            H = torch.cat([module.hidden(c.to(self.device))[:, -1] for c in contexts.split(CHUNK)])
            logits = torch.cat([module(c.to(self.device))[:, -1] for c in contexts.split(CHUNK)])
        err = float((H @ W.mT - logits).abs().max() / logits.abs().max().clamp_min(1e-300))
        return H, W, err


class HFModels:
    """Hugging Face causal LMs in local folders (one or several checkpoints of one model, same tokenizer); the step of
    a folder is the last number in its name (``step1000``), else its position."""

    def __init__(self, paths: list[str | Path], *, device=None):
        from ...models.hf import HFCausalLM

        self.models = [HFCausalLM(p, device=resolve_device(device)) for p in paths]
        first = self.models[0]
        if any(m.vocab != first.vocab for m in self.models[1:]):
            raise DataError("--hf: the models have different vocabularies; analyze checkpoints of one model together")
        numbers = [re.findall(r"\d+", Path(p).name) for p in paths]
        self.steps = ([int(n[-1]) for n in numbers] if all(numbers) and len({n[-1] for n in numbers}) == len(paths)
                      else list(range(len(paths))))
        self.vocab, self.context, self.source = first.vocab, first.context, ", ".join(map(str, paths))
        self.tokenizer, self.seed = None, None

    def encode(self, lines: list[str], source: str) -> tuple[np.ndarray, np.ndarray]:
        return self.models[0].encode(lines, source=source)

    def training_text(self):
        raise DataError("--hf: name the text to analyze with --text")

    def features(self, i: int, contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        model = self.models[i]
        parts = [model.features(c) for c in contexts.split(CHUNK)]
        return torch.cat([h for h, _ in parts]).double(), model.unembedding.double(), max(e for _, e in parts)


@dataclass(frozen=True, eq=False)
class TextContexts:
    """The NTP data of a text at context length T, before the model's features: ``data`` (with a placeholder H),
    each context's tokens (m, T) and which model tokens the columns of P are (``keep``: all, or those of the text)."""

    data: NTPData
    tokens: torch.Tensor
    keep: np.ndarray
    facts: dict


def text_contexts(models, lines: list[str], T: int, *, max_tokens: int = 0, max_contexts: int = 0,
                  vocab: str = "model", source: str = "text") -> TextContexts:
    """Encode ``lines`` with the model's tokenizer and build their T-gram NTP data (module docstring).

    ``max_contexts`` > 0 keeps the most frequent contexts (π̂ renormalized over them); ``vocab="text"`` keeps only the
    model tokens that occur in the text (the softmax restricted to them; docs/lm.md#decisions).
    """
    if models.context is not None and T > models.context:
        raise DataError(f"--context-length {T} exceeds the model's context of {models.context} tokens")
    ids, lengths = first_tokens(*models.encode(lines, source), max_tokens)
    V = len(models.vocab)
    keep = np.unique(ids) if vocab == "text" else np.arange(V)
    new_id = np.full(V, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    names = np.asarray(models.vocab, dtype=str)
    s = kgram_id_samples(ids, lengths, names, T, source=source)
    ctx_ids, tokens = s.context_ids, s.context_tokens
    n_contexts = len(tokens)
    if max_contexts and n_contexts > max_contexts:
        counts = np.bincount(ctx_ids, minlength=n_contexts)
        chosen = np.sort(np.argsort(-counts, kind="stable")[:max_contexts])
        remap = np.full(n_contexts, -1, dtype=np.int64)
        remap[chosen] = np.arange(len(chosen))
        sel = remap[ctx_ids] >= 0
        ctx_ids, next_tokens, tokens = remap[ctx_ids[sel]], s.next_tokens[sel], tokens[chosen]
        contexts = s.contexts[chosen]
    else:
        next_tokens, contexts = s.next_tokens, s.contexts
    m = len(tokens)
    check_memory({f"P ({m:,} contexts x {len(keep):,} tokens) and its counts": nbytes(m, len(keep), itemsize=16)},
                 f"the NTP data of {m:,} contexts", hint="use --max-contexts, a shorter text or --vocab text")
    data = NTPData.from_samples(ctx_ids, new_id[next_tokens], np.zeros((m, 1)), V=len(keep), vocab=names[keep],
                                contexts=contexts)
    facts = {"text": source, "lines": int(len(lengths)), "tokens": int(ids.size), "context length T": T,
             "contexts m": m, "distinct contexts in the text": n_contexts, "samples": int(len(ctx_ids)),
             "share of the text's samples": len(ctx_ids) / len(s.context_ids),
             "vocabulary V": len(keep), "entropy H (nats)": data.entropy}
    return TextContexts(data, torch.as_tensor(tokens, dtype=torch.int64), keep, facts)


@dataclass
class LMAnalysis:
    """What ``ntpbias lm analyze`` writes: ``record`` (analysis.json), ``data`` (ntp_data.npz: the final features),
    ``W`` (the final unembedding), ``arrays`` (lm_geometry.npz), ``section`` (the report)."""

    record: dict
    data: NTPData
    W: torch.Tensor
    arrays: dict
    section: Section
    rows: list[dict] = field(default_factory=list)


def footprint(m: int, V: int, d: int, *, nuclear: bool) -> dict[str, int]:
    """Memory of :func:`analyze_models` by part, from the shapes (its preflight): the (V, m) logit-space arrays of one
    checkpoint (logits, projections, weights and their temporaries, about 14 of them), the reference's (L*, S̃ and its
    SVD, the baselines), the features, and the nuclear-norm SVM's ADMM iterates (about 12 (V, m) arrays) when it is
    solved. Nothing of size m x m is formed (docs/lm.md#cost)."""
    parts = {f"logit-space arrays of one checkpoint (14 x V = {V:,} x m = {m:,})": nbytes(14, V, m),
             "reference: L*, S̃, its SVD, the baselines (8 x V x m)": nbytes(8, V, m),
             f"features and collapse blocks (m x d = {m:,} x {d:,}, {BLOCK} x {BLOCK})":
                 nbytes(4, m, d) + nbytes(3, BLOCK, BLOCK)}
    if nuclear and nuclear_cost(V, m) <= NUCLEAR_MAX_SVD:
        parts["nuclear-norm SVM iterates (12 x V x m)"] = nbytes(12, V, m)
    return parts


def analyze_models(models, text: TextContexts, *, solver: str = "auto", nuclear: bool = True, prefix: bool = True,
                   figure_prefix: str = "lm", checkpoints: int = 0,
                   say: Callable[[str], None] = lambda _m: None) -> LMAnalysis:
    """Measure the checkpoints of ``models`` on ``text`` (module docstring): all of them, or ``checkpoints`` of them
    spread evenly over their list (the first and the last included); the report's figures are
    ``<figure_prefix>-curves``, ``-spectra`` and ``-collapse``. ``prefix``: also the longest separable prefix of the
    contexts where the features are not separable (docs/lm.md#the-largest-separable-set)."""
    rows, spectra, last, ref = [], {"logits": [], "H": [], "W": []}, None, None
    chosen = chosen_checkpoints(len(models.steps), checkpoints)
    keep = torch.as_tensor(text.keep)
    for n, i in enumerate(chosen):  # loop over checkpoints
        step = models.steps[i]
        say(f"checkpoint {n + 1}/{len(chosen)} (step {step}): features")
        wall, cpu = time.perf_counter(), time.process_time()
        H, W, err = models.features(i, text.tokens)
        data = replace(text.data, H=H.cpu().double(), _cache={})
        ref_cpu = 0.0
        if ref is None:  # the data's own objects, once (the random-feature baseline takes the model's width)
            check_memory(footprint(data.m, data.V, data.d, nuclear=nuclear),
                         f"the geometry of {data.m:,} contexts (V = {data.V:,}, d = {data.d:,})",
                         hint="use --max-contexts N (the N most frequent contexts), --vocab text or --no-nuclear")
            say("support pattern, baselines and the nuclear-norm NTP-SVM")
            ref_cpu = time.process_time()
            ref = logit_reference(text.data, solver="auto" if solver == "auto" else ("admm" if solver != "clarabel"
                                                                                      else "clarabel"),
                                  nuclear=nuclear, d=data.d)
            ref_cpu = reference_cpu = time.process_time() - ref_cpu
        say(f"checkpoint {n + 1}/{len(chosen)} (step {step}): geometry")
        W = W.cpu().double()[keep]
        geo = model_geometry(data, W, ref, solver=solver, prefix=prefix)
        last = (data, W, geo)
        rows.append({"step": step, **geo.values, "logit_reconstruction_error": err,
                     "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu - ref_cpu})
        for k, v in geo.spectra.items():
            spectra[k].append(to_numpy(v))
    data, W, geo = last
    record = geo.paper_a.record(data)
    curves = {k: [r.get(k) for r in rows] for k in rows[-1]}
    record["lm"] = {"source": models.source, "seed": models.seed, "context_length": int(text.tokens.shape[1]),
                    "steps": curves.pop("step"),
                    **curves, "final": rows[-1], "reference": {**_reference_record(ref, text.data),
                                                               "cpu_seconds": reference_cpu},
                    "facts": dict(text.facts)}
    arrays = {"steps": np.array([r["step"] for r in rows]), "L_star": ref.L_star, "S_tilde": ref.support.S_tilde,
              "S_tilde_singular_values": ref.support.sigma, "groups": ref.groups,
              **{f"spectra_{k}": _stack(v) for k, v in spectra.items()}}
    if ref.svm is not None:
        arrays.update(L_mm=ref.L_mm, L_mm_singular_values=ref.directions["mm"].sigma)
    if geo.paper_a.W_mm is not None:
        arrays["W_mm"] = geo.paper_a.W_mm
    if geo.paper_a.W_star is not None:
        arrays["W_star"] = geo.paper_a.W_star
    if geo.prefix_svm is not None and geo.prefix_svm.certified:
        arrays["W_mm_prefix"] = geo.prefix_svm.W
    return LMAnalysis(record, data, W, arrays, _section(models, text, ref, rows, arrays, data, figure_prefix), rows)


def chosen_checkpoints(n: int, k: int = 0) -> list[int]:
    """Indices of ``k`` of ``n`` checkpoints spread evenly over the list, the first and the last included (all when
    ``k`` is 0 or at least ``n``).

    >>> chosen_checkpoints(10, 4), chosen_checkpoints(3, 0)
    ([0, 3, 6, 9], [0, 1, 2])
    """
    if not k or k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [n - 1]


def _stack(spectra: list[np.ndarray]) -> np.ndarray:
    n = max(len(s) for s in spectra)
    return np.stack([np.pad(s, (0, n - len(s)), constant_values=np.nan) for s in spectra])


#: the columns of the baselines table: the quantities that need no trained model
BASELINE_KEYS = ("loss_gap", "finite_rel_error", "finite_rel_error_weighted", "logit_perp_share", "logit_cos_perp_S",
                 "logit_cos_perp_mm", "separated_fraction")


def _reference_record(ref: LogitReference, data: NTPData) -> dict:
    out = {"support_sets": int(ref.groups.max()) + 1, "support_matrix_singular_values": ref.support.sigma.tolist(),
           "polar_out_max": ref.support.polar_out_max, "finite_part_norm": float(torch.linalg.vector_norm(ref.L_star)),
           "baselines": ref.baselines, "nuclear_svm_note": ref.note}
    if ref.svm is not None:
        out["nuclear_svm"] = svm_record(ref.svm)
        out["svm_vs_centred_support"] = svm_vs_centred_support(ref.svm, data)
    return out


def _fmt(v):
    return float(f"{v:.4g}") if isinstance(v, float) else v


def _section(models, text: TextContexts, ref: LogitReference, rows: list[dict], arrays: dict, data: NTPData,
             prefix: str) -> Section:
    final = rows[-1]
    section = Section("lm", f"NTP geometry of {models.source} on {text.facts['text']} (T = "
                      f"{text.tokens.shape[1]})", description="The model read as a linear decoder on its own features: "
                      "paper A's finite part and max-margin direction on the model's H, and the log-bilinear model's "
                      "logit-space predictions, each beside its baselines (docs/lm.md).", facts=dict(text.facts))
    section.facts.update({"checkpoints": len(rows), "support sets": int(ref.groups.max()) + 1,
                          "final: rank H": final["rank_H"], "final: equations (4) / (V - 1) rank H":
                              f"{final['equations']:,} / {(data.V - 1) * final['rank_H']:,}",
                          "final: NTP-separable H": final["separable"],
                          "final: decided by": final["separability_method"],
                          "final: NTP_H-compatible": final["compatible"],
                          "seconds per checkpoint (CPU)": round(sum(r["cpu_seconds"] for r in rows) / len(rows), 1)})
    section.checks.extend(sanity_checks(ref, rows))
    section.tables.append(Table("Per checkpoint", ("step", *TABLE), tuple(
        (r["step"], *(_fmt(r.get(k)) for k in TABLE)) for r in rows)))
    section.tables.append(Table("Baselines (no trained model) against the final checkpoint", ("logits", *BASELINE_KEYS),
                                ((f"the model, step {final['step']}", *(_fmt(final.get(k)) for k in BASELINE_KEYS)),
                                 *((name, *(_fmt(b.get(k)) for k in BASELINE_KEYS))
                                   for name, b in ref.baselines.items()))))
    if final["separable"] is False:
        section.notes.append("the final features are not NTP-separable (a finding, not an error; "
                             f"{final['separability_method']}): the paper-A max-margin quantities (svm_norm, "
                             "cos_perp_mm, margin_ratio) are undefined; prefix_* measure the longest separable prefix "
                             "of the contexts by frequency, separated_fraction how much the model's own W separates")
    elif final["separable"] is None:
        section.notes.append("separability of the final features is undecided: " + final["separability_method"])
    if ref.note:
        section.notes.append(ref.note)
    if any(r["svm_certified"] is False for r in rows):
        section.notes.append("an NTP-SVM missed its tolerance at some checkpoint: its W^mm values are null there")
    if any(r.get("prefix_svm_certified") is False for r in rows):
        section.notes.append("the NTP-SVM of the longest separable prefix failed or missed its tolerance at some "
                             "checkpoint (at the numerical edge of separability the solver can find no margin the LP "
                             "certified): prefix_svm_norm, prefix_cos_perp_mm and prefix_margin_ratio are null there")
    section.plots.append(FigureSpec(f"{prefix}-curves", "The geometry against training steps",
                                    "Left to right: CE - H on the analysed contexts; the finite part's error in logit "
                                    "space (unweighted and π p-weighted, and paper A's ||P_F W - W*||/||W*|| when H is "
                                    "compatible); alignment of the growing part with W^mm (on the model's H), with "
                                    "L^mm and with S̃; the margin relative to the maximum and the share of separated "
                                    "contexts; Gram alignments; collapse angles. Dotted: the add-0.1 baseline.",
                                    "lm.curves", {"rows": rows, "baseline": ref.baselines.get("add_0.1", {})}))
    section.plots.append(FigureSpec(f"{prefix}-spectra", "Singular spectra",
                                    "Singular values of the centred logits W_c H^T at each checkpoint (darker = "
                                    "later), against those of the nuclear-norm SVM L^mm and of the centred support "
                                    "matrix S̃, each divided by its largest.", "lm.spectra",
                                    {k: arrays[k] for k in ("steps", "spectra_logits", "S_tilde_singular_values")
                                     } | ({"L_mm_singular_values": arrays["L_mm_singular_values"]}
                                          if "L_mm_singular_values" in arrays else {})))
    shown = _collapse_sample(ref.groups, data.pi)
    dirs = ref.directions["mm" if "mm" in ref.directions else "S"]
    predicted = (dirs.Vt[:, shown].mT * dirs.sigma) @ dirs.Vt[:, shown]
    section.plots.append(FigureSpec(f"{prefix}-collapse", "Context features by support set",
                                    f"Cosines between the final features h_j of {len(shown)} contexts (the most "
                                    "frequent of the support sets holding two or more), ordered by support set (lines "
                                    "between sets), beside the context Gram direction the "
                                    f"{'nuclear-norm SVM' if 'mm' in ref.directions else 'centred support matrix'} "
                                    "predicts (docs/ufm.md, U-4).",
                                    "lm.collapse", {"H": to_numpy(data.H[shown]), "groups": to_numpy(ref.groups[shown]),
                                                    "predicted": to_numpy(predicted)}))
    return section


#: contexts drawn in the collapse figure (at most)
COLLAPSE_SHOWN = 400


def _collapse_sample(groups: torch.Tensor, pi: torch.Tensor) -> torch.Tensor:
    """Up to :data:`COLLAPSE_SHOWN` contexts for the collapse figure: those of the support sets with two or more
    contexts, the most frequent first (all contexts when no set has two)."""
    size = torch.bincount(groups)
    multi = torch.nonzero(size[groups] >= 2).flatten()
    pool = multi if len(multi) else torch.arange(len(groups))
    top = pool[torch.argsort(pi[pool], descending=True, stable=True)[:COLLAPSE_SHOWN]]
    return torch.sort(top).values


def sanity_checks(ref: LogitReference, rows: list[dict]) -> list[Check]:
    """The certificates behind the numbers: the nuclear-norm SVM's duality gap, every checkpoint's NTP-SVM KKT
    residuals (where separable), and the features reproducing the model's logits."""
    exact = {"kind": "sanity", "threshold_source": "solver tolerance and round-off (ours)"}
    out = [check_at_most("features reproduce the logits", "max over checkpoints of max |W h - logits| / max |logits| "
                         "(h: the features, W: the unembedding)", max(r["logit_reconstruction_error"] for r in rows),
                         1e-6, "docs/lm.md#what-is-measured", **exact)]
    if ref.svm is not None:
        out.append(check_at_most("nuclear-norm SVM certificate", "relative duality gap of L^mm",
                                 ref.svm.certificate.duality_gap, ref.svm.tol, "docs/ufm.md, U-2", **exact))
    decided = [r["separability_residual"] for r in rows if r["separability_residual"] is not None]
    if decided:
        out.append(check_at_most("separability certificates", f"worst relative residual of the {len(decided)} "
                                 "separability certificate(s) (a separating W, a Gordan combination from the support "
                                 "graph or the LP)", max(decided), CERT_TOL, "docs/lm.md#decided-by-structure",
                                 **exact))
    kkt = [r["svm_kkt_worst"] for r in rows if r["svm_kkt_worst"] is not None]
    if kkt:
        out.append(check_at_most("NTP-SVM certificates", f"worst KKT residual of W^mm over the {len(kkt)} separable "
                                 "checkpoint(s)", max(kkt), 1e-6, "docs/paper-a-linear-ntp.md#objects", **exact))
    return out
