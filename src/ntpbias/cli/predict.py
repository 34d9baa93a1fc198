"""``ntpbias predict``: train a one-layer transformer with Algorithm 1 and complete given inputs (paper C)."""

from __future__ import annotations

import json

import click

from ..config import INT64_MAX
from ._common import cli, resource_options


@cli.command()
@click.option("--train", "train", required=True, metavar="SENTENCES",
              help="Training sentences: a .txt file (one sentence per line, tokens separated by spaces; every prefix "
                   "is a sample) or a built-in dataset (example1, prop2-counterexample).")
@click.option("--input", "inputs", multiple=True, required=True, metavar='"T1 T2 ..."',
              help="An input sequence (tokens separated by spaces) to complete; repeat for several.")
@click.option("--embedding", type=click.Choice(["onehot", "orthonormal", "unit"]), default="onehot",
              show_default=True, help="Token embeddings (d = |V|); unit-norm ones are outside the theory.")
@click.option("--steps", type=click.IntRange(1, INT64_MAX), default=900, show_default=True,
              help="Iterations of each stage of Algorithm 1 (the paper's T = T_1 = 900).")
@click.option("--seed", type=click.IntRange(0, INT64_MAX), default=0, show_default=True,
              help="Seed of random embeddings.")
@click.option("--allow-violations", is_flag=True,
              help="Train even when the sentences violate Assumption 1 or 3 (the guarantees then do not apply).")
@click.option("--json", "as_json", is_flag=True,
              help='Print a JSON list of {"input", "prediction", "probability", "runner_up", "runner_up_probability", '
                   '"tie", "guarantee", "query_seen"}.')
@resource_options
def predict(train, inputs, embedding, steps, seed, allow_violations, as_json):
    """Train on SENTENCES with Algorithm 1 and print the predicted next token of each --input, with the result
    that covers it.

    Algorithm 1 of the paper, at its default settings: normalized GD from zero, first on the
    collocation loss L_0 in W_ov (η₀ = 0.2/√d), then on the full loss in W_kq with W_ov frozen
    (η = 0.05/√d), --steps iterations each, with d = |V|. Inputs may be sequences never seen in
    training. Each answer names the result that fixes it: "Theorem 2" when the training orders put one
    token above all others in the input (an optimal token is present; Lemma 5 puts the attention on it),
    "Theorem 3" when the input is one non-comparable token and non-optimal tokens under a query seen in
    training, "none" otherwise: then no theorem covers the input, and an exact tie between the two most
    likely tokens (within round-off) is reported as `tie`, never as a confident answer. Data that violate
    the paper's assumptions are refused (exit 2, naming the violation and the results that no longer
    apply) unless --allow-violations is given.

    \b
    Examples:
      ntpbias predict --train example1 --input "S P" --input "O S P" --input "V P"
      ntpbias predict --train sentences.txt --input "the cat" --json
    """
    import torch

    from ..data.structure import analyze_structure, regenerate_labels
    from ..data.unseen import theorem3_premise
    from ..errors import DataError
    from ..models.transformer import token_embeddings
    from ..training.config import TrainConfig, paper_step_sizes
    from ..training.transformer import TransformerTask, train_two_stage
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
    L = max(map(len, ids))
    X = torch.tensor([x + [0] * (L - len(x)) for x in ids])
    mask = torch.tensor([[True] * len(x) + [False] * (L - len(x)) for x in ids])
    known = regenerate_labels(structure, X, mask)  # the label the training data's orders determine, -1 if none
    covered = theorem3_premise(structure, X, mask)  # before training: inputs too long for memory fail at once
    E = token_embeddings(samples.V, kind=embedding, seed=seed)
    task = TransformerTask.build(samples, E, structure=structure, solve=False)
    eta0, eta = paper_step_sizes(task.d)
    log = TrainConfig(steps=steps, log_points=0)
    result = train_two_stage(task, eta0=eta0, eta=eta, stage1=log, stage2=log, seeds=[seed])
    _, _, probs, _ = model_predict(result.W_ov[0], result.W_kq[0], E, X, mask)
    top, order = probs.topk(2, dim=1)
    tie = (top[:, 0] - top[:, 1]).abs() <= TIE_TOLERANCE * top[:, 0]
    guarantee = [GUARANTEES[0] if t else GUARANTEES[1] if k >= 0 else GUARANTEES[2] if c else GUARANTEES[0]
                 for t, k, c in zip(tie.tolist(), known.tolist(), covered.tolist(), strict=True)]
    seen_queries = set(structure.queries)
    records = [{"input": " ".join(toks), "prediction": samples.vocab[int(o[0])], "probability": float(p[0]),
                "runner_up": samples.vocab[int(o[1])], "runner_up_probability": float(p[1]), "tie": bool(t),
                "guarantee": g, "query_seen": len(x) == 1 or x[-1] in seen_queries}
               for toks, x, o, p, t, g in zip(tokens, ids, order.tolist(), top.tolist(), tie.tolist(), guarantee,
                                               strict=True)]
    if as_json:
        click.echo(json.dumps(records, indent=2))
        return
    _print(records)


#: two probabilities this close (relative) are a tie: the argmax between them is decided by round-off
TIE_TOLERANCE = 1e-9
#: the results that can fix a prediction (see the command's help)
GUARANTEES = ("none", "Theorem 2", "Theorem 3")


def _print(records: list[dict]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title_justify="left")
    for name in ("input", "prediction", "probability", "runner-up", "guarantee"):
        table.add_column(name)
    for rec in records:
        if rec["tie"]:
            note = f"none: a tie with {rec['runner_up']} (the argmax is round-off)"
        elif rec["guarantee"] == "Theorem 2":
            note = "Theorem 2 / Lemma 5: the training orders put one token of the input above the others"
        elif rec["guarantee"] == "Theorem 3":
            note = "Theorem 3: one non-comparable token and non-optimal tokens under a seen query"
        elif not rec["query_seen"]:
            note = "none: the query never ends a training input (uniform attention)"
        else:
            note = "none: no theorem covers this input"
        table.add_row(escape(rec["input"]), escape(rec["prediction"]), f"{rec['probability']:.4f}",
                      f"{escape(rec['runner_up'])} {rec['runner_up_probability']:.4f}", escape(note))
    Console().print(table)
