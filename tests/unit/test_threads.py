"""The thread count ntpbias chooses (ntpbias.threads): its precedence, that importing ntpbias applies it before torch
and BLAS load, that a command's --threads and NTPBIAS_THREADS reach torch (recorded in summary.json), and that worker
processes inherit the choice."""

import json
import os
import subprocess
import sys

import pytest

from ntpbias.errors import ConfigError
from ntpbias.threads import DEFAULT_THREADS, choose_threads, parse_threads

#: every variable that can set a count, removed so that each case starts from a bare environment
_VARS = ("NTPBIAS_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    return dict(env, PYTHONWARNINGS="ignore", **extra)


@pytest.mark.parametrize(("requested", "environ", "expected"), [
    (None, {}, DEFAULT_THREADS),
    (None, {"OMP_NUM_THREADS": "3"}, 3),
    (None, {"MKL_NUM_THREADS": "5"}, 5),
    (None, {"NTPBIAS_THREADS": "2", "OMP_NUM_THREADS": "3"}, 2),  # ntpbias's own variable beats the generic one
    (4, {"NTPBIAS_THREADS": "2", "OMP_NUM_THREADS": "3"}, 4),  # --threads beats both
    (None, {"OMP_NUM_THREADS": "garbage"}, DEFAULT_THREADS),  # not ours to refuse: the library ignores it too
])
def test_precedence(requested, environ, expected):
    assert choose_threads(requested, environ=environ) == expected


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", ""])
def test_a_bad_count_is_refused(bad):
    with pytest.raises(ConfigError, match="expected a number of threads >= 1"):
        parse_threads(bad)


_PROBE = ("import os, ntpbias, torch; print(torch.get_num_threads(), "
          "*(os.environ.get(v) for v in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'OMP_WAIT_POLICY')))")


@pytest.mark.parametrize(("extra", "expected"), [
    ({}, "1 1 1 PASSIVE"),  # torch would otherwise take every core
    ({"NTPBIAS_THREADS": "2", "OPENBLAS_NUM_THREADS": "7"}, "2 2 2 PASSIVE"),
    ({"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "7", "OMP_WAIT_POLICY": "ACTIVE"}, "2 2 7 ACTIVE"),
])
def test_importing_ntpbias_applies_the_count_before_torch_loads(extra, expected):
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=_env(**extra),
                         check=True, timeout=120)
    assert out.stdout.split() == expected.split()


def test_torch_loaded_first_still_gets_the_count():
    probe = "import torch; n = torch.get_num_threads(); import ntpbias; print(n, torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True,
                         timeout=120)
    before, after = map(int, out.stdout.split())
    assert after == 1 and before >= 1


def test_worker_processes_inherit_the_choice():
    probe = ("import ntpbias.threads as t; t.apply_threads(3); from ntpbias.parallel import map_values; "
             "print(map_values(t.choose_threads, [None, None], executor='local'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True,
                         timeout=300)
    assert out.stdout.strip() == "[3, 3]"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="torch caps a count at the cores: 2 needs two")
def test_dask_workers_compute_with_the_choice():
    """An embedded Dask cluster's worker processes (other pids) run torch with the count ntpbias chose (2), not
    Dask's own choice for its workers (one thread: its nanny sets ``OMP_NUM_THREADS=1``)."""
    probe = ("import os, ntpbias.threads as t; t.apply_threads(2); from ntpbias.parallel import map_values; "
             "from ntpbias.parallel.executors import ExecutorConfig; "
             "got = map_values(lambda _: (os.getpid(), __import__('torch').get_num_threads()), [0, 1], "
             "executor=ExecutorConfig(kind='dask', workers=2)); "
             "print(all(pid != os.getpid() for pid, _ in got), sorted({n for _, n in got}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True,
                         timeout=300)
    assert out.stdout.split("\n")[-2] == "True [2]", out.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("args", "extra", "expected"), [
    ((), {}, 1),
    (("--threads", "2"), {}, 2),
    ((), {"NTPBIAS_THREADS": "2"}, 2),
])
def test_a_command_computes_with_the_chosen_count(tmp_path, args, extra, expected):
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "ntpbias", "train", "--preset", "linear-fig4-gd", "--scale", "smoke",
                    "--out", str(out), "--quiet", *args], env=_env(**extra), check=True, capture_output=True,
                   timeout=300)
    assert json.loads((out / "summary.json").read_text())["threads"] == expected


def test_a_bad_environment_count_is_a_user_error():
    out = subprocess.run([sys.executable, "-m", "ntpbias", "list"], capture_output=True, text=True,
                         env=_env(NTPBIAS_THREADS="many"), timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == ("ntpbias: error: NTPBIAS_THREADS='many': expected a number of threads >= 1 "
                                  "(e.g. NTPBIAS_THREADS=1)")
