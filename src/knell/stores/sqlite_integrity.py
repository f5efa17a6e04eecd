"""The SQLite store's final integrity probe: ``PRAGMA integrity_check``.

``integrity_check`` reads every page of the file (and of its WAL, which a
connection replays first) and checks the b-trees, the free list and every
index against its table: what a torn page or a lost write under an index
would break. It answers one row ``ok``, or rows naming each problem.

What counts as corrupt is decided by SQLite's own error codes:
``SQLITE_CORRUPT`` (and its extended codes) and ``SQLITE_NOTADB`` mean the
file is damaged; anything else (the file locked, a disk error, a missing
file) means the probe could not look, so its outcome is unknown. Python
before 3.11 gives no code, only SQLite's fixed text for it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from knell.stores.integrity import Integrity

__all__ = ["PROBE", "classify_error", "integrity_check"]

PROBE = "PRAGMA integrity_check"

_CORRUPT_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")

_CORRUPT_TEXTS = ("database disk image is malformed", "file is not a database")
"""SQLite's own fixed text for those two codes (``sqlite3_errstr``): what
Python before 3.11, whose errors carry no code, can go by."""

_SHOWN_ROWS = 5


def classify_error(exc: sqlite3.Error) -> Integrity:
    """A failed probe, by SQLite's error code: damage is ``corrupt``,
    anything else ``unknown`` (the probe could not look)."""
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    text = " ".join(str(exc).split())
    if code.startswith(_CORRUPT_CODES) or (not code and text.startswith(_CORRUPT_TEXTS)):
        return Integrity.corrupt(PROBE, f"{code}: {text}")
    return Integrity.unknown(PROBE, f"could not run ({code or type(exc).__name__}: {text})")


def integrity_check(path: Path, *, timeout: float = 10.0) -> Integrity | None:
    """Run the probe on the database at ``path`` (nothing else may be
    writing it). No file: no probe (``None``): a bus of one's own that
    keeps its data elsewhere left nothing here to vouch for."""
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(str(path), timeout=timeout)
    except sqlite3.Error as exc:
        return classify_error(exc)
    try:
        rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.Error as exc:
        return classify_error(exc)
    finally:
        conn.close()
    if rows == ["ok"]:
        return Integrity.ok(PROBE, f"{path.name}: ok")
    shown = "; ".join(rows[:_SHOWN_ROWS]) + (
        f"; and {len(rows) - _SHOWN_ROWS} more" if len(rows) > _SHOWN_ROWS else ""
    )
    return Integrity.corrupt(PROBE, f"{path.name}: {shown}")
