"""HiGHS linear programs with a guard against stalls: a time limit per attempt, then the other HiGHS algorithm.

HiGHS's interior-point method ends with a crossover and, when that fails, a simplex clean-up; on rare degenerate
separability LPs that clean-up (or dual simplex from scratch) stalls on a problem of a few seconds (observed in the
large-m study at m = 200, V = 20, |S_j| = 2, d = 51: still in dual simplex phase 1 after many minutes, where the
same LP on other draws takes 3-4 s). :func:`highs_linprog` gives each attempt :data:`LP_ATTEMPT_SECONDS`, then
tries the other algorithm, and finally the first one without a limit, so a verdict is never lost to the guard;
which attempt answered is not part of the answer (every certificate is checked independently by the caller).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import OptimizeResult, linprog

#: wall-clock seconds one HiGHS attempt may take before the other algorithm is tried
LP_ATTEMPT_SECONDS = 240.0
#: scipy's status for an iteration or time limit
LIMIT_STATUS = 1


def highs_linprog(c: np.ndarray, *, algorithm: str, **problem) -> OptimizeResult:
    """``scipy.optimize.linprog(c, method=algorithm, **problem)`` with the stall guard (module docstring).

    ``algorithm``: ``"highs-ds"`` or ``"highs-ipm"``; ``problem``: the other keyword arguments of ``linprog``.

    >>> res = highs_linprog(np.array([1.0]), algorithm="highs-ds", bounds=[(2.0, None)])
    >>> res.status, float(res.x[0])
    (0, 2.0)
    """
    other = "highs-ds" if algorithm == "highs-ipm" else "highs-ipm"
    res = None
    for method, limit in ((algorithm, LP_ATTEMPT_SECONDS), (other, LP_ATTEMPT_SECONDS), (algorithm, None)):
        res = linprog(c, method=method, options={} if limit is None else {"time_limit": limit}, **problem)
        if res.status != LIMIT_STATUS:
            return res
    return res
