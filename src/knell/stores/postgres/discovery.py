"""Where the Postgres server binaries are.

Postgres hides its server binaries: Debian and Ubuntu put ``initdb`` and
``postgres`` in ``/usr/lib/postgresql/<version>/bin`` (only the client
wrappers are on PATH), RHEL in ``/usr/pgsql-<version>/bin``, Homebrew under
``/opt/homebrew/opt/postgresql@<version>/bin``. So the search order is:
``bin`` (a folder) > ``$KNELL_POSTGRES_BIN`` (a folder) > PATH > the usual
places, newest version first. A folder qualifies when it holds both
``initdb`` and ``postgres``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from knell.stores.base import StoreError
from knell.stores.discovery import EXE as _EXE

__all__ = ["PostgresBinaries", "find_postgres"]

_POSTGRES_GLOBS = (
    "/usr/lib/postgresql/*/bin",
    "/usr/pgsql-*/bin",
    "/opt/homebrew/opt/postgresql@*/bin",
    "/usr/local/opt/postgresql@*/bin",
    "/opt/homebrew/opt/postgresql/bin",
    "/usr/local/opt/postgresql/bin",
    "/usr/local/pgsql/bin",
    "C:/Program Files/PostgreSQL/*/bin",
)


@dataclass(frozen=True)
class PostgresBinaries:
    """The two programs a private Postgres needs, from one installation."""

    initdb: Path
    postgres: Path

    @property
    def folder(self) -> Path:
        return self.postgres.parent


def _version_key(folder: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", folder)
    return tuple(int(n) for n in numbers) or (0,)


def _postgres_in(folder: Path) -> PostgresBinaries | None:
    initdb, postgres = folder / f"initdb{_EXE}", folder / f"postgres{_EXE}"
    if initdb.is_file() and postgres.is_file():
        return PostgresBinaries(initdb, postgres)
    return None


def find_postgres(named: str | Path | None = None) -> PostgresBinaries:
    """The Postgres server binaries; :class:`StoreError` names where it looked."""
    if named is not None:
        found = _postgres_in(Path(named))
        if found is None:
            raise StoreError(f"store bin = {str(named)!r}: no initdb and postgres in that folder")
        return found
    env = os.environ.get("KNELL_POSTGRES_BIN")
    if env:
        found = _postgres_in(Path(env))
        if found is None:
            raise StoreError(f"KNELL_POSTGRES_BIN={env!r}: no initdb and postgres in that folder")
        return found
    on_path = shutil.which("postgres"), shutil.which("initdb")
    if on_path[0] and on_path[1]:
        return PostgresBinaries(Path(on_path[1]), Path(on_path[0]))
    candidates: list[str] = []
    for pattern in _POSTGRES_GLOBS:
        candidates += sorted(glob.glob(pattern), key=_version_key, reverse=True)
    for folder in candidates:
        found = _postgres_in(Path(folder))
        if found is not None:
            return found
    raise StoreError(
        "no Postgres server binaries (initdb and postgres) found on PATH or in "
        + ", ".join(_POSTGRES_GLOBS)
        + "; install Postgres (Debian: apt-get install postgresql) or set KNELL_POSTGRES_BIN "
        "to its bin folder"
    )
