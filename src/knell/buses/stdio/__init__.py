"""The ``exec:`` driver: test a bus written in any language over stdio.

Many agent buses are not Python. Their authors write a small *adapter*: a
program that reads one JSON request per line on stdin and writes one JSON
reply per line on stdout (``docs/stdio-protocol.md`` specifies it, with a
JSON Schema). knell then drives that bus through every scenario and check
exactly as it drives its own, the way Maelstrom runs nodes in any
language::

    knell run quickstart --bus 'exec:node examples/node-adapter/adapter.js'

The protocol covers the three contracts (broadcast, queue, at-most-once);
an adapter declares those it implements in its ``hello`` reply, that is
what :attr:`StdioBus.contracts` says, and ``knell run`` refuses a
scenario for a contract the adapter does not declare.

The driver string is ``exec:`` followed by a command line (split like a
POSIX shell would, without running one). knell still provisions the run's
store (a fresh SQLite file) and calls the driver's factory with its URL;
the factory starts the adapter *as a child of the calling process* (each
worker gets its own adapter, which dies with it) and hands it the URL in
the ``hello`` handshake and as ``$KNELL_STORE_URL``.

Relative paths in the command are relative to the directory knell was
started from, even in workers, which run inside the run directory: the
first resolution of an ``exec:`` driver records that directory in
``$KNELL_EXEC_CWD``, which workers inherit, and adapters start there.

Options come from the environment, so one driver string serves a whole
run: ``KNELL_ADAPTER_TIMEOUT`` (seconds to wait for a reply, default 30),
``KNELL_ADAPTER_START_TIMEOUT`` (for ``hello``, default 30),
``KNELL_ADAPTER_STDERR`` (a file for the adapters' stderr; default: the
worker's own stderr, which is its log in the run directory) and
``KNELL_ADAPTER_STDERR_CAP`` (bytes, default 1 MiB per bus), and
``KNELL_ADAPTER_TRACE`` (a folder: each adapter's traffic, both ways, goes
to ``adapter-PID.log`` there; for a bus author debugging an adapter).

The modules: :mod:`.wire` (lines and reply shapes), :mod:`.child` (the
adapter process and its leash), :mod:`.bus` (:class:`StdioBus`, the
contract over the protocol), :mod:`.errors` (:class:`AdapterError`).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.buses import EXEC_CWD_VAR
from knell.buses.stdio.bus import StdioBus
from knell.buses.stdio.errors import MARKER, AdapterError, AdapterStartError
from knell.buses.stdio.wire import PROTOCOL_VERSION

__all__ = [
    "MARKER",
    "PROTOCOL_VERSION",
    "AdapterError",
    "AdapterStartError",
    "StdioBus",
    "exec_driver",
    "open_exec",
    "options_from_env",
]

PREFIX = "exec:"
CWD_VAR = EXEC_CWD_VAR


def _driver_error(message: str) -> Exception:
    from knell.buses import DriverError

    return DriverError(message)


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise _driver_error(f"${name}={raw!r}: expected a number of seconds > 0")
    return value


def options_from_env() -> dict[str, Any]:
    """The :class:`StdioBus` options set by ``KNELL_ADAPTER_*`` variables."""
    options: dict[str, Any] = {
        "timeout": _seconds("KNELL_ADAPTER_TIMEOUT", 30.0),
        "start_timeout": _seconds("KNELL_ADAPTER_START_TIMEOUT", 30.0),
    }
    if os.environ.get("KNELL_ADAPTER_STDERR"):
        options["stderr"] = os.environ["KNELL_ADAPTER_STDERR"]
    if os.environ.get("KNELL_ADAPTER_TRACE"):
        options["trace"] = os.environ["KNELL_ADAPTER_TRACE"]
    cap = os.environ.get("KNELL_ADAPTER_STDERR_CAP")
    if cap:
        if not cap.isdigit():
            raise _driver_error(f"$KNELL_ADAPTER_STDERR_CAP={cap!r}: expected a number of bytes")
        options["stderr_cap"] = int(cap)
    return options


def _program(argv0: str, cwd: str) -> str:
    """The adapter program as an absolute path, or a clear error."""
    if os.sep in argv0 or (os.altsep and os.altsep in argv0):
        path = Path(cwd, argv0)
        if not path.is_file():
            raise _driver_error(f"no such program {argv0!r} (looked in {cwd})")
        return os.path.abspath(path)  # not resolve(): a venv's python is a symlink
    found = shutil.which(argv0)
    if found is None:
        raise _driver_error(f"program {argv0!r} is not on PATH")
    return found


def exec_driver(driver: str) -> Callable[[str], StdioBus]:
    """The factory for an ``exec:COMMAND ARGS`` driver string: called with
    the run's store URL, it starts the adapter. The command is checked here
    (it parses, its program exists), before any process starts."""
    command = driver[len(PREFIX) :].strip() if driver.startswith(PREFIX) else driver.strip()
    try:
        argv = shlex.split(command, posix=sys.platform != "win32")
    except ValueError as exc:
        raise _driver_error(f"bus driver {driver!r}: cannot split the command: {exc}") from None
    if not argv:
        raise _driver_error(f"bus driver {driver!r}: give a command after 'exec:'")
    cwd = os.environ.setdefault(CWD_VAR, os.getcwd())
    try:
        argv[0] = _program(argv[0], cwd)
    except Exception as exc:
        raise _driver_error(f"bus driver {driver!r}: {exc}") from None
    options = options_from_env()
    return functools.partial(_open, argv, cwd, options)


def _open(argv: list[str], cwd: str, options: dict[str, Any], store: str) -> StdioBus:
    return StdioBus(argv, store, cwd=cwd, **options)


def open_exec(url: str) -> StdioBus:
    """The ``exec:`` URL scheme: an adapter that brings its own store (it
    gets an empty store URL)."""
    return exec_driver(url)("")
