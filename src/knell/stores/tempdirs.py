"""Temporary folders a private server owns, on record until removed.

As root, Postgres runs as an unprivileged user, and the run directory may
sit under a folder that user cannot enter (a clone in ``/root``), so its
data directory lives in a temporary folder that user owns. A runner that
is SIGKILLed cannot remove it, so the folder is recorded in the owner
registry (kind ``directory``) and :func:`remove` is the reaper that
``knell reap`` calls for it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from knell.owners import Owner

__all__ = ["PREFIX", "make", "remove"]

PREFIX = "knell-store-"


def make(kind: str, owner: Owner | None) -> Path:
    """A fresh temporary folder for one store, recorded with ``owner``."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    path.chmod(0o755)
    if owner is not None:
        owner.resource("directory", str(path))
    return path


def remove(record: dict[str, Any]) -> bool:
    """Remove a recorded folder; only ever one that :func:`make` created."""
    path = Path(str(record.get("id", "")))
    if not path.name.startswith(PREFIX) or path.parent != Path(tempfile.gettempdir()):
        return False
    if not path.exists():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()
