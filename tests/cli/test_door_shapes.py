"""The door's second pass (docs/errors-and-limits.md): values of the wrong shape, inputs that grow memory, damaged sweep
state and late checks, each one line ``ntpbias: error:`` with exit status 2 that names the key or file, and nothing new
left on disk."""

import json

import numpy as np
import pytest


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def refused(tmp_path, cli, assert_user_error, *args, contains):
    """Run ``ntpbias ARGS``; assert a one-line user error containing ``contains`` and nothing new under tmp_path."""
    before = _tree(tmp_path)
    code, _, err = cli(*args)
    assert_user_error(code, err, contains)
    assert _tree(tmp_path) == before


# ------------------------------------------------------------------------------------------------ shapes
SWEEP_BASE = '[base]\npreset = "linear-2d"\nscale = "smoke"\n'


@pytest.mark.parametrize(("text", "message"), [
    ("base = 3\n", "base = 3: expected a table ([base] followed by its keys"),
    ('run = 3\n' + SWEEP_BASE, "run = 3: expected a table"),
    ('collect = ["loss"]\n' + SWEEP_BASE, "collect = ['loss']: expected a table"),
    ("axes = [1]\n" + SWEEP_BASE, "axes = [1]: expected a table"),
    ('[base]\npreset = 3\n', "[base] preset = 3: expected a string (a preset name) in quotes"),
    ('[base]\nconfig = ["a.toml"]\n', "[base] config = ['a.toml']: expected a string (a config path)"),
    (SWEEP_BASE + "[axes]\ndata = [{m = 3}, {m = 4}]\n", "data is a table of settings, not one value: vary its keys"),
    (SWEEP_BASE + "[axes]\ndata = {range = [1, 3]}\n", "data is a table of settings"),
    (SWEEP_BASE + "[axes]\nseed = {values = 3}\n", "axis 'seed': values = 3: expected a list"),
    (SWEEP_BASE + "[axes]\nseed = [{a = 1}]\n", "seed: expected an integer, got {'a': 1}"),
])
def test_a_sweep_file_value_of_the_wrong_shape_is_one_line(tmp_path, cli, assert_user_error, text, message):
    sweep = tmp_path / "s.toml"
    sweep.write_text(text)
    refused(tmp_path, cli, assert_user_error, "sweep", sweep, "--out", tmp_path / "out", contains=message)


@pytest.mark.parametrize("value", ['["linear"]', "3", "{ name = \"linear\" }"])
def test_a_config_whose_experiment_is_not_a_name_is_one_line(tmp_path, cli, assert_user_error, value):
    config = tmp_path / "c.toml"
    config.write_text(f"experiment = {value}\n")
    refused(tmp_path, cli, assert_user_error, "train", config, "--out", tmp_path / "out",
            contains="expected a string in quotes; set `experiment` to one of linear,")


@pytest.mark.parametrize(("arrays", "message"), [
    ({"n_samples": np.array([1, 2, 3])}, "n_samples must be one positive integer (the number of samples), got shape "
                                         "(3,)"),
    ({"n_samples": np.array(0)}, "n_samples must be one positive integer"),
    ({"n_samples": np.array("many")}, "n_samples must hold integers"),
    ({"context_lengths": np.array(["a", "b", "c"])}, "context_lengths must hold integers"),
    ({"context_lengths": np.array([[1, 2, 3]])}, "context_lengths must hold m = 3 positive integers (shape (3,))"),
    ({"vocab": np.array([["a", "b"]])}, "vocab must be a 1-D array of 2 names, got shape (1, 2)"),
])
def test_an_npz_array_of_the_wrong_shape_is_one_line(tmp_path, cli, assert_user_error, arrays, message):
    data = tmp_path / "d.npz"
    np.savez(data, H=np.eye(3), P=np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), **arrays)
    refused(tmp_path, cli, assert_user_error, "analyze", data, "--out", tmp_path / "out", contains=message)


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "0"])
def test_sweep_timeout_must_be_a_finite_positive_number(tmp_path, cli, assert_user_error, timeout):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP_BASE + "[axes]\nseed = [0]\n")
    refused(tmp_path, cli, assert_user_error, "sweep", sweep, "--out", tmp_path / "out", "--scheduler",
            "tcp://127.0.0.1:9", "--timeout", timeout, contains="connect_timeout (--timeout) must be a finite number")


@pytest.mark.parametrize("args", [["predict", "--train", "example1", "--input", "S P", "--seed", str(10**23)],
                                  ["reproduce", "linear-fig2", "--seeds", str(2**63), "--out", "o"],
                                  ["corpus", "shakespeare", "--stride", str(10**30)],
                                  ["analyze", "d.npz", "--max-iter", str(10**20), "--out", "o"]])
def test_integers_beyond_int64_are_refused_by_the_option(tmp_path, cli, assert_user_error, args):
    refused(tmp_path, cli, assert_user_error, *args, contains="is not in the range")


# ------------------------------------------------------------------------------------------------ memory
@pytest.mark.parametrize(("args", "message"), [
    (["analyze", "long.txt", "--autoregressive", "--out", "o"],
     "the autoregressive contexts (every prefix of every line, up to 2,999 tokens) would take about"),
    (["analyze", "long.txt", "--context-length", "1500", "--out", "o"], "the 1500-token contexts would take about"),
    (["corpus", "long.txt", "--max-context", "2000"], "the windows of --max-context 2000 + 1 tokens would take"),
    (["predict", "--train", "example1", "--input", " ".join(["S"] * 3000)],
     "position-pair tables (1 inputs x 3,000 x 3,000 positions)"),
])
def test_inputs_that_grow_memory_are_refused_before_they_are_built(tmp_path, cli, assert_user_error, args, message):
    (tmp_path / "long.txt").write_text(" ".join(f"t{i % 50}" for i in range(3000)) + "\n")
    refused(tmp_path, cli, assert_user_error, *args, "--max-memory", "20M", contains=message)


# ------------------------------------------------------------------------------------------------ damaged sweep state
@pytest.mark.parametrize(("content", "message"), [
    (b"cell,status,config_hash\n\xff\xfe broken\n", "results.csv: the sweep's results table is not UTF-8 text"),
    (b"cell,seed\nseed=0,0\n", "results.csv: the sweep's results table lacks the column(s) status, config_hash"),
    (b"cell,status,config_hash\nseed=0,running,abc\n", "results.csv: line 2 has cell 'seed=0' and status 'running'"),
])
def test_a_damaged_results_table_is_one_line_naming_the_recovery(tmp_path, cli, assert_user_error, content, message):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP_BASE + "[axes]\nseed = [0]\n[run]\nexecutor = \"inprocess\"\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.csv").write_bytes(content)
    refused(tmp_path, cli, assert_user_error, "sweep", sweep, "--out", tmp_path / "out", contains=message)
    code, _, err = cli("sweep", sweep, "--out", tmp_path / "out")
    assert "delete it and run the sweep again" in err or "--retry-failed" in err


# ------------------------------------------------------------------------------------------ leftovers, late checks
def test_an_unreachable_scheduler_leaves_nothing(tmp_path, cli, assert_user_error):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP_BASE + "[axes]\nseed = [0, 1]\n")
    refused(tmp_path, cli, assert_user_error, "sweep", sweep, "--out", tmp_path / "out", "--scheduler",
            "tcp://127.0.0.1:9", "--timeout", "1", contains="cannot reach the Dask scheduler at tcp://127.0.0.1:9")


def test_reproduce_reads_a_later_groups_file_before_the_first_group_runs(tmp_path, cli, assert_user_error):
    yelp = tmp_path / "yelp.json"
    yelp.write_text("\n".join(json.dumps({"text": "x" * 1200, "stars": s}) for s in (5, "five", 1)) + "\n")
    refused(tmp_path, cli, assert_user_error, "reproduce", "linear-fig2", "attention-imdb", "--yelp", yelp, "--scale",
            "smoke", "--out", tmp_path / "r", "--quiet", contains="line 2: unknown star rating 'five'")
