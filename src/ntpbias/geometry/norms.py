"""The matrix norms of the max-margin programs and of steepest descent, and their duals (docs/optimizers.md#norms).

For W (V x d), with singular values σ_1 >= σ_2 >= ...:

========== ============================== ===========
norm       ||W||                          dual norm
========== ============================== ===========
l2         sqrt(Σ W_vc²) (Frobenius)      l2
linf       max |W_vc| (entrywise max)     l1
l1         Σ |W_vc| (entrywise sum)       linf
spectral   σ_1                            nuclear
nuclear    Σ σ_i                          spectral
========== ============================== ===========

The dual norm is ||G||_* = max{<G, D> : ||D|| <= 1}; Hölder's inequality <G, W> <= ||G||_* ||W|| is tight for
every G, which is what the certificates of :mod:`ntpbias.geometry.margins.norm_svm` and the steepest-descent directions
of :mod:`ntpbias.training.steepest` rely on.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ..errors import ArgumentTypeError, ConfigError, describe_value

#: The norms, in the order of reports and of ``ntpbias analyze --norms``.
NORMS = ("l2", "linf", "l1", "spectral", "nuclear")
#: norm -> its dual norm.
DUAL = {"l2": "l2", "linf": "l1", "l1": "linf", "spectral": "nuclear", "nuclear": "spectral"}
#: One-line descriptions (reports, ``--help``).
DESCRIPTIONS = {"l2": "Frobenius norm", "linf": "largest absolute entry", "l1": "sum of absolute entries",
                "spectral": "largest singular value", "nuclear": "sum of singular values"}


def check_norm(norm: str) -> str:
    """``norm`` if it is one of :data:`NORMS`, else a :class:`~ntpbias.errors.ConfigError` naming the valid ones."""
    if norm not in NORMS:
        raise ConfigError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")
    return norm


def parse_norms(norms: str | Iterable[str], where: str = "--norms") -> tuple[str, ...]:
    """Norms from one name (``"linf"``), a comma-separated list (``"l2,linf"``) or a list of names, validated,
    duplicates removed, order kept; ``where`` (the option or argument) prefixes an error.

    >>> parse_norms("linf, l2,linf"), parse_norms("l1"), parse_norms(["spectral", "l2"])
    (('linf', 'l2'), ('l1',), ('spectral', 'l2'))
    """
    if isinstance(norms, str):
        names = [s.strip() for s in norms.split(",") if s.strip()]
        if not names:
            raise ConfigError(f"{where}: give one or more of {', '.join(NORMS)}, separated by commas")
    elif isinstance(norms, Iterable) and not isinstance(norms, (bytes, dict)):
        names = list(norms)
        if not all(isinstance(n, str) for n in names):
            raise ArgumentTypeError(f"{where} = {describe_value(norms)}: expected norm names ({', '.join(NORMS)})")
    else:
        raise ArgumentTypeError(f"{where} = {describe_value(norms)}: expected a norm name, a comma-separated list of "
                                f"them, or a list of names ({', '.join(NORMS)})")
    bad = [n for n in names if n not in NORMS]
    if bad:
        raise ConfigError(f"{where}: unknown norm {bad[0]!r}; choose from {', '.join(NORMS)} (comma-separated)")
    return tuple(dict.fromkeys(names))


def matrix_norm(W: torch.Tensor, norm: str) -> torch.Tensor:
    """||W|| in ``norm`` for W (..., V, d); returns (...,).

    >>> W = torch.tensor([[3.0, 0.0], [0.0, -4.0]], dtype=torch.float64)
    >>> [round(float(matrix_norm(W, n)), 6) for n in NORMS]
    [5.0, 4.0, 7.0, 4.0, 7.0]
    """
    if norm == "l2":
        return torch.linalg.vector_norm(W, dim=(-2, -1))
    if norm == "linf":
        return W.abs().amax(dim=(-2, -1))
    if norm == "l1":
        return W.abs().sum(dim=(-2, -1))
    if norm == "spectral":
        return torch.linalg.matrix_norm(W, ord=2)
    if norm == "nuclear":
        return torch.linalg.matrix_norm(W, ord="nuc")
    raise ConfigError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")


def dual_norm(G: torch.Tensor, norm: str) -> torch.Tensor:
    """||G||_* = max{<G, D> : ||D|| <= 1} for the dual of ``norm``, (...,)."""
    return matrix_norm(G, DUAL[check_norm(norm)])
