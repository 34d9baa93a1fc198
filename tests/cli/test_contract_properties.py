"""The user-error contract as a property (docs/errors-and-limits.md#the-contract): every command, driven through its
command-line boundary with generated bad configs, data files and sizes, exits with status 2, prints exactly one
stderr line starting ``ntpbias: error:``, no traceback, and leaves nothing new behind.

The bad values are generated from the settings' own declarations (type, range, choices), so a new setting is covered
as soon as it is declared.
"""

import dataclasses
import typing

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ntpbias.config import _field_types
from ntpbias.experiments import GROUPS, PRESETS

#: one preset per experiment (small, so that a value that slipped through would still fail fast)
PRESET_OF = {"linear": "linear-2d", "separability": "separability-cover", "attention": "attention-fig2",
             "attention-stage2": "attention-stage2", "transformer": "transformer-example1"}
CONTRACT = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NAME = st.from_regex(r"[a-z][a-z_-]{0,11}", fullmatch=True)


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def check_contract(tmp_path, cli, *args, contains: str = ""):
    """Run ``ntpbias ARGS`` from tmp_path and assert the user-error contract (nothing new under tmp_path)."""
    before = _tree(tmp_path)
    code, _, err = cli(*args)
    lines = err.strip().splitlines()
    assert code == 2, (args, code, err)
    assert len(lines) == 1 and lines[0].startswith("ntpbias: error:"), (args, err)
    assert "Traceback" not in err
    assert contains in lines[0], (contains, lines[0])
    assert _tree(tmp_path) == before, args


# ------------------------------------------------------------------------------------------------ generated settings
def _leaves(cls, prefix=""):
    """(dotted key, type, field) of every setting of a config class."""
    types = _field_types(cls)
    for f in dataclasses.fields(cls):
        typ = types[f.name]
        if dataclasses.is_dataclass(typ):
            yield from _leaves(typ, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, typ, f


def _bad_values(typ, f) -> list[str]:
    """``--set`` values that the setting must refuse (empty when any string is allowed)."""
    m = f.metadata
    out = []
    scalar = typing.get_args(typ)[0] if typing.get_origin(typ) is tuple else typ
    for bound, below in (("ge", 1), ("gt", 0)):
        if m.get(bound) is not None:
            out.append(str(m[bound] - below) if scalar is int else repr(float(m[bound]) - below))
    for bound, above in (("le", 1), ("lt", 0)):
        if m.get(bound) is not None:
            out.append(str(m[bound] + above) if scalar is int else repr(float(m[bound]) + above))
    if scalar is int:
        out += ["x1", "1.5", str(2**63), "true"]
    elif scalar is float:
        out += ["nan", "inf", "-inf", "x1"] if m.get("finite", True) else ["nan", "x1"]
    elif scalar is bool:
        out += ["maybe", "2"]
    elif m.get("choices"):
        out += ["no-such-choice", ""]
    elif m.get("pattern"):
        out += [""] if m["pattern"] == ".+" else ["tpu:x", ""]
    if typing.get_origin(typ) is tuple and len(typing.get_args(typ)) == 3:
        out.append("1,2")  # a fixed-length list with the wrong count
    return [v for v in out if v != "" or scalar is str]


def _bad_settings(presets=None):
    cases = []
    for preset in PRESET_OF.values() if presets is None else presets:
        cls = type(PRESETS[preset].make("smoke"))
        for key, typ, f in _leaves(cls):
            cases += [(preset, key, v) for v in _bad_values(typ, f)]
    return cases


BAD_SETTINGS = _bad_settings()


def test_every_experiment_has_generated_bad_settings():
    assert {p for p, _, _ in BAD_SETTINGS} == set(PRESET_OF.values()) and len(BAD_SETTINGS) > 300


@CONTRACT
@given(case=st.sampled_from(BAD_SETTINGS))
def test_train_refuses_every_bad_setting(tmp_path, cli, case):
    preset, key, value = case
    check_contract(tmp_path, cli, "train", "--preset", preset, "--scale", "smoke", "--set", f"{key}={value}",
                   "--out", tmp_path / "run", "--quiet", contains=key.rsplit(".", 1)[-1])


def _wrong_type(value):
    """TOML values of another type than ``value`` has (a list where a name belongs, a table where a number...)."""
    if isinstance(value, bool):
        return st.sampled_from([3, "yes", [True], {"x": 1}])
    if isinstance(value, int):
        return st.sampled_from([1.5, "3", [3], {"x": 1}, True])
    if isinstance(value, float):
        return st.sampled_from(["0.5", [0.5], {"x": 1}, True])
    if isinstance(value, str):
        return st.sampled_from([["a"], 3, {"x": "a"}, False])
    return st.sampled_from([{"x": 1}, True, "x1"])  # a list


@CONTRACT
@given(data=st.data(), preset=st.sampled_from(sorted(PRESET_OF.values())))
def test_train_refuses_a_config_file_with_a_value_of_the_wrong_type(tmp_path, cli, data, preset):
    import tomli_w

    from ntpbias.config import to_dict

    cfg = PRESETS[preset].make("smoke")
    record = to_dict(cfg)
    leaves = [(k.split("."), v) for k, v in _flat(record).items()]
    path, value = data.draw(st.sampled_from(leaves))
    node = record
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = data.draw(_wrong_type(value))
    config = tmp_path / "bad.toml"
    config.write_text(tomli_w.dumps(record))
    check_contract(tmp_path, cli, "train", config, "--out", tmp_path / "run", "--quiet", contains=path[-1])


def _flat(record, prefix=""):
    out = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


@CONTRACT
@given(junk=st.binary(min_size=1, max_size=40), command=st.sampled_from(["train", "sweep", "corpus", "structure",
                                                                          "analyze"]))
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, cli, junk, command):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"# \xff\xfe\x80 " + junk)
    extra = {"train": ["--out", tmp_path / "run"], "sweep": ["--out", tmp_path / "run"],
             "analyze": ["--context-length", "1", "--out", tmp_path / "run"]}.get(command, [])
    check_contract(tmp_path, cli, command, path, *extra)


# ------------------------------------------------------------------------------------------------ generated data
@st.composite
def bad_npz(draw):
    """(arrays, what is wrong) of an NTP dataset .npz that must be refused."""
    m, d, V = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(2, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    H = rng.normal(size=(m, d))
    P = rng.random((m, V))
    P /= P.sum(1, keepdims=True)
    kind = draw(st.sampled_from(["nan-H", "inf-H", "unnormalized", "negative", "shapes", "one-token", "no-P",
                                 "strings", "nan-P", "n_samples-vector", "lengths-strings", "vocab-2d"]))
    if kind == "nan-H":
        H[rng.integers(m), rng.integers(d)] = np.nan
    elif kind == "inf-H":
        H[rng.integers(m), rng.integers(d)] = np.inf
    elif kind == "unnormalized":
        P[rng.integers(m)] *= draw(st.sampled_from([0.5, 1.1, 3.0]))
    elif kind == "negative":
        j = rng.integers(m)
        P[j, 0], P[j, 1] = -0.25, P[j, 1] + P[j, 0] + 0.25
    elif kind == "shapes":
        H = rng.normal(size=(m + 1, d))
    elif kind == "one-token":
        P = np.ones((m, 1))
    elif kind == "strings":
        P = np.array([["x"] * V] * m)
    elif kind == "nan-P":
        P[rng.integers(m), 0] = np.nan
    arrays = {"H": H} if kind == "no-P" else {"H": H, "P": P}
    if kind == "n_samples-vector":  # a vector where a scalar belongs
        arrays["n_samples"] = np.arange(1, draw(st.integers(2, 4)))
    elif kind == "lengths-strings":
        arrays["context_lengths"] = np.array(["x"] * m)
    elif kind == "vocab-2d":
        arrays["vocab"] = np.array([[f"t{v}" for v in range(V)]])
    return arrays, kind


@CONTRACT
@given(case=bad_npz())
def test_analyze_refuses_generated_bad_data(tmp_path, cli, case):
    arrays, _ = case
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    check_contract(tmp_path, cli, "analyze", path, "--out", tmp_path / "run", contains=str(path))


@CONTRACT
@given(option=st.sampled_from(["--context-length", "--max-context"]),
       value=st.integers(max_value=0) | st.integers(min_value=2**63, max_value=2**80))
def test_analyze_refuses_context_lengths_out_of_range(tmp_path, cli, option, value):
    path = tmp_path / "s.txt"
    path.write_text("a b c\nb c a\n")
    rule = ["--autoregressive"] if option == "--max-context" else []
    check_contract(tmp_path, cli, "analyze", path, *rule, option, value, "--out", tmp_path / "run", contains=option)


@CONTRACT
@given(spec=st.sampled_from(["gaussian:d=0", "gaussian:d=-3", "gaussian:scale=0", "gaussian:scale=nan",
                             "gaussian:seed=x", "gaussian:foo=1", "gaussian:d="])
       | NAME.filter(lambda s: s != "onehot"))
def test_analyze_refuses_bad_embeddings(tmp_path, cli, spec):
    path = tmp_path / "s.txt"
    path.write_text("a b c\nb c a\n")
    check_contract(tmp_path, cli, "analyze", path, "--context-length", "1", "--embedding", spec,
                   "--out", tmp_path / "run", contains="--embedding")


@CONTRACT
@given(text=st.sampled_from(["", "\n\n", "a\nb\nc\n", "single\n"]), command=st.sampled_from(["structure", "predict"]))
def test_sentence_commands_refuse_data_without_samples(tmp_path, cli, text, command):
    path = tmp_path / "sentences.txt"
    path.write_text(text)
    args = ["structure", path] if command == "structure" else ["predict", "--train", path, "--input", "a"]
    check_contract(tmp_path, cli, *args, contains=str(path))


@CONTRACT
@given(token=NAME.filter(lambda t: t not in ("S", "V", "O", "P")))
def test_predict_refuses_unknown_tokens(tmp_path, cli, token):
    check_contract(tmp_path, cli, "predict", "--train", "example1", "--input", f"S {token}", contains=repr(token))


@CONTRACT
@given(args=st.sampled_from([["-T", "0"], ["-T", "-2"], ["--stride", "0"], ["--max-vocab", "1"],
                             ["--max-tokens", "-1"], ["-T", str(2**63)], ["--tokenizer", "nope"]]))
def test_corpus_refuses_bad_options(tmp_path, cli, args):
    path = tmp_path / "t.txt"
    path.write_text("the cat sat on the mat. the dog sat.\n")
    check_contract(tmp_path, cli, "corpus", path, *args)


# ------------------------------------------------------------------------------------------------ sweeps, reproduce
@st.composite
def bad_sweep(draw):
    """(sweep file text, a word the error must contain)."""
    head = '[base]\npreset = "linear-2d"\n'
    kind = draw(st.sampled_from(["table", "key", "value", "base-set-table", "metric", "range", "linspace", "run",
                                 "not-a-table", "axis-over-a-table", "base-value"]))
    name = draw(NAME)
    if kind == "table":
        return head + f"[{name}x]\n", f"{name}x"
    if kind == "key":
        return head + f"[axes]\n{name}x = [1, 2]\n", f"{name}x"
    if kind == "value":
        return head + f'[axes]\n"data.seed" = [1, "{name}"]\n', "data.seed"
    if kind == "base-set-table":
        return head + '[base.set]\n"train" = 3\n', "train"
    if kind == "metric":
        return head + f'[collect]\nmetrics = ["{name}x"]\n', f"{name}x"
    if kind == "range":
        return head + f'[axes]\nseed = {{range = [0, {draw(st.integers(2**63, 2**70))}]}}\n', "range"
    if kind == "linspace":
        return head + '[axes]\n"optimizer.lr" = {linspace = [-1.0, 1.0, 5]}\n', "optimizer.lr"
    if kind == "not-a-table":  # a value where a table belongs
        table, value = draw(st.sampled_from(["run", "collect", "axes"])), draw(st.sampled_from(["3", "[1]", "true"]))
        return f"{table} = {value}\n" + head, f"{table} = "
    if kind == "axis-over-a-table":
        table = draw(st.sampled_from(["data", "optimizer", "train"]))
        return head + f"[axes]\n{table} = [{{{name} = 1}}]\n", f"{table} is a table of settings"
    if kind == "base-value":
        value = draw(st.sampled_from(["3", '["linear-2d"]', "true"]))
        return f"[base]\npreset = {value}\n", "[base] preset = "
    return head + f'[run]\nexecutor = "{name}x"\n', "executor"


@CONTRACT
@given(case=bad_sweep(), dry_run=st.booleans())
def test_sweep_refuses_generated_bad_files(tmp_path, cli, case, dry_run):
    text, word = case
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    check_contract(tmp_path, cli, "sweep", path, "--out", tmp_path / "run", *(["--dry-run"] if dry_run else []),
                   contains=word)


VALID_IDS = {"all", *GROUPS, *(f for g in GROUPS.values() for f in g.figures)}


@CONTRACT
@given(ids=st.lists(NAME.filter(lambda s: s not in VALID_IDS), min_size=1, max_size=3),
       known=st.sampled_from(sorted(GROUPS)))
def test_reproduce_refuses_unknown_ids_before_any_group(tmp_path, cli, ids, known):
    check_contract(tmp_path, cli, "reproduce", known, *ids, "--scale", "smoke", "--out", tmp_path / "run",
                   contains="unknown experiment or figure ID")


@CONTRACT
@given(option=st.sampled_from([["--seeds", "0"], ["--seeds", "-3"], ["--yelp", "missing.json"],
                               ["--device", "tpu"], ["--max-memory", "lots"]]))
def test_reproduce_refuses_bad_options(tmp_path, cli, option):
    check_contract(tmp_path, cli, "reproduce", "linear-fig2", *option, "--scale", "smoke", "--out", tmp_path / "run")


# ------------------------------------------------------------------------------------------------ sizes
@CONTRACT
@given(case=st.sampled_from([("linear-2d", "seeds"), ("linear-fig4-gd", "data.d"), ("linear-fig4-gd", "data.m"),
                             ("attention-fig2", "model.d"), ("attention-fig2", "data.n"),
                             ("attention-stage2", "model.d"), ("transformer-example1", "model.d")]),
       size=st.integers(10**7, 10**12))
def test_sizes_beyond_the_memory_budget_are_refused_before_any_work(tmp_path, cli, case, size):
    preset, key = case
    check_contract(tmp_path, cli, "train", "--preset", preset, "--scale", "smoke", "--set", f"{key}={size}",
                   "--max-memory", "100M", "--out", tmp_path / "run", "--quiet", contains="would take about")


@CONTRACT
@given(d=st.integers(10**7, 10**13), m=st.integers(1, 4))
def test_analyze_refuses_embeddings_beyond_the_budget(tmp_path, cli, d, m):
    path = tmp_path / "s.txt"
    path.write_text("\n".join(f"a b c{i}" for i in range(m)) + "\n")
    check_contract(tmp_path, cli, "analyze", path, "--context-length", "1", "--embedding", f"gaussian:d={d}",
                   "--max-memory", "50M", "--out", tmp_path / "run", contains="would take about")


LM_BAD_SETTINGS = _bad_settings(("lm-planted",))


@CONTRACT
@given(case=st.sampled_from(LM_BAD_SETTINGS), junk=st.binary(min_size=1, max_size=40))
def test_lm_train_keeps_the_contract(tmp_path, cli, case, junk):
    """``lm train`` refuses every generated bad setting of its preset, and a text that is not UTF-8."""
    preset, key, value = case
    check_contract(tmp_path, cli, "lm", "train", "--preset", preset, "--scale", "smoke", "--set", f"{key}={value}",
                   "--out", tmp_path / "run", "--quiet", contains=key.rsplit(".", 1)[-1])
    path = tmp_path / "bad.txt"
    path.write_bytes(b"# \xff\xfe\x80 " + junk)
    check_contract(tmp_path, cli, "lm", "train", path, "--out", tmp_path / "run", "--quiet")


def test_the_contract_covers_every_command():
    from ntpbias.cli import cli as group

    tested = {"train", "analyze", "sweep", "reproduce", "corpus", "structure", "predict", "lm"}
    assert tested | {"list", "settings"} == set(group.commands)


def test_a_bad_setting_error_names_the_key_the_value_and_what_is_allowed(tmp_path, cli, assert_user_error):
    code, _, err = cli("train", "--preset", "linear-2d", "--set", "data.dirichlet=nan", "--out", tmp_path / "r")
    assert_user_error(code, err, "data.dirichlet = nan: must be a finite number (float > 0)")
    assert not (tmp_path / "r").exists()
