"""One Redis Sentinel of a replicated private Redis.

A Sentinel watches the primary, agrees with the other Sentinels that it is
down (a quorum of them), elects one of them to lead the failover, and
promotes a replica; clients ask any Sentinel where the primary is now.
It is the ``redis-server`` binary in Sentinel mode (``redis-server CONF
--sentinel``: Debian's ``redis-sentinel`` is the same binary under another
name, and often not installed), on its own free 127.0.0.1 port, leashed to
the run like every private server (:mod:`knell.stores.process`).

A Sentinel rewrites its config file as it learns the topology, so the file
is its own and must be writable: ``store/<name>/sentinel.conf`` in the run
directory; with a password (``auth-pass``, a secret), a 0600 file in a
private 0700 temporary folder instead, on record with the owner so that a
runner that dies does not leave it behind.

The timeouts are short on purpose: ``down-after-milliseconds`` (default
1000) is how long the primary must be silent before a Sentinel calls it
down, and ``failover-timeout`` bounds each step of a failover, so a
failover takes seconds, not the three minutes of Redis's defaults.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from redis.connection import Connection
from redis.exceptions import RedisError

from knell.owners import Owner
from knell.stores import tempdirs
from knell.stores.redis.discovery import find_redis_server
from knell.stores.redis.server import _conf_quote
from knell.stores.server import ServerStore, ensure_writable

__all__ = ["SERVICE", "RedisSentinel"]

SERVICE = "knell"
"""The name the Sentinels monitor the primary under (the URL's service)."""


class RedisSentinel(ServerStore):
    """One Sentinel process (see the module docstring)."""

    kind = "redis"
    title = "Redis Sentinel"
    faults = frozenset()

    def __init__(
        self,
        run_dir: Path,
        *,
        name: str,
        owner: Owner | None,
        primary_port: int,
        quorum: int = 2,
        password: str | None = None,
        binary: str | Path | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        super().__init__(run_dir, owner=owner, port=None, poll_interval=0.1, op_timeout=5.0)
        self.name = name
        self.log = self.store_dir / f"{name}.log"
        self.dir = self.store_dir / name
        self.primary_port = primary_port
        self.quorum = quorum
        self.password = password
        self.binary_name = binary
        self.binary: Path | None = None
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self._private: Path | None = None

    @property
    def url(self) -> str:
        """Where it listens (``redis://``: Sentinel speaks the Redis protocol)."""
        return f"redis://127.0.0.1:{self.port}"

    def _provision(self) -> None:
        self.binary = find_redis_server(self.binary_name)
        ensure_writable(self.dir, "sentinel folder")

    def _config(self) -> str:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {_conf_quote(str(self.dir.resolve()))}",
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} {self.quorum}",
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}",
            f"sentinel failover-timeout {SERVICE} {self.failover_timeout_ms}",
            f"sentinel parallel-syncs {SERVICE} 1",
        ]
        if self.password:
            lines.append(f"sentinel auth-pass {SERVICE} {_conf_quote(self.password)}")
        return "".join(line + "\n" for line in lines)

    def _command(self) -> list[str]:
        assert self.binary is not None
        if self.password:
            if self._private is None:
                self._private = tempdirs.make("redis-sentinel", self.owner)
                self._private.chmod(0o700)
            path = self._private / "sentinel.conf"
        else:
            path = self.dir / "sentinel.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(self._config())
        return [str(self.binary), str(path), "--sentinel"]

    def _kept_options(self) -> dict[str, Any]:
        return {"cwd": self.dir}

    def connection(self, timeout: float = 2.0) -> Connection:
        """A short-lived connection to this Sentinel (not yet connected)."""
        return Connection(
            host="127.0.0.1",
            port=self.port or 0,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
        )

    def ask(self, *command: Any, timeout: float = 2.0) -> Any:
        """One command to this Sentinel and its reply."""
        conn = self.connection(timeout)
        try:
            conn.send_command(*command)
            return conn.read_response()
        finally:
            conn.disconnect()

    def _probe(self) -> str | None:
        try:
            self.ask("PING")
            return None
        except (RedisError, OSError) as exc:
            return " ".join(str(exc).split())

    def stop(self) -> None:
        self._stop_server("terminate")
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "port": self.port}
