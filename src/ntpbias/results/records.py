"""The content of a report: sections holding facts, theory checks, tables and figures.

Experiments build these records (figures as :class:`FigureSpec`: what to draw, from which saved numbers);
:mod:`ntpbias.report` draws the figures and renders the HTML; ``summary.json`` stores the records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .._repr import short_repr

#: What a check proves. ``theorem``: a paper's proven statement (a pass proves it holds on this run when
#: ``premise_met``; outside its premises the verdict is "consistent"/"inconsistent"); ``paper-number``: a number or a
#: statement of a figure the paper states, reproduced (at other settings than the paper's, "consistent"/
#: "inconsistent"); ``calibrated``: a level set on other seeds/subsamples (``threshold_source`` says which);
#: ``sanity``: an implementation invariant; ``by-construction``: a value that holds because of how the run was built
#: (a setting chosen to satisfy the statement, or an exact identity of the implementation that a sanity check already
#: tests; ``construction`` says how), shown and never counted as a match; ``erratum``: a paper statement we found
#: false in general (the errata of each paper's docs page), measured as printed: "holds" or "refuted" here, never a
#: failure (the corrected statement is a separate check); ``vacuous``: a bound that cannot fail at this scale (shown,
#: never counted).
CHECK_KINDS = ("theorem", "paper-number", "calibrated", "sanity", "by-construction", "erratum", "vacuous")
#: the kinds that grade a paper's own sentence: each carries ``quote``, ``where`` and ``metric``
QUOTED_KINDS = ("theorem", "paper-number", "erratum")
#: the kinds whose verdict is a finding: each names a negative control (an input on which it must come out False: a
#: wrong solution, data that break the premise's conclusion, the wrong optimizer, a run stopped early, a broken
#: implementation path) and records its value there; a check no control can fail is ``sanity``, ``by-construction``
#: or ``vacuous``
GRADED_KINDS = ("theorem", "paper-number", "calibrated", "erratum")
#: every verdict a check can have; only "fail" is a failure. "control passed": the check passed, but so did its
#: negative control, so the pass shows nothing (never counted as a pass, nor as a failure)
VERDICTS = ("pass", "fail", "consistent", "inconsistent", "by construction", "holds", "refuted", "shown",
            "not graded", "control passed")


@short_repr
@dataclass(frozen=True)
class Check:
    """One theory check: a claim of a paper, the measured value, the threshold it is held to, and the verdict.

    ``threshold`` states the rule in words (e.g. ">= 0.9"); asymptotic claims are checked as trends, rates over
    checkpoints and calibrated levels, never as exact limits. ``kind`` (one of :data:`CHECK_KINDS`), ``premise`` (the
    hypotheses in words), ``premise_met`` (True / False / None when not applicable or undecidable) and
    ``threshold_source`` (the paper, a bound we derive, or the calibration seeds) say what a pass proves. A check of a
    paper's sentence (:data:`QUOTED_KINDS`) carries ``quote`` (the sentence, verbatim, searchable in the paper or in
    the docs page ``where`` names), ``where`` (paper and section, equation, figure or caption) and ``metric`` (what is
    measured, in words; :attr:`missing` names what it lacks); a ``by-construction`` check carries ``construction``
    (how the value was chosen). A check of a :data:`GRADED_KINDS` kind carries its negative control: ``control``
    (the input, in words), ``control_measured`` (the value there) and ``control_passed`` (the check's outcome there,
    which must be False; build it with :func:`with_control`). ``graded`` is False at smoke scale (the pipeline ran,
    nothing is judged) and where the run does not reach what the statement is about (a run that stops before the
    statement's step range); ``ungraded_reason`` says which. Either way the verdict is "not graded".
    """

    name: str
    claim: str
    measured: float | str
    threshold: str
    passed: bool
    source: str = ""
    kind: str = "theorem"
    premise: str = ""
    premise_met: bool | None = None
    threshold_source: str = ""
    quote: str = ""
    where: str = ""
    metric: str = ""
    construction: str = ""
    graded: bool = True
    control: str = ""
    control_measured: float | str | None = None
    control_passed: bool | None = None
    ungraded_reason: str = ""

    def __post_init__(self):
        if self.kind not in CHECK_KINDS:
            raise ValueError(f"check {self.name!r}: unknown kind {self.kind!r}; choose one of {', '.join(CHECK_KINDS)}")
        if self.kind == "by-construction" and not self.construction:
            raise ValueError(f"check {self.name!r}: a by-construction check says how the value was chosen "
                             "(construction)")

    @property
    def missing(self) -> tuple[str, ...]:
        """The fields the check lacks: ``quote``, ``where`` and ``metric`` for a check of a paper's sentence
        (:data:`QUOTED_KINDS`), ``control`` and its outcome for a graded kind (:data:`GRADED_KINDS`); the test suite
        requires none missing in every group."""
        quoted = ("quote", "where", "metric") if self.kind in QUOTED_KINDS else ()
        controlled = ("control", "control_passed") if self.kind in GRADED_KINDS else ()
        return tuple(k for k in quoted + controlled if getattr(self, k) in ("", None))

    def _summary(self) -> dict:
        """What ``repr`` shows: the name, the measured value, the threshold and the verdict."""
        return {"name": self.name, "measured": self.measured, "threshold": self.threshold, "verdict": self.verdict}

    @property
    def verdict(self) -> str:
        """One of :data:`VERDICTS`: "pass" / "fail"; "consistent" / "inconsistent" for a theorem or paper number
        outside its premises; "by construction" (a failure is still "fail": the construction broke); "holds" /
        "refuted" for an erratum; "shown" when vacuous; "not graded" at smoke scale. Only "fail" is a failure."""
        if not self.graded:
            return "not graded"
        if self.kind in GRADED_KINDS and self.passed and self.control_passed:
            return "control passed"
        if self.kind == "vacuous":
            return "shown"
        if self.kind == "erratum":
            return "holds" if self.passed else "refuted"
        if self.kind == "by-construction":
            return "by construction" if self.passed else "fail"
        if self.kind in ("theorem", "paper-number") and self.premise_met is False:
            return "consistent" if self.passed else "inconsistent"
        return "pass" if self.passed else "fail"

    def as_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict}


def with_control(check: Check, control: str, on_control: Check) -> Check:
    """``check`` with its negative control recorded: ``on_control`` is the same check computed on the control input
    (``control`` says which, in words); a graded check must fail there, or its pass shows nothing.

    >>> ok = check_at_least("rate", "decays", 1.9, 1.0)
    >>> c = with_control(ok, "a run stopped at step 10", check_at_least("rate", "decays", 0.3, 1.0))
    >>> c.verdict, c.control_measured, c.control_passed
    ('pass', 0.3, False)
    """
    return replace(check, control=control, control_measured=on_control.measured,
                   control_passed=bool(on_control.passed))


def verdict_counts(checks) -> str:
    """How many checks have each verdict, in words.

    >>> verdict_counts([Check("a", "", 1.0, "", True), Check("b", "", 0.0, "", False), Check("c", "", 1.0, "", True)])
    '2 pass, 1 fail'
    """
    verdicts = [c.verdict for c in checks]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) or "none"


def tally(checks) -> dict[str, int]:
    """Counts behind the headline, every verdict apart: theorem checks passed, consistent and inconsistent outside
    their premises, failed; paper numbers matched, consistent, inconsistent, missed; calibrated and sanity checks
    passed / failed; values by construction; errata refuted / holding here; vacuous bounds shown; checks not graded;
    graded checks whose negative control passed too (``control_passed``: not counted)."""
    checks = list(checks)

    def count(kind, verdict):
        return sum(c.kind == kind and c.verdict == verdict for c in checks)

    return {
        "theorem_passed": count("theorem", "pass"), "theorem_consistent": count("theorem", "consistent"),
        "theorem_inconsistent": count("theorem", "inconsistent"), "theorem_failed": count("theorem", "fail"),
        "theorem_outside_premises": sum(c.kind == "theorem" and c.verdict in ("consistent", "inconsistent")
                                        for c in checks),
        "paper_matched": count("paper-number", "pass"), "paper_consistent": count("paper-number", "consistent"),
        "paper_inconsistent": count("paper-number", "inconsistent"), "paper_missed": count("paper-number", "fail"),
        "calibrated_passed": count("calibrated", "pass"), "calibrated_failed": count("calibrated", "fail"),
        "sanity_passed": count("sanity", "pass"), "sanity_failed": count("sanity", "fail"),
        "by_construction": count("by-construction", "by construction"),
        "errata_refuted": count("erratum", "refuted"), "errata_holding": count("erratum", "holds"),
        "vacuous_shown": count("vacuous", "shown"),
        "not_graded": sum(c.verdict == "not graded" for c in checks),
        "control_passed": sum(c.verdict == "control passed" for c in checks),
        "inconsistent": sum(c.verdict == "inconsistent" for c in checks),
        "failed": sum(c.verdict == "fail" for c in checks),
    }


def headline(checks) -> str:
    """One line saying what the checks show, every verdict apart, e.g. "13 theorem checks passed, 5 paper numbers
    matched (of 6), 17 calibrated and 7 sanity checks passed; not counted: 10 theorem checks consistent outside their
    premises, 4 by construction, 3 vacuous bounds shown; 1 failed"; at smoke scale "not graded (smoke scale: 30 checks
    computed, none judged)"."""
    checks = list(checks)
    t = tally(checks)
    if checks and t["not_graded"] == len(checks):
        return f"not graded (smoke scale: {len(checks)} checks computed, none judged)"

    def n(k, one, many=None):
        return f"{k} {one if k == 1 else (many or one + 's')}"

    missed = f" (of {t['paper_matched'] + t['paper_missed']})" if t["paper_missed"] else ""
    counted = (f"{n(t['theorem_passed'], 'theorem check')} passed, {n(t['paper_matched'], 'paper number')} "
               f"matched{missed}, {t['calibrated_passed']} calibrated and {t['sanity_passed']} sanity checks passed")
    if t["errata_refuted"] or t["errata_holding"]:
        counted += (f", {n(t['errata_refuted'], 'paper statement')} refuted (errata; {t['errata_holding']} holding "
                    "here)")
    apart = [(t["theorem_consistent"] + t["paper_consistent"], "consistent outside their premises"),
             (t["inconsistent"], "inconsistent outside their premises"),
             (t["control_passed"], "passed with their negative control (show nothing)"),
             (t["by_construction"], "by construction"), (t["vacuous_shown"], "vacuous bounds shown"),
             (t["not_graded"], "not graded")]
    rest = ", ".join(f"{k} {what}" for k, what in apart if k)
    return f"{counted}{'; not counted: ' + rest if rest else ''}; {t['failed']} failed"


def check_at_least(name: str, claim: str, measured: float, bound: float, source: str = "", **fields) -> Check:
    """A check passing when ``measured >= bound`` (``fields``: kind, premise, premise_met, threshold_source)."""
    return Check(name, claim, float(measured), f">= {bound:g}", bool(measured >= bound), source, **fields)


def check_at_most(name: str, claim: str, measured: float, bound: float, source: str = "", **fields) -> Check:
    """A check passing when ``measured <= bound`` (``fields``: kind, premise, premise_met, threshold_source)."""
    return Check(name, claim, float(measured), f"<= {bound:g}", bool(measured <= bound), source, **fields)


@dataclass(frozen=True)
class FigureSpec:
    """A figure to draw: ``plot`` names a drawing function of :mod:`ntpbias.report` (e.g. ``"linear.training"``) and
    ``data`` holds its keyword arguments (saved numbers: histories, arrays, floats); drawing never retrains."""

    id: str
    title: str
    caption: str
    plot: str
    data: dict = field(default_factory=dict)


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


@short_repr
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
    plots: list[FigureSpec] = field(default_factory=list)

    def _summary(self) -> dict:
        """What ``repr`` shows: the id, the title, the checks' verdicts and the figures."""
        return {"id": self.id, "title": self.title, "checks": verdict_counts(self.checks),
                "figures": len(self.figures) + len(self.plots)}

    @property
    def passed(self) -> bool:
        """No check failed (vacuous bounds and checks outside their premises never fail a section)."""
        return all(c.verdict != "fail" for c in self.checks)

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
                       self.notes, self.seconds, self.plots)
