"""Packages whose public names are imported on first use (PEP 562), so that importing a package imports none of its
heavy modules: ``import ntpbias`` and the command line's ``--help`` stay fast."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, whose public names live in other modules:
    ``exports`` maps each name to its module (absolute, or relative to ``package`` as ``".config"``).

    >>> getattr_, dir_ = lazy_exports("ntpbias", {"dedent": "textwrap"})
    >>> getattr_("dedent")("  a")
    'a'
    >>> dir_()
    ['dedent']
    """

    def __getattr__(name: str):
        if name in exports:
            return getattr(import_module(exports[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
