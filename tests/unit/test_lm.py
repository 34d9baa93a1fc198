"""The language model's pieces against independent computations: K-gram counting by a dictionary, windows against an
enumeration of every (context, next token) occurrence, the training loss against one forward pass per context, the
decoder's causality and parameter count, the tokenizer, and resume."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from ntpbias.data.lm_text import TextTokenizer, text_lines
from ntpbias.data.planted import planted_markov_lines
from ntpbias.data.sequences import kgram_id_samples
from ntpbias.errors import DataError
from ntpbias.experiments.lm.config import LMModelConfig
from ntpbias.models.gpt import GPT
from ntpbias.training.lm import LMProblem, TokenWindows
from ntpbias.training.loop import TrainConfig, Trainer
from ntpbias.training.optimizers import Optimizer, OptimizerConfig
from ntpbias.training.snapshots import load_snapshot, snapshot_steps, snapshot_writer


def _lines(seed=0, n=6, V=5):
    rng = np.random.default_rng(seed)
    return [rng.integers(V, size=rng.integers(1, 9)) for _ in range(n)]


@pytest.mark.parametrize("K", [1, 2, 3])
def test_kgram_counts_against_a_dictionary(K):
    lines = _lines(K)
    counts = collections.Counter((tuple(line[i:i + K]), int(line[i + K])) for line in lines
                                 for i in range(len(line) - K))
    s = kgram_id_samples(np.concatenate(lines), np.array([len(x) for x in lines]), np.array(list("abcde")), K)
    got = collections.Counter((tuple(s.context_tokens[c]), int(z)) for c, z in zip(s.context_ids, s.next_tokens,
                                                                                     strict=True))
    assert got == counts
    assert [" ".join("abcde"[t] for t in row) for row in s.context_tokens] == s.contexts.tolist()


def test_windows_hold_every_occurrence_once():
    lines, C = _lines(3, n=8), 3
    w = TokenWindows(np.concatenate(lines), np.array([len(x) for x in lines]), C)
    expected = collections.Counter((tuple(line[s:s + t]), int(line[s + t])) for line in lines
                                   for s in range(len(line)) for t in range(1, C + 1) if s + t < len(line))
    x, y, mask = w.batch(torch.arange(w.n_windows))
    got = collections.Counter((tuple(x[b, :t + 1].tolist()), int(y[b, t])) for b in range(w.n_windows)
                              for t in range(x.shape[1]) if mask[b, t])
    assert got == expected and w.n_targets == sum(expected.values())


def test_loss_over_all_windows_is_the_mean_ce_over_contexts_fed_alone():
    """Σ CE over every window's targets / #targets = the mean over all (context, next) pairs of the CE of the model fed
    that context alone at positions 0..t-1: the training objective is the distinct-context CE of its contexts."""
    lines, C = _lines(5, n=5), 3
    w = TokenWindows(np.concatenate(lines), np.array([len(x) for x in lines]), C)
    problem = LMProblem(w, 5, {"context": C, "layers": 1, "d": 8, "heads": 2}, dtype=torch.float64)
    params = problem.init_params([0])
    run = {k: v[0] for k, v in params.items()}
    loss = float(problem._loss(run, torch.arange(w.n_windows), w.n_targets))
    model = problem.build(0)
    with torch.no_grad():
        ces = [float(torch.nn.functional.cross_entropy(model(torch.as_tensor(line[s:s + t])[None])[0, -1],
                                                       torch.as_tensor(line[s + t])))
               for line in lines for s in range(len(line)) for t in range(1, C + 1) if s + t < len(line)]
    assert loss == pytest.approx(np.mean(ces), rel=1e-10)


def test_decoder_is_causal_and_counts_its_parameters():
    for tied, bias in ((False, True), (True, False)):
        cfg = LMModelConfig(layers=2, d=8, heads=2, context=6, tied=tied, bias=bias)
        model = GPT(11, seed=1, dtype=torch.float64, **cfg.kwargs())
        assert sum(p.numel() for p in model.parameters()) == cfg.parameters(11)
        a, b = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[1, 2, 9, 0]])
        assert torch.equal(model.hidden(a)[:, :2], model.hidden(b)[:, :2])
        assert torch.allclose(model(a), model.hidden(a) @ model.unembedding.T)
        assert (model.unembedding is model.tok_emb.weight) == tied
    assert torch.equal(GPT(5, context=2, layers=1, d=4, heads=1, seed=3).unembedding,
                       GPT(5, context=2, layers=1, d=4, heads=1, seed=3).unembedding)


def test_tokenizers(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The cat, the DOG.\n\n  a cat  \n", encoding="utf-8")
    lines = text_lines(str(path))
    assert lines == ["The cat, the DOG.", "a cat"]
    tok, ids, lengths = TextTokenizer.fit(lines, "word")
    assert tok.vocab == (",", ".", "a", "cat", "dog", "the") and lengths.tolist() == [6, 2] and tok.unk is None
    assert [tok.vocab[i] for i in ids] == ["the", "cat", ",", "the", "dog", ".", "a", "cat"]
    with pytest.raises(DataError, match="'cow' is not in the model's vocabulary"):
        tok.encode(["a cow"])
    chars, ids, lengths = TextTokenizer.fit(lines, "char", max_vocab=4)
    assert chars.vocab == (" ", "a", "t", "<unk>") and lengths.tolist() == [17, 5]
    assert "".join(chars.vocab[i] for i in chars.encode(["a cat"])[0]) == "a <unk>at"
    assert TextTokenizer.from_dict(chars.to_dict()).vocab == chars.vocab


def test_planted_chain_keeps_its_supports():
    text, chain = planted_markov_lines(V=8, sizes=(2, 3), contexts=4, lines=400, length=12, seed=1)
    ids = np.array([[int(t[1:]) for t in line.split()] for line in text])
    seen = np.zeros((8, 8), dtype=bool)
    seen[ids[:, :-1].ravel(), ids[:, 1:].ravel()] = True
    assert np.array_equal(seen, chain.support.numpy())


def test_resume_gives_the_numbers_of_one_run(tmp_path):
    lines = [np.array(x) for x in _lines(7, n=20)]
    w = TokenWindows(np.concatenate(lines), np.array([len(x) for x in lines]), 4)

    def run(steps, resume, folder):
        problem = LMProblem(w, 5, {"context": 4, "layers": 1, "d": 8, "heads": 2}, batch_size=4)
        trainer = Trainer(problem, Optimizer(OptimizerConfig(name="adam", lr=1e-2), fused=True),
                          TrainConfig(steps=steps, log_points=4), seeds=[0, 1], checkpoint_dir=folder,
                          on_snapshot=snapshot_writer(folder / "steps", [0, 1]))
        return trainer.run(resume=resume)

    whole = run(30, False, tmp_path / "a")
    run(12, False, tmp_path / "b")
    resumed = run(30, True, tmp_path / "b")
    assert np.array_equal(whole["loss"][-1], resumed["loss"][-1])
    for k, v in whole.params.items():
        assert torch.equal(v, resumed.params[k])
    snaps = snapshot_steps(tmp_path / "a" / "steps")
    assert [s for s, _ in snaps] == whole.steps.tolist()
    last = load_snapshot(snaps[-1][1])
    assert last["seeds"] == [0, 1] and torch.equal(last["params"]["head.weight"], whole.params["head.weight"])


def test_builtin_texts():
    """The built-in texts read as lines: Shakespeare's spoken lines, IMDB's reviews without HTML line breaks."""
    imdb = text_lines("imdb")
    assert len(imdb) >= 25_000 and not any("<br" in line for line in imdb[:2000])
    assert text_lines("shakespeare")[0] and len(text_lines("shakespeare")) == 110_402
