"""Untrusted text, made safe to show.

Message bodies, handles, channel names and error texts come from the bus
under test, and a bus can return anything: escape sequences that repaint
a terminal, control characters, lines that imitate knell's own output,
megabytes of one string. Everything knell prints or writes into a report
that came from a bus passes through :func:`clean` first: control
characters and ANSI escape sequences are neutralised (shown, not obeyed),
and an over-long string is cut with a marker saying how much was cut.

Each kind of output then has its own active characters, escaped on top of
:func:`clean`: :func:`md` and :func:`md_code` for Markdown (a ``|`` would
split a table cell, a ``#`` at a line start makes a heading, ``<`` raw
HTML). HTML is escaped by the templates themselves (jinja2 with
autoescape). The terminal needs no escaping: knell's consoles never parse
rich markup (``knell.cli.common``: style is given as data, not as
``[red]`` tags inside the text).
"""

from __future__ import annotations

import re

__all__ = ["MAX_TEXT", "clean", "md", "md_code"]

MAX_TEXT = 500
"""Characters of one untrusted string shown before it is cut."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile("[\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
"""Zero-width, bidirectional-override and line/paragraph-separator
characters: they reorder or split what a reader sees (Trojan Source)."""
_MD_ACTIVE = re.compile(r"([\\`*_\[\]<>|~#])")
_MD_LINE_START = re.compile(r"^(\s*)([-+=>]|\d+[.)])")
_BACKTICKS = re.compile(r"`+")


def clean(text: object, limit: int = MAX_TEXT, *, newlines: bool = False) -> str:
    """``text`` as a single safe line (or, ``newlines=True``, several):
    escape sequences and control characters shown as ``\\xNN``, cut to
    ``limit`` characters with a marker."""
    value = text if isinstance(text, str) else str(text)
    value = _ANSI.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), value)
    if not newlines:
        value = value.replace("\r\n", "\n").replace("\n", "\\n")
    value = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", value)
    value = _INVISIBLE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", value)
    if len(value) > limit:
        value = value[:limit] + f"... [cut: {len(value) - limit} more characters]"
    return value


def md(text: object, limit: int = MAX_TEXT) -> str:
    """``text`` as one line of inert Markdown: :func:`clean`, then every
    character Markdown or GitHub's table syntax would act on escaped with a
    backslash (so ``|`` stays in its cell, ``<script>`` stays text, and a
    line imitating a heading or a list item stays a plain line)."""
    value = _MD_ACTIVE.sub(r"\\\1", clean(text, limit))
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), value)


def md_code(text: object, limit: int = MAX_TEXT) -> str:
    """``text`` as an inline code span that is safe inside a table cell: a
    fence longer than any run of backticks inside, ``|`` escaped (GitHub
    splits cells on it even inside code)."""
    value = clean(text, limit).replace("|", "\\|")
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value else ""
    return f"{fence}{pad}{value}{pad}{fence}"
