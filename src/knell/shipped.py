"""The shipped scenarios, wherever knell is installed.

``knell run quickstart`` must work from any directory. The scenarios live
in the repository's top-level ``scenarios/`` folder (the one source); a
wheel carries a copy as ``knell/scenarios/`` (see ``setup.py``), and a
source checkout or an editable install reads the repository's folder.
A scenario named by path, or found under ``--scenarios-dir``, always wins.

The failure-mode matrix names a scenario it re-targeted to another store
``NAME@STORE`` (``contract-tour@redis``); :func:`split_store` reads that
name back, so the name a matrix cell shows runs as is
(``knell run contract-tour@redis`` is ``knell run contract-tour --store
redis``).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["shipped_dir", "split_store"]

_AT_STORE = re.compile(r"^(?P<name>[^@/\\]+)@(?P<store>[a-z][a-z0-9_-]*)$")
"""``NAME@STORE``: a bare scenario name (no folder), then a store kind's name."""


def shipped_dir() -> Path | None:
    """The folder of shipped scenarios, or None if this install has none."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "scenarios", here.parents[1] / "scenarios"):
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return candidate
    return None


def split_store(arg: str) -> tuple[str, str | None]:
    """``("contract-tour", "redis")`` for ``contract-tour@redis``; ``(arg,
    None)`` for anything else. A file that exists under that exact name
    wins (a scenario file may have ``@`` in its name), and a path is never
    split: only a bare name re-targets."""
    match = _AT_STORE.match(arg)
    if match is None or Path(arg).exists():
        return arg, None
    return match["name"], match["store"]
