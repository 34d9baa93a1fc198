"""The content of a report: sections holding facts, theory checks, tables and figures.

Experiments build these records; :mod:`ntpbias.report.html` renders them; ``summary.json`` stores them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Check:
    """One theory check: a claim of a paper, the measured value, the threshold it is held to, and the verdict.

    ``threshold`` states the rule in words (e.g. ">= 0.9"); thresholds are calibrated honestly: asymptotic claims
    are checked as trends and calibrated levels, never as exact limits.
    """

    name: str
    claim: str
    measured: float | str
    threshold: str
    passed: bool
    source: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def check_at_least(name: str, claim: str, measured: float, bound: float, source: str = "") -> Check:
    """A check passing when ``measured >= bound``."""
    return Check(name, claim, float(measured), f">= {bound:g}", bool(measured >= bound), source)


def check_at_most(name: str, claim: str, measured: float, bound: float, source: str = "") -> Check:
    """A check passing when ``measured <= bound``."""
    return Check(name, claim, float(measured), f"<= {bound:g}", bool(measured <= bound), source)


@dataclass(frozen=True)
class Figure:
    """A saved figure: ``png`` and ``svg`` paths relative to the run directory."""

    id: str
    title: str
    caption: str
    png: str
    svg: str


@dataclass(frozen=True)
class Table:
    """A small table for the report (and summary.json)."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple, ...]


@dataclass
class Section:
    """Everything one experiment group contributes to a report."""

    id: str
    title: str
    description: str = ""
    facts: dict[str, object] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def as_dict(self) -> dict:
        return {
            "id": self.id, "title": self.title, "description": self.description, "facts": self.facts,
            "checks": [c.as_dict() for c in self.checks],
            "figures": [asdict(f) for f in self.figures],
            "tables": [{"title": t.title, "header": list(t.header), "rows": [list(r) for r in t.rows]}
                       for t in self.tables],
            "notes": self.notes, "seconds": self.seconds, "passed": self.passed,
        }

    def relocate(self, prefix: str | Path) -> Section:
        """The same section with figure paths prefixed (when a group's directory is nested in a bigger report)."""
        figs = [Figure(f.id, f.title, f.caption, str(Path(prefix) / f.png), str(Path(prefix) / f.svg))
                for f in self.figures]
        return Section(self.id, self.title, self.description, self.facts, self.checks, figs, self.tables,
                       self.notes, self.seconds)
