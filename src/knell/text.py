"""Untrusted text, made safe to show.

Message bodies, handles, channel names and error texts come from the bus
under test, and a bus can return anything: escape sequences that repaint
a terminal, control characters, lines that imitate knell's own output,
megabytes of one string. Everything knell prints or writes into a report
that came from a bus passes through :func:`clean` first: control
characters and ANSI escape sequences are neutralised (shown, not obeyed),
and an over-long string is cut with a marker saying how much was cut.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TEXT", "clean"]

MAX_TEXT = 500
"""Characters of one untrusted string shown before it is cut."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: object, limit: int = MAX_TEXT, *, newlines: bool = False) -> str:
    """``text`` as a single safe line (or, ``newlines=True``, several):
    escape sequences and control characters shown as ``\\xNN``, cut to
    ``limit`` characters with a marker."""
    value = text if isinstance(text, str) else str(text)
    value = _ANSI.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), value)
    if not newlines:
        value = value.replace("\r\n", "\n").replace("\n", "\\n")
    value = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", value)
    if len(value) > limit:
        value = value[:limit] + f"... [cut: {len(value) - limit} more characters]"
    return value
