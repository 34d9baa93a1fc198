"""The Python API checks at its boundary (``import ntpbias as nb``), as the command line does: a wrong argument is a
``TypeError`` or ``ValueError`` that is also an ``NTPBiasError``, with the same one-line message; the results print
short; and the door's other checks (run directories, memory) hold from Python too. Property tests drive every API
function with generated wrong arguments."""

import os
import stat
import subprocess
import sys
import textwrap
from operator import attrgetter

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ntpbias as nb
from ntpbias.errors import ArgumentTypeError, NTPBiasError, OutputInUseError, UnknownNameError
from ntpbias.limits import memory_budget

TINY = nb.NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


# ------------------------------------------------------------------------------------------------ from_sequences
def test_from_sequences_splits_strings_on_whitespace_never_into_characters():
    as_strings = nb.from_sequences(["a b c a b", "b c a"], context_length=1)
    as_lists = nb.from_sequences([["a", "b", "c", "a", "b"], ["b", "c", "a"]], context_length=1)
    assert as_strings.vocab == as_lists.vocab == ("a", "b", "c")
    assert torch.equal(as_strings.P, as_lists.P) and torch.equal(as_strings.pi, as_lists.pi)
    assert "never into characters" in " ".join(nb.from_sequences.__doc__.split())


@pytest.mark.parametrize(("sequences", "error", "message"), [
    (["a", "b", "c"], NTPBiasError, "every sequence is a single token"),
    ([["a b", "c"]], NTPBiasError, "sequences[0] has the token 'a b'"),
    ([1, 2], ArgumentTypeError, "sequences[0] = 1: expected a string of whitespace-separated tokens or a list"),
    (3, ArgumentTypeError, "sequences = 3: expected a path or a list of sequences"),
    ([], NTPBiasError, "no sequences were given"),
    ("a b c\nb c a", NTPBiasError, "a string of several lines where a file path belongs"),
])
def test_from_sequences_refuses_what_it_cannot_read_unambiguously(sequences, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        nb.from_sequences(sequences, context_length=1)


# ------------------------------------------------------------------------------------------------ analyze
def test_analyze_names_what_it_expects_and_reads_an_npz(tmp_path):
    with pytest.raises(ArgumentTypeError, match=r"analyze: data = a numpy array of shape \(2, 2\): expected NTPData"):
        nb.analyze(np.eye(2))
    with pytest.raises(NTPBiasError, match="x.npz: no such file"):
        nb.analyze(str(tmp_path / "x.npz"))
    TINY.save(tmp_path / "d.npz")
    assert nb.analyze(tmp_path / "d.npz").summary() == nb.analyze(TINY).summary()
    (tmp_path / "s.txt").write_text("a b\n")
    with pytest.raises(NTPBiasError, match=r"nb.from_sequences\(.*s.txt', context_length=K\)"):
        nb.analyze(tmp_path / "s.txt")


def test_analyze_takes_a_norm_name_a_comma_list_or_a_list():
    one, listed, comma = (nb.analyze(TINY, norms=n).max_margin for n in ("linf", ["linf"], "linf, l1"))
    assert list(one) == list(listed) == ["linf"] and list(comma) == ["linf", "l1"]
    assert one["linf"].norm == pytest.approx(listed["linf"].norm, rel=1e-12)
    with pytest.raises(NTPBiasError, match="analyze: norms: unknown norm 'lmax'"):
        nb.analyze(TINY, norms="lmax")


def test_unknown_keywords_are_the_projects_type_error_naming_the_valid_ones():
    with pytest.raises(ArgumentTypeError, match=r"from_text\(\): unknown keyword argument 'maxvocab' \(did you mean "
                                                r"max_vocab\?\); valid keywords: .*max_vocab"):
        nb.from_text("shakespeare", maxvocab=5)
    with pytest.raises(ArgumentTypeError, match=r"analyze\(\): unknown keyword argument 'norm' \(did you mean norms"):
        nb.analyze(TINY, norm="l2")
    with pytest.raises(ArgumentTypeError, match=r"analyze: solver_options: unknown keyword argument 'iters'"):
        nb.analyze(TINY, solver_options={"iters": 5})
    with pytest.raises(TypeError):  # still a TypeError for code that catches one
        nb.random_ntp(mm=3)


def test_a_history_names_its_metrics():
    run_history = nb.load_run  # noqa: F841  (the History of a saved run is the same type)
    from ntpbias.training.history import History

    h = History(steps=np.array([0, 10]), seeds=(0,), columns={"loss": np.zeros((2, 1)), "cos_mm": np.ones((2, 1))})
    with pytest.raises(UnknownNameError, match=r"no metric 'los' in the history \(did you mean loss\?\); its metrics: "
                                               r"loss, cos_mm") as info:
        h["los"]  # noqa: B018
    assert isinstance(info.value, KeyError) and not str(info.value).startswith("'")


# ------------------------------------------------------------------------------------------------ short reprs
def test_every_public_result_prints_short_and_has_an_html_table():
    data = nb.random_ntp(m=40, d=8)  # the case: its repr was 7,748 characters
    separable = nb.random_ntp(m=6, d=20, V=4, support_size=2)
    analysis = nb.analyze(separable, norms="linf")
    planted = nb.planted_supports(V=8, sizes=(1, 2), contexts=2)
    results = [data, analysis, analysis.separability, analysis.svm, analysis.svm.certificate,
               analysis.max_margin["linf"], nb.support_svd(planted), nb.nuclear_svm(planted),
               nb.ufm_regularization_path(planted, [0.1], seeds=[0], d=3)[0]]
    for r in results:
        text = repr(r)
        assert len(text) < 320 and "tensor(" not in text and text.startswith(type(r).__name__ + "("), text
        assert r._repr_html_().startswith(f"<table><caption>{type(r).__name__}</caption>")
    assert "m=40, V=10, d=8" in repr(data)
    assert "separable=True" in repr(analysis.separability) and "certified=True" in repr(analysis.svm)


def test_a_run_and_its_history_print_short(tmp_path):
    run = nb.train("linear-2d", out=tmp_path / "r", scale="smoke")
    for r in (run, run.history, run.checks[0]):
        assert len(repr(r)) < 320 and r._repr_html_().startswith("<table>")
    # smoke scale grades nothing: the repr says so instead of a verdict count
    assert "not graded" in repr(run) and "status=completed" in repr(run)
    assert "metrics=(" in repr(run.history) and "loss" in repr(run.history)
    section = nb.reproduce("linear-fig2", out=tmp_path / "f2", scale="smoke")[0]
    assert repr(section).startswith("Section(id=linear") and len(repr(section)) < 320


# ------------------------------------------------------------------------------------------------ the door, from Python
def test_train_refuses_another_run_and_a_second_writer(tmp_path):
    out = tmp_path / "r"
    nb.train("linear-2d", out=out, scale="smoke")
    with pytest.raises(OutputInUseError, match="already holds an earlier run"):
        nb.train("transformer-example1", out=out, scale="smoke")
    run = nb.train("transformer-example1", out=out, scale="smoke", overwrite=True)
    assert run.config.experiment == "transformer" and not (out / "geometry.npz").exists()
    code = textwrap.dedent(f"""
        import time
        from ntpbias.io import locked_dir
        with locked_dir({str(out)!r}):
            print("held", flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(OutputInUseError, match=f"pid {proc.pid} on "):
            nb.train("transformer-example1", out=out, scale="smoke", overwrite=True)
    finally:
        proc.kill()
        proc.wait()


def test_api_files_get_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        nb.train("linear-2d", out=tmp_path / "r", scale="smoke")
        TINY.save(tmp_path / "d.npz")
    finally:
        os.umask(old)
    modes = {stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*") if p.is_file()}
    assert modes == {0o640}


def test_memory_preflight_from_python():
    with memory_budget("20M"), pytest.raises(NTPBiasError, match="the autoregressive contexts .* would take about"):
        nb.from_sequences([" ".join(f"t{i % 50}" for i in range(3000))], autoregressive=True)
    with memory_budget("1M"), pytest.raises(NTPBiasError, match="random_ntp: the data would take about"):
        nb.random_ntp(m=10**6, d=100)


# ------------------------------------------------------------------------------------------------ properties
#: values of every wrong kind an argument can get
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(min_value=2**63, max_value=2**70),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.lists(st.integers(-1, 3),
                 max_size=3), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                 st.just(np.eye(2)), st.just(torch.zeros(2)), st.just(b"x"), st.just(object()))

#: function -> its valid call (keyword arguments), which the property breaks one argument at a time
CALLS = {
    "random_ntp": {"m": 4, "d": 3, "V": 3, "support_size": 2, "seed": 0, "embedding_scale": 1.0, "dirichlet": 1.0,
                   "pi": "uniform"},
    "planted_supports": {"V": 6, "sizes": (1, 2), "contexts": 2, "seed": 0, "disjoint": True, "dirichlet": 1.0,
                         "pi": "uniform"},
    "from_sequences": {"sequences": ["a b a", "b a b"], "context_length": 1, "embedding": "onehot"},
    "analyze": {"data": TINY, "solver": "auto", "separability_method": "auto", "subspace_method": "auto",
                "solver_options": None, "norms": (), "progress": None},
    "nuclear_svm": {"data": TINY, "solver": "auto", "tol": 1e-8, "max_iter": 100},
    "support_svd": {"data": TINY},
    "ufm_regularization_path": {"data": TINY, "lambdas": [1.0], "seeds": [0], "d": 2, "init_scale": 0.01,
                                "tol": 1e-8},
    "load_run": {"path": "no-such-run"},
    "NTPData.from_arrays": {"H": np.eye(3), "P": np.eye(3), "pi": None, "vocab": ["a", "b", "c"], "contexts": None,
                            "context_lengths": [1, 1, 2], "n_samples": 3, "dtype": torch.float64},
    "NTPData.load": {"path": "no-such.npz"},
}
API = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize(("fn", "arg"), [(fn, arg) for fn, kwargs in CALLS.items() for arg in kwargs])
@API
@given(junk=JUNK)
def test_a_wrong_argument_is_always_the_projects_error(fn, arg, junk):
    """Any value in place of any argument: the call succeeds or raises an NTPBiasError (a TypeError for a wrong
    type), never an AttributeError, a bare TypeError or an error from deep inside."""
    kwargs = dict(CALLS[fn], **{arg: junk})
    try:
        attrgetter(fn)(nb)(**kwargs)
    except NTPBiasError as exc:
        assert "\n" not in str(exc) and str(exc)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"nb.{fn}({arg}={junk!r}) raised {type(exc).__name__}: {exc}")


@API
@given(fn=st.sampled_from(sorted(CALLS)), name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True))
def test_an_unknown_keyword_names_the_valid_ones(fn, name):
    import inspect

    params = inspect.signature(attrgetter(fn)(nb)).parameters
    if name in params or "." in fn:  # the classes' constructors are Python's own
        return
    with pytest.raises(ArgumentTypeError, match="valid keywords: "):
        attrgetter(fn)(nb)(**CALLS[fn], **{name: 1})


@API
@given(sequences=st.lists(st.lists(st.sampled_from("abcd"), min_size=2, max_size=6), min_size=1, max_size=4))
def test_strings_and_token_lists_give_the_same_data(sequences):
    assume(len({t for s in sequences for t in s}) >= 2)  # NTP data need two tokens
    as_lists = nb.from_sequences(sequences, context_length=1)
    as_strings = nb.from_sequences([" ".join(s) for s in sequences], context_length=1)
    assert as_lists.vocab == as_strings.vocab and torch.equal(as_lists.P, as_strings.P)
