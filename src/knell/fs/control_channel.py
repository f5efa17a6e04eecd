"""The control channel: how a nemesis (or a user's test) drives a mounted
filesystem from another process.

One Unix socket, one JSON object per line each way: a request
``{"op": "torn", "seed": 7}`` gets ``{"ok": true, "result": {...}}`` or
``{"ok": false, "error": "..."}``. The operations are those of
:class:`FsControl`; the server runs them on the page cache and the fault
switches of the mount process. A socket (not signals or files) because a
power cut must be done, and its report read, before the nemesis restarts
the store.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import sys
import threading
from pathlib import Path
from typing import Any

assert sys.platform != "win32"

from knell.errors import KnellError  # noqa: E402
from knell.fs.cache import LazyDisk  # noqa: E402
from knell.fs.faults import FaultSwitches  # noqa: E402

__all__ = ["ControlError", "ControlServer", "FsControl"]


class ControlError(KnellError):
    """The control socket cannot be reached, or refused a request."""


def _handle(disk: LazyDisk, faults: FaultSwitches, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "lose-unsynced":
        return disk.lose_unsynced().as_dict()
    if op == "torn":
        seed = request.get("seed")
        if not isinstance(seed, int):
            raise ValueError(f"torn: seed must be an integer, not {seed!r}")
        return disk.torn(seed).as_dict()
    if op == "checkpoint":
        disk.checkpoint()
        return {}
    if op == "fsync-error":
        count = request.get("count", 1)
        path = request.get("path")
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"fsync-error: count must be a positive integer, not {count!r}")
        if path is not None and not isinstance(path, str):
            raise ValueError(f"fsync-error: path must be a string, not {path!r}")
        faults.arm_fsync_error(path, count, drop_dirty=bool(request.get("drop_dirty", True)))
        return faults.as_dict()
    if op == "disk-full":
        faults.disk_full = True
        return faults.as_dict()
    if op == "slow-disk":
        delay = request.get("delay")
        if not isinstance(delay, (int, float)) or delay < 0:
            raise ValueError(f"slow-disk: delay must be seconds >= 0, not {delay!r}")
        faults.fsync_delay = float(delay)
        return faults.as_dict()
    if op == "heal":
        faults.heal()
        return faults.as_dict()
    if op == "status":
        with disk.lock:
            return {
                **faults.as_dict(),
                "dirty_files": len(disk.files),
                "dirty_dirs": len(disk.dirs),
                "entries": disk.entries,
                "pid": os.getpid(),
            }
    raise ValueError(f"unknown operation {op!r}")


class ControlServer:
    """Serves the control socket on a thread of the mount process."""

    def __init__(self, path: Path, disk: LazyDisk, faults: FaultSwitches) -> None:
        self.path = Path(path)

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    try:
                        request = json.loads(line)
                        if not isinstance(request, dict):
                            raise ValueError("a request is a JSON object")
                        reply = {"ok": True, "result": _handle(disk, faults, request)}
                    except (ValueError, OSError) as exc:
                        reply = {"ok": False, "error": str(exc)}
                    except Exception as exc:  # a bug here must still answer
                        reply = {"ok": False, "error": f"internal: {type(exc).__name__}: {exc}"}
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                    self.wfile.flush()

        self.path.unlink(missing_ok=True)
        self._server = socketserver.ThreadingUnixStreamServer(str(self.path), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)


class FsControl:
    """The client: one method per fault, each a round trip on the socket
    that returns when the mount process has done it."""

    def __init__(self, path: Path | str, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.timeout = timeout

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        payload = json.dumps({"op": op, **args}).encode() + b"\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(str(self.path))
                sock.sendall(payload)
                data = sock.makefile("rb").readline()
        except OSError as exc:
            raise ControlError(
                f"{self.path}: cannot reach the knell fs control socket: {exc.strerror or exc}"
            ) from None
        if not data:
            raise ControlError(f"{self.path}: the knell fs control socket closed without a reply")
        reply = json.loads(data)
        if not reply.get("ok"):
            raise ControlError(f"{self.path}: {op}: {reply.get('error')}")
        result: dict[str, Any] = reply.get("result") or {}
        return result

    def lose_unsynced(self) -> dict[str, Any]:
        return self.request("lose-unsynced")

    def torn(self, seed: int) -> dict[str, Any]:
        return self.request("torn", seed=seed)

    def fsync_error(
        self, path: str | None = None, count: int = 1, *, drop_dirty: bool = True
    ) -> dict[str, Any]:
        return self.request("fsync-error", path=path, count=count, drop_dirty=drop_dirty)

    def disk_full(self) -> dict[str, Any]:
        return self.request("disk-full")

    def slow_disk(self, delay: float) -> dict[str, Any]:
        return self.request("slow-disk", delay=delay)

    def heal(self) -> dict[str, Any]:
        return self.request("heal")

    def checkpoint(self) -> dict[str, Any]:
        return self.request("checkpoint")

    def status(self) -> dict[str, Any]:
        return self.request("status")
