"""Short ``repr`` and notebook ``_repr_html_`` for the public result types, from one summary each.

A result (data, an analysis, a max-margin solution, a run, a history) prints as ``Name(key=value, ...)``: its sizes,
headline numbers and verdicts, never a whole tensor; in a notebook it shows as a two-column table of the same values.

>>> from dataclasses import dataclass
>>> @short_repr
... @dataclass
... class Result:
...     margin: float
...     def _summary(self):
...         return {"margin": self.margin, "certified": True}
>>> Result(0.123456789)
Result(margin=0.123457, certified=True)
>>> Result(0.5)._repr_html_()
'<table><caption>Result</caption><tr><th>margin</th><td>0.5</td></tr><tr><th>certified</th><td>True</td></tr></table>'
"""

from __future__ import annotations

import html

#: a summary value longer than this is cut (a reason, a path)
MAX_CHARS = 80


def short_repr(cls):
    """Class decorator (above ``@dataclass``): ``repr`` and ``_repr_html_`` from the instance's ``_summary()`` (a
    dict of a few numbers, names and verdicts)."""
    cls.__repr__ = _repr
    cls._repr_html_ = _repr_html
    return cls


def format_value(value) -> str:
    """A summary value in a few characters: floats to 6 significant digits, long sequences cut.

    >>> format_value(1 / 3), format_value(tuple("abcdefgh"))
    ('0.333333', "('a', 'b', 'c', 'd', 'e', ...)")
    """
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (tuple, list)) and len(value) > 6:
        return "(" + ", ".join(map(repr, value[:5])) + ", ...)"
    text = repr(value) if isinstance(value, (tuple, list)) else str(value)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 3] + "..."


def _repr(self) -> str:
    return f"{type(self).__name__}(" + ", ".join(f"{k}={format_value(v)}" for k, v in self._summary().items()) + ")"


def _repr_html(self) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(format_value(v))}</td></tr>"
                   for k, v in self._summary().items())
    return f"<table><caption>{type(self).__name__}</caption>{rows}</table>"
