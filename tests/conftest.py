"""Test-wide settings: one BLAS/torch thread (2-core machines), float64, no hypothesis deadlines."""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

torch.set_num_threads(1)
settings.register_profile("ntpbias", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ntpbias")


@pytest.fixture
def run_cli(tmp_path):
    """Run ``python -m ntpbias ARGS`` in a subprocess; returns the CompletedProcess (text mode)."""
    import subprocess
    import sys

    def _run(*args, check=False, timeout=600):
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        return subprocess.run([sys.executable, "-m", "ntpbias", *map(str, args)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, check=check, timeout=timeout)

    return _run
