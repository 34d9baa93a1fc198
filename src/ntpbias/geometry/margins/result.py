"""One result type and one certificate type for every max-margin program.

Every max-margin program of the project minimizes a norm subject to logit-gap constraints with margin 1: the NTP-SVM
of paper A (Def. 3) in the l2 norm (:func:`~ntpbias.geometry.margins.program.ntp_svm`, a quadratic program) and in the
l1, linf, spectral and nuclear norms (:func:`~ntpbias.geometry.margins.norm_svm.norm_svm`, cone programs), the
max-margin programs of papers B and C (eq. (12) of paper B; eqs. (2) and (3) of paper C), and the nuclear-norm NTP-SVM
of the log-bilinear model in logit space (:func:`~ntpbias.geometry.ufm.logit_svm.nuclear_svm`). Each returns an
:class:`SVMResult` whose :class:`Certificate` is recomputed from the primal and dual solutions alone, never taken from
the solver's own report (docs/optimizers.md#the-max-margin-programs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import torch

from ..._repr import short_repr
from ..norms import matrix_norm
from ..scaling import in_user_units, stable_norm


@short_repr
@dataclass(frozen=True, kw_only=True)
class Certificate:
    """Optimality residuals of a max-margin program at its returned (primal, dual) pair; all zero at the optimum.

    Each residual is relative (dimensionless), so a certificate can neither pass nor fail because of the data's units
    (docs/errors-and-limits.md). A residual that a program does not have is None and is left out of
    :meth:`as_dict` and :attr:`worst`.

    Attributes
    ----------
    primal_violation : float
        How far the primal point is from feasible, relative to the margin 1. The weight-space programs:
        max(max_i (1 - A_in(W)_i)^+, max |A_eq(W)|). The logit-space program, whose returned L is projected onto its
        constraint set: ||L_solver - L|| / ||L||, how far the solver's L was from it.
    dual_violation : float
        How far the multipliers are from the sign and equality constraints of the dual, relative to their size. l2:
        max_i (-λ_i)^+ / max_i |λ_i|; the other norms: max_i (-λ_i)^+ / Σ|λ|; the logit-space program: the largest
        positive off-support entry and the largest column sum of the solver's Λ.
    duality_gap : float
        The primal objective minus the dual objective over the larger of the two. l2: |½||W||² - (Σλ - ½||A^T y||²)|
        over max(½||W||², |Σλ - ½||A^T y||²|); the other norms: | ||W|| - Σλ | / ||W||; the logit-space program:
        (||L||_* + Σ_out Λ) / ||L||_* (>= 0 by weak duality, up to round-off).
    complementary_slackness : float or None
        l2 only: max_i |λ_i (A_in(W)_i - 1)| / max_i |λ_i|.
    stationarity : float or None
        l2 only: ||W - A_in^T λ - A_eq^T μ|| / max(||W||, ||A_in^T λ + A_eq^T μ||).
    dual_norm_violation : float or None
        The programs of a norm other than l2: (||A_in^T λ + A_eq^T μ||_* - 1)^+ in the dual norm (the logit-space
        program: (||Λ_solver||_op - 1)^+).
    """

    primal_violation: float
    dual_violation: float
    complementary_slackness: float | None = None
    stationarity: float | None = None
    dual_norm_violation: float | None = None
    duality_gap: float

    def _summary(self) -> dict:
        """What ``repr`` shows: every residual the program has."""
        return self.as_dict()

    @property
    def worst(self) -> float:
        """The largest residual."""
        return max(self.as_dict().values())

    def as_dict(self) -> dict[str, float]:
        """The residuals the program has, by name (``analysis.json``'s ``kkt`` and ``certificate`` records)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@short_repr
@dataclass(frozen=True, eq=False, kw_only=True)
class SVMResult:
    """Solution of a max-margin program with its certificate.

    Attributes
    ----------
    W : Tensor or None
        The minimizer of a weight-space program (the shape of its variable: (V, d) for the NTP-SVM); None for the
        logit-space program.
    dual_ineq, dual_eq : Tensor or None
        The multipliers λ >= 0 (R_in,) of the inequalities and μ (R_eq,) of the equalities (weight-space programs).
    L, Lam : Tensor or None
        The logit-space program's minimizer L (V, m), made exactly feasible, and its dual Λ (V, m), made exactly dual
        feasible (||Λ||_op <= 1, columns summing to 0, <= 0 off the supports).
    certificate : :class:`Certificate`
        Recomputed from the primal and dual solutions.
    status : str
        "optimal" (certified to ``tol``), "inaccurate" (the residuals say by how much) or "degenerate" (the
        logit-space program without an off-support entry: L^mm = 0).
    solver : str
        The backend.
    solve_seconds : float
        Wall time of the solve (with the certificate; for the other norms also the uniqueness test).
    iterations : int or None
        The solver's iterations, if known.
    tol : float
        The certification tolerance.
    min_gap : float
        The smallest constrained logit gap of the minimizer, min_i A_in(W)_i (1 at the optimum; the maximum
        normalized margin is 1/:attr:`norm`).
    norm_name : str
        The norm minimized: "l2", "linf", "l1", "spectral" or "nuclear".
    dual_value : float or None
        The logit-space program's dual objective -Σ_out Λ (a lower bound on the optimum).
    singular_values : Tensor or None
        The logit-space program's singular values of L (descending).
    unique : bool or None
        The norms other than l2: True (certified unique), False (a second minimizer was found and checked) or None
        (undecided). ``uniqueness`` says how, ``W_second`` is the second minimizer when ``unique`` is False.
    details : dict
        Backend facts (dual: ``form``, ``precision``, ``lipschitz``, ``dual_seconds``; ``polish``; ipm:
        ``ipm_iterations``, ``factorizations``, ``polish``, ``polish_tries``, ``stopped``; the other norms:
        program kind, Clarabel's status, the uniqueness test; the logit-space program: its form and polishing).
    """

    W: torch.Tensor | None = None
    dual_ineq: torch.Tensor | None = None
    dual_eq: torch.Tensor | None = None
    L: torch.Tensor | None = None
    Lam: torch.Tensor | None = None
    certificate: Certificate
    status: str
    solver: str
    solve_seconds: float
    iterations: int | None
    tol: float
    min_gap: float
    norm_name: str = "l2"
    dual_value: float | None = None
    singular_values: torch.Tensor | None = None
    unique: bool | None = None
    uniqueness: str = ""
    W_second: torch.Tensor | None = None
    details: dict = field(default_factory=dict)

    def _summary(self) -> dict:
        """What ``repr`` shows: the program, the optimal value and margin, the status and the worst residual."""
        shape = tuple((self.W if self.W is not None else self.L).shape)
        out = {"norm_name": self.norm_name, "shape": shape, "norm": self.norm,
               "margin": 1 / self.norm if self.norm > 0 else float("inf"), "status": self.status,
               "certified": self.certified, "worst_residual": self.certificate.worst, "solver": self.solver}
        if self.unique is not None:
            out["unique"] = self.unique
        return out

    @property
    def norm(self) -> float:
        """The optimal value: ||W|| in ``norm_name`` (l2 computed without over- or underflow at any scale of W), or
        ||L||_* for the logit-space program."""
        if self.L is not None:
            return float(self.singular_values.sum())
        if self.norm_name == "l2":
            return stable_norm(self.W)
        return float(matrix_norm(self.W, self.norm_name))

    @property
    def certified(self) -> bool:
        """Every residual of the certificate is within ``tol`` (or the program is degenerate)."""
        return self.status in ("optimal", "degenerate")

    @property
    def n_active(self) -> int:
        """Number of inequality constraints with positive multiplier (support vectors)."""
        lam = self.dual_ineq
        return int((lam > 1e-9 * max(1.0, float(lam.max()) if lam.numel() else 0.0)).sum())

    @property
    def rank(self) -> int | None:
        """The numerical rank of the logit-space program's L (None for the weight-space programs)."""
        s = self.singular_values
        if s is None:
            return None
        return int((s > 1e-7 * s[0]).sum()) if s.numel() and s[0] > 0 else 0

    def in_user_units(self, scale: float) -> SVMResult:
        """The result of a program solved on embeddings divided by ``scale`` (:mod:`ntpbias.geometry.scaling`), in
        the original units: W / scale, and the multipliers / scale² in l2 (its optimal value ½||W||² = Σλ/2 scales
        like W²) or / scale in the other norms (Σλ = ||W^mm||); the gap and the relative certificate are the same."""
        if scale == 1.0:
            return self
        power = 2 if self.norm_name == "l2" else 1
        return replace(self, W=in_user_units(self.W, scale), dual_ineq=in_user_units(self.dual_ineq, scale, power, "λ"),
                       dual_eq=in_user_units(self.dual_eq, scale, power, "μ"),
                       W_second=in_user_units(self.W_second, scale), details=dict(self.details))
