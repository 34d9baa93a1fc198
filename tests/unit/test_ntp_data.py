"""The NTP data model (docs/paper-a-linear-ntp.md#setting): construction, validation, npz I/O, embeddings."""

from __future__ import annotations

import math
import pickle
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ntpbias.data.embedding import EmbeddingSpec
from ntpbias.data.ntp import NTPData
from ntpbias.errors import DataError


class Payload:
    """Unpickling this object creates ``marker`` (by calling ``open(marker, "w")``): proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


# ============================================================================ construction
@given(
    m=st.integers(1, 5),
    V=st.integers(2, 6),
    draws=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=60),
)
def test_from_samples_counts_match_a_naive_dictionary_count(m, V, draws):
    ctx = [c % m for c, _ in draws] + list(range(m))  # every context occurs at least once
    tok = [t % V for _, t in draws] + [(7 * j) % V for j in range(m)]
    H = np.arange(m * 3, dtype=float).reshape(m, 3)
    data = NTPData.from_samples(ctx, tok, H, V=V)

    pair_counts = Counter(zip(ctx, tok, strict=True))
    ctx_counts = Counter(ctx)
    n = len(ctx)
    assert data.n_samples == n and (data.m, data.V, data.d) == (m, V, 3)
    for j in range(m):
        assert data.pi[j].item() == pytest.approx(ctx_counts[j] / n, rel=1e-15)
        for z in range(V):
            assert data.P[j, z].item() == pytest.approx(pair_counts[(j, z)] / ctx_counts[j], rel=1e-15)
            assert bool(data.support[j, z]) == ((j, z) in pair_counts)
    assert data.support_sizes.tolist() == [len({z for (c, z) in pair_counts if c == j}) for j in range(m)]
    ent = -sum(k / n * math.log(k / ctx_counts[c]) for (c, _), k in pair_counts.items())  # π p log p = (k/n) log p
    assert data.entropy == pytest.approx(ent, rel=1e-12, abs=1e-15)
    torch.testing.assert_close(data.H, torch.as_tensor(H))


def test_from_arrays_defaults_and_derived_quantities():
    H = [[3.0, 4.0], [1.0, 0.0], [0.0, 0.0]]
    P = [[0.25, 0.75, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.5, 0.0, 0.25, 0.25]]
    data = NTPData.from_arrays(H, P)
    assert data.H.dtype == torch.float64 and data.P.dtype == torch.float64
    assert data.pi.tolist() == [1 / 3] * 3  # uniform by default
    assert data.support.tolist() == [[True, True, False, False], [False, False, False, True], [True, False, True, True]]
    assert data.support_sizes.tolist() == [2, 1, 3]
    h = [-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), 0.0, -(0.5 * math.log(0.5) + 0.5 * math.log(0.25))]
    assert data.entropy == pytest.approx(sum(h) / 3, rel=1e-14)
    assert data.embedding_bound == pytest.approx(math.sqrt(2) * 5.0, rel=1e-15)  # M = √2 max ||h_j||
    assert data.vocab is None and data.contexts is None and data.n_samples is None
    f32 = data.to(dtype=torch.float32)
    assert f32.H.dtype == torch.float32 and f32.pi.dtype == torch.float32 and f32.m == 3


def test_rows_within_tolerance_are_renormalized_and_one_hot_entropy_is_zero():
    P = np.array([[0.5, 0.5 + 1e-10], [1.0, 0.0]])
    data = NTPData.from_arrays(np.eye(2), P, pi=[0.4, 0.6 + 1e-10])
    assert abs(data.P.sum(1) - 1).max() <= 1e-15 and abs(data.pi.sum() - 1) <= 1e-15
    one_hot = NTPData.from_arrays(np.eye(3), np.eye(3))
    assert one_hot.entropy == 0.0 and not math.copysign(1, one_hot.entropy) < 0


def test_entropy_per_length_needs_context_lengths():
    with pytest.raises(DataError, match="context lengths"):
        NTPData.from_arrays(np.eye(2), np.eye(2)).entropy_per_length()


# ============================================================================ npz I/O
def test_npz_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    m, V, d = 30, 12, 7
    P = rng.dirichlet(np.ones(V) * 0.3, size=m)  # tiny entries, rows that do not sum to 1 exactly in float
    P[P < 0.01] = 0.0
    P /= P.sum(1, keepdims=True)
    data = NTPData.from_arrays(rng.standard_normal((m, d)), P, rng.dirichlet(np.ones(m)),
                               vocab=[f"tok{v}" for v in range(V)], contexts=[f"ctx é {j}" for j in range(m)],
                               context_lengths=rng.integers(1, 5, m), n_samples=1234)
    path = tmp_path / "sub" / "data.npz"
    data.save(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.npz"]  # atomic: no temporary left behind
    back = NTPData.load(path)
    for name in ("H", "P", "pi", "context_lengths"):
        assert torch.equal(getattr(back, name), getattr(data, name)), name
    assert back.vocab == data.vocab and back.contexts == data.contexts and back.n_samples == 1234
    back.save(tmp_path / "again.npz")  # a second trip changes nothing either
    assert torch.equal(NTPData.load(tmp_path / "again.npz").P, data.P)
    with np.load(path, allow_pickle=False) as f:  # the file holds plain arrays only
        assert {k: f[k].dtype.kind for k in f.files} == {
            "H": "f", "P": "f", "pi": "f", "vocab": "U", "contexts": "U", "context_lengths": "i", "n_samples": "i"}


def test_minimal_npz_gets_uniform_pi(tmp_path):
    np.savez(tmp_path / "d.npz", H=np.eye(2, dtype=np.float32), P=np.array([[1, 0], [0, 1]], dtype=np.int64))
    data = NTPData.load(tmp_path / "d.npz")
    assert data.pi.tolist() == [0.5, 0.5] and data.H.dtype == torch.float64 and data.n_samples is None


# ============================================================================ bad input -> DataError
GOOD_H = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
GOOD_P = np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8], [1.0, 0.0, 0.0]])

BAD_ARRAYS = {
    # name: (arrays for from_arrays, regex the message must match)
    "H 1-D": (dict(H=np.ones(3), P=GOOD_P), r"H must be a 2-D array \(m, d\); got shape \(3,\)"),
    "P 3-D": (dict(H=GOOD_H, P=GOOD_P[None]), r"P must be a 2-D array \(m, V\); got shape \(1, 3, 3\)"),
    "H rows != P rows": (dict(H=GOOD_H[:2], P=GOOD_P), r"H has 2 rows but P has 3"),
    "H transposed": (dict(H=np.ones((2, 3)), P=GOOD_P), r"H has 2 rows but P has 3.*transpose"),
    "H zero columns": (dict(H=np.ones((3, 0)), P=GOOD_P), r"d = 0"),
    "NaN in H": (dict(H=np.where(GOOD_H == 0, np.nan, GOOD_H), P=GOOD_P),
                 r"H contains NaN or inf \(first at index \(0, 1\)\)"),
    "inf in P": (dict(H=GOOD_H, P=np.where(GOOD_P == 0.8, np.inf, GOOD_P)),
                 r"P contains NaN or inf \(first at index \(1, 2\)\)"),
    "NaN in pi": (dict(H=GOOD_H, P=GOOD_P, pi=[0.5, np.nan, 0.5]), r"pi contains NaN or inf"),
    "negative P": (dict(H=GOOD_H, P=[[0.5, 0.5, 0.0], [0.2, -0.2, 1.0], [1.0, 0.0, 0.0]]),
                   r"negative probability at row 1, column 1: -0\.2"),
    "row of P off": (dict(H=GOOD_H, P=GOOD_P + [[0, 0, 0], [0, 0, 0], [0, 0, 0.1]]), r"row 2 of P sums to 1.1, not 1"),
    "pi off": (dict(H=GOOD_H, P=GOOD_P, pi=[0.5, 0.3, 0.3]), r"pi sums to 1.1, not 1"),
    "pi zero": (dict(H=GOOD_H, P=GOOD_P, pi=[0.5, 0.5, 0.0]), r"pi\[2\] = 0; context probabilities must be positive"),
    "pi wrong length": (dict(H=GOOD_H, P=GOOD_P, pi=[0.5, 0.5]), r"pi has 2 entries but there are m = 3"),
    "m = 0": (dict(H=np.ones((0, 2)), P=np.ones((0, 3))), r"no contexts \(m = 0\)"),
    "V < 2": (dict(H=GOOD_H, P=np.ones((3, 1))), r"at least 2 tokens; P has V = 1"),
    "string H": (dict(H=np.array([["a", "b"]] * 3), P=GOOD_P), r"H'? (is not a numeric array|must be numeric)"),
    "vocab wrong length": (dict(H=GOOD_H, P=GOOD_P, vocab=["a", "b"]), r"vocab has 2 entries, expected 3"),
    "context lengths": (dict(H=GOOD_H, P=GOOD_P, context_lengths=[1, 0, 2]),
                        r"context_lengths must hold m = 3 positive"),
}


@pytest.mark.parametrize("case", BAD_ARRAYS)
def test_bad_arrays_raise_data_error_naming_the_problem(case, tmp_path):
    arrays, pattern = BAD_ARRAYS[case]
    with pytest.raises(DataError, match=pattern):
        NTPData.from_arrays(**arrays)
    if set(arrays) <= {"H", "P", "pi", "vocab"}:  # the same through a file; the message names the file
        path = tmp_path / "bad.npz"
        np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})
        with pytest.raises(DataError, match=pattern) as info:
            NTPData.load(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda p: None, r"no such file"),
        (lambda p: p.mkdir(), r"is a directory; pass a file"),
        (lambda p: p.write_bytes(b"this is not a zip file at all"), r"not a readable \.npz file"),
        (lambda p: p.write_bytes(b"PK\x03\x04 truncated zip"), r"not a readable \.npz file"),
        (lambda p: np.savez(p, P=GOOD_P), r"missing array\(s\) H;.*found: P"),
        (lambda p: np.savez(p, X=GOOD_P), r"missing array\(s\) H, P"),
        (lambda p: np.savez(p, H=GOOD_H, P=np.array([["x"] * 3] * 3)), r"array 'P' must be numeric"),
    ],
    ids=["missing", "directory", "garbage", "broken-zip", "no-H", "no-H-P", "string-P"],
)
def test_bad_files_raise_data_error(tmp_path, make, pattern):
    path = tmp_path / "data.npz"
    make(path)
    with pytest.raises(DataError, match=pattern):
        NTPData.load(path)


def test_pickled_npz_is_refused_without_unpickling(tmp_path):
    marker = tmp_path / "code_ran"
    evil = tmp_path / "evil.npz"
    np.savez(evil, H=GOOD_H, P=np.array([Payload(marker)] * 3, dtype=object))
    with pytest.raises(DataError, match=r"array 'P' holds pickled Python objects.*refuses"):
        NTPData.load(evil)
    assert not marker.exists()

    disguised = tmp_path / "pickle.npz"  # a bare pickle stream named .npz
    disguised.write_bytes(pickle.dumps({"H": Payload(marker)}))
    with pytest.raises(DataError, match=r"not a readable \.npz file"):
        NTPData.load(disguised)
    assert not marker.exists()

    # the payload is live: loading with allow_pickle=True would have run it
    with np.load(evil, allow_pickle=True) as f:
        f["P"]
    assert marker.exists()


def test_npz_members_are_read_as_arrays_not_executed(tmp_path):
    """A zip member that is not .npy (e.g. a raw pickle named P.npy) is refused, not unpickled."""
    marker = tmp_path / "code_ran"
    path = tmp_path / "crafted.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("H.npy", _npy_bytes(GOOD_H))
        zf.writestr("P.npy", pickle.dumps(Payload(marker)))
    with pytest.raises(DataError, match=r"member 'P' is not a numpy array"):
        NTPData.load(path)
    assert not marker.exists()


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize(
    "ctx, tok, V, pattern",
    [
        ([0, 1], [0], 3, r"2 context ids but 1 next tokens"),
        ([], [], 3, r"no samples were given \(n = 0\)"),
        ([0, 3], [0, 1], 3, r"context ids must lie in 0\.\.2"),
        ([0, 1, 2], [0, 1, 3], 3, r"next-token ids must lie in 0\.\.2"),
        ([0, 0, 2], [0, 1, 2], 3, r"context 1 \(row of H\) has no sample"),
    ],
)
def test_bad_samples_raise_data_error(ctx, tok, V, pattern):
    with pytest.raises(DataError, match=pattern):
        NTPData.from_samples(ctx, tok, np.eye(3), V=V)


# ============================================================================ embeddings
def test_onehot_and_gaussian_embeddings():
    assert torch.equal(EmbeddingSpec.parse(" onehot ").matrix(4), torch.eye(4, dtype=torch.float64))
    spec = EmbeddingSpec.parse("gaussian:d=7,scale=2.5,seed=3")
    assert (spec.kind, spec.d, spec.scale, spec.seed) == ("gaussian", 7, 2.5, 3)
    A = spec.matrix(400)
    assert A.shape == (400, 7) and A.dtype == torch.float64
    assert torch.equal(A, EmbeddingSpec.parse("gaussian:seed=3,d=7,scale=2.5").matrix(400))  # reproducible
    assert not torch.equal(A[:, :7], EmbeddingSpec.parse("gaussian:d=7,scale=2.5,seed=4").matrix(400))
    # i.i.d. N(0, scale²): loose moment checks on 2800 draws (5 standard errors)
    assert abs(float(A.mean())) <= 5 * 2.5 / math.sqrt(A.numel())
    assert float(A.std()) == pytest.approx(2.5, rel=5 * math.sqrt(0.5 / A.numel()))
    default = EmbeddingSpec.parse("gaussian")
    assert (default.d, default.scale, default.seed) == (60, 1.0, 0)
    assert EmbeddingSpec.parse("gaussian").matrix(3, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("gaussian:dim=3", r"unknown or empty option 'dim=3'"),
        ("gaussian:d=", r"unknown or empty option 'd='"),
        ("gaussian:d=x", r"d must be a number, got 'x'"),
        ("gaussian:d=0", r"need d >= 1 and scale > 0"),
        ("gaussian:scale=-1", r"need d >= 1 and scale > 0"),
        ("glove", r"expected onehot, gaussian"),
    ],
)
def test_bad_embedding_specs(text, pattern):
    with pytest.raises(DataError, match=pattern):
        EmbeddingSpec.parse(text)


def test_user_npy_embedding(tmp_path):
    good = np.random.default_rng(0).standard_normal((5, 3))
    np.save(tmp_path / "emb.npy", good)
    spec = EmbeddingSpec.parse(str(tmp_path / "emb.npy"))
    assert spec.kind == "file"
    np.testing.assert_array_equal(spec.matrix(5).numpy(), good)
    with pytest.raises(DataError, match=r"expected an \(m, d\) matrix with m = 4 rows.*got shape \(5, 3\)"):
        spec.matrix(4)
    np.save(tmp_path / "flat.npy", np.ones(5))
    with pytest.raises(DataError, match=r"got shape \(5,\)"):
        EmbeddingSpec.parse(str(tmp_path / "flat.npy")).matrix(5)
    np.save(tmp_path / "text.npy", np.array([["a"] * 3] * 5))
    with pytest.raises(DataError, match=r"expected a numeric array"):
        EmbeddingSpec.parse(str(tmp_path / "text.npy")).matrix(5)
    with pytest.raises(DataError, match=r"no such file"):
        EmbeddingSpec.parse(str(tmp_path / "missing.npy")).matrix(5)
    marker = tmp_path / "code_ran"
    np.save(tmp_path / "evil.npy", np.array([Payload(marker)] * 5, dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"not a readable .npy array file"):
        EmbeddingSpec.parse(str(tmp_path / "evil.npy")).matrix(5)
    assert not marker.exists()
