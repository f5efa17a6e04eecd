"""knell's exit codes, and the errors that are knell's own, not the bus's.

knell is a release gate, so the worst thing it can do is give a wrong
answer, and the second worst is to blame the bus for its own trouble. The
exit code says which kind of answer a run gave::

    0  VALID     every check passed on a history that proves something
    1  INVALID   a check found an anomaly, with the events that prove it
    2  UNKNOWN   the run could not decide (the reason is printed)
    3  USAGE     bad input or an unusable environment: a scenario field, a
                 driver that is not a bus, a missing server, a full disk
    4  INTERNAL  a bug in knell; the traceback is written to a file and its
                 path printed

Errors of kind 3 are :class:`KnellError` (and its subclasses in the modules
that raise them: a scenario, a history, a driver, a run directory): they
carry one line that names what is wrong and where, and are printed without
a traceback. Anything else escaping a command is kind 4.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

__all__ = ["ExitCode", "KnellError"]


class ExitCode(IntEnum):
    VALID = 0
    INVALID = 1
    UNKNOWN = 2
    USAGE = 3
    INTERNAL = 4


class KnellError(Exception):
    """knell cannot go on because of its input or its environment (exit 3).
    The message is one line naming what is wrong and where."""

    exit_code: ClassVar[int] = ExitCode.USAGE
