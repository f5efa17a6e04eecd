"""The shipped scenarios, wherever knell is installed.

``knell run quickstart`` must work from any directory. The scenarios live
in the repository's top-level ``scenarios/`` folder (the one source); a
wheel carries a copy as ``knell/scenarios/`` (see ``setup.py``), and a
source checkout or an editable install reads the repository's folder.
A scenario named by path, or found under ``--scenarios-dir``, always wins.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped_dir"]


def shipped_dir() -> Path | None:
    """The folder of shipped scenarios, or None if this install has none."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "scenarios", here.parents[1] / "scenarios"):
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return candidate
    return None
