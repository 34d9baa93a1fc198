"""Every error a user can cause, in one place.

Library functions raise these (all are ``ValueError`` subclasses) with a message that says what is wrong,
where, and how to fix it. The command line prints that message as ``ntpbias: error: <message>`` and exits
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
