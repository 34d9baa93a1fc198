"""``ntpbias predict``: train a one-layer transformer with Algorithm 1 and complete given inputs (paper C)."""

from __future__ import annotations

import json

import click

from ._common import cli


@cli.command()
@click.option("--train", "train", required=True, metavar="SENTENCES",
              help="Training sentences: a .txt file (one sentence per line, tokens separated by spaces; every prefix "
                   "is a sample) or a built-in dataset (example1, prop2-counterexample).")
@click.option("--input", "inputs", multiple=True, required=True, metavar='"T1 T2 ..."',
              help="An input sequence (tokens separated by spaces) to complete; repeat for several.")
@click.option("--embedding", type=click.Choice(["onehot", "orthonormal", "unit"]), default="onehot",
              show_default=True, help="Token embeddings (d = |V|); unit-norm ones are outside the theory.")
@click.option("--steps", type=click.IntRange(min=1), default=900, show_default=True,
              help="Iterations of each stage of Algorithm 1 (the paper's T = T_1 = 900).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random embeddings.")
@click.option("--allow-violations", is_flag=True,
              help="Train even when the sentences violate Assumption 1 or 3 (the guarantees then do not apply).")
@click.option("--json", "as_json", is_flag=True,
              help='Print a JSON list of {"input", "prediction", "probability", "query_seen"}.')
def predict(train, inputs, embedding, steps, seed, allow_violations, as_json):
    """Train on SENTENCES with Algorithm 1 and print the predicted next token of each --input.

    Algorithm 1 of the paper, at its default settings: normalized GD from zero, first on the
    collocation loss L_0 in W_ov (η₀ = 0.2/√d), then on the full loss in W_kq with W_ov frozen
    (η = 0.05/√d), --steps iterations each, with d = |V|. Inputs may be sequences never seen in
    training (Theorem 3: an input made of a token that is non-comparable under the query and tokens
    below it is completed with that token's collocation). Data that violate the paper's assumptions
    are refused (exit 2, naming the violation and the results that no longer apply) unless
    --allow-violations is given.

    \b
    Examples:
      ntpbias predict --train example1 --input "S P" --input "O S P" --input "V P"
      ntpbias predict --train sentences.txt --input "the cat" --json
    """
    import torch

    from ..data.structure import analyze_structure, regenerate_labels
    from ..errors import DataError
    from ..models.transformer import token_embeddings
    from ..training.loop import TrainConfig
    from ..training.transformer import TransformerTask, paper_step_sizes, train_two_stage
    from ..training.transformer import predict as model_predict
    from .structure import load_sentences

    samples = load_sentences(train)
    tokens = [text.split() for text in inputs]
    for text, toks in zip(inputs, tokens, strict=True):
        if not toks:
            raise DataError(f"--input {text!r} is empty; give the input's tokens separated by spaces")
    ids = [samples.encode(toks, what=f"input {' '.join(toks)!r}") for toks in tokens]
    structure = analyze_structure(samples)
    if not structure.assumptions_hold:
        if not allow_violations:
            raise DataError(structure.failure_message() + "; fix the sentences, or pass --allow-violations to "
                            "train anyway")
        click.echo("ntpbias: warning: " + structure.failure_message(), err=True)
    E = token_embeddings(samples.V, kind=embedding, seed=seed)
    task = TransformerTask.build(samples, E, structure=structure, solve=False)
    eta0, eta = paper_step_sizes(task.d)
    log = TrainConfig(steps=steps, log_points=0)
    result = train_two_stage(task, eta0=eta0, eta=eta, stage1=log, stage2=log, seeds=[seed])

    L = max(map(len, ids))
    X = torch.tensor([x + [0] * (L - len(x)) for x in ids])
    mask = torch.tensor([[True] * len(x) + [False] * (L - len(x)) for x in ids])
    pred, prob, _, _ = model_predict(result.W_ov[0], result.W_kq[0], E, X, mask)
    known = regenerate_labels(structure, X, mask)  # the label the training data's orders determine, -1 if none
    seen_queries = set(structure.queries)
    records = [{"input": " ".join(toks), "prediction": samples.vocab[int(p)], "probability": float(pr),
                "query_seen": len(x) == 1 or x[-1] in seen_queries}
               for toks, x, p, pr in zip(tokens, ids, pred.tolist(), prob.tolist(), strict=True)]
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    _print(records, [samples.vocab[int(k)] if k >= 0 else None for k in known.tolist()])


def _print(records: list[dict], determined: list[str | None]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title_justify="left")
    for name in ("input", "prediction", "probability", "note"):
        table.add_column(name)
    for rec, label in zip(records, determined, strict=True):
        if not rec["query_seen"]:
            note = "the query never ends a training input: uniform attention, no guarantee"
        elif label is None:
            note = "unseen combination (Theorem 3)"
        else:
            note = f"the training orders give {label}"
        table.add_row(escape(rec["input"]), escape(rec["prediction"]), f"{rec['probability']:.4f}", escape(note))
    Console().print(table)
