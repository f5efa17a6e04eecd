"""Where ``redis-server`` is: ``bin`` (the path) > ``$KNELL_REDIS_SERVER``
> PATH > ``/usr/local/bin``, ``/opt/homebrew/bin``, ``/usr/bin``,
``/usr/sbin``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from knell.stores.base import StoreError
from knell.stores.discovery import EXE as _EXE

__all__ = ["find_redis_server"]

_REDIS_PLACES = ("/usr/local/bin", "/opt/homebrew/bin", "/usr/bin", "/usr/sbin")


def find_redis_server(named: str | Path | None = None) -> Path:
    """The ``redis-server`` binary; :class:`StoreError` names where it looked."""
    if named is not None:
        path = Path(named)
        if not path.is_file():
            raise StoreError(f"store bin = {str(named)!r}: no such redis-server binary")
        return path
    env = os.environ.get("KNELL_REDIS_SERVER")
    if env:
        if not Path(env).is_file():
            raise StoreError(f"KNELL_REDIS_SERVER={env!r}: no such redis-server binary")
        return Path(env)
    which = shutil.which("redis-server")
    if which:
        return Path(which)
    for folder in _REDIS_PLACES:
        path = Path(folder) / f"redis-server{_EXE}"
        if path.is_file():
            return path
    raise StoreError(
        "no redis-server found on PATH or in "
        + ", ".join(_REDIS_PLACES)
        + "; install Redis (Debian: apt-get install redis-server) or set KNELL_REDIS_SERVER "
        "to the binary"
    )
