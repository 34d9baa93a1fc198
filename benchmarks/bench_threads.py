"""Threads on a busy machine: wall and CPU time of three commands, alone and beside two CPU-burning processes, under
the thread settings a user can end up with (docs/errors-and-limits.md#threads).

Commands (each in a fresh interpreter, its CPU time = user + system of the child and its descendants):

* ``lm``: a tiny ``ntpbias lm train --preset lm-shakespeare --set train.steps=STEPS``;
* ``analyze``: ``ntpbias analyze corpus.txt --context-length 2 --embedding gaussian:d=64,seed=0`` (the README's form)
  on the first LINES spoken lines of Shakespeare (written to a temporary ``corpus.txt``);
* ``reproduce``: README command 1, ``ntpbias reproduce all`` at quick scale (long: skip it with ``--only lm,analyze``).

Thread settings:

* ``ntpbias default``: no thread variable set (what a user gets: ntpbias's choice, one thread);
* ``one thread forced``: ``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1`` (the tests' setting);
* ``all cores``: ``--threads <cores>`` (idle OpenMP threads sleep: ntpbias's passive wait policy);
* ``all cores, spinning``: ``--threads <cores>`` with ``GOMP_SPINCOUNT=300000``, GNU OpenMP's spin when no wait
  policy is set: what every command did before ntpbias chose its threads.

The issue's acceptance is the ``ntpbias default`` row of ``lm`` beside two busy processes against the ``one thread
forced`` row: CPU at most 1.5x. The benchmark itself sets no thread variable (it runs commands in children, each
with its own environment); the machine's load average is printed with the table, since a shared machine's other
users change every number.

Run: python benchmarks/bench_threads.py [--only lm,analyze] [--steps 100] [--lines 60] [--settings default,one]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import print_table

SETTINGS = {
    "default": ("ntpbias default", {}, []),
    "one": ("one thread forced", {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, []),
    "cores": ("all cores", {}, ["--threads", str(os.cpu_count() or 1)]),
    "spin": ("all cores, spinning", {"GOMP_SPINCOUNT": "300000"}, ["--threads", str(os.cpu_count() or 1)]),
}
#: every variable that sets a thread count or a wait policy: removed before each setting adds its own
THREAD_VARS = ("NTPBIAS_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
               "GOMP_SPINCOUNT")


def shakespeare_text(path: Path, lines: int) -> Path:
    """The first ``lines`` non-blank spoken lines of the built-in Shakespeare, lower-cased words, one per line."""
    from ntpbias.data.corpus import read_corpus

    _, texts = read_corpus("shakespeare")
    words = (" ".join(re.findall(r"[a-z']+", line.lower())) for text in texts for line in text.splitlines())
    kept = [w for w in words if len(w.split()) >= 3][:lines]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def commands(work: Path, steps: int, text: Path) -> dict[str, list[str]]:
    return {
        "lm": ["lm", "train", "--preset", "lm-shakespeare", "--set", f"train.steps={steps}", "--out",
               str(work / "lm"), "--overwrite", "--quiet"],
        "analyze": ["analyze", str(text), "--context-length", "2", "--embedding", "gaussian:d=64,seed=0", "--out",
                    str(work / "analyze"), "--overwrite", "--quiet"],
        "reproduce": ["reproduce", "all", "--out", str(work / "all"), "--overwrite", "--quiet"],
    }


def timed_run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its descendants) of ``ntpbias ARGS``; a failure stops the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ntpbias", *args], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):  # 3: a finished reproduction with a failing check (still timed)
        sys.exit(f"ntpbias {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class Busy:
    """``n`` processes that burn a CPU each while the body runs (a shared machine's other users)."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="lm,analyze,reproduce", help="commands: lm, analyze, reproduce")
    parser.add_argument("--settings", default="default,one,cores,spin", help=f"of {', '.join(SETTINGS)}")
    parser.add_argument("--steps", type=int, default=100, help="lm: training steps")
    parser.add_argument("--lines", type=int, default=60, help="analyze: lines of Shakespeare")
    parser.add_argument("--busy", type=int, default=2, help="CPU-burning processes beside the command")
    args = parser.parse_args()
    only, settings = args.only.split(","), args.settings.split(",")
    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    rows, reference = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cmds = commands(work, args.steps, shakespeare_text(work / "corpus.txt", args.lines))
        for name in only:
            for busy in (0, args.busy):
                for key in settings:
                    label, extra, flags = SETTINGS[key]
                    with Busy(busy):
                        load = os.getloadavg()[0]
                        wall, cpu = timed_run(cmds[name] + flags, {**base, **extra})
                    if key == "one":
                        reference[name, busy] = cpu
                    rows.append([name, f"{busy} busy", label, wall, cpu, load, (name, busy)])
                    print(f"{name}, {busy} busy, {label}: {wall:.1f} s wall, {cpu:.1f} s CPU (load {load:.1f})",
                          file=sys.stderr, flush=True)
    table = [r[:6] + [f"{r[4] / reference[r[6]]:.2f}" if r[6] in reference else "-"] for r in rows]
    print_table(f"Threads on a {os.cpu_count()}-core machine (CPU/one: the CPU time over the one-thread-forced "
                "run's, same command and load)",
                ["command", "beside", "threads", "wall s", "CPU s", "load avg", "CPU/one"], table)


if __name__ == "__main__":
    main()
