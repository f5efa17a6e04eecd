"""Temporary folders a run's private servers own, on record until removed.

As root, Postgres runs as an unprivileged user, and the run directory may
sit under a folder that user cannot enter (a clone in ``/root``), so its
data directory lives in a temporary folder that user owns; the fault
proxy keeps its ready file in one too. A runner that is SIGKILLed cannot
remove them, so each folder is recorded in the owner registry (kind
``directory``) and :func:`remove` is the reaper that ``knell reap`` calls
for it. It removes only folders these prefixes name, directly in the temp
folder: a record is data, and a tampered one must not delete anything else.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from knell.owners import Owner

__all__ = ["PREFIX", "PREFIXES", "make", "remove"]

PREFIX = "knell-store-"
PREFIXES = (PREFIX, "knell-proxy-", "knell-fs-")
"""Every prefix a recorded folder may carry (the proxy's: knell.nemesis.toxiproxy;
the faulty disk's mount point: knell.stores.disk)."""


def make(kind: str, owner: Owner | None) -> Path:
    """A fresh temporary folder for one store, recorded with ``owner``."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    path.chmod(0o755)
    if owner is not None:
        owner.resource("directory", str(path))
    return path


def remove(record: dict[str, Any]) -> bool:
    """Remove a recorded folder; only ever one named by :data:`PREFIXES`."""
    path = Path(str(record.get("id", "")))
    if not path.name.startswith(PREFIXES) or path.parent != Path(tempfile.gettempdir()):
        return False
    if not path.exists():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()
