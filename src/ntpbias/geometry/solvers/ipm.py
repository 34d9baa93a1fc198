"""An interior-point method for the NTP-SVM whose cost does not depend on the conditioning of the features:
``MarginProgram.solve(solver="ipm")`` (docs/benchmarks.md#ill-conditioned-features).

The first-order methods of :mod:`ntpbias.geometry.solvers.dual` and :mod:`ntpbias.geometry.solvers.workset` work on the
dual of the NTP-SVM, whose Hessian is Λ ↦ Λ K with K = H H^T: their step counts grow with the conditioning of K on the
active face, and on a trained model's features (cond(H) ~ 1e3-1e6, many in-support ties per context) they stall. A
change of variables cannot remove this: the dual function does not depend on how W is parametrized, and a
preconditioner other than a scaling per context breaks the exact projection onto the dual's constraints. Here the dual
is solved by a primal-dual interior-point method instead, whose Newton systems are solved exactly, so that its
iteration count (12-34 measured: docs/benchmarks.md#ill-conditioned-features) is that of any interior-point method.

**The problem.** In the logit-cell layout of :class:`~ntpbias.geometry.solvers.dual_forms.CellForm` (the NTP-SVM's
reduced form, every (token, context) cell used once: the in-support cells E, the out-of-support cells I), the dual of
(P) of :mod:`ntpbias.geometry.margins.program` is, with Y = -Λ (V, m),

    minimize ½ tr(Y K Y^T) - Σ_I Y   s.t.   Y^T 1 = 0 (every column sums to 0),  Y >= 0 on I,

and W = -Y H; the multipliers of the anchor form are λ = Y on I and μ = Y at the non-anchor in-support cells. Its
optimality conditions, with the multiplier c (m,) of the column sums and the slack S >= 0 on I (0 on E), are

    Y K - T - 1 c^T - S = 0  (T = 1 on I, 0 on E),    Y^T 1 = 0,    Y S = 0 on I,

the first of which says that the logits L = W H^T = -Y K put every in-support logit of context j at -c_j and every
other at -c_j - 1 - S: margins 1 + S >= 1.

**The Newton system** (Mehrotra's predictor-corrector, one step length) eliminates the slack: with D = S / Y on I,

    ΔY_v (K + diag(D_v)) = q_v + Δc   for every token v (row of ΔY),      Σ_v ΔY_v = -R_c,

so ΔY_v = M_v^{-1} (q_v + Δc) with M_v = K + diag(D_v) (m, m), and Δc solves (Σ_v M_v^{-1}) Δc = -R_c -
Σ_v M_v^{-1} q_v: one Cholesky factorization per token (batched, in chunks of tokens) and one of an (m, m) matrix per
iteration, O(V m³) operations and V m² numbers of memory, whatever cond(H) (H enters only through K; each M_v is
factorized after a symmetric diagonal scaling to unit diagonal, and inverted: a solve is then a batched
matrix-vector product). Every cell gets a small proximal regularization (D >= :data:`REGULARIZATION`, the in-support
cells exactly that) so that every M_v is positive definite also when H has fewer independent rows than contexts; the
residuals are recomputed exactly at every iteration, so it only makes the directions inexact.

**Finish.** Once the worst KKT residual is below :data:`POLISH_BELOW`, the face (the out-of-support cells with
Y K̄ > S, K̄ the mean K_jj: D below the scale of K) is solved exactly by the same factorization with D ≈ 0 on the face
and D = ∞ off it (rounds of refinement), and kept when its residual is lower; where float64 itself bounds the residual
(about 1e-16 times the largest logit), the run stops as "stalled" (:data:`STALL_ITERATIONS`). The caller
(:meth:`~ntpbias.geometry.margins.program.MarginProgram.finish`) recomputes the certificate from (W, λ, μ) on every
row in float64.

**Not separable.** The dual is then unbounded: Y grows along a Gordan direction. The run stops with
``diverged=True`` when the iterate passes the rounding-safe Gordan test of the workset method (the same
``DIVERGENCE_TOL``).
"""

from __future__ import annotations

import math
import time

import torch

from ...errors import SolverError
from ...limits import check_memory, nbytes
from .dual import _SolverRun
from .dual_forms import CellForm
from .gram import ConstraintOps
from .workset import _GordanCheck

#: Iteration cap of :func:`solve_ipm` unless asked otherwise (12-34 measured).
IPM_MAX_ITER = 100
#: Fraction of the step to the boundary of the positive orthant taken at each iteration.
STEP_FRACTION = 0.99
#: Proximal regularization of every cell (the smallest D), relative to the mean diagonal entry of K.
REGULARIZATION = 1e-11
#: The face is solved exactly once the worst KKT residual of the iterate is below this.
POLISH_BELOW = 1e-3
#: Face solves tried at most (each costs one factorization); a face is tried once it is the same at two iterations.
POLISH_TRIES = 3
#: The run stops when its best residual, once below STALL_BELOW, did not halve over STALL_ITERATIONS iterations (the
#: floor of float64 arithmetic on the features: about 1e-16 times the largest logit over the margin).
STALL_ITERATIONS = 5
STALL_BELOW = 1e-4
#: A run stops at once when its residual is at most this; above it, a run that reached its tolerance takes up to
#: EXTRA_ITERATIONS more iterations for a face solve to reach it (their faces are the optimum's more often).
EXACT = 1e-12
EXTRA_ITERATIONS = 2
#: Rounds of refinement of the face solve (each one removes the regularization's error once more).
POLISH_ROUNDS = 10
#: Off-face cells get D = this times the mean diagonal entry of K in the face solve (they leave it).
OFF_FACE = 1e20
#: The run stops once the worst KKT residual is at most this times ``tol`` (the caller's recomputation certifies).
TARGET_FACTOR = 0.25
#: Entries of the (tokens, m, m) blocks formed and inverted at once (bounds the temporary memory).
CHUNK_ENTRIES = 1 << 22
#: :func:`fits` takes problems whose factorizations cost at most this many operations V m³ each (about 10 s on one
#: CPU thread; 20-40 of them per solve).
MAX_WORK = 2e10


def fits(V: int, m: int) -> bool:
    """Whether an NTP-SVM with V tokens and m contexts is within :data:`MAX_WORK` for the interior-point method (its
    memory, V m² numbers, is then at most MAX_WORK / m).

    >>> fits(1024, 128), fits(64, 3000)
    (True, False)
    """
    return V * m ** 3 <= MAX_WORK


def solve_ipm(program, *, tol: float = 1e-6, max_iter: int = IPM_MAX_ITER, warm_start=None,
              dtype: torch.dtype | str | None = None, device=None) -> _SolverRun:
    """Solve the NTP-SVM ``program`` by the interior-point method of the module doc.

    Parameters
    ----------
    program : MarginProgram
        The NTP-SVM in its reduced (anchor) form, :func:`ntpbias.geometry.constraints.constraints` (another program
        is a :class:`~ntpbias.errors.SolverError`).
    tol : float
        KKT tolerance the run aims at (the caller certifies).
    max_iter : int
        Cap on interior-point iterations.
    warm_start : ignored
        Interior-point methods gain little from a warm start; accepted for a common signature.
    dtype : None or torch.float64
        The method runs in float64 (its Newton systems need it).
    device : torch device or None
        Where to iterate (default: the program's device; the batched factorizations run on a GPU too).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> from ntpbias.geometry.constraints import constraints
    >>> from ntpbias.geometry.margins.program import MarginProgram
    >>> cons = constraints(NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    >>> sol = solve_ipm(MarginProgram(cons.ineq, cons.eq))
    >>> sol.converged, [round(float(x), 6) for x in sol.lam]
    (True, [0.666667, 0.333333, 0.333333])
    """
    start = time.perf_counter()
    if isinstance(dtype, str):
        dtype = {"float32": torch.float32, "float64": torch.float64}.get(dtype, dtype)
    if dtype not in (None, torch.float64):
        raise SolverError(f"the interior-point solver runs in float64, not {dtype}; use solver='workset' for float32")
    home_dtype, home_device = program.ineq.H.dtype, program.ineq.H.device
    work_device = torch.device(device) if device is not None else home_device
    ops = ConstraintOps.build(program.ineq, program.eq, work_device, torch.float64)
    cells = CellForm.detect(ops)
    if cells is None:
        raise SolverError("the interior-point solver solves the NTP-SVM in its reduced form (one anchor per context, "
                          "every other token of the context in one row); use solver='workset' or 'clarabel' for "
                          "other max-margin programs")
    V, m = cells.shape
    check_memory({"inverse blocks (V x m x m)": nbytes(V, m, m),
                  "one chunk of blocks": nbytes(min(V, max(1, CHUNK_ENTRIES // (m * m))), m, m),
                  "iterates and residuals (V x m)": nbytes(12, V, m)},
                 f"the interior-point NTP-SVM solve (V = {V:,}, m = {m:,})",
                 hint="use solver='workset' (memory linear in the constraints)", device=work_device)
    run = _IPM(ops, cells, program, tol, max_iter).run()
    lam, mu = (x.to(device=home_device, dtype=home_dtype) for x in (run["lam"], run["mu"]))
    W = None if run["W"] is None else run["W"].to(device=home_device, dtype=home_dtype)
    return _SolverRun(lam=lam, mu=mu, iterations=run["iterations"], converged=run["converged"],
                      diverged=run["diverged"], gordan_residual=run["gordan"], form="cells", precision="float64",
                      lipschitz=math.nan, seconds=time.perf_counter() - start,
                      residual_history=tuple(run["history"]), details=run["details"], W=W)


class _Blocks:
    """The per-token blocks M_v = K + diag(D_v) of the Newton systems, inverted (module doc), and their solves; the
    storage is allocated once per run and refilled by :meth:`factor`.

    Each block is scaled to unit diagonal, T_v M_v T_v with T_v = diag(K_jj + D_vj)^{-1/2}, factorized by Cholesky and
    inverted from its factor; the inverses are kept, since the Δc system needs their sum anyway, and a solve is then
    one batched matrix-vector product (measured 5-10x faster on one CPU thread than triangular solves with the
    factors, which torch runs block by block)."""

    def __init__(self, K: torch.Tensor, V: int):
        m = K.shape[0]
        self.K, self.kdiag = K, torch.diagonal(K)
        self.inverses = torch.empty(V, m, m, dtype=K.dtype, device=K.device)
        self.step = max(1, min(V, CHUNK_ENTRIES // (m * m)))
        self.work = torch.empty(self.step, m, m, dtype=K.dtype, device=K.device)
        self.eye = torch.eye(m, dtype=K.dtype, device=K.device)
        self.count = 0

    def factor(self, D: torch.Tensor) -> _Blocks:
        """Invert M_v = K + diag(D_v) for D (V, m) >= 0, and factorize the (m, m) matrix Σ_v M_v^{-1} of the Δc
        system."""
        V, m = D.shape
        self.t = (self.kdiag[None, :] + D).rsqrt()  # (V, m) Jacobi scaling: unit diagonal
        Sc = torch.zeros(m, m, dtype=D.dtype, device=D.device)
        for s in range(0, V, self.step):  # chunks of tokens bound the (chunk, m, m) temporaries
            t = self.t[s:s + self.step]
            n = t.shape[0]
            M = torch.mul(self.K[None], t[:, :, None], out=self.work[:n]).mul_(t[:, None, :])
            M.diagonal(dim1=1, dim2=2).fill_(1.0)  # (K_jj + D_j) t_j² = 1 exactly
            inv = torch.cholesky_inverse(_cholesky(M, self.eye), out=self.inverses[s:s + n])
            Sc += torch.mul(inv, t[:, :, None], out=self.work[:n]).mul_(t[:, None, :]).sum(0)
        self.sc_scale = torch.diagonal(Sc).clamp(min=torch.finfo(D.dtype).tiny).rsqrt()
        self.sc_factor = _cholesky((Sc * self.sc_scale[:, None] * self.sc_scale[None, :])[None], self.eye)[0]
        self.count += 1
        return self

    def apply_inverse(self, Q: torch.Tensor) -> torch.Tensor:
        """Rows M_v^{-1} q_v for Q (V, m) (or one vector (m,) for every token)."""
        return self.t * torch.bmm(self.inverses, (self.t * Q)[:, :, None])[:, :, 0]

    def solve(self, Q: torch.Tensor, Rc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(ΔY, Δc) with ΔY_v M_v = Q_v + Δc and Σ_v ΔY_v = -Rc."""
        P = self.apply_inverse(Q)
        rhs = -(Rc + P.sum(0)) * self.sc_scale
        dc = self.sc_scale * torch.cholesky_solve(rhs[:, None], self.sc_factor)[:, 0]
        return P + self.apply_inverse(dc), dc


def _cholesky(M: torch.Tensor, eye: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factors of the unit-diagonal batch M, adding a growing multiple of I to a block that is not
    numerically positive definite (a regularization the residuals of the next iteration account for)."""
    L, info = torch.linalg.cholesky_ex(M)
    shift = 1e-12
    while bool((info > 0).any()):
        bad = info > 0
        L[bad], info[bad] = torch.linalg.cholesky_ex(M[bad] + shift * eye)
        shift *= 100
        if shift > 1:
            raise SolverError("the interior-point solver's Newton system is singular; the features are too "
                              "degenerate for it (use solver='workset')")
    return L


class _IPM:
    """One interior-point run (module doc); :meth:`run` returns its outcome as a dict."""

    def __init__(self, ops: ConstraintOps, cells: CellForm, program, tol: float, max_iter: int):
        self.ops, self.cells, self.program = ops, cells, program
        self.tol, self.max_iter = tol, max_iter
        H = ops.H
        self.H, self.K = H, H @ H.T
        self.ineq = cells.c > 0  # (V, m) out-of-support cells
        V, m = cells.shape
        self.anchor = torch.zeros(m, dtype=torch.long, device=H.device)
        self.anchor[ops.a_cell % m] = ops.a_cell // m  # the anchor token of each context (its column's free cell)
        self.cols = torch.arange(m, device=H.device)
        self.T = cells.c
        self.n_ineq = max(1, int(self.ineq.sum()))
        self.kscale = float(torch.diagonal(self.K).mean())
        self.reg = REGULARIZATION * self.kscale
        self.blocks = _Blocks(self.K, cells.shape[0])
        self.check = program.to(device=H.device, dtype=torch.float64)
        self.gordan = _GordanCheck(program)
        self.details = {"polish": "not tried", "polish_tries": 0, "ipm_iterations": 0}

    def duals(self, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(λ, μ) of the anchor form from Y (module doc)."""
        return self.cells.duals(-Y)

    def certify(self, Y: torch.Tensor, W: torch.Tensor):
        """(worst KKT residual, W, λ, μ) for the multipliers of Y and the tracked W (:meth:`move`), on every row in
        float64."""
        lam, mu = self.duals(Y)
        return self.check.certificate(W, lam, mu).worst, W, lam, mu

    def move(self, Y: torch.Tensor, W: torch.Tensor, dY: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Y + ΔY, W - ΔY H) with ΔY's anchor cells set so that its columns sum to 0 exactly (W = -Y H = A^T y).

        W is carried along rather than recomputed as -Y H: on ill-conditioned features Y is large (up to about
        ||W|| / σ_min(H)) and -Y H cancels, which would put an error of about 1e-16 |Y| |H| in every logit, above the
        tolerance at cond(H) = 1e6; the increments ΔY shrink with the residual, and so does their rounding."""
        dY = dY.clone()
        dY[self.anchor, self.cols] -= dY.sum(0)
        return Y + dY, W - dY @ self.H

    def logits(self, W: torch.Tensor) -> torch.Tensor:
        """L = W H^T (V, m) (= -Y K)."""
        return W @ self.H.T

    def start(self):
        """Mehrotra's starting point: the Newton step from Y = 0, S = 0 with D = mean K_jj on the I cells (every margin
        constraint treated as active), shifted into the interior."""
        ineq = self.ineq
        m = self.cells.shape[1]
        D = torch.where(ineq, self.kscale, self.reg).to(self.K.dtype)
        Y, c = self.blocks.factor(D).solve(self.T, torch.zeros(m, dtype=D.dtype, device=D.device))
        S = torch.where(ineq, -D * Y, 0.0)
        y_shift = max(-1.5 * float(Y[ineq].min()), 0.0)
        s_shift = max(-1.5 * float(S[ineq].min()), 0.0)
        Y = torch.where(ineq, Y + y_shift, Y)
        S = torch.where(ineq, S + s_shift, 0.0)
        ys = float((Y * S).sum())
        Y = torch.where(ineq, Y + 0.5 * ys / max(float(S.sum()), 1e-300), Y)
        S = torch.where(ineq, S + 0.5 * ys / max(float(Y[ineq].sum()), 1e-300), 0.0)
        Y, W = self.move(torch.zeros_like(Y), torch.zeros_like(self.H[:1]).expand(Y.shape[0], -1), Y)
        return Y, S, c, W

    @property
    def done(self) -> bool:
        """The best point so far meets the tolerance (with the margin the caller's recomputation needs)."""
        return self.best[0] <= TARGET_FACTOR * self.tol

    def keep(self, worst: float, point: tuple) -> None:
        """Keep (worst, (W, λ, μ)) if it is the best so far."""
        if worst < self.best[0]:
            self.best = (worst, point)

    def run(self) -> dict:
        Y, S, c, W = self.start()
        self.best, self.tried = (math.inf, None), None
        history, last_face, extra, diverged, stopped = [], None, 0, False, None
        it = 0
        while True:
            worst, W, lam, mu = self.certify(Y, W)
            history.append((it, worst))
            self.keep(worst, (W, lam, mu))
            face = self.ineq & (Y * self.kscale > S)  # D = S / Y below the scale of K: an active cell
            stable = last_face is not None and torch.equal(face, last_face)
            last_face = face
            if worst <= POLISH_BELOW and (stable or self.done):
                self.try_polish(Y, c, W, face, worst)
            if self.best[0] <= EXACT or (self.done and (extra >= EXTRA_ITERATIONS
                                                        or self.details["polish_tries"] >= POLISH_TRIES)):
                break
            extra += self.done
            if self.gordan(lam, mu):
                diverged = True
                self.best = (worst, (None, lam, mu))
                break
            if it >= self.max_iter:
                stopped = f"iteration limit ({it} iterations; raise max_iter)"
                break
            if _stalled(history):
                stopped = (f"stalled at residual {self.best[0]:.1e} after {it} iterations (the floor of float64 "
                           "arithmetic on these features)")
                break
            Y, S, c, W = self.step(Y, S, c, W)
            it += 1
        converged = not diverged and self.done
        if converged and self.best[0] > EXACT:
            self.drop_inactive(Y, W, last_face)
        self.details.update(ipm_iterations=it, factorizations=self.blocks.count)
        if stopped is not None and not converged:
            self.details["stopped"] = stopped
        W, lam, mu = self.best[1]
        gordan = self.gordan.ratio(*self.gordan.full(lam, mu))
        if diverged:
            total = lam.sum()
            lam, mu = lam / total, mu / total
        return {"lam": lam, "mu": mu, "W": W, "iterations": it, "converged": converged, "diverged": diverged,
                "gordan": gordan, "history": history, "details": self.details}

    def drop_inactive(self, Y: torch.Tensor, W: torch.Tensor, face: torch.Tensor) -> None:
        """Zero the multipliers of the last iterate (Y, W) off ``face`` (an interior point's are small, not zero, and
        would count as support vectors), if its certificate stays within the tolerance."""
        got = self.certify(*self.move(Y, W, -torch.where(self.ineq & ~face, Y, 0.0)))
        if got[0] <= TARGET_FACTOR * self.tol:
            self.best = (got[0], got[1:])
            self.details["inactive_dropped"] = True

    def try_polish(self, Y: torch.Tensor, c: torch.Tensor, W: torch.Tensor, face: torch.Tensor, worst: float) -> None:
        """:meth:`polish` on ``face`` unless the best point is exact, the tries are spent or this face was tried."""
        if (self.best[0] <= EXACT or self.details["polish_tries"] >= POLISH_TRIES
                or (self.tried is not None and torch.equal(face, self.tried))):
            return
        self.tried = face
        self.details["polish_tries"] += 1
        polished = self.polish(Y, c, W, face)
        if polished[0] < self.best[0]:
            self.keep(polished[0], polished[1:])
            self.details["polish"] = f"applied at residual {worst:.1e}"
        elif self.details["polish"] == "not tried":
            self.details["polish"] = "rejected"

    def step(self, Y: torch.Tensor, S: torch.Tensor, c: torch.Tensor, W: torch.Tensor):
        """One predictor-corrector iteration (module doc)."""
        ineq = self.ineq
        Rp = -self.logits(W) - self.T - c[None, :] - S  # Y K - T - 1 c^T - S
        Rc = Y.sum(0)
        Ys = torch.where(ineq, Y, 1.0)
        mu = float((Y * S).sum()) / self.n_ineq
        blocks = self.blocks.factor(torch.where(ineq, (S / Ys).clamp(min=self.reg), self.reg))

        def direction(r_mu):
            dY, dc = blocks.solve(-Rp + torch.where(ineq, r_mu / Ys, 0.0), Rc)
            dS = torch.where(ineq, (r_mu - S * dY) / Ys, 0.0)
            return dY, dc, dS

        dY, dc, dS = direction(torch.where(ineq, -Y * S, 0.0))
        a = _max_step(Y, dY, S, dS, ineq)
        mu_aff = float(((Y + a * dY) * (S + a * dS)).sum()) / self.n_ineq
        sigma = min(1.0, (mu_aff / mu) ** 3) if mu > 0 else 0.0
        dY, dc, dS = direction(torch.where(ineq, sigma * mu - Y * S - dY * dS, 0.0))
        a = min(1.0, STEP_FRACTION * _max_step(Y, dY, S, dS, ineq))
        Y, W = self.move(Y, W, a * dY)
        return Y, torch.where(ineq, S + a * dS, 0.0), c + a * dc, W

    def polish(self, Y: torch.Tensor, c: torch.Tensor, W: torch.Tensor, face: torch.Tensor):
        """Solve the ``face`` (I cells with Y K̄ > S) exactly (module doc): refinement rounds on the face equations with
        the regularized factorization, until the certificate stops improving; the best (worst, W, λ, μ)."""
        ineq = self.ineq
        off = ineq & ~face
        blocks = self.blocks.factor(torch.where(off, OFF_FACE * self.kscale, self.reg).to(Y.dtype))
        Y, W = self.move(Y, W, -torch.where(off, Y, 0.0))
        best = (math.inf,)
        for _ in range(POLISH_ROUNDS):
            R = torch.where(off, 0.0, -self.logits(W) - self.T - c[None, :])
            dY, dc = blocks.solve(-R, Y.sum(0))
            Y, W = self.move(Y, W, torch.where(off, 0.0, dY))
            c = c + dc
            got = self.certify(Y, W)
            if got[0] > 0.5 * best[0]:  # no longer improving: the face is wrong, or float64's floor is reached
                return min(best, got, key=lambda g: g[0])
            best = got
            if best[0] <= TARGET_FACTOR * self.tol:
                break
        return best


def _stalled(history: list[tuple[int, float]]) -> bool:
    """Whether the best residual of the last :data:`STALL_ITERATIONS` iterations is not below half the best before,
    once that is below :data:`STALL_BELOW` (early residuals are not monotone)."""
    if len(history) <= STALL_ITERATIONS:
        return False
    before = min(w for _, w in history[:-STALL_ITERATIONS])
    return before <= STALL_BELOW and min(w for _, w in history[-STALL_ITERATIONS:]) > 0.5 * before


def _max_step(Y, dY, S, dS, ineq) -> float:
    """The largest α <= 1 / STEP_FRACTION keeping Y + α ΔY and S + α ΔS nonnegative on the I cells."""
    big = torch.full_like(Y, math.inf)
    ay = torch.where(ineq & (dY < 0), -Y / torch.where(dY < 0, dY, -1.0), big).min()
    as_ = torch.where(ineq & (dS < 0), -S / torch.where(dS < 0, dS, -1.0), big).min()
    return float(min(ay, as_, torch.tensor(1.0 / STEP_FRACTION, dtype=Y.dtype)))
