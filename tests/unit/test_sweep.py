"""Sweeps: sweep-file parsing and checking, executors (in-process, local processes, Dask), results.csv, resume."""

from __future__ import annotations

import csv
import math
import textwrap

import pytest

from ntpbias.data.ntp import NTPData
from ntpbias.errors import ConfigError, DataError
from ntpbias.experiments import separability as sepmod
from ntpbias.parallel import ExecutorConfig, map_tasks, map_values
from ntpbias.parallel.executors import TaskError
from ntpbias.sweep import aggregate, load_sweep, read_results, run_sweep

# a cheap real trainer: one-hot binary separability, 6 datasets of m = 8 contexts per cell
SWEEP = """
[base]
preset = "separability-cover"
[base.set]
m = 8
trials = 6
scan = 1
[axes]
seed = {{ range = [0, {seeds}] }}
V = [2, 3]
[run]
executor = "{executor}"
workers = 2
"""


def _write(tmp_path, text, name="sweep.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


# ------------------------------------------------------------------------------------------------ sweep files
def test_axes_grid_keys_and_types(tmp_path):
    spec = load_sweep(_write(tmp_path, """
        [base]
        preset = "linear-fig4-gd"
        [base.set]
        train.steps = 10
        [axes]
        seed = { range = [0, 3] }
        optimizer.lr = { geomspace = [0.01, 1.0, 3] }
        "data.d,data.m" = [[12, 10], [24, 20]]
        optimizer.name = ["gd", "adam"]
    """))
    cells = spec.cells()
    assert spec.size == len(cells) == 3 * 3 * 2 * 2
    # TOML groups dotted keys with a common prefix (optimizer.*) into one table: that is the axis order
    assert spec.axis_keys == ("seed", "optimizer.lr", "optimizer.name", "data.d", "data.m")
    first = cells[0]
    assert first.key == "seed=0 optimizer.lr=0.01 optimizer.name=gd data.d=12 data.m=10"
    assert first.config.train.steps == 10 and first.config.optimizer.lr == 0.01 and first.config.data.m == 10
    last = cells[-1]
    assert (last.config.seed, last.config.data.d, last.config.optimizer.name) == (2, 24, "adam")
    assert math.isclose(last.config.optimizer.lr, 1.0)
    assert len({c.directory for c in cells}) == len(cells) and len({c.config_hash for c in cells}) == len(cells)
    assert all(c.directory.startswith("cells/") for c in cells)
    # a zipped axis with scalar values sets every key to the value; cross-field checks run on the whole cell
    spec = load_sweep(_write(tmp_path, """
        [base]
        preset = "separability-ntp"
        [axes]
        "seed,trials" = { range = [1, 3] }
        V = [3, 10]
        support_size = [1, 2]
    """, "z.toml"))
    assert [(c.config.seed, c.config.trials) for c in spec.cells()][::4] == [(1, 1), (2, 2)]


@pytest.mark.parametrize(("body", "message"), [
    ("[axes]\ndata.mm = [1, 2]", "unknown setting data.mm"),
    ("[axes]\ndata.m = [10, 2.5]", "axis 'data.m' value 2.5: data.m: expected an integer"),
    ("[axes]\noptimizer.lr = [\"fast\"]", "expected a number"),
    ("[axes]\ndata.m = 10", "expected a list of values"),
    ("[axes]\nseed = {range = [0.5, 3]}", "range = [start, stop]"),
    ("[axes]\nseed = [1, 1]", "repeats a value"),
    ("[axes]\n\"data.d,data.m\" = [[1, 2, 3]]", "zipped keys"),
    ("[axis]\nseed = [1]", "unknown table [axis]"),
    ("[run]\nexecutor = \"cluster\"", "unknown executor 'cluster'"),
    ("[collect]\nmetric = [\"x\"]", "unknown key 'metric'"),
])
def test_bad_sweep_files_are_config_errors(tmp_path, body, message):
    path = _write(tmp_path, "[base]\npreset = \"linear-fig4-gd\"\n" + body + "\n")
    with pytest.raises(ConfigError, match="sweep.toml: .*" + message.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)").replace("]", r"\]").replace("*", r"\*").replace(".", r"\.")):
        load_sweep(path).cells()


def test_base_from_a_config_file_and_cli_overrides(tmp_path):
    (tmp_path / "base.toml").write_text('experiment = "separability"\nV = 3\nsupport_size = 1\nm = 8\ntrials = 2\n')
    spec = load_sweep(_write(tmp_path, '[base]\nconfig = "base.toml"\n[axes]\nsupport_size = [1, 2]\n'),
                      overrides=["trials=4"], executor={"kind": "inprocess", "workers": None})
    cells = spec.cells()
    assert [c.config.support_size for c in cells] == [1, 2] and cells[0].config.trials == 4
    assert spec.executor.kind == "inprocess"
    with pytest.raises(ConfigError, match="support_size"):  # __post_init__ cross-field check names the cell
        load_sweep(_write(tmp_path, '[base]\nconfig = "base.toml"\n[axes]\nsupport_size = [1, 3]\n')).cells()
    spec = load_sweep(_write(tmp_path, '[base]\nconfig = "base.toml"\n'), executor={"scheduler": "tcp://h:1"})
    assert spec.executor.kind == "dask"  # --scheduler implies the dask executor


# ------------------------------------------------------------------------------------------------ executors
def test_inprocess_and_local_executors_record_errors_and_keep_order():
    assert map_values(math.sqrt, [4.0, 9.0, 16.0], executor="inprocess") == [2.0, 3.0, 4.0]
    assert map_values(math.sqrt, [4.0, 9.0, 16.0], executor=ExecutorConfig("local", workers=2)) == [2.0, 3.0, 4.0]
    outcomes = sorted(map_tasks(math.sqrt, [4.0, -1.0, 9.0], executor="inprocess"), key=lambda o: o.index)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].error == "ValueError: math domain error" and "Traceback" in outcomes[1].traceback
    with pytest.raises(TaskError, match=r"task 1 of 2 failed: ValueError: math domain error"):
        map_values(math.sqrt, [4.0, -1.0], executor="inprocess")
    # a task's own user error (bad data or config) is re-raised as itself, also from a worker process
    for executor in ("inprocess", ExecutorConfig("local", workers=1)):
        with pytest.raises(DataError, match="no such file"):
            map_values(NTPData.load, ["/nonexistent/data.npz"], executor=executor)


def test_a_dying_worker_fails_only_its_task():
    tasks = ["x = 1", "import os; os._exit(7)", "y = 2", "import os; os._exit(9)", "z = 3"]
    outcomes = sorted(map_tasks(exec, tasks, executor=ExecutorConfig("local", workers=2)), key=lambda o: o.index)
    assert [o.ok for o in outcomes] == [True, False, True, False, True]
    assert "exit code 7" in outcomes[1].error and "exit code 9" in outcomes[3].error
    assert outcomes[1].error.startswith("WorkerDied")


def test_executor_config_validation():
    with pytest.raises(ConfigError, match="needs the dask executor"):
        ExecutorConfig("local", scheduler="tcp://x:1")
    with pytest.raises(ConfigError, match="workers must be >= 0"):
        ExecutorConfig("local", workers=-1)


# ------------------------------------------------------------------------------------------------ sweeps
def test_sweep_results_table_report_and_aggregate(tmp_path):
    spec = load_sweep(_write(tmp_path, SWEEP.format(executor="inprocess", seeds=2)))
    result = run_sweep(spec, tmp_path / "out")
    rows = _rows(tmp_path / "out" / "results.csv")
    assert [r["cell"] for r in rows] == ["seed=0 V=2", "seed=0 V=3", "seed=1 V=2", "seed=1 V=3"]
    assert list(rows[0])[:3] == ["cell", "seed", "V"]
    assert list(rows[0])[-7:] == ["checks_passed", "checks_total", "status", "seconds", "error", "run_dir",
                                  "config_hash"]
    assert all(r["status"] == "completed" for r in rows) and result.counts["completed"] == 4
    # collected values equal the cell's own summary.json "final" values
    import json

    for r in rows:
        final = json.loads((tmp_path / "out" / r["run_dir"] / "summary.json").read_text())["final"]
        assert float(r["threshold"]) == final["threshold"] and int(r["lp_solves"]) == final["lp_solves"]
    # aggregate over seeds: mean and spread by V, checked against the rows directly
    agg = {e["V"]: e for e in aggregate(rows, ("V",), ("threshold",))}
    for V in ("2", "3"):
        vals = [float(r["threshold"]) for r in rows if r["V"] == V]
        assert agg[V]["n"] == 2 and math.isclose(agg[V]["threshold"]["mean"], sum(vals) / 2)
        assert agg[V]["threshold"]["min"] == min(vals) and agg[V]["threshold"]["max"] == max(vals)
    out = tmp_path / "out"
    assert (out / "report.html").exists() and (out / "summary.json").exists() and (out / "sweep.toml").exists()
    assert (out / "figures" / "sweep-threshold.png").stat().st_size > 1000
    assert not (out / ".sweep.lock").exists()


@pytest.mark.slow
def test_interrupted_sweep_resumes_without_duplicates_or_losses(tmp_path):
    spec = load_sweep(_write(tmp_path, SWEEP.format(executor="inprocess", seeds=2)))
    out = tmp_path / "out"

    def stop_after_two(state):
        if state["done"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, progress=stop_after_two)
    first = _rows(out / "results.csv")
    assert [r["cell"] for r in first] == ["seed=0 V=2", "seed=0 V=3"]
    # a cell killed mid-run leaves a partial directory behind; it is simply rerun
    (out / "cells" / "seed=1_V=2").mkdir(parents=True)
    (out / "cells" / "seed=1_V=2" / "trials.csv").write_text("partial")
    result = run_sweep(spec, out)
    rows = _rows(out / "results.csv")
    assert result.ran == 2 and [r["cell"] for r in rows] == [c.key for c in spec.cells()]
    assert rows[:2] == first  # the finished cells were not rerun (same seconds)
    fresh = run_sweep(spec, tmp_path / "fresh")
    assert _strip(rows) == _strip(fresh.rows)
    assert run_sweep(spec, out).ran == 0  # everything done


@pytest.mark.slow
def test_failed_cells_are_recorded_and_retried_on_request(tmp_path, monkeypatch):
    spec = load_sweep(_write(tmp_path, SWEEP.format(executor="inprocess", seeds=2)))
    real = sepmod.runs.critical_dimensions

    def flaky(task):
        if task.seed == 1 and task.V == 3:
            raise RuntimeError("solver exploded")
        return real(task)

    monkeypatch.setattr(sepmod.runs, "critical_dimensions", flaky)
    result = run_sweep(spec, tmp_path / "out")
    rows = {r["cell"]: r for r in _rows(tmp_path / "out" / "results.csv")}
    assert result.counts == {"completed": 3, "diverged": 0, "failed": 1}
    bad = rows["seed=1 V=3"]
    assert bad["status"] == "failed" and "solver exploded" in bad["error"] and bad["threshold"] == ""
    assert "RuntimeError" in (tmp_path / "out" / bad["run_dir"] / "error.txt").read_text()
    assert run_sweep(spec, tmp_path / "out").ran == 0  # not retried without the flag
    monkeypatch.setattr(sepmod.runs, "critical_dimensions", real)
    again = run_sweep(spec, tmp_path / "out", retry_failed=True)
    assert again.ran == 1 and again.counts["completed"] == 4 and len(again.rows) == 4


def test_changed_base_config_is_refused_and_bad_collect_names(tmp_path):
    spec = load_sweep(_write(tmp_path, SWEEP.format(executor="inprocess", seeds=2)))
    run_sweep(spec, tmp_path / "out", report=False)
    changed = load_sweep(tmp_path / "sweep.toml", overrides=["trials=5"])
    with pytest.raises(ConfigError, match="different config"):
        run_sweep(changed, tmp_path / "out")
    bad = _write(tmp_path, SWEEP.format(executor="inprocess", seeds=2) + '[collect]\nmetrics = ["thresh"]\n', "b.toml")
    with pytest.raises(ConfigError, match="'thresh' is not a final value of separability runs; available: .*threshold"):
        load_sweep(bad)  # refused when the file is read, before any cell trains
    assert not (tmp_path / "out2").exists()
    picked = _write(tmp_path, SWEEP.format(executor="inprocess", seeds=2) +
                    '[collect]\nmetrics = ["threshold", "check:V=2, |S|=1: certificates"]\nchecks = false\n', "c.toml")
    rows = run_sweep(load_sweep(picked), tmp_path / "out3", report=False).rows
    assert [k for k in rows[0] if k not in ("cell", "seed", "V", "status", "seconds", "error", "run_dir",
                                            "config_hash")] == ["threshold", "check:V=2, |S|=1: certificates"]
    assert rows[0]["check:V=2, |S|=1: certificates"] == "true"


@pytest.mark.slow  # starts a Dask cluster or real worker processes
def test_dask_local_cluster_gives_the_same_results_as_local_processes(tmp_path):
    pytest.importorskip("distributed")
    def sweep(kind):
        path = _write(tmp_path, SWEEP.format(executor=kind, seeds=1), f"{kind}.toml")
        return run_sweep(load_sweep(path), tmp_path / kind, report=False)

    local, dask = sweep("local"), sweep("dask")
    assert dask.counts == local.counts
    assert local.counts["completed"] == 2
    assert _strip(read_results(tmp_path / "local" / "results.csv")) == _strip(
        read_results(tmp_path / "dask" / "results.csv"))
