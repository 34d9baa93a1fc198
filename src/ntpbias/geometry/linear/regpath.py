"""The norm-constrained regularization path Ŵ_B = argmin_{||W|| <= B} CE(W) (eq. (8) of paper A,
docs/paper-a-linear-ntp.md#objects).

For separable data the minimizer lies on the sphere ||Ŵ_B|| = B, where the KKT conditions read
∇CE(Ŵ_B) + λ Ŵ_B = 0 with λ > 0: Ŵ_B is the ridge minimizer W_λ = argmin CE(W) + (λ/2)||W||² for the λ at
which ||W_λ|| = B. We solve the (strongly convex) ridge problem by Newton's method with conjugate gradients on
exact Hessian-vector products (two matrix products each, never a dense (Vd x Vd) Hessian) and find λ by a
bracketed root search on log λ, warm-starting along the increasing B grid.

First-order methods stall long before the boundary for large B (docs/paper-a-linear-ntp.md#objects); here each point
reports its KKT residual ||∇CE + λW|| / (λ B) (a bound on the relative error of Ŵ_B) and whether ||Ŵ_B|| = B was
attained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...data.ntp import NTPData
from .loss import cross_entropy_grad

#: Relative accuracy asked of each path point (KKT residual and | ||W|| - B | / B).
PATH_TOL = 1e-7


@dataclass(frozen=True, eq=False)
class PathPoint:
    """One point Ŵ_B of the regularization path.

    ``attained`` is True when ||Ŵ_B|| = B to ``PATH_TOL`` relative and the KKT residual is below it; otherwise
    ``note`` says why (the unconstrained minimum lies inside the ball, or float64 precision ran out).
    """

    B: float
    W: torch.Tensor
    loss: float
    lam: float
    kkt_residual: float
    attained: bool
    note: str = ""

    @property
    def norm(self) -> float:
        return float(torch.linalg.vector_norm(self.W))


def _hvp(U: torch.Tensor, probs: torch.Tensor, data: NTPData, lam: float) -> torch.Tensor:
    """(∇²CE(W) + λI) U with ∇²CE = Σ_j π̂_j (diag(s_j) - s_j s_j^T) ⊗ h̄_j h̄_j^T (the Hessian of
    docs/paper-a-linear-ntp.md#objects, item 3)."""
    LU = data.H @ U.T  # (m, V)
    t = probs * LU - probs * (probs * LU).sum(-1, keepdim=True)
    return (t * data.pi[:, None]).T @ data.H + lam * U


def _ridge(data: NTPData, lam: float, W: torch.Tensor, *, gtol: float,
           max_newton: int = 200) -> tuple[torch.Tensor, float]:
    """Minimize CE(W) + (λ/2)||W||² by Newton-CG from W; returns (W, final ||gradient||).

    Stops at ``gtol`` or at the float64 round-off level of the gradient, whichever is larger.
    """
    max_cg = 4 * W.numel() + 50
    gtol = max(gtol, 1e-15 * data.embedding_bound * math.sqrt(W.numel()))
    for _ in range(max_newton):
        loss, g = cross_entropy_grad(W, data)
        g = g + lam * W
        gnorm = float(torch.linalg.vector_norm(g))
        if gnorm <= gtol:
            return W, gnorm
        probs = torch.softmax(data.H @ W.T, dim=-1)
        # conjugate gradients on (∇²f) p = -g with an Eisenstat-Walker forcing term
        forcing = min(0.5, math.sqrt(gnorm)) * gnorm
        p = torch.zeros_like(W)
        r = -g
        d = r.clone()
        rr = float((r * r).sum())
        for _ in range(max_cg):
            Hd = _hvp(d, probs, data, lam)
            curv = float((d * Hd).sum())
            if curv <= 0:
                break
            alpha = rr / curv
            p = p + alpha * d
            r = r - alpha * Hd
            rr_new = float((r * r).sum())
            if rr_new ** 0.5 <= forcing:
                break
            d = r + (rr_new / rr) * d
            rr = rr_new
        if not torch.any(p != 0):
            p = -g
        f0 = float(loss) + 0.5 * lam * float((W * W).sum())
        slope = float((g * p).sum())
        step = 1.0
        while step > 1e-12:  # backtracking (Armijo)
            Wn = W + step * p
            fn = float(cross_entropy_grad(Wn, data)[0]) + 0.5 * lam * float((Wn * Wn).sum())
            if fn <= f0 + 1e-4 * step * slope or abs(fn - f0) <= 1e-15 * abs(f0):
                break
            step *= 0.5
        else:
            break  # no descent possible at this precision
        W = Wn
    loss, g = cross_entropy_grad(W, data)
    return W, float(torch.linalg.vector_norm(g + lam * W))


def regularization_path(data: NTPData, B_values, *, tol: float = PATH_TOL) -> list[PathPoint]:
    """Ŵ_B for each B in ``B_values`` (solved in increasing order with warm starts).

    Examples
    --------
    >>> import torch
    >>> from ntpbias.data.ntp import NTPData
    >>> data = NTPData.from_arrays(torch.eye(2), [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> pt = regularization_path(data, [3.0])[0]
    >>> pt.attained, round(pt.norm, 6)
    (True, 3.0)
    """
    points = {}
    state = {"W": torch.zeros(data.V, data.d, dtype=data.H.dtype, device=data.H.device)}
    history: list[tuple[float, float]] = []  # (log B, log λ) of solved points, to extrapolate the next guess
    floor = math.log(1e-16)
    for B in sorted(float(b) for b in B_values):

        def excess(log_lam: float, B=B) -> float:
            """log ||W_λ|| - log B: decreasing in λ; warm-started from the last solve."""
            lam = math.exp(log_lam)
            state["W"], _ = _ridge(data, lam, state["W"], gtol=1e-3 * tol * lam * B)
            return math.log(float(torch.linalg.vector_norm(state["W"]))) - math.log(B)

        log_lam, interior = _solve_log_lambda(excess, _initial_guess(history, math.log(B)), floor, tol)
        note = "the minimum of CE inside the ball is not on the sphere ||W|| = B (or λ underflowed)" if interior \
            else ""
        lam = math.exp(log_lam)
        W, gnorm = _ridge(data, lam, state["W"], gtol=1e-3 * tol * lam * B)
        state["W"] = W
        kkt = gnorm / (lam * B)
        norm = float(torch.linalg.vector_norm(W))
        attained = (not interior) and abs(norm - B) <= tol * B and kkt <= tol
        if not attained and not note:
            note = f"float64 precision limit: KKT residual {kkt:.1e}, | ||W|| - B | / B = {abs(norm - B) / B:.1e}"
        points[B] = PathPoint(B=B, W=W, loss=float(cross_entropy_grad(W, data)[0]), lam=lam,
                              kkt_residual=kkt, attained=attained, note=note)
        if not interior:
            history.append((math.log(B), log_lam))
    return [points[float(b)] for b in B_values]


def _initial_guess(history: list[tuple[float, float]], log_B: float) -> float:
    """log λ guess for the next B: linear extrapolation in (log B, log λ) from the last two solved points."""
    if not history:
        return 0.0
    if len(history) == 1:
        return history[-1][1] - 2.0
    (b0, l0), (b1, l1) = history[-2:]
    return l1 + (l1 - l0) / (b1 - b0) * (log_B - b1) if b1 != b0 else l1 - 2.0


def _solve_log_lambda(excess, guess: float, floor: float, tol: float) -> tuple[float, bool]:
    """Root of the decreasing function ``excess`` in log λ: bracket from ``guess``, then Illinois regula falsi.

    Returns (log λ, interior) where interior means no root above ``floor`` (the minimum lies inside the ball).
    """
    x0, g0 = guess, excess(guess)
    step = 1.0 if g0 > 0 else -1.0  # g > 0: ||W|| too large, increase λ
    x1, g1 = x0, g0
    while (g1 > 0) == (g0 > 0) and g1 != 0:
        x0, g0 = x1, g1
        x1 = x1 + step
        if x1 < floor:
            return x0, True
        g1 = excess(x1)
        step *= 2.0
    lo, glo, hi, ghi = (x0, g0, x1, g1) if x0 < x1 else (x1, g1, x0, g0)  # glo >= 0 >= ghi
    side = 0
    for _ in range(100):
        if abs(ghi) < abs(glo):
            best, gbest = hi, ghi
        else:
            best, gbest = lo, glo
        if abs(gbest) <= 1e-3 * tol or hi - lo <= 1e-12:
            return best, False
        x = hi - ghi * (hi - lo) / (ghi - glo)
        g = excess(x)
        if g > 0:
            lo, glo = x, g
            if side == -1:
                ghi /= 2
            side = -1
        else:
            hi, ghi = x, g
            if side == 1:
                glo /= 2
            side = 1
    return best, False
