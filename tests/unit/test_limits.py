"""The memory preflight of ntpbias.limits: estimates from the shapes, refused before any allocation with the estimate
and the memory available, ``--max-memory`` to go past it; sweep grids counted
(docs/errors-and-limits.md#memory-estimated-from-the-shapes-checked-before-it-is-taken)."""

import math
import os
import re

import pytest

from ntpbias.errors import ConfigError, LimitError
from ntpbias.experiments import PRESETS
from ntpbias.limits import (
    ENV,
    available_memory,
    budget,
    check_memory,
    format_bytes,
    memory_budget,
    nbytes,
    parse_size,
)


def test_parse_size():
    assert parse_size("16G") == 16e9 and parse_size("500MB") == 500e6 and parse_size("2GiB") == 2**31
    assert parse_size("1.5t") == 1.5e12 and parse_size(4096) == 4096.0 and parse_size("123") == 123.0
    assert parse_size("none") == math.inf and parse_size(None) is None
    for bad in ("12x", "-1G", "0", "G", "lots"):
        with pytest.raises(ConfigError, match="--max-memory"):
            parse_size(bad)


def test_nbytes_is_exact_for_any_size():
    assert nbytes(10**10, 10**10) == 8 * 10**20  # Python integers: no overflow
    assert nbytes(3, 4, itemsize=1) == 12


def test_check_memory_refuses_with_the_estimate_and_the_budget():
    with memory_budget("1M"):
        assert check_memory({"small": 1000}, "x") == 1000
        with pytest.raises(LimitError) as info:
            check_memory({"H (m x d)": nbytes(1000, 1000), "P": 10}, "the data", hint="use fewer contexts")
    msg = str(info.value)
    assert "the data would take about 8.0 MB (H (m x d) 8.0 MB" in msg and "--max-memory allows 1.0 MB" in msg
    assert "use fewer contexts" in msg and "pass --max-memory SIZE" in msg
    with memory_budget("none"):
        check_memory({"huge": 10**30}, "x")  # no check


def test_the_default_budget_is_the_memory_available(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    limit, source = budget()
    assert 0 < limit <= available_memory() * 1.5 and "available" in source
    with pytest.raises(LimitError, match="this machine has available"):
        check_memory({"more than this machine": 2**70}, "x")


def test_the_budget_reaches_worker_processes_and_is_restored(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with memory_budget("3G"):
        assert os.environ[ENV] == "3G"
    assert ENV not in os.environ
    monkeypatch.setenv(ENV, "2G")  # a worker started under --max-memory 2G
    assert budget() == (2e9, "--max-memory allows")


def test_a_container_limit_lowers_the_budget(monkeypatch):
    import ntpbias.limits as lim

    monkeypatch.setattr(lim, "_cgroup_memory", lambda: (4 * 2**30, 3 * 2**30))
    monkeypatch.setattr(lim, "_meminfo_available", lambda: 64 * 2**30)
    assert lim.available_memory() == 2**30


def test_format_bytes():
    assert format_bytes(512) == "512 B" and format_bytes(2.5e9) == "2.5 GB" and format_bytes(3e21) == "3e+21 B"


@pytest.mark.parametrize("preset, key", [("linear-fig4-gd", "seeds=50"), ("attention-fig2", "seeds=50"),
                                         ("attention-stage2", "seeds=50"), ("transformer-fig2", "model.d=400")])
def test_footprints_grow_with_the_sizes(preset, key):
    from ntpbias.config import apply_overrides

    cfg = PRESETS[preset].make("quick")
    one = sum(cfg.footprint().values())
    more = sum(apply_overrides(cfg, [key]).footprint().values())
    assert 0 < one < 2e9 and more > one  # every preset fits a laptop; more seeds (batched) or a larger d take more


@pytest.mark.parametrize("args, pattern", [
    (["train", "--preset", "linear-fig4-gd", "--set", "data.d=100000000"], r"this linear run .* would take about "
     r"[\d.]+ GB .*parameters, gradients, optimizer state"),
    (["train", "--preset", "linear-fig4-gd", "--set", "seeds=100000000"], r"100,000,000 per-run random generators"),
    (["train", "--preset", "attention-fig2", "--set", "data.T=30000", "--set", "model.kind=two_layer"],
     r"T x T attention"),
    (["reproduce", "linear", "--seeds", "100000000"], r"this linear run \(100000000 seed\(s\)\) would take about"),
    (["train", "--preset", "linear-2d", "--max-memory", "1k"], r"--max-memory allows 1.0 kB"),
    (["train", "--preset", "linear-2d", "--max-memory", "12x"], r"--max-memory '12x': expected a size"),
])
def test_oversized_runs_are_refused_before_any_work(tmp_path, cli, assert_user_error, args, pattern):
    code, _, err = cli(*args, "--out", tmp_path / "run", "--quiet")
    assert_user_error(code, err, re.compile(pattern))
    assert not (tmp_path / "run").exists()


def test_max_memory_goes_past_the_default(tmp_path, cli):
    code, _, err = cli("train", "--preset", "linear-2d", "--scale", "smoke", "--set", "train.steps=5",
                       "--max-memory", "100T", "--out", tmp_path / "run", "--quiet")
    assert code == 0, err


def test_long_sentences_and_many_one_hot_contexts_are_refused(tmp_path, cli, assert_user_error):
    long = tmp_path / "long.txt"
    long.write_text(" ".join(f"w{i % 50}" for i in range(3000)) + "\n")
    for command in (["structure", long], ["predict", "--train", long, "--input", "w1"]):
        code, _, err = cli(*command, "--max-memory", "100M")
        assert_user_error(code, err, re.compile(r"2,999 samples padded to 2,999 tokens .*split long sentences"))
    many = tmp_path / "many.txt"
    many.write_text("\n".join(" ".join(f"t{(i * 7 + j) % 97}" for j in range(30)) for i in range(200)) + "\n")
    code, _, err = cli("analyze", many, "--autoregressive", "--max-memory", "50M", "--out", tmp_path / "a")
    assert_user_error(code, err, re.compile(r"onehot embeddings\) .*smaller embedding"))
    assert not (tmp_path / "a").exists()


def test_sweep_grids_are_counted_not_built(tmp_path, cli, assert_user_error):
    sweep = tmp_path / "huge.toml"
    sweep.write_text('[base]\npreset = "linear-fig4-gd"\n[axes]\nseed = {range = [0, 1000000]}\n'
                     '"data.seed" = {range = [0, 1000]}\n"optimizer.lr" = {linspace = [0.1, 1.0, 1000000000]}\n')
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "s", "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("1,000,000,000,000,000,000 cells of preset linear-fig4-gd")
    assert "more cells (counted, not listed)" in out and lines[-1].split()[-1] == "optimizer.lr=1.0"
    assert len(lines) == 22
    code, _, err = cli("sweep", sweep, "--out", tmp_path / "s")  # running it: the grid alone exceeds the memory
    assert_user_error(code, err, re.compile(r"1,000,000,000,000,000,000 sweep cells .*split the sweep"))
    assert not (tmp_path / "s").exists()


def test_a_lazy_linspace_axis_equals_numpy(tmp_path):
    import numpy as np

    from ntpbias.sweep import load_sweep
    from ntpbias.sweep.spec import EAGER_POINTS

    n = EAGER_POINTS + 1
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'[base]\npreset = "linear-fig4-gd"\n[axes]\n"optimizer.lr" = {{linspace = [0.1, 2.0, {n}]}}\n')
    axis = load_sweep(sweep).axes[0]
    ref = np.linspace(0.1, 2.0, n)
    assert len(axis.points) == n
    assert [axis.points[i][0] for i in (0, 1, 12345, n - 1)] == [float(ref[i]) for i in (0, 1, 12345, n - 1)]
