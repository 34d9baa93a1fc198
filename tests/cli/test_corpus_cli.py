"""``ntpbias corpus`` end to end: statistics against a naive count, output files, export -> analyze, bad input.

The success path runs once in a real subprocess (it pays the torch import); the other cases run in-process
through the same entry point (``ntpbias.cli.main``; the process-level exit-2 contract of ``main`` is checked in
a real process by test_analyze_cli.py).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from ntpbias.data import corpus as corpusmod
from ntpbias.data.ntp import NTPData

TEXT = "The cat sat. The cat ran!\nA dog sat; the dog ran.\nThe cat sat, the dog sat.\n"
TOKENS = "the cat sat . the cat ran ! a dog sat ; the dog ran . the cat sat , the dog sat .".split()  # of TEXT


def _naive_stats(tokens: list[str], T: int) -> dict[int, tuple[int, int, float, float]]:
    """(samples, distinct contexts, H_t, single-next fraction) per t: all windows of T+1 tokens, loops."""
    follow = defaultdict(Counter)
    for s in range(len(tokens) - T):
        w = tokens[s:s + T + 1]
        for t in range(1, T + 1):
            follow[tuple(w[:t])][w[t]] += 1
    out = {}
    for t in range(1, T + 1):
        fs = [f for c, f in follow.items() if len(c) == t]
        n = sum(sum(f.values()) for f in fs)
        H = -sum(k / n * math.log(k / sum(f.values())) for f in fs for k in f.values())
        out[t] = (n, len(fs), H, sum(len(f) == 1 for f in fs) / len(fs))
    return out


def test_corpus_json_outputs_and_export_in_a_real_process(tmp_path, run_cli):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    out, npz = tmp_path / "out", tmp_path / "data.npz"
    proc = run_cli("corpus", text, "--max-context", 3, "--json", "--out", out, "--export", npz,
                   "--embedding", "gaussian:d=5,seed=1")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    tokens = TOKENS
    assert rec["tokens"] == len(tokens) and rec["vocab"] == len(set(tokens))
    ref = _naive_stats(tokens, 3)
    assert [s["t"] for s in rec["lengths"]] == [1, 2, 3]
    for s in rec["lengths"]:
        n, m, H, single = ref[s["t"]]
        assert (s["samples"], s["distinct_contexts"]) == (n, m)
        assert math.isclose(s["entropy"], H, rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(s["single_next_fraction"], single, rel_tol=1e-12)
    assert rec["shannon"]["holds"] == all(ref[t + 1][2] <= ref[t][2] + 1e-12 for t in (1, 2))
    # files: corpus.json = stdout, support sizes sum to m_t, figures written
    assert json.loads((out / "corpus.json").read_text()) == rec
    rows = np.loadtxt(out / "support_sizes.csv", delimiter=",", skiprows=1, dtype=int).reshape(-1, 3)
    for s in rec["lengths"]:
        assert rows[rows[:, 0] == s["t"], 2].sum() == s["distinct_contexts"]
    for ext in ("png", "svg"):
        assert (out / "figures" / f"corpus_stats.{ext}").stat().st_size > 1000
    data = NTPData.load(npz)
    assert data.m == sum(s["distinct_contexts"] for s in rec["lengths"]) and data.d == 5
    assert data.V == rec["vocab"] and data.n_samples == sum(s["samples"] for s in rec["lengths"])
    assert data.contexts[0] in tokens and data.context_lengths.tolist() == sorted(data.context_lengths.tolist())


def test_exported_data_feed_analyze(tmp_path, cli):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    code, _, err = cli("corpus", text, "-T", 2, "--export", tmp_path / "d.npz", "--quiet")
    assert code == 0, err
    code, out, err = cli("analyze", tmp_path / "d.npz", "--out", tmp_path / "an", "--json")
    assert code == 0, err
    rec = json.loads(out)
    data = NTPData.load(tmp_path / "d.npz")
    assert rec["m"] == data.m and rec["V"] == data.V and rec["d"] == data.m  # onehot: d = m
    assert rec["separable"] is True  # one-hot embeddings are always separable (Lemma 1 of paper A)
    # the numbers analyze prints, against the naive count of the text: m = distinct contexts of lengths 1..T,
    # V = distinct tokens, entropy = the sample-weighted mean of the per-length conditional entropies H_t
    ref = _naive_stats(TOKENS, 2)
    assert rec["m"] == sum(m for _, m, _, _ in ref.values()) and rec["V"] == len(set(TOKENS))
    expected = sum(n * H for n, _, H, _ in ref.values()) / sum(n for n, _, _, _ in ref.values())
    assert rec["entropy"] == pytest.approx(expected, rel=1e-12)


def test_table_output_and_builtin_shakespeare(tmp_path, cli):
    code, out, err = cli("corpus", "shakespeare", "-T", 2, "--max-tokens", 5000, "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["tokens"] == 5000 and rec["documents"] == 38 and rec["source"] == "shakespeare"
    assert rec["lengths"][0]["samples"] == 5000 - 2  # one document (the first play) with 5000 tokens, T = 2
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    code, out, err = cli("corpus", text, "-T", 2, "--tokenizer", "wordpiece")
    assert code == 0, err
    assert "Shannon" in out and "H_t" in out


@pytest.mark.parametrize(("args", "message"), [
    (["{text}", "-T", 50], "smaller than the context"),
    (["{tmp}/missing.txt"], "no such file or folder"),
    (["{text}", "-T", 0], "Invalid value for '--max-context'"),
    (["{text}", "--stride", 0], "Invalid value for '--stride'"),
    (["{text}", "--export", "{tmp}/x.npz", "--embedding", "fancy"], "--embedding 'fancy'"),
    (["{text}", "--segment", "line", "-T", 2, "--max-tokens", 1], "lines of at least 2 tokens"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message, cli, assert_user_error):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    args = [str(a).format(text=text, tmp=tmp_path) for a in args]
    code, out, err = cli("corpus", *args, "--out", tmp_path / "out", "--export", tmp_path / "d.npz")
    assert_user_error(code, err, message)
    assert out == ""
    assert not (tmp_path / "out").exists() and not (tmp_path / "d.npz").exists()


def test_too_large_export_writes_nothing(tmp_path, monkeypatch, cli, assert_user_error):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    monkeypatch.setattr(corpusmod, "MAX_EXPORT_ENTRIES", 100)
    code, _, err = cli("corpus", text, "-T", 2, "--out", tmp_path / "out", "--export", tmp_path / "d.npz")
    assert_user_error(code, err, "matrix entries")
    assert not (tmp_path / "out").exists() and not (tmp_path / "d.npz").exists()


@pytest.mark.slow  # starts a Dask cluster or real worker processes
def test_several_sources_and_dask_sharded_counting_equal_one_process(tmp_path, cli, assert_user_error):
    """`ntpbias corpus DIR FILE --executor dask` (an embedded two-worker LocalCluster) prints the same statistics."""
    pytest.importorskip("distributed")
    folder = tmp_path / "docs"
    folder.mkdir()
    for k, line in enumerate(TEXT.splitlines() * 2):
        (folder / f"{k:02d}.txt").write_text(line + " " + line + "\n", encoding="utf-8")
    extra = tmp_path / "extra.txt"
    extra.write_text(TEXT, encoding="utf-8")
    args = ["corpus", folder, extra, "-T", 3, "--max-vocab", 9, "--json", "--quiet"]
    code, plain, err = cli(*args)
    assert code == 0, err
    code, sharded, err = cli(*args, "--executor", "dask", "--workers", 2, "--shards", 3)
    assert code == 0, err
    a, b = json.loads(plain), json.loads(sharded)
    assert a["documents"] == b["documents"] == 7 and a["source"] == f"{folder} {extra}"
    assert a == b
    code, _, err = cli("corpus", extra, "--scheduler", "tcp://127.0.0.1:9", "--quiet")
    assert_user_error(code, err, "cannot reach the Dask scheduler")
