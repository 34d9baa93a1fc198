"""Configs: frozen dataclasses with documented defaults, loaded from TOML, overridden by ``--set a.b=value``.

Overrides and TOML values are type-checked against the type of the field's default (bool, int, float, str,
tuples of those, nested config dataclasses); an unknown key is an error naming the valid ones, as in nanoGPT's
configurator. ``to_toml`` writes the fully resolved config, so re-running it reproduces the run.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from .errors import ConfigError

C = TypeVar("C")


def _field_types(cls) -> dict[str, Any]:
    """Field name -> annotated type (falling back to the default value's type when a hint cannot be resolved)."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:
        defaults = cls()
        hints = {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(cls)}
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, typ: Any, where: str) -> Any:
    """Check/convert ``value`` to ``typ`` (TOML or string input); raise ConfigError on mismatch."""
    origin = typing.get_origin(typ)
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table of settings, got {value!r}")
        return from_dict(typ, value, prefix=where + ".")
    if origin is tuple:
        args = typing.get_args(typ)
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else str
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, item, where) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_coerce(v, t, where) for v, t in zip(value, args, strict=True))
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if typ is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                f = float(value)
            except ValueError:
                raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
            if f.is_integer():
                return int(f)
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if typ is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported setting type {typ!r}")


def require_choice(name: str, value: str, choices) -> None:
    """Validation helper for config ``__post_init__``: ``value`` must be one of ``choices`` (ValueError otherwise).

    >>> require_choice("optimizer", "adam", ("gd", "adam"))
    >>> require_choice("optimizer", "sgdx", ("gd", "adam"))
    Traceback (most recent call last):
    ...
    ValueError: unknown optimizer 'sgdx'; choose one of gd, adam
    """
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(str, choices))}")


def from_dict(cls: type[C], values: dict, *, prefix: str = "", base: C | None = None) -> C:
    """Build ``cls`` from a (nested) dict on top of ``base`` (default: the class defaults)."""
    types = _field_types(cls)
    unknown = sorted(set(values) - set(types))
    if unknown:
        valid = ", ".join(prefix + k for k in types)
        raise ConfigError(f"unknown setting {prefix}{unknown[0]}; valid keys here: {valid}")
    base = base if base is not None else cls()
    changes = {}
    for key, value in values.items():
        typ = types[key]
        if dataclasses.is_dataclass(typ):
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix}{key}: expected a table of settings, got {value!r}")
            changes[key] = from_dict(typ, value, prefix=f"{prefix}{key}.", base=getattr(base, key))
        else:
            changes[key] = _coerce(value, typ, prefix + key)
    try:
        return dataclasses.replace(base, **changes)
    except (ValueError, TypeError) as exc:  # __post_init__ validation
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: {exc}") from None


def apply_overrides(cfg: C, overrides: list[str] | tuple[str, ...]) -> C:
    """Apply ``key.sub=value`` strings (``--set``), each type-checked against the default's type.

    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Opt:
    ...     lr: float = 0.5
    >>> @dataclass(frozen=True)
    ... class Run:
    ...     steps: int = 10
    ...     opt: Opt = field(default_factory=Opt)
    >>> apply_overrides(Run(), ["steps=1e3", "opt.lr=0.1"])
    Run(steps=1000, opt=Opt(lr=0.1))
    """
    nested: dict = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set optimizer.lr=0.1")
        node = nested
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {part} is not a table of settings")
        node[parts[-1]] = value.strip()
    return from_dict(type(cfg), nested, base=cfg)


def load_toml(cls: type[C], path: str | Path, *, base: C | None = None) -> C:
    """Read a TOML config file into ``cls`` (unknown keys and type mismatches are errors)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        return from_dict(cls, values, base=base)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def to_dict(cfg) -> dict:
    """Nested plain dict (tuples become lists) of a config dataclass."""
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def to_toml(cfg) -> str:
    """The fully resolved config as TOML text."""
    return tomli_w.dumps(to_dict(cfg))
