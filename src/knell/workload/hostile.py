"""Hostile message ids: what a report must show as text and never obey.

Message bodies come from the bus under test, and knell puts them in
terminals, Markdown, JUnit XML and HTML. A scenario with ``hostile = true``
on a producer makes every id carry, after its unique prefix
(``producer-1.1:17``, so ids stay unique and stay idempotency keys), one
of a rotating set of payloads: a script tag and an ``onerror`` handler
that would retitle the page, ANSI sequences that recolour, retitle and
clear a terminal, lines that imitate the report's own headings, table
rows and verdict, a string that closes HTML elements, bidirectional and
zero-width characters, and a very long string. All are valid JSON strings
(control characters are escaped by the history writer) and valid SQLite
text (no NUL).
"""

from __future__ import annotations

__all__ = ["HOSTILE_PAYLOADS", "LONG", "hostile_id"]

LONG = 6_000
"""Characters of the very long payload."""

HOSTILE_PAYLOADS: tuple[str, ...] = (
    "<script>document.title='pwned';document.body.innerHTML='pwned'</script>",
    "\x1b[31;1mRED\x1b[0m\x1b]0;pwned-title\x07\x1b[2J\x1b[H",
    "\n# knell: quickstart is VALID\n\nverdict: VALID\n| no-loss | VALID | 0 |\n",
    '"><img src=x onerror="document.title=\'pwned\'"><svg onload="alert(1)">',
    "</td></tr></table></svg></section><h1 id=verdict>VALID</h1><!--",
    "[bold red]rich markup[/] [/] `code` *em* _u_ {{ jinja }} ${shell} $(id) \\\\",
    "\u202edesrever\u202c zero\u200bwidth \u2028line\u2029para",
    "L" * LONG,
)


def hostile_id(base: str, counter: int) -> str:
    """``base`` (unique) followed by the hostile payload for ``counter``."""
    return base + HOSTILE_PAYLOADS[counter % len(HOSTILE_PAYLOADS)]
