"""Sweep files: a base config, axes over any config key, what to collect, and the executor.

A sweep file (TOML)::

    [base]
    preset = "linear-fig4-gd"       # or: config = "runs/gd/config.toml" (relative to this file)
    scale = "quick"                 # the preset's scale (smoke | quick | paper); default quick
    [base.set]                      # fixed overrides, type-checked like --set
    train.steps = 2000

    [axes]                          # the grid is the Cartesian product of the axes
    seed = { range = [0, 100] }     # 0, 1, ..., 99
    data.m = [20, 30, 40, 50, 60]   # any config key, dotted
    "data.d,data.m" = [[60, 50], [120, 100]]   # keys joined by commas vary together (zipped)
    "seed,data.seed" = { range = [0, 10] }     # a single value goes to every zipped key
    optimizer.lr = { geomspace = [0.01, 1.0, 5] }   # also: linspace = [a, b, n], values = [...]

    [collect]
    metrics = ["loss_gap", "cos_mm"]   # names of summary.json "final" values, or "check:NAME" (default: all final)
    checks = true                      # columns checks_passed, checks_total

    [run]
    executor = "local"                 # inprocess | local | dask
    workers = 0                        # 0 = every core
    scheduler = ""                     # dask: tcp://host:8786 of an existing cluster

Axes are taken in the order of the parsed ``[axes]`` table (TOML groups dotted keys with a common prefix, e.g.
all ``optimizer.*`` keys, together); the last axis varies fastest. Every axis value goes through
:func:`ntpbias.config.from_dict` on the base config, exactly like ``--set``: an unknown key or a value of the
wrong type is a :class:`~ntpbias.errors.ConfigError` naming the axis, raised before any cell runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import INT64_MAX, _coerce, _field_types, apply_overrides, from_dict, read_toml, to_toml
from ..errors import ConfigError
from ..limits import check_memory
from ..parallel import ExecutorConfig

VALUE_SPECS = ("values", "range", "linspace", "geomspace")
#: a linspace/geomspace axis of up to this many points is computed at once by numpy; a longer one point by point
EAGER_POINTS = 100_000
#: memory of one built cell (its resolved config, name, directory and results row): the grid's preflight
CELL_BYTES = 20_000
TABLES = ("base", "axes", "collect", "run")
#: how each table of a sweep file looks (for errors)
TABLE_EXAMPLE = {"base": '[base] preset = "linear-fig4-gd"', "axes": "[axes] seed = {range = [0, 10]}",
                 "collect": '[collect] metrics = ["loss_gap"]', "run": '[run] executor = "local"'}


@dataclass(frozen=True)
class Axis:
    """One axis: config ``keys`` (one, or several zipped) and the value tuple of each point.

    ``points`` is a sequence (``len`` and indexing); ``range``, ``linspace`` and ``geomspace`` axes compute their
    points on demand, so an axis of 10^9 points takes no memory until its cells are built.
    """

    keys: tuple[str, ...]
    points: Sequence[tuple[Any, ...]]


class _Span(Sequence):
    """A lazy sequence of n numbers, ``value(i)`` computed on demand (a linspace or geomspace axis)."""

    def __init__(self, n: int, value: Callable[[int], Any]):
        self.n, self.value = n, value

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.value(i % self.n)


class _Points(Sequence):
    """The points of a computed axis: value i of ``values`` (a range or a span) for each of ``width`` zipped keys."""

    def __init__(self, values: Sequence, width: int):
        self.values, self.width = values, width

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return (self.values[i],) * self.width


@dataclass(frozen=True)
class Cell:
    """One point of the grid: its axis values, the resolved config, and where its run directory goes.

    Attributes
    ----------
    key : canonical name, ``"seed=3 data.m=20"`` (axis keys in file order); identifies the cell on resume
    values : ((config key, value), ...) of the axes
    config : the resolved config dataclass
    directory : the run directory, relative to the sweep's output (``cells/<slug>``)
    config_hash : hash of the resolved config's TOML (a finished cell is reused only for the same config)
    """

    key: str
    values: tuple[tuple[str, Any], ...]
    config: Any
    directory: str
    config_hash: str


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file (see the module docstring)."""

    base: Any
    base_label: str
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...] = ()
    checks: bool = True
    executor: ExecutorConfig = dataclasses.field(default_factory=ExecutorConfig)
    text: str = ""

    @property
    def axis_keys(self) -> tuple[str, ...]:
        return tuple(k for a in self.axes for k in a.keys)

    @property
    def size(self) -> int:
        """The number of cells, counted (never materialised): the product of the axes' lengths."""
        return math.prod(len(a.points) for a in self.axes)

    def iter_cells(self, indices: Iterable[int] | None = None) -> Iterator[Cell]:
        """The cells at ``indices`` of the grid (default: all), in grid order (the last axis varies fastest), each
        built and checked when reached."""
        seen: dict[str, str] = {}
        lengths = [len(a.points) for a in self.axes]
        for i in range(self.size) if indices is None else indices:
            combo, rest = [], i
            for n in reversed(lengths):
                rest, j = divmod(rest, n)
                combo.append(j)
            values = tuple((k, v) for axis, j in zip(self.axes, reversed(combo), strict=True)
                           for k, v in zip(axis.keys, axis.points[j], strict=True))
            key = " ".join(f"{k}={format_value(v)}" for k, v in values)
            try:
                cfg = from_dict(type(self.base), _nest(values), base=self.base)
            except ConfigError as exc:
                raise ConfigError(f"sweep cell {key or '(base)'}: {exc}") from None
            slug = _slug(key)
            if slug in seen:
                slug = f"{slug[:80]}-{_digest(key)[:8]}"
            seen[slug] = key
            yield Cell(key, values, cfg, f"cells/{slug}", config_hash(cfg))

    def cells(self) -> list[Cell]:
        """Every cell of the grid, in grid order (the last axis varies fastest), each config checked. The grid's
        memory is checked first (:data:`CELL_BYTES` per cell): ``--dry-run`` counts a larger grid instead."""
        check_memory({f"{self.size:,} sweep cells (configs, names, result rows)": self.size * CELL_BYTES},
                     "the sweep grid", hint="split the sweep into several files")
        return list(self.iter_cells())


def config_hash(cfg) -> str:
    """A short stable hash of a config's resolved TOML."""
    return _digest(to_toml(cfg))[:16]


def format_value(v: Any) -> str:
    """An axis or metric value as written in names and results.csv (floats round-trip exactly)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    return str(v)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _slug(key: str) -> str:
    if not key:
        return "base"
    slug = re.sub(r"[^A-Za-z0-9._=+-]", "-", key.replace(" ", "_"))
    if len(slug) > 100 or slug != key.replace(" ", "_"):
        slug = f"{slug[:80]}-{_digest(key)[:8]}"
    return slug


def _nest(values) -> dict:
    nested: dict = {}
    for key, value in values:
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


# ------------------------------------------------------------------------------------------------ parsing
def load_sweep(path: str | Path, *, overrides: tuple[str, ...] | list[str] = (),
               executor: dict | None = None) -> SweepSpec:
    """Read and check a sweep file.

    ``overrides`` (``--set key=value``) apply to the base config; ``executor`` (``kind``, ``workers``,
    ``scheduler``, ``connect_timeout``; None values ignored) overrides the file's ``[run]`` table.
    """
    path = Path(path)
    raw = read_toml(path, "sweep file")
    text = path.read_text(encoding="utf-8")
    try:
        return parse_sweep(raw, root=path.parent, text=text, overrides=overrides, executor=executor)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_sweep(raw: dict, *, root: Path = Path("."), text: str = "", overrides=(), executor: dict | None = None
                ) -> SweepSpec:
    """A :class:`SweepSpec` from a parsed sweep file (see :func:`load_sweep`)."""
    unknown = sorted(set(raw) - set(TABLES))
    if unknown:
        raise ConfigError(f"unknown table [{unknown[0]}]; a sweep file has [{'], ['.join(TABLES)}]")
    for name in TABLES:
        if not isinstance(raw.get(name, {}), dict):
            raise ConfigError(f"{name} = {raw[name]!r}: expected a table ([{name}] followed by its keys, e.g. "
                              f"{TABLE_EXAMPLE[name]})")
    base, label = _base(raw.get("base", {}), root)
    if overrides:
        base = apply_overrides(base, list(overrides))
        label += " with " + " ".join(overrides)
    axes = _axes(raw.get("axes", {}), base)
    collect = raw.get("collect", {})
    _only(collect, ("metrics", "checks"), "[collect]")
    metrics = collect.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise ConfigError("[collect] metrics: expected a list of names, e.g. metrics = [\"loss_gap\"]")
    finals = getattr(type(base), "final_values", ())
    unknown = [m for m in metrics if not m.startswith("check:") and m not in finals]
    if unknown:  # before any cell trains (check:NAME columns are checked against the first finished cell)
        raise ConfigError(f"[collect] metrics: {unknown[0]!r} is not a final value of {base.experiment} runs; "
                          f"available: {', '.join(finals) or '(none)'}, or check:NAME for a theory check")
    checks = collect.get("checks", True)
    if not isinstance(checks, bool):
        raise ConfigError(f"[collect] checks: expected true or false, got {checks!r}")
    run = dict(raw.get("run", {}))
    _only(run, ("executor", "workers", "scheduler", "connect_timeout"), "[run]")
    if "executor" in run:
        run["kind"] = run.pop("executor")
    given = {k: v for k, v in (executor or {}).items() if v is not None}
    if given.get("scheduler") and "kind" not in given:
        given["kind"] = "dask"  # --scheduler implies --executor dask
    run.update(given)
    if run.get("scheduler") and "kind" not in run:
        run["kind"] = "dask"
    exe = from_dict(ExecutorConfig, run, prefix="run.")
    return SweepSpec(base, label, axes, tuple(metrics), checks, exe, text)


def _only(table: dict, keys: tuple[str, ...], where: str) -> None:
    extra = sorted(set(table) - set(keys))
    if extra:
        raise ConfigError(f"{where}: unknown key {extra[0]!r}; valid keys: {', '.join(keys)}")


def _base(table: dict, root: Path):
    from ..experiments import TRAINERS
    from ..experiments.base import SCALES, get_preset, load_run_config

    _only(table, ("preset", "scale", "config", "set"), "[base]")
    preset, config = table.get("preset"), table.get("config")
    if (preset is None) == (config is None):
        raise ConfigError("[base] needs exactly one of preset = \"NAME\" or config = \"path/config.toml\"")
    for key, what in (("preset", "a preset name"), ("scale", "smoke, quick or paper"), ("config", "a config path")):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"[base] {key} = {table[key]!r}: expected a string ({what}) in quotes")
    if preset is not None:
        scale = table.get("scale", "quick")
        if scale not in SCALES:
            raise ConfigError(f"[base] scale must be one of {', '.join(SCALES)}, got {scale!r}")
        base, label = get_preset(preset).make(scale), f"preset {preset} ({scale})"
    else:
        cpath = Path(config) if Path(config).is_absolute() else root / config
        try:
            base = load_run_config(cpath)
        except ConfigError as exc:
            raise ConfigError(f"[base] config {config!r}: {exc}") from None
        label = f"config {config}"
    if not hasattr(base, "experiment") or base.experiment not in TRAINERS:
        raise ConfigError(f"[base] {label}: its config has no trainer (experiment = "
                          f"{getattr(base, 'experiment', None)!r})")
    fixed = table.get("set", {})
    if not isinstance(fixed, dict):
        raise ConfigError("[base] set: expected a table of settings, e.g. [base.set] train.steps = 1000")
    if fixed:
        try:
            base = from_dict(type(base), fixed, base=base)
        except ConfigError as exc:
            raise ConfigError(f"[base.set] {exc}") from None
    return base, label


def _flatten_axes(table: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for key, value in table.items():
        name = prefix + key
        if isinstance(value, dict) and not (set(value) & set(VALUE_SPECS)):
            out.extend(_flatten_axes(value, name + "."))
        else:
            out.append((name, value))
    return out


def _values(name: str, spec: Any) -> Sequence[Any]:
    """The values of one axis from a list or a {values|range|linspace|geomspace = ...} table (a range, or a
    linspace/geomspace of more than :data:`EAGER_POINTS` points, is computed on demand)."""
    if isinstance(spec, list):
        values = spec
    elif isinstance(spec, dict):
        if len(spec) != 1:
            raise ConfigError(f"axis {name!r}: give exactly one of {', '.join(VALUE_SPECS)}, got {sorted(spec)}")
        (kind, args), = spec.items()
        if kind == "values":
            if not isinstance(args, list):
                raise ConfigError(f"axis {name!r}: values = {args!r}: expected a list, e.g. values = [1, 2]")
            values = args
        else:
            if not isinstance(args, list) or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                                                     for a in args):
                raise ConfigError(f"axis {name!r}: {kind} expects a list of numbers, got {args!r}")
            if kind == "range":
                if not (2 <= len(args) <= 3) or not all(isinstance(a, int) for a in args):
                    raise ConfigError(f"axis {name!r}: range = [start, stop] or [start, stop, step] (integers; stop "
                                      f"excluded), got {args!r}")
                if any(abs(a) > INT64_MAX for a in args) or (len(args) == 3 and args[2] == 0):
                    raise ConfigError(f"axis {name!r}: range = {args!r}: need 64-bit integers and a non-zero step")
                values = range(*args)
            else:
                if len(args) != 3 or not isinstance(args[2], int) or args[2] < 1:
                    raise ConfigError(f"axis {name!r}: {kind} = [first, last, count], got {args!r}")
                if not all(math.isfinite(a) for a in args[:2]):
                    raise ConfigError(f"axis {name!r}: {kind} needs finite ends, got {args!r}")
                if kind == "geomspace" and (args[0] <= 0 or args[1] <= 0):
                    raise ConfigError(f"axis {name!r}: geomspace needs positive ends, got {args!r}")
                integral = all(isinstance(a, int) for a in args[:2])
                if args[2] <= EAGER_POINTS:
                    fn = np.linspace if kind == "linspace" else np.geomspace
                    values = [float(v) for v in fn(args[0], args[1], args[2])]
                    if integral and all(v.is_integer() for v in values):
                        values = [int(v) for v in values]
                else:
                    values = _Span(args[2], _span(kind, float(args[0]), float(args[1]), args[2], integral))
    else:
        raise ConfigError(f"axis {name!r}: expected a list of values or a table such as {{range = [0, 10]}}, "
                          f"got {spec!r}")
    if not isinstance(values, (list, range, _Span)) or not len(values):
        raise ConfigError(f"axis {name!r}: no values")
    return values


def _span(kind: str, first: float, last: float, n: int, integral: bool) -> Callable[[int], Any]:
    """Point i of ``numpy.linspace(first, last, n)`` (the same arithmetic), or of the geometric span, on demand;
    integer ends give integer points when the point is an integer."""
    lo, hi = (first, last) if kind == "linspace" else (math.log(first), math.log(last))
    step = (hi - lo) / (n - 1) if n > 1 else 0.0

    def value(i: int):
        v = last if i == n - 1 and n > 1 else (i * step + lo)
        if kind == "geomspace" and not (i == n - 1 and n > 1):
            v = first if i == 0 else math.exp(v)
        return int(v) if integral and float(v).is_integer() else v

    return value


def _check_value(cls, key: str, value: Any) -> None:
    """The setting ``key`` exists in ``cls`` and ``value`` has its type (the rules of ``--set``)."""
    parts = key.split(".")
    for depth, part in enumerate(parts):
        types = _field_types(cls)
        prefix = ".".join(parts[:depth])
        if part not in types:
            valid = ", ".join((prefix + "." if prefix else "") + k for k in types)
            raise ConfigError(f"unknown setting {key}; valid keys here: {valid}")
        if depth < len(parts) - 1:
            if not dataclasses.is_dataclass(types[part]):
                raise ConfigError(f"{'.'.join(parts[:depth + 1])} is not a table of settings")
            cls = types[part]
    if dataclasses.is_dataclass(types[parts[-1]]):
        valid = ", ".join(f"{key}.{k}" for k in _field_types(types[parts[-1]]))
        raise ConfigError(f"{key} is a table of settings, not one value: vary its keys one by one ({valid})")
    _coerce(value, types[parts[-1]], key)


def _freeze(value: Any) -> Any:
    """Lists (values of tuple-typed settings) as tuples, so that points are hashable."""
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _axes(table: dict, base) -> tuple[Axis, ...]:
    if not isinstance(table, dict):
        raise ConfigError("[axes] must be a table")
    axes, used = [], set()
    for name, spec in _flatten_axes(table):
        keys = tuple(k.strip() for k in name.split(","))
        values = _values(name, spec)
        if not isinstance(values, list):  # a computed span: numbers, monotone, distinct
            for k in keys:
                if k in used:
                    raise ConfigError(f"axis {k!r} appears twice")
                used.add(k)
                for v in {values[0], values[-1]}:  # every point lies between the two ends
                    try:
                        _check_value(type(base), k, v)
                    except ConfigError as exc:
                        raise ConfigError(f"axis {k!r} value {v!r}: {exc}") from None
            if len(values) > 1 and values[0] == values[-1]:
                raise ConfigError(f"axis {name!r} repeats a value")
            axes.append(Axis(keys, _Points(values, len(keys))))
            continue
        if len(keys) > 1:
            values = [v if isinstance(v, list) else [v] * len(keys) for v in values]  # a scalar goes to every key
            if not all(len(v) == len(keys) for v in values):
                raise ConfigError(f"axis {name!r}: zipped keys need a list of {len(keys)}-element lists, "
                                  f"e.g. [[60, 50], [120, 100]]")
            points = tuple(tuple(_freeze(x) for x in v) for v in values)
        else:
            points = tuple((_freeze(v),) for v in values)
        for k in keys:
            if k in used:
                raise ConfigError(f"axis {k!r} appears twice")
            used.add(k)
        # check every key and value on its own (the error names the axis and the value); checks that involve
        # several settings (__post_init__) run on each cell's full config in SweepSpec.cells
        for point in points:
            for k, v in zip(keys, point, strict=True):
                try:
                    _check_value(type(base), k, v)
                except ConfigError as exc:
                    raise ConfigError(f"axis {k!r} value {v!r}: {exc}") from None
        if len(set(points)) != len(points):
            raise ConfigError(f"axis {name!r} repeats a value")
        axes.append(Axis(keys, points))
    return tuple(axes)
