"""Every error a user can cause, in one place.

Library functions raise these (all are subclasses of :class:`NTPBiasError`, a ``ValueError``; an argument of the
wrong type is also a ``TypeError``, an unknown name looked up by key also a ``KeyError``) with a message that says
what is wrong, where, and how to fix it. The command line prints that message as ``ntpbias: error: <message>`` and exits
with status 2, without a traceback (``--debug`` shows it).
"""

from __future__ import annotations


class NTPBiasError(ValueError):
    """Base class of every user-facing ntpbias error."""


class DataError(NTPBiasError):
    """A data file or array is missing, unreadable, wrongly shaped, or violates a constraint."""


class ConfigError(NTPBiasError):
    """A configuration file, preset name, or ``--set`` override is invalid."""


class SolverError(NTPBiasError):
    """A solver could not run on the given problem (as opposed to a finding such as non-separability)."""


class NotSeparableError(NTPBiasError):
    """A max-margin program was asked of data that admit no separating direction."""


class TrainingDivergedError(NTPBiasError):
    """Training produced a non-finite loss; the metrics logged so far are kept."""


class LimitError(NTPBiasError):
    """A problem's size exceeds a limit checked before any work (the memory it would take, a dense export); the
    message gives the estimate, the limit and how to go past it (docs/errors-and-limits.md)."""


class ArgumentTypeError(NTPBiasError, TypeError):
    """An argument of the Python API of the wrong type or shape (``nb.analyze(np.eye(2))``), or an unknown keyword
    argument; the message names the argument, what it expects and what it got (or the valid keywords)."""


class UnknownNameError(NTPBiasError, KeyError):
    """A name looked up by key that does not exist (``history["los"]``); the message lists the names there are."""

    def __str__(self) -> str:  # a KeyError would print its message quoted
        return str(self.args[0]) if self.args else ""


class OutputInUseError(NTPBiasError):
    """An output directory that another process is writing (its lock names the holder's pid), or that holds another
    run (pass ``--overwrite`` to replace it or ``--resume`` to continue it)."""


def describe_value(value: object) -> str:
    """A value as an error message shows it: an array by its type and shape, anything else by a short ``repr``.

    >>> describe_value(__import__("numpy").eye(2)), len(describe_value(list(range(100))))
    ('a numpy array of shape (2, 2)', 60)
    """
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) or type(shape).__name__ == "Size":
        return f"a {type(value).__module__.split('.')[0]} array of shape {tuple(shape)}"
    text = " ".join(repr(value).split())  # one line
    return text if len(text) <= 60 else text[:57] + "..."
