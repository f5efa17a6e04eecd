"""A private Redis server for one run.

``redis-server`` on a free 127.0.0.1 port, configured on its command line
(no config file to find or write), with its data in ``store/redis/`` and
its log in ``store/redis.log``. Persistence is the scenario's choice,
because it is exactly what a store-crash fault tests:

* ``always``: ``appendonly yes`` + ``appendfsync always``: a write is
  fsynced to the AOF before the reply, so nothing acknowledged is lost;
* ``everysec``: ``appendfsync everysec``: the AOF is written before the
  reply but fsynced once a second, so a machine crash can lose a second of
  acknowledged writes; a SIGKILL of the server cannot (the page cache
  survives it), which a store-crash run shows;
* ``none``: no AOF and no snapshots: a crash loses everything, and a run
  shows it.

RDB snapshots are always off (``save ""``), so a restart loads exactly what
the AOF says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redis.connection import Connection
from redis.exceptions import BusyLoadingError, RedisError

from knell.owners import Owner
from knell.stores.base import StoreError
from knell.stores.redis.discovery import find_redis_server
from knell.stores.server import ServerStore, ensure_writable

__all__ = ["PERSISTENCE", "RedisServer"]

PERSISTENCE = ("none", "everysec", "always")


class RedisServer(ServerStore):
    """A Redis server whose data lives in the run directory."""

    kind = "redis"
    title = "Redis"
    frozen_client_stalls = False

    def __init__(
        self,
        run_dir: Path,
        *,
        owner: Owner | None = None,
        port: int | None = None,
        persistence: str = "always",
        binary: str | Path | None = None,
        data_dir: str | Path | None = None,
        password: str | None = None,
        prefix: str = "knell:",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        settings: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            run_dir, owner=owner, port=port, poll_interval=poll_interval, op_timeout=op_timeout
        )
        if persistence not in PERSISTENCE:
            raise StoreError(
                f"redis persistence must be one of {', '.join(PERSISTENCE)}, got {persistence!r}"
            )
        self.persistence = persistence
        self.binary_name = binary
        self.binary: Path | None = None
        self.data_dir = Path(data_dir) if data_dir is not None else self.store_dir / "redis"
        self.password = password
        self.prefix = prefix
        self.settings = dict(settings or {})

    @property
    def admin_url(self) -> str:
        if self.port is None:
            raise StoreError("the Redis store has not been started")
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def url(self) -> str:
        return (
            f"{self.admin_url}?prefix={self.prefix}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    def _provision(self) -> None:
        self.binary = find_redis_server(self.binary_name)
        ensure_writable(self.store_dir, "store folder")
        ensure_writable(self.data_dir, "data directory")

    def _command(self) -> list[str]:
        assert self.binary is not None
        settings = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.data_dir.resolve()),
            "save": "",
            "appendonly": "no" if self.persistence == "none" else "yes",
            "appendfsync": "everysec" if self.persistence == "everysec" else "always",
            "daemonize": "no",
            "logfile": "",
            **({"requirepass": self.password} if self.password else {}),
            **self.settings,
        }
        command = [str(self.binary)]
        for key, value in settings.items():
            command += [f"--{key}", value]
        return command

    def _kept_options(self) -> dict[str, Any]:
        return {"cwd": self.data_dir}

    def _probe(self) -> str | None:
        conn = Connection(
            host="127.0.0.1",
            port=self.port or 0,
            password=self.password,
            socket_timeout=2,
            socket_connect_timeout=2,
        )
        try:
            conn.send_command("PING")
            conn.read_response()
            return None
        except BusyLoadingError:
            return "loading its data"
        except (RedisError, OSError) as exc:
            return " ".join(str(exc).split())
        finally:
            conn.disconnect()

    def stop(self) -> None:
        self._stop_server("terminate")

    @property
    def logs(self) -> list[Path]:
        return [self.log] if self.log.exists() else []

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "port": self.port,
            "binary": None if self.binary is None else str(self.binary),
            "data_dir": str(self.data_dir),
            "persistence": self.persistence,
        }
