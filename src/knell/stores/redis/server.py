"""A private Redis server for one run.

``redis-server`` on a free 127.0.0.1 port, configured on its command line,
with its data in ``store/redis/`` and its log in ``store/redis.log``.
Secrets are the exception: a password (``requirepass``, and any secret
setting such as ``masterauth``) would be readable by every local user on
the command line (``ps``), and the run directory is shared, so they go
into a config file of mode 0600 in a private temporary folder (0700)
outside the run directory, named as the server's first argument and
removed when the store stops (see :mod:`knell.redact`). Persistence is the scenario's choice,
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

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from redis.connection import Connection
from redis.exceptions import BusyLoadingError, RedisError

from knell.owners import Owner
from knell.redact import is_secret_key
from knell.stores import tempdirs
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
        disk: str = "plain",
        node: str | None = None,
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
        self.node = node or "redis"
        """Its name among the servers of one store (``redis-1``); alone, ``redis``."""
        if node is not None:
            self.log = self.store_dir / f"{node}.log"
        default_dir = self.store_dir / self.node
        self.data_dir = Path(data_dir) if data_dir is not None else default_dir
        self.password = password
        self.prefix = prefix
        self.settings = dict(settings or {})
        self._secrets: Path | None = None
        """The private folder of the secret settings' config file, once written."""
        self._data_on(disk, owner)

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
        if self.disk is not None:
            self.data_dir = self.disk.start() / "redis"
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
        secret = {k: v for k, v in settings.items() if is_secret_key(k)}
        command = [str(self.binary)]
        if secret:
            command.append(str(self._secret_config(secret)))
        for key, value in settings.items():
            if key not in secret:
                command += [f"--{key}", value]
        return command

    def _secret_config(self, secret: dict[str, str]) -> Path:
        """Write the secret settings to a 0600 file in a 0700 folder of
        this store's own (made once, recorded with the owner so a runner
        that dies does not leave it behind) and return its path."""
        if self._secrets is None:
            self._secrets = tempdirs.make("redis", self.owner)
            self._secrets.chmod(0o700)
        path = self._secrets / "secrets.conf"
        text = "".join(f"{key} {_conf_quote(value)}\n" for key, value in secret.items())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        path.chmod(0o600)  # an existing file keeps its mode through O_CREAT
        return path

    def _kept_options(self) -> dict[str, Any]:
        return {"cwd": self.data_dir}

    def preload_refusal(self) -> str | None:
        """A ``redis-server`` built with jemalloc (Debian's, and Redis's own
        default) cannot run under libfaketime: jemalloc reads the clock while
        libfaketime initialises, and the server dies at start (libfaketime
        issue #130, unfixed). One built with libc's malloc can. So when a
        clock fault must move the server's clock and the chosen binary is a
        jemalloc one, ``$KNELL_REDIS_CLOCK_SERVER`` may name a libc build
        (``make MALLOC=libc``) for this run alone; other runs keep theirs."""
        binary = find_redis_server(self.binary_name)
        why = _jemalloc(binary)
        if why is None:
            return None
        spare = os.environ.get(CLOCK_SERVER_ENV)
        if spare:
            if not Path(spare).is_file():
                return f"{CLOCK_SERVER_ENV}={spare!r}: no such redis-server binary"
            if _jemalloc(Path(spare)) is None:
                self.binary_name = spare
                return None
            why = _jemalloc(Path(spare)) or why
        return (
            f"{why}, which libfaketime cannot be preloaded into (the server dies at start: "
            "libfaketime issue #130); a clock fault can move its clients' clocks, not the "
            "server's (build Redis with MALLOC=libc, as tools/redis_libc.sh in knell's "
            f"repository does, and name it in {CLOCK_SERVER_ENV})"
        )

    def _connection(self) -> Connection:
        """A short-lived admin connection to the server (probes, its clock)."""
        return Connection(
            host="127.0.0.1",
            port=self.port or 0,
            password=self.password,
            socket_timeout=2,
            socket_connect_timeout=2,
        )

    def clock(self) -> float:
        """The server's wall clock (``TIME``, what ``PX`` expiry counts on)."""
        conn = self._connection()
        try:
            conn.send_command("TIME")
            seconds, micros = conn.read_response()
            return int(seconds) + int(micros) / 1e6
        finally:
            conn.disconnect()

    def _probe(self) -> str | None:
        conn = self._connection()
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
        if self._secrets is not None:
            shutil.rmtree(self._secrets, ignore_errors=True)
            self._secrets = None
        if self.disk is not None:
            self.disk.stop()  # after the server: nothing holds it open

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "port": self.port,
            "binary": None if self.binary is None else str(self.binary),
            "data_dir": str(self.data_dir),
            "persistence": self.persistence,
            **({} if self.disk is None else self.disk.describe()),
        }


def _conf_quote(value: str) -> str:
    """``value`` as one argument of a redis.conf line: double-quoted, with
    a backslash, a quote and any non-printable byte escaped as Redis's
    config parser reads them (``\\xHH``)."""
    out = []
    for byte in value.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


CLOCK_SERVER_ENV = "KNELL_REDIS_CLOCK_SERVER"
"""A ``redis-server`` built with libc's malloc, used for a run whose clock
faults move the server's clock when the usual binary is a jemalloc build."""


def _jemalloc(binary: Path) -> str | None:
    """Why ``binary`` cannot run under libfaketime (it is a jemalloc
    build, or says nothing), or None when it can."""
    try:
        version = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{binary} --version failed: {exc}"
    if "malloc=jemalloc" in version:
        return f"{binary} is built with jemalloc"
    return None
