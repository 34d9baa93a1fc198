"""Configs: frozen dataclasses with documented, range-checked fields, loaded from TOML, overridden by ``--set``.

A config class derives from :class:`Config` and declares each field with :func:`setting` (default, one-line doc,
allowed range or choices). Every value is checked when the config is built, from TOML, ``--set`` or Python, before
any work starts: its type (bool, int, float, str, tuples of those, nested configs), its range, finiteness (NaN and
infinities are refused), and then the rules between fields (:meth:`Config.check`). An error names the key, the value
given and what is allowed. An unknown key is an error naming the valid ones (as in nanoGPT's configurator), and a
key that moved names its new place. ``to_toml`` writes the fully resolved config, so re-running it reproduces the run.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Opt(Config):
...     lr: float = setting(0.5, "step size", gt=0)
>>> Opt(lr=0.1)
Opt(lr=0.1)
>>> Opt(lr=-1.0)
Traceback (most recent call last):
...
ntpbias.config.FieldError: lr = -1.0: must be > 0 (float > 0)
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import tomllib
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import tomli_w

from .errors import ArgumentTypeError, ConfigError, describe_value

C = TypeVar("C")

#: every integer setting fits a signed 64-bit integer (torch and numpy seeds, sizes)
INT64_MAX = 2**63 - 1


class FieldError(ConfigError):
    """A config value outside its type or range; ``key`` is the field's dotted name (prefixed by nested loaders)."""

    def __init__(self, key: str, detail: str):
        self.key, self.detail = key, detail
        super().__init__(f"{key} {detail}")

    def under(self, prefix: str) -> FieldError:
        return type(self)(prefix + self.key, self.detail)


class FieldTypeError(FieldError, ArgumentTypeError):
    """A config value or API argument of the wrong type (a list where a number belongs, ...): also a ``TypeError``."""


def argument(where: str, name: str, value: Any, typ: Any, **limits) -> Any:
    """An argument of a public function checked like a config value: its type (``int``, ``float``, ``str``,
    ``bool``, ``tuple[int, ...]``, ...) and the limits of :func:`setting` (``ge``, ``gt``, ``le``, ``lt``,
    ``choices``, ``pattern``, ``finite``); returns it converted (an int where a float belongs becomes a float, a list
    a tuple; a numpy array, tensor or range where a list belongs is taken as a list). A value of the wrong type is a
    :class:`FieldTypeError` (a ``TypeError``), one out of range a :class:`FieldError` (a ``ValueError``); both name
    ``where`` (the function) and the argument.

    >>> argument("random_ntp", "m", 3, int, ge=1)
    3
    >>> argument("random_ntp", "m", "3", int, ge=1)
    Traceback (most recent call last):
    ...
    ntpbias.config.FieldTypeError: random_ntp: m = '3': expected an integer (int >= 1)
    """
    if typing.get_origin(typ) is tuple and (isinstance(value, range) or callable(getattr(value, "tolist", None))):
        value = list(value) if isinstance(value, range) else value.tolist()
    try:
        return _validated(value, typ, setting(None, **limits), name)
    except FieldError as exc:
        raise exc.under(f"{where}: ") from None


def unknown_keyword(where: str, name: str, valid: Iterable[str]) -> ArgumentTypeError:
    """The error for an unknown keyword argument: it names the valid keywords and the closest one.

    >>> str(unknown_keyword("from_text()", "maxvocab", ["max_vocab", "max_tokens"]))
    "from_text(): unknown keyword argument 'maxvocab' (did you mean max_vocab?); valid keywords: max_vocab, max_tokens"
    """
    import difflib

    valid = list(valid)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ArgumentTypeError(f"{where}: unknown keyword argument {name!r}{hint}; valid keywords: {', '.join(valid)}")


def checked_call(fn: Callable, name: str = "") -> Callable:
    """``fn`` whose calls are checked against its signature first: an unknown keyword, a missing or an extra argument
    is an :class:`~ntpbias.errors.ArgumentTypeError` (a ``TypeError``) naming the valid keywords, not Python's bare
    ``TypeError`` (the Python API's boundary, ``import ntpbias as nb``); ``name``: the name it is called by (default
    its own)."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    name = name or fn.__name__
    names = [p for p, par in sig.parameters.items() if par.kind not in (par.VAR_POSITIONAL, par.VAR_KEYWORD)]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            unknown = [k for k in kwargs if k not in sig.parameters]
            if unknown and not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
                raise unknown_keyword(f"{name}()", unknown[0], names) from None
            raise ArgumentTypeError(f"{name}(): {exc}; its arguments: {', '.join(names)}") from None
        return fn(*args, **kwargs)

    return call


def setting(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = None, ge: float | None = None,
            gt: float | None = None, le: float | None = None, lt: float | None = None,
            choices: tuple | dict | None = None, pattern: str | None = None, finite: bool = True,
            admits: str | None = None):
    """A config field with its one-line documentation and its allowed values (checked by :class:`Config`).

    ``ge``/``gt``/``le``/``lt`` bound numbers (and every element of a tuple of numbers); ``choices`` lists the allowed
    strings; ``pattern`` is a regular expression a string must match in full (``admits`` says it in words);
    ``finite=False`` admits infinities.
    """
    meta = {"doc": doc, "ge": ge, "gt": gt, "le": le, "lt": lt, "admits": admits,
            "choices": tuple(choices) if choices is not None else None, "pattern": pattern, "finite": finite}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def allowed(f: dataclasses.Field, typ: Any) -> str:
    """What a field admits, in words (for errors, ``--help`` and the docs): e.g. ``int >= 1``, ``one of gd, adam``."""
    m = f.metadata
    if m.get("admits"):
        return m["admits"]
    if m.get("choices"):
        return "one of " + ", ".join(map(str, m["choices"]))
    if m.get("pattern"):
        return f"a string matching {m['pattern']}"
    name = _type_name(typ)
    ops = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
    bounds = [f"{op} {_number(m[k])}" for k, op in ops if m.get(k) is not None]
    return " ".join([name, ", ".join(bounds)]).strip()


def _toml_value(value: Any) -> str:
    return tomli_w.dumps({"v": value})[4:].strip()


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def describe(config, *, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Every setting of a config class (or instance: its values are shown as the defaults), nested tables flattened:
    ``(dotted key, what it admits, default, doc)``.

    The source of ``ntpbias settings`` and of docs/settings.md.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Opt(Config):
    ...     lr: float = setting(0.5, "step size", gt=0)
    >>> describe(Opt)
    [('lr', 'float > 0', '0.5', 'step size')]
    """
    cls = config if isinstance(config, type) else type(config)
    types = _field_types(cls)
    defaults = cls() if isinstance(config, type) else config
    rows = []
    for f in dataclasses.fields(cls):
        typ, value = types[f.name], getattr(defaults, f.name)
        if dataclasses.is_dataclass(typ):
            rows += describe(value, prefix=f"{prefix}{f.name}.")
            continue
        shown = ("[" + ", ".join(_toml_value(v) for v in value) + "]" if isinstance(value, tuple)
                 else _toml_value(value))
        rows.append((prefix + f.name, allowed(f, typ), shown, f.metadata.get("doc", "")))
    return rows


def _type_name(typ: Any) -> str:
    if dataclasses.is_dataclass(typ):
        return "table"
    if typing.get_origin(typ) is tuple:
        args = typing.get_args(typ)
        return f"list of {_type_name(args[0]) if args else 'values'}"
    return {bool: "true/false", int: "int", float: "float", str: "string"}.get(typ, str(typ))


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of every config dataclass: each field is checked against its type and :func:`setting` range when the
    config is built, then :meth:`check` verifies the rules between fields.

    ``moved`` maps keys of configs written by earlier versions to their new place (an old key is then an error that
    names the new key).
    """

    moved: ClassVar[dict[str, str]] = {}

    def __post_init__(self):
        types = _field_types(type(self))
        for f in dataclasses.fields(self):
            value = _validated(getattr(self, f.name), types[f.name], f, f.name)
            object.__setattr__(self, f.name, value)
        try:
            self.check()
        except FieldError:
            raise
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def check(self) -> None:
        """Rules between fields (override; raise ValueError with a message naming the keys)."""

    def input_files(self) -> dict[str, str]:
        """The files this table's settings name (setting -> path), checked before any work; raise a ConfigError when
        the settings need a file that is not given (override)."""
        return {}


def input_files(cfg, prefix: str = "") -> dict[str, str]:
    """Every file a (nested) config names, by dotted key (:meth:`Config.input_files` of each table)."""
    out = {prefix + k: v for k, v in (cfg.input_files() if isinstance(cfg, Config) else {}).items()}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(input_files(value, f"{prefix}{f.name}."))
    return out


def _validated(value: Any, typ: Any, f: dataclasses.Field, key: str) -> Any:
    """``value`` checked against ``typ`` and the field's range (ints widen to float, lists to tuples)."""
    m = f.metadata
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, typ):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected a table of settings ({typ.__name__})")
        return value
    origin = typing.get_origin(typ)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected a list ({allowed(f, typ)})")
        args = typing.get_args(typ)
        item_types = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(item_types) != len(value):
            raise FieldError(key, f"= {list(value)!r}: expected {len(item_types)} values")
        return tuple(_validated(v, t, f, key) for v, t in zip(value, item_types, strict=True))
    if typ is bool:
        if not isinstance(value, bool):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected true or false")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected an integer ({allowed(f, typ)})")
        value = int(value)
        if abs(value) > INT64_MAX:
            raise FieldError(key, f"= {value!r}: must fit a 64-bit integer (|value| <= 2^63 - 1)")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected a number ({allowed(f, typ)})")
        try:
            value = float(value)
        except OverflowError:
            value = math.copysign(math.inf, value)
        if math.isnan(value) or (m.get("finite", True) and math.isinf(value)):
            raise FieldError(key, f"= {value!r}: must be a finite number ({allowed(f, typ)})")
    elif typ is str:
        if not isinstance(value, str):
            raise FieldTypeError(key, f"= {describe_value(value)}: expected a string ({allowed(f, typ)})")
        if m.get("choices") and value not in m["choices"]:
            raise FieldError(key, f"= {value!r}: unknown value; choose one of {', '.join(map(str, m['choices']))}")
        if m.get("pattern") and not re.fullmatch(m["pattern"], value):
            raise FieldError(key, f"= {value!r}: expected {allowed(f, typ)}")
        return value
    else:
        return value
    for k, op, ok in (("ge", ">=", lambda b: value >= b), ("gt", ">", lambda b: value > b),
                      ("le", "<=", lambda b: value <= b), ("lt", "<", lambda b: value < b)):
        if m.get(k) is not None and not ok(m[k]):
            raise FieldError(key, f"= {value!r}: must be {op} {_number(m[k])} ({allowed(f, typ)})")
    return value


def _field_types(cls) -> dict[str, Any]:
    """Field name -> annotated type (falling back to the default value's type when a hint cannot be resolved)."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:
        defaults = cls()
        hints = {f.name: type(getattr(defaults, f.name)) for f in dataclasses.fields(cls)}
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, typ: Any, where: str, *, text: bool = False) -> Any:
    """Check/convert ``value`` to ``typ``; raise ConfigError on mismatch. ``text``: the value was typed as text
    (``--set``), so numbers, booleans and lists are parsed from strings; a TOML file's values carry their type, and a
    string where a number belongs is refused there."""
    origin = typing.get_origin(typ)
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table of settings, got {value!r}")
        return from_dict(typ, value, prefix=where + ".", text=text)
    if isinstance(value, str) and not text and typ is not str:
        expected = {int: "an integer", float: "a number", bool: "true or false"}.get(typ, "a list")
        raise ConfigError(f"{where}: expected {expected}, got the string {value!r} (write it without quotes)")
    if origin is tuple:
        args = typing.get_args(typ)
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item = args[0] if args else str
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, item, where, text=text) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_coerce(v, t, where, text=text) for v, t in zip(value, args, strict=True))
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
                return int(value.strip().replace("_", ""))
            except ValueError:
                pass
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
            if isinstance(value, float) or abs(value) < 2**1023:
                return float(value)  # NaN and infinities are refused later, by name
            return math.copysign(math.inf, value)  # an int beyond float64
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


def from_dict(cls: type[C], values: dict, *, prefix: str = "", base: C | None = None, text: bool = False) -> C:
    """Build ``cls`` from a (nested) dict on top of ``base`` (default: the class defaults); ``text``: the values are
    strings typed by a user (``--set``) to parse, rather than typed values (TOML, Python)."""
    types = _field_types(cls)
    moved = getattr(cls, "moved", {})
    # an old key, or an old plain value where a table now stands (``model = "one_layer"`` became ``[model]``)
    stale = sorted(k for k in values if k in moved and (k not in types or (dataclasses.is_dataclass(types[k])
                                                                          and not isinstance(values[k], dict))))
    if stale:
        raise ConfigError(f"setting {prefix}{stale[0]} has moved to {prefix}{moved[stale[0]]} (a config written by an "
                          "earlier ntpbias); rename the key")
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
            changes[key] = from_dict(typ, value, prefix=f"{prefix}{key}.", base=getattr(base, key), text=text)
        else:
            changes[key] = _coerce(value, typ, prefix + key, text=text)
    try:
        return dataclasses.replace(base, **changes)
    except FieldError as exc:
        raise exc.under(prefix) from None
    except (ValueError, TypeError) as exc:  # rules between fields (Config.check)
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
    return from_dict(type(cfg), nested, base=cfg, text=True)


def read_toml(path: str | Path, what: str = "config file") -> dict:
    """The table of a user's TOML file; a missing path, a directory or FIFO, text that is not UTF-8, or invalid TOML
    is a one-line error naming the file."""
    from .io import read_input_text

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such {what}")
    try:
        return tomllib.loads(read_input_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def load_toml(cls: type[C], path: str | Path, *, base: C | None = None) -> C:
    """Read a TOML config file into ``cls`` (unknown keys and type mismatches are errors)."""
    path = Path(path)
    values = read_toml(path)
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
