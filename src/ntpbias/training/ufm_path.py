"""The regularization path of the log-bilinear model, every point solved to optimality (docs/ufm.md#training, U-1).

For a decreasing grid of λ, (W_λ, H_λ) = argmin CE(W H^T) + (λ/2)(||W||² + ||H||²), batched over seeds: the first
point starts from each seed's small random initialisation, every later one from the previous solution (warm start).
Each point is solved by a trust-region Newton method with Steihaug's truncated conjugate gradients on exact
Hessian-vector products (closed form, two products through the (V, m) logits; no dense Hessian), batched over seeds
with per-seed radii. Negative curvature (the saddle at the origin) is followed to the trust-region boundary, so the
method leaves it. A seed that reaches a stationary point which is not a global minimum (||∇CE||_op > λ: a rank-deficient
saddle of the factorization) is pushed out along the top singular pair (u, v) of -∇CE, W += ε u a^T, H += ε v a^T with
a unit a orthogonal to the rows of W and H (it exists while d > rank), which decreases f by about ε²(||∇CE||_op - λ)
(the escape of Burer-Monteiro factorizations), and Newton resumes.

Each point is certified by its first-order conditions, ``grad_rel`` = ||∇f|| / (λ ||(W, H)||) <= ``tol``, and by the
global certificate of :func:`~ntpbias.geometry.ufm.logits.optimality_certificate`: ||∇CE||_op <= λ (up to ``tol``) and
the duality gap of the convex problem min CE(L) + λ||L||_*, which the factored problem equals when d >= rank(L) (the
variational form of the nuclear norm).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from .._repr import short_repr
from ..config import argument
from ..data.ntp import NTPData, as_ntp_data
from ..errors import ArgumentTypeError, DataError, describe_value
from ..geometry.linear.loss import logit_cross_entropy_grad
from ..geometry.ufm.logits import optimality_certificate, ufm_logits
from .ufm import init_embeddings

#: the largest initial scale: the objective squares the parameters, which must stay far below float64's range
MAX_INIT_SCALE = 1e100
#: relative gradient norm a path point must reach
PATH_TOL = 1e-8
#: a stationary point with ||∇CE||_op > λ (1 + ESCAPE_TOL) is a saddle to escape
ESCAPE_TOL = 1e-6


@short_repr
@dataclass(frozen=True, eq=False)
class UFMPathPoint:
    """(W_λ, H_λ) for every seed with its certificate (each entry of ``certificate`` is (B,))."""

    lam: float
    W: torch.Tensor
    H: torch.Tensor
    certificate: dict[str, torch.Tensor]
    newton_steps: int
    cg_steps: int
    seconds: float
    tol: float = PATH_TOL
    notes: list[str] = field(default_factory=list)
    escapes: int = 0

    def _summary(self) -> dict:
        """What ``repr`` shows: λ, the seeds, the shapes, the certificate's verdict and the work."""
        return {"lam": self.lam, "seeds": self.W.shape[0], "W": tuple(self.W.shape[1:]), "H": tuple(self.H.shape[1:]),
                "certified": self.certified, "newton_steps": self.newton_steps, "seconds": self.seconds}

    @property
    def L(self) -> torch.Tensor:
        return ufm_logits(self.W, self.H)

    @property
    def certified(self) -> bool:
        """First-order conditions to ``tol`` and global optimality (||∇CE||_op <= λ(1 + 1e-6)) on every seed."""
        c = self.certificate
        return bool((c["grad_rel"] <= self.tol).all() and (c["op_ratio"] <= 1 + 1e-6).all())


def _split(X: torch.Tensor, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    return X[..., :V, :], X[..., V:, :]


def _objective(X: torch.Tensor, data: NTPData, lam: float):
    """f, the gradient (B, V + m, d) of the stacked parameters X = [W; H], the CE gradient G and the softmax."""
    W, H = _split(X, data.V)
    L = ufm_logits(W, H)
    ce, G = logit_cross_entropy_grad(L, data)
    f = ce + 0.5 * lam * X.pow(2).sum((-2, -1))
    return f, torch.cat([G @ H, G.mT @ W], dim=-2) + lam * X, G, torch.softmax(L, dim=-2)


def _hvp(X, G, probs, dX, data: NTPData, lam: float, pi: torch.Tensor):
    """∇²f(X)[dX] with dL = dW H^T + W dH^T and ∇²CE[dL] = π̂_j (s_j ⊙ dL_j - s_j <s_j, dL_j>) per column."""
    V = data.V
    W, H = _split(X, V)
    dW, dH = _split(dX, V)
    dL = dW @ H.mT + W @ dH.mT
    sdl = probs * dL
    Gp = (sdl - probs * sdl.sum(-2, keepdim=True)) * pi
    return torch.cat([Gp @ H + G @ dH, Gp.mT @ W + G.mT @ dW], dim=-2) + lam * dX


def _dot(a, b):
    return (a * b).sum((-2, -1))


def _steihaug(g, hvp, radius, cg_tol, max_cg):
    """Batched truncated CG for min <g, z> + <z, ∇²f z>/2 s.t. ||z|| <= radius (per seed). Returns (z, CG steps)."""
    z = torch.zeros_like(g)
    r, p = g, -g
    rr = _dot(r, r)
    active = torch.ones_like(rr, dtype=torch.bool)
    steps = 0
    while steps < max_cg:
        steps += 1
        Hp = hvp(p)
        pHp = _dot(p, Hp)
        alpha = (rr / torch.where(pHp > 0, pHp, torch.ones_like(pHp)))[:, None, None]
        z_new = z + alpha * p
        hit = active & ((pHp <= 0) | (_dot(z_new, z_new) >= radius ** 2))
        keep = (active & ~hit)[:, None, None]
        if bool(hit.any()):  # go to the boundary along p: ||z + τ p|| = radius, τ >= 0
            zp, pp, zz = _dot(z, p), _dot(p, p), _dot(z, z)
            tau = (-zp + (zp ** 2 + pp * (radius ** 2 - zz)).clamp_min(0).sqrt()) / pp.clamp_min(1e-300)
            z = torch.where(hit[:, None, None], z + tau[:, None, None] * p, z)
        z = torch.where(keep, z_new, z)
        r = torch.where(keep, r + alpha * Hp, r)
        rr_new = _dot(r, r)
        active = keep[:, 0, 0] & (rr_new > cg_tol ** 2)
        if not bool(active.any()):
            break
        p = torch.where(active[:, None, None], -r + (rr_new / rr.clamp_min(1e-300))[:, None, None] * p, p)
        rr = rr_new
    return z, steps


def _rank_deficient(X: torch.Tensor) -> torch.Tensor:
    """(B,) whether the rows of X = [W; H] leave a direction of R^d free (the escape needs one)."""
    if X.shape[-1] > X.shape[-2]:
        return torch.ones(X.shape[0], dtype=torch.bool, device=X.device)
    sv = torch.linalg.svdvals(X)
    return sv[..., -1] <= 1e-8 * sv[..., 0].clamp_min(1e-300)


def _escape(X, G, which, lam):
    """Move the seeds ``which`` off a saddle along the top singular pair of -G (module docstring)."""
    U, s, Vh = torch.linalg.svd(-G, full_matrices=False)
    _, _, Vr = torch.linalg.svd(X, full_matrices=True)
    a = Vr[..., -1, :]  # (B, d): orthogonal to every row of W and H when d > rank([W; H])
    dir_ = torch.cat([U[..., :, 0], Vh[..., 0, :]], dim=-1)  # (B, V + m)
    eps = 0.1 * ((s[..., 0] - lam).clamp_min(0) / (s[..., 0] + lam)).sqrt() * (X.pow(2).sum((-2, -1)).sqrt() + 1)
    eps = torch.where(which, eps, torch.zeros_like(eps))[:, None, None]
    return X + eps * dir_[..., :, None] * a[..., None, :]


def solve_point(X: torch.Tensor, data: NTPData, lam: float, *, tol: float = PATH_TOL,
                radius: torch.Tensor | None = None, max_newton: int = 300,
                max_cg: int = 5000) -> tuple[torch.Tensor, dict]:
    """Minimize f(W, H) = CE(W H^T) + (λ/2)(||W||² + ||H||²) from the stacked X = [W; H] (B, V + m, d) by batched
    trust-region Newton-CG until every seed's ``grad_rel`` <= tol (module docstring).

    Returns (X, {"newton": steps, "cg": CG steps, "escapes": saddle escapes, "radius": (B,) final radii}).
    """
    pi = data.pi.to(X)
    if radius is None:
        radius = X.pow(2).sum((-2, -1)).sqrt().clamp_min(1.0)
    f, g, G, probs = _objective(X, data, lam)
    stats = {"newton": 0, "cg": 0, "escapes": 0}
    for _ in range(max_newton):
        gn, pn = _dot(g, g).sqrt(), _dot(X, X).sqrt()
        done = gn <= tol * lam * pn
        if bool(done.any()):
            saddle = done & (torch.linalg.matrix_norm(G, ord=2) > lam * (1 + ESCAPE_TOL))
            if bool(saddle.any()):
                saddle &= _rank_deficient(X)  # with d <= rank the factorization cannot reach the convex optimum
            if bool(saddle.any()):
                X = _escape(X, G, saddle, lam)
                f, g, G, probs = _objective(X, data, lam)
                stats["escapes"] += 1
                continue
            if bool(done.all()):
                break
        stats["newton"] += 1
        forcing = torch.minimum(torch.full_like(gn, 0.1), (gn / (lam * pn)).sqrt()) * gn

        def hvp(dX, X=X, G=G, probs=probs):
            return _hvp(X, G, probs, dX, data, lam, pi)

        z, k = _steihaug(g, hvp, radius, forcing, max_cg)
        stats["cg"] += k
        z = torch.where(done[:, None, None], 0.0, z)
        predicted = -(_dot(g, z) + 0.5 * _dot(z, hvp(z)))
        f_new, g_new, G_new, probs_new = _objective(X + z, data, lam)
        actual = f - f_new
        rho = actual / predicted.clamp_min(1e-300)
        # at round-off level (the predicted decrease below 1e-14 |f|) f cannot rank the points: the gradient norm does
        tiny = predicted <= 1e-14 * f.abs()
        smaller = _dot(g_new, g_new) < _dot(g, g)
        rho = torch.where(tiny, torch.where(smaller, 1.0, 0.0).to(rho), rho)
        accept = (~done) & (((rho > 1e-4) & (actual >= 0)) | (tiny & smaller))
        step = _dot(z, z).sqrt()
        radius = torch.where(rho < 0.25, 0.25 * step.clamp_min(1e-12),
                             torch.where((rho > 0.75) & (step >= 0.99 * radius), 2 * radius, radius))
        a = accept[:, None, None]
        X, g = torch.where(a, X + z, X), torch.where(a, g_new, g)
        G, probs = torch.where(a, G_new, G), torch.where(a, probs_new, probs)
        f = torch.where(accept, f_new, f)
    stats["radius"] = radius
    return X, stats


def regularization_path(data: NTPData, lambdas, *, seeds: list[int], d: int, init_scale: float = 1e-2,
                        tol: float = PATH_TOL, progress=None) -> list[UFMPathPoint]:
    """The regularization path of the log-bilinear model: (W_λ, H_λ) for each λ, batched over seeds (docs/ufm.md).

    Each point minimizes CE(W H^T) + (λ/2)(||W||² + ||H||²) by batched trust-region Newton-CG and is certified as a
    *global* optimum (relative gradient, ||∇CE||_op <= λ, the convex problem's duality gap). Warm starts: the first
    point from each seed's small random initialisation, the second from the first, every later one from the linear
    extrapolation in log λ of the two before it.

    Parameters
    ----------
    data : NTPData
        The dataset (its ``H`` is ignored: every context gets a trained embedding).
    lambdas : iterable of float
        The regularization strengths, solved from the largest down.
    seeds : list of int
        One initialisation per seed, solved as one batch.
    d : int
        Embedding dimension of W (V x d) and H (m x d).
    init_scale : float
        Scale of the random initialisation.
    tol : float
        Tolerance of the certificate.
    progress : callable, optional
        Receives a description of each point.

    Returns
    -------
    list of UFMPathPoint
        One point per λ (decreasing): ``W`` (B, V, d), ``H`` (B, m, d), ``certificate`` (each entry one value per
        seed), ``certified``.

    Examples
    --------
    >>> from ntpbias.data.planted import planted_supports
    >>> data = planted_supports(V=6, sizes=(2, 3), contexts=2, seed=0)
    >>> path = ufm_regularization_path(data, [1e-1, 1e-2], seeds=[0], d=4)
    >>> [p.lam for p in path], all(p.certified for p in path)
    ([0.1, 0.01], True)
    """
    where = "ufm_regularization_path"
    data = as_ntp_data(data, where)
    lambdas = argument(where, "lambdas", lambdas, tuple[float, ...], gt=0)
    seeds = list(argument(where, "seeds", seeds, tuple[int, ...], ge=0))
    if len(set(lambdas)) != len(lambdas) or not seeds:
        raise DataError(f"{where}: needs distinct lambdas (got {describe_value(lambdas)}) and at least one seed "
                        f"(got {describe_value(seeds)})")
    d = argument(where, "d", d, int, ge=1)
    init_scale = argument(where, "init_scale", init_scale, float, gt=0, le=MAX_INIT_SCALE)
    tol = argument(where, "tol", tol, float, gt=0)
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(f"{where}: progress = {describe_value(progress)}: expected a function of one message")
    params = init_embeddings(data, seeds, d, init_scale)
    X = torch.cat([params["W"], params["H"]], dim=-2)
    points: list[UFMPathPoint] = []
    for lam in sorted((float(x) for x in lambdas), reverse=True):
        if progress is not None:
            progress(f"λ = {lam:.3g}")
        t0 = time.perf_counter()
        start = X
        if len(points) >= 2:
            X1 = torch.cat([points[-1].W, points[-1].H], dim=-2)
            X0 = torch.cat([points[-2].W, points[-2].H], dim=-2)
            step = math.log(points[-1].lam / lam) / math.log(points[-2].lam / points[-1].lam)
            start = X1 + step * (X1 - X0)
            if not bool(torch.isfinite(start).all()) or float(_objective(start, data, lam)[0].max()) > float(
                    _objective(X1, data, lam)[0].max()):
                start = X1
        X, stats = solve_point(start, data, lam, tol=tol)  # a fresh trust region: faster than the last one's
        W, H = _split(X, data.V)
        cert = optimality_certificate(W, H, data, lam)
        notes = []
        if not bool((cert["grad_rel"] <= tol).all()):
            notes.append(f"λ = {lam:.3g}: the Newton iterations stopped at grad_rel {float(cert['grad_rel'].max()):.2e}"
                         f" > {tol:g}")
        points.append(UFMPathPoint(lam, W, H, cert, stats["newton"], stats["cg"], time.perf_counter() - t0, tol,
                                   notes, stats["escapes"]))
    return points


def lambda_grid(data: NTPData, n: int = 8, decades: float = 4.0) -> list[float]:
    """n values of λ from λ_0/√10 down to λ_0 10^(-decades), log-spaced, with λ_0 = ||∇CE(0)||_op: above λ_0 the
    origin is the global minimum (L = 0), so the path starts below it."""
    _, G0 = logit_cross_entropy_grad(torch.zeros(data.V, data.m, dtype=data.P.dtype), data)
    lam0 = float(torch.linalg.matrix_norm(G0, ord=2))
    exps = [-0.5 - (decades - 0.5) * i / max(n - 1, 1) for i in range(n)]
    return [lam0 * math.pow(10.0, e) for e in exps]


#: the name the package exports (``ntpbias.ufm_regularization_path``)
ufm_regularization_path = regularization_path
