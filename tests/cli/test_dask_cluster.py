"""The Dask cluster recipe of docs/guide-sweeps.md, run for real: ``dask scheduler`` and two ``dask worker``
processes on the loopback, a sweep through ``--scheduler`` with one worker killed while it runs a cell, then the
separability study on the cluster; both give exactly the results of a run on this process (every column but the
timings).

The commands are read from the recipe (the bash block that starts ``# a Dask cluster by hand`` in README.md or a page
of docs/), with the host, port and paths replaced and the dashboard turned off; every process is started in its own
session and killed at the end, whatever happens.
"""

import csv
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MARKER = "# a Dask cluster by hand"
#: the sweep the test runs: 4 cells of a few seconds each, so that a worker can be killed while it runs one
SWEEP = ('[base]\npreset = "linear-fig4-gd"\nscale = "smoke"\n[base.set]\ntrain.steps = 3000\n'
         '[axes]\nseed = [0, 1, 2, 3]\n')
DEADLINE = 300  # seconds any one step may take on a loaded CI machine


def recipe() -> dict[str, list[str]]:
    """The recipe's commands by what they start (scheduler, worker, sweep, reproduce), each split as a shell would."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            if block.startswith(MARKER):
                argvs = [shlex.split(line, comments=True) for line in block.splitlines()[1:]]
                by_kind = {" ".join(_split_env(a)[1][:2]): a for a in argvs if a}
                return {"scheduler": by_kind["dask scheduler"], "worker": by_kind["dask worker"],
                        "sweep": by_kind["ntpbias sweep"], "reproduce": by_kind["ntpbias reproduce"]}
    pytest.fail(f"no bash block starting {MARKER!r} in README.md or docs/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``VAR=value`` words of a command line as environment variables, and the rest."""
    env = {}
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
        key, value = argv[0].split("=", 1)
        env[key] = value
        argv = argv[1:]
    return env, argv


def _substitute(argv: list[str], address: str, paths: dict[str, str]) -> list[str]:
    out = []
    for word in argv:
        word = word.replace("tcp://HOST:8786", address)
        out.append(paths.get(word, address.rsplit(":", 1)[1] if word == "8786" else word))
    return out


class Cluster:
    """The recipe's scheduler and workers as subprocesses (each in its own session, so that a kill takes the nanny
    and its worker process together)."""

    def __init__(self, tmp: Path):
        self.tmp, self.port = tmp, _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = dict(os.environ, PYTHONWARNINGS="ignore")
        src = str(ROOT / "src")  # the workers import this checkout's ntpbias (as an editable install would)
        self.env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
        self.dask = str(Path(sys.executable).with_name("dask"))

    def start(self, name: str, argv: list[str], extra: list[str]) -> None:
        env, argv = _split_env(argv)
        assert argv[0] == "dask", argv
        argv = [self.dask, *_substitute(argv[1:], self.address, {}), *extra]
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115  (closed with the process)
        self.procs[name] = subprocess.Popen(argv, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=self.tmp)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def _client(address: str):
    from distributed import Client

    return Client(address, timeout="60s")


def _start_workers(cluster: Cluster, commands: dict, names: list[str]) -> None:
    for name in names:
        cluster.start(name, commands["worker"], ["--no-dashboard", "--name", name, "--host", "127.0.0.1",
                                                 "--death-timeout", "120"])


def _ntpbias(cluster: Cluster, argv: list[str], out: Path, extra: list[str], sweep_file: Path | None = None
             ) -> subprocess.Popen:
    """A recipe's ntpbias command on the test's cluster: its --out and sweep file replaced by the test's."""
    assert argv[0] == "ntpbias", argv
    paths = {w: str(out) for prev, w in zip(argv, argv[1:], strict=False) if prev == "--out"}
    paths.update({w: str(sweep_file) for w in argv if w.endswith(".toml") and sweep_file is not None})
    log = open(cluster.tmp / f"{argv[1]}.log", "w")  # noqa: SIM115  (closed when the process ends)
    return subprocess.Popen([sys.executable, "-m", "ntpbias", *_substitute(argv[1:], cluster.address, paths), *extra],
                            env=cluster.env, stdout=log, stderr=subprocess.STDOUT, cwd=cluster.tmp)


def _rows(path: Path, drop: tuple[str, ...]) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(fh)]


def _wait(proc: subprocess.Popen, log: Path) -> None:
    try:
        code = proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"timed out; log:\n{log.read_text()}")
    assert code == 0, log.read_text()


def test_the_cluster_recipe_survives_a_killed_worker(tmp_path, cluster, cli):
    commands = recipe()
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(SWEEP)
    # the reference: the same sweep and study in this process
    local = tmp_path / "local"
    assert cli("sweep", sweep_file, "--out", local / "sweep", "--executor", "inprocess", "--quiet")[0] == 0
    assert cli("reproduce", "separability", "--scale", "smoke", "--out", local / "sep", "--quiet")[0] == 0

    cluster.start("scheduler", commands["scheduler"], ["--host", "127.0.0.1", "--no-dashboard"])
    _start_workers(cluster, commands, ["w1", "w2"])
    with _client(cluster.address) as client:
        client.wait_for_workers(2, timeout=DEADLINE)
        out = tmp_path / "dask"
        sweep = _ntpbias(cluster, commands["sweep"], out / "sweep", ["--quiet"], sweep_file)
        # kill the worker that runs a cell, while the sweep goes on
        killed, t0 = None, time.monotonic()
        while killed is None and sweep.poll() is None and time.monotonic() - t0 < DEADLINE:
            busy = [addr for addr, keys in client.processing().items() if any("ntpbias-" in str(k) for k in keys)]
            if busy:
                killed = client.scheduler_info()["workers"][busy[0]]["name"]
                cluster.kill(killed)
            time.sleep(0.2)
        assert killed is not None and sweep.poll() is None, "no worker was running a cell while the sweep ran"
        _wait(sweep, tmp_path / "sweep.log")
        # a fresh worker, as the recipe starts one, for the separability study
        _start_workers(cluster, commands, ["w3"])
        client.wait_for_workers(2, timeout=DEADLINE)
        study = _ntpbias(cluster, commands["reproduce"], out / "sep", ["--scale", "smoke", "--quiet"])
        _wait(study, tmp_path / "reproduce.log")

    # nothing lost: every cell completed once, with the numbers of the local run; no lock left behind
    assert _rows(out / "sweep" / "results.csv", ("seconds",)) == _rows(local / "sweep" / "results.csv", ("seconds",))
    assert {r["status"] for r in _rows(out / "sweep" / "results.csv", ())} == {"completed"}
    assert not list(out.rglob(".ntpbias.lock"))
    assert _rows(out / "sep" / "data" / "trials.csv", ("seconds",)) == \
        _rows(local / "sep" / "data" / "trials.csv", ("seconds",))
    checks = [json.loads((d / "sep" / "summary.json").read_text())["checks"] for d in (out, local)]
    assert [(c["name"], c["measured"], c["verdict"]) for c in checks[0]] == \
        [(c["name"], c["measured"], c["verdict"]) for c in checks[1]]
