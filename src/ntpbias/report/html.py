"""The self-contained HTML report: every image embedded, no CDN, opens offline."""

from __future__ import annotations

import base64
import datetime as _dt
from importlib import resources
from pathlib import Path

import jinja2

from .. import __version__
from ..io import write_text
from ..results import Section, headline, tally


def format_value(v) -> str:
    """Numbers in a compact scientific-friendly form; everything else as text."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 or v == 0 else f"{v:.3e}"
    return str(v)


def render(run_dir: str | Path, sections: list[Section], *, title: str, command: str) -> Path:
    """Write ``run_dir/report.html`` for ``sections`` (figure paths relative to ``run_dir``)."""
    run_dir = Path(run_dir)
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
        resources.files("ntpbias.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8"))
    images = {}
    for s in sections:
        for f in s.figures:
            images[f.png] = base64.b64encode((run_dir / f.png).read_bytes()).decode("ascii")
    checks = [c for s in sections for c in s.checks]
    html = template.render(
        title=title, version=__version__, created=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"), command=command,
        sections=sections, images=images, fmt=format_value, headline=headline(checks),
        n_failed=tally(checks)["failed"], n_checks=len(checks),
        section_headline=lambda s: headline(s.checks) if s.checks else "no checks",
    )
    path = run_dir / "report.html"
    write_text(path, html)
    return path
