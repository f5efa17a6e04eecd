"""A private NATS server with JetStream for one run.

``nats-server`` on a free 127.0.0.1 port, configured by a file it is
started with (``store/nats.conf``: the port, JetStream, its store
directory ``store/nats/`` in the run directory), its log in
``store/nats.log``, on the keeper's leash like every private server
(:mod:`knell.stores.process`): a SIGKILLed runner takes it down, and
``knell reap`` removes what even the keeper left.

``sync_interval`` is the scenario's choice, because it is exactly what a
store-crash fault tests. JetStream's file store writes each message to
its block file before it acknowledges the publish, but fsyncs those files
only every ``sync_interval`` (two minutes as NATS ships it; the option is
absent from the file then): a SIGKILL of the server cannot lose an
acknowledged message (the page cache survives a process), a power loss
can lose up to two minutes of them. ``always`` fsyncs every write before
the acknowledgement.

A config file, not flags: ``sync_interval`` has no command-line flag, and
one file keeps every setting where ``ps`` and the run directory show it.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

from knell.owners import Owner
from knell.stores.base import StoreError
from knell.stores.nats.discovery import find_nats_server
from knell.stores.server import ServerStore, ensure_writable

__all__ = ["SYNC_INTERVAL", "NatsServer", "jetstream_ready"]

SYNC_INTERVAL = re.compile(r"^(always|[1-9][0-9]*(ms|s|m|h))$")
"""What ``sync_interval`` may be: ``always``, or a duration NATS reads
(``500ms``, ``10s``, ``2m``)."""

GUARDED = frozenset({"listen", "host", "net", "port", "jetstream", "include"})
"""Top-level settings knell writes itself: a scenario's ``settings`` may
not open the server beyond 127.0.0.1 or move its store out of the run."""


class NatsServer(ServerStore):
    """A NATS server whose JetStream store lives in the run directory."""

    kind = "nats"
    title = "NATS"
    # The server runs each request whole: a frozen client holds nothing.
    frozen_client_stalls = False

    def __init__(
        self,
        run_dir: Path,
        *,
        owner: Owner | None = None,
        port: int | None = None,
        sync_interval: str | None = None,
        binary: str | Path | None = None,
        data_dir: str | Path | None = None,
        prefix: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        settings: dict[str, str] | None = None,
        disk: str = "plain",
        duplicate_window: float | None = None,
    ) -> None:
        super().__init__(
            run_dir, owner=owner, port=port, poll_interval=poll_interval, op_timeout=op_timeout
        )
        if sync_interval is not None and not SYNC_INTERVAL.match(sync_interval):
            raise StoreError(
                f'store option sync_interval = {sync_interval!r}: must be "always" or a '
                'duration such as "10s" or "2m"'
            )
        self.sync_interval = sync_interval
        self.duplicate_window = duplicate_window
        """The drivers' stream duplicate window (in the URL); None: NATS's."""
        self.binary_name = binary
        self.binary: Path | None = None
        self.data_dir = Path(data_dir) if data_dir is not None else self.store_dir / "nats"
        self.prefix = prefix
        self.settings = dict(settings or {})
        guarded = sorted(k for k in self.settings if k.lower() in GUARDED)
        if guarded:
            raise StoreError(
                f"store settings {guarded}: knell sets these itself (the server listens on "
                "127.0.0.1 only, its store stays in the run directory)"
            )
        self.config = self.store_dir / "nats.conf"
        self._data_on(disk, owner)

    @property
    def admin_url(self) -> str:
        if self.port is None:
            raise StoreError("the NATS store has not been started")
        return f"nats://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return (
            f"{self.admin_url}?prefix={self.prefix}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        ) + (
            "" if self.duplicate_window is None else f"&duplicate_window={self.duplicate_window:g}"
        )

    def _provision(self) -> None:
        self.binary = find_nats_server(self.binary_name)
        ensure_writable(self.store_dir, "store folder")
        if self.disk is not None:
            self.data_dir = self.disk.start() / "nats"
        ensure_writable(self.data_dir, "JetStream store directory")

    def _command(self) -> list[str]:
        assert self.binary is not None
        self.config.write_text(self._config_text(), encoding="utf-8")
        return [str(self.binary), "-c", str(self.config.resolve())]

    def _config_text(self) -> str:
        lines = [
            f'listen: "127.0.0.1:{self.port}"',
            'server_name: "knell"',
            "jetstream {",
            f"  store_dir: {json.dumps(str(self.data_dir.resolve()))}",
        ]
        if self.sync_interval is not None:
            lines.append(f"  sync_interval: {self.sync_interval}")
        lines.append("}")
        lines += [f"{key}: {value}" for key, value in self.settings.items()]
        return "\n".join(lines) + "\n"

    def _probe(self) -> str | None:
        return jetstream_ready("127.0.0.1", self.port or 0, timeout=2.0)

    def stop(self) -> None:
        # SIGTERM: NATS flushes and closes its stores (its documented stop).
        self._stop_server("terminate")
        if self.disk is not None:
            self.disk.stop()  # after the server: nothing holds it open

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "port": self.port,
            "binary": None if self.binary is None else str(self.binary),
            "data_dir": str(self.data_dir),
            "sync_interval": self.sync_interval or "default",
            **({} if self.disk is None else self.disk.describe()),
        }


_INBOX = b"_INBOX.knell-ready"


def jetstream_ready(host: str, port: int, *, timeout: float) -> str | None:
    """Whether JetStream answers at ``host:port``: None if it does, else why
    not (one line). A raw exchange, no client library: the server's
    ``INFO``, then a ``$JS.API.INFO`` request, whose reply proves
    JetStream (not just the server) is up; after a restart it answers only
    once its streams are recovered."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return "closed before its INFO"
                data += chunk
            if not data.startswith(b"INFO "):
                return f"no INFO greeting ({data[:40]!r})"
            sock.sendall(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
                b"SUB " + _INBOX + b" 1\r\nPUB $JS.API.INFO " + _INBOX + b" 0\r\n\r\n"
            )
            data = b""
            while True:
                start = data.find(b"MSG " + _INBOX)
                if start >= 0:
                    header_end = data.find(b"\r\n", start)
                    if header_end >= 0:
                        size = int(data[start:header_end].split()[-1])
                        body = data[header_end + 2 : header_end + 2 + size]
                        if len(body) == size:
                            reply = json.loads(body or b"{}")
                            error = reply.get("error")
                            return None if error is None else f"JetStream: {error}"
                chunk = sock.recv(4096)
                if not chunk:
                    return "closed before JetStream answered"
                data += chunk
    except (OSError, ValueError) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
