"""A private Postgres server for one run.

``initdb`` makes a fresh cluster, and ``postgres`` serves it on a free
127.0.0.1 port (TCP only: no Unix socket to place or clean up), with
``fsync`` and ``synchronous_commit`` as the scenario says, so a store-crash
fault tests exactly the durability the scenario claims. The superuser is
``knell``, trusted from 127.0.0.1 (or with a password, ``password=``, to
exercise credentials).

Postgres refuses to run as root. As root the server therefore runs as an
unprivileged user (``postgres`` unless ``user=`` names another), with its
data directory in a temporary folder that user owns, because the run
directory may sit under a folder only root can enter; the folder is on
record in the owner registry until it is removed. The server's output goes
to ``store/postgres.log`` in the run directory through a file descriptor
the runner opened, so that user never needs to reach the run directory.

Settings go on the server's command line as ``-c name=value``, secrets
excepted: a setting whose name says it is one (:func:`knell.redact.is_secret_key`)
would be readable there by every local user (``ps``), and the data
directory may sit in the run directory, which is shared. Those go into a
main config file of mode 0600 in a private temporary folder (0700) outside
the run directory (``-c config_file=...``), which includes the cluster's
own ``postgresql.conf`` first and is removed when the store stops.

A crash is SIGKILL of the server's process group (postmaster and backends
alike: nothing gets to flush or say goodbye); a restart runs crash
recovery on the same data directory and port.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import psycopg

from knell.faketime.control import CONTROL_ENV
from knell.owners import Owner
from knell.platform import give_to, is_root
from knell.redact import is_secret_key
from knell.stores import tempdirs
from knell.stores.base import StoreError, tail
from knell.stores.postgres.discovery import PostgresBinaries, find_postgres
from knell.stores.process import KeptProcess
from knell.stores.server import ServerStore, ensure_writable

__all__ = ["SYNCHRONOUS_COMMIT", "PostgresServer"]

SYNCHRONOUS_COMMIT = ("on", "off", "local", "remote_write", "remote_apply")

SUPERUSER = "knell"
DATABASE = "postgres"


class PostgresServer(ServerStore):
    """A Postgres cluster in the run directory (or a temporary folder as
    root), served on 127.0.0.1."""

    kind = "postgres"
    title = "Postgres"
    ready_timeout = 60.0

    def __init__(
        self,
        run_dir: Path,
        *,
        owner: Owner | None = None,
        port: int | None = None,
        fsync: bool = True,
        synchronous_commit: str = "on",
        bin_dir: str | Path | None = None,
        user: str | None = None,
        data_dir: str | Path | None = None,
        password: str | None = None,
        keep: bool = False,
        schema: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        settings: dict[str, str] | None = None,
        disk: str = "plain",
        node: str | None = None,
    ) -> None:
        super().__init__(
            run_dir, owner=owner, port=port, poll_interval=poll_interval, op_timeout=op_timeout
        )
        if synchronous_commit not in SYNCHRONOUS_COMMIT:
            raise StoreError(
                f"synchronous_commit must be one of {', '.join(SYNCHRONOUS_COMMIT)}, "
                f"got {synchronous_commit!r}"
            )
        self.fsync = fsync
        self.synchronous_commit = synchronous_commit
        self.bin_dir = bin_dir
        self.user = user
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.password = password
        self.keep = keep
        self.schema = schema
        self.settings = dict(settings or {})
        self.binaries: PostgresBinaries | None = None
        self.node = node
        """The node's name in a replicated store (``pg-0``), or None alone."""
        if node is not None:
            self.log = self.store_dir / f"{node}.log"
        self.initdb_log = self.store_dir / ("initdb.log" if node is None else f"{node}-init.log")
        self._temp: Path | None = None
        self._clock_temp: Path | None = None
        self._secrets: Path | None = None
        """The private folder of the secret settings' config file, once written."""
        self._data_on(disk, owner)

    # -- the URL --------------------------------------------------------------

    def _auth(self) -> str:
        return SUPERUSER + (f":{self.password}" if self.password else "")

    @property
    def admin_url(self) -> str:
        """A plain libpq URL of the server (no knell options)."""
        if self.port is None:
            raise StoreError("the Postgres store has not been started")
        return f"postgresql://{self._auth()}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def url(self) -> str:
        return (
            f"{self.admin_url}?schema={self.schema}"
            f"&poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"
        )

    # -- lifecycle ------------------------------------------------------------

    def _server_user(self) -> str | None:
        if is_root():
            return self.user or "postgres"
        if self.user is not None:
            raise StoreError(
                f"store user = {self.user!r}: running Postgres as another user needs root"
            )
        return None

    def _place_clock(self, user: str | None) -> None:
        """A clock fault's control file where the server's user can read it:
        as another user, the server may not reach the run directory, so the
        file moves to a temporary folder of its own and the environment
        (which the fault reads to know where to write) names it there."""
        current = self.server_env.get(CONTROL_ENV)
        if user is None or current is None or self._clock_temp is not None:
            return
        self._clock_temp = tempdirs.make("postgres-clock", self.owner)
        moved = self._clock_temp / Path(current).name
        shutil.copyfile(current, moved)
        moved.chmod(0o644)
        self.server_env[CONTROL_ENV] = str(moved)

    def _provision(self) -> None:
        self.binaries = find_postgres(self.bin_dir)
        ensure_writable(self.store_dir, "store folder")
        user = self.user = self._server_user()
        self._place_clock(user)
        if self.disk is not None:
            self.data_dir = self.disk.start() / "pgdata"
        elif self.data_dir is None:
            if user is not None:
                self._temp = tempdirs.make("postgres", self.owner)
                self.data_dir = self._temp / "data"
            else:
                self.data_dir = self.store_dir / (
                    "pgdata" if self.node is None else f"{self.node}-pgdata"
                )
        data = self.data_dir
        try:
            data.mkdir(parents=True, exist_ok=True)
            if user is not None:
                give_to(data if self._temp is None else self._temp, user)
        except KeyError:
            raise StoreError(
                f"no user {user!r} to run Postgres as (it refuses to run as root): "
                "create one, or name another with store user = ..."
            ) from None
        except OSError as exc:
            raise StoreError(f"data directory {data} is not writable: {exc}") from None
        if (data / "PG_VERSION").exists():
            return  # an existing cluster (a kept data directory): serve it as it is
        self._make_cluster(data, user)
        if self.disk is not None and sys.platform != "win32":
            # initdb ran with --no-sync: make the fresh cluster durable, as a
            # machine set up before the test would be, so a power loss hits
            # only what the server itself wrote.
            self.disk.control().checkpoint()

    def _make_cluster(self, data: Path, user: str | None) -> None:
        """Fill the empty data directory ``data`` (``initdb``; a replica
        copies its primary instead)."""
        self._initdb(data, user)

    def _initdb(self, data: Path, user: str | None) -> None:
        assert self.binaries is not None
        command = [
            str(self.binaries.initdb),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]
        pwfile = None
        if self.password:
            # The password reaches initdb through a file only its user can
            # read, removed as soon as initdb is done; never its command
            # line, which every local user can read (see knell.redact).
            pwfile = data.parent / f".knell-pw-{data.name}"
            pwfile.unlink(missing_ok=True)
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.password + "\n")
            if user is not None:
                give_to(pwfile, user)
            command += ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            command += ["--auth=trust"]
        initdb = KeptProcess(
            "initdb",
            command,
            log=self.initdb_log,
            pidfile=self.store_dir / "initdb.pid",
            user=user,
            owner=self.owner,
        )
        try:
            initdb.start()
            if not initdb.wait(180):
                initdb.kill()
                raise StoreError(f"initdb of {data} did not finish within 180 s")
        finally:
            if pwfile is not None:
                pwfile.unlink(missing_ok=True)
        code = initdb.exit_code()
        if code != 0:
            log = tail(self.initdb_log)
            if "ermission denied" in log:
                who = f"user {user!r}" if user else "this user"
                last = log.splitlines()[-1]
                raise StoreError(f"data directory {data} is not writable by {who} (initdb: {last})")
            raise StoreError(f"initdb of {data} failed (exit {code}): {log}")

    def _command(self) -> list[str]:
        assert self.binaries is not None and self.data_dir is not None
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "fsync": "on" if self.fsync else "off",
            "synchronous_commit": self.synchronous_commit,
            "max_connections": "200",
            "logging_collector": "off",
            "log_line_prefix": "%m [%p] ",
            **self.settings,
        }
        secret = {k: v for k, v in settings.items() if is_secret_key(k)}
        command = [str(self.binaries.postgres), "-D", str(self.data_dir)]
        if secret:
            command += ["-c", f"config_file={self._secret_config(secret)}"]
        for key, value in settings.items():
            if key not in secret:
                command += ["-c", f"{key}={value}"]
        return command

    def _secret_config(self, secret: dict[str, str]) -> Path:
        """Write the server's main config file, the cluster's own
        ``postgresql.conf`` and then the secret settings, 0600 in a 0700
        folder of this store's own (made once, recorded with the owner so a
        runner that dies does not leave it behind, given to the server's
        user) and return its path. The data directory and the HBA file stay
        where ``-D`` puts them."""
        assert self.data_dir is not None
        if self._secrets is None:
            self._secrets = tempdirs.make("postgres-conf", self.owner)
            self._secrets.chmod(0o700)
        path = self._secrets / "postgresql.conf"
        own = Path(self.data_dir).resolve() / "postgresql.conf"
        text = f"include_if_exists {_conf_quote(str(own))}\n" + "".join(
            f"{key} = {_conf_quote(value)}\n" for key, value in secret.items()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        path.chmod(0o600)  # an existing file keeps its mode through O_CREAT
        if self.user is not None:
            give_to(self._secrets, self.user)
        return path

    def _kept_options(self) -> dict[str, Any]:
        return {"user": self.user}

    def clock(self) -> float:
        """The server's wall clock (``clock_timestamp()``, what ``now()``
        reads at the start of each transaction)."""
        with psycopg.connect(self.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT extract(epoch from clock_timestamp())::float8").fetchone()
        assert row is not None
        return float(row[0])

    def _probe(self) -> str | None:
        try:
            with psycopg.connect(self.admin_url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return None
        except psycopg.Error as exc:
            return " ".join(str(exc).split())

    def stop(self) -> None:
        self._stop_server("interrupt")  # "fast" shutdown: no waiting for clients
        if self._temp is not None and not self.keep:
            shutil.rmtree(self._temp, ignore_errors=True)
        if self._clock_temp is not None:
            shutil.rmtree(self._clock_temp, ignore_errors=True)
        if self._secrets is not None:
            shutil.rmtree(self._secrets, ignore_errors=True)
            self._secrets = None
        if self.disk is not None:
            self.disk.stop()  # after the server: nothing holds it open

    @property
    def logs(self) -> list[Path]:
        return [p for p in (self.initdb_log, self.log) if p.exists()]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server": "private",
            "port": self.port,
            "binaries": None if self.binaries is None else str(self.binaries.folder),
            "data_dir": None if self.data_dir is None else str(self.data_dir),
            "user": self.user,
            "fsync": self.fsync,
            "synchronous_commit": self.synchronous_commit,
            **({} if self.disk is None else self.disk.describe()),
        }


def _conf_quote(value: str) -> str:
    """``value`` as a quoted postgresql.conf value: single quotes doubled,
    backslashes and line breaks escaped as the config parser reads them."""
    escaped = (
        value.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n").replace("\r", "\\r")
    )
    return f"'{escaped}'"
