"""Start-up of the command line: ``ntpbias --help``, ``list``, ``settings`` and an argument error, each in a fresh
interpreter, against ``python -c "import numpy"`` and ``python -c "import torch"`` in the same run.

Per command: the best wall time and the best CPU time (user + system of the child) over ``--repeat`` runs (the best
is the least disturbed by other users of a shared machine), and which heavy libraries the command loaded (none is
the goal: help, listings and argument errors need neither torch nor numpy; ``tests/cli/test_instant_cli.py`` holds
it).

Run: python benchmarks/bench_cli.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from _common import print_table

HEAVY = ("torch", "numpy", "scipy", "matplotlib", "cvxpy")
#: prints the heavy packages loaded when the interpreter exits (after the command has run)
PROBE = ("import atexit, sys; atexit.register(lambda: sys.__stderr__.write('LOADED ' + ' '.join(sorted("
         f"{{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))))")

COMMANDS = {
    "ntpbias --help": ["-m", "ntpbias", "--help"],
    "ntpbias list": ["-m", "ntpbias", "list"],
    "ntpbias settings linear": ["-m", "ntpbias", "settings", "linear"],
    "ntpbias train --preset nope --out x (error)": ["-m", "ntpbias", "train", "--preset", "nope", "--out", "x"],
    'python -c "import numpy" (reference)': ["-c", "import numpy"],
    'python -c "import torch" (reference)': ["-c", "import torch"],
}


def run(args: list[str], repeat: int) -> tuple[float, float, str]:
    """(best wall seconds, best CPU seconds, heavy packages loaded) of ``python ARGS``."""
    wall, cpu, loaded = [], [], ""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        if args[0] == "-m":  # the command, with the probe of what it loaded
            code = f"{PROBE}; import runpy; sys.argv = {[args[1], *args[2:]]!r}; runpy.run_module('ntpbias', " \
                   "run_name='__main__')"
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            loaded = proc.stderr.rsplit("LOADED", 1)[-1].strip() or "none"
        else:
            subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
            loaded = "-"
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(wall), min(cpu), loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    rows = []
    for label, argv in COMMANDS.items():
        wall, cpu, loaded = run(argv, args.repeat)
        rows.append([label, f"{wall:.2f}", f"{cpu:.2f}", loaded])
    print_table(f"Start-up, best of {args.repeat} (load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after)",
                ["command", "wall s", "CPU s", "heavy libraries loaded"], rows)


if __name__ == "__main__":
    main()
