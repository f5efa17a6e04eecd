"""The Postgres store kind: everything knell knows about Postgres, in one package.

* :mod:`.bus` (with :mod:`.queue`, :mod:`.roles`, :mod:`.kinds`): the
  reference bus on a Postgres server, ``postgresql://`` URLs;
* :mod:`.mutants`: that bus with one seeded bug each;
* :mod:`.server`: a private server for a run (``initdb`` into the run);
  :mod:`.discovery`: where its binaries are;
* :mod:`.external`: a run's schema on a server someone else runs;
* this module: the :class:`PostgresKind` declaration the registry reads.

Importing this package loads no client library: psycopg is imported by
the modules above, when a run uses Postgres (``pip install
'knell[postgres]'``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import field_validator, model_validator

from knell.platform import is_root, user_exists
from knell.stores.base import StoreError
from knell.stores.disk import DiskOptions
from knell.stores.kind import (
    ComposeService,
    Greeting,
    Probe,
    StoreKind,
    version_of,
)

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.stores.base import Store
    from knell.stores.integrity import Integrity
    from knell.stores.spec import StoreSpec

__all__ = ["STORE_KIND", "PostgresKind", "PostgresOptions"]

_ALL_FAULTS = frozenset({"crash", "pause", "restart", "disconnect"})

MAX_REPLICAS = 8
"""The most streaming replicas a private Postgres may have."""

_REPLICATED_REFUSED = ("port", "data_dir", "password")
"""Options of a lone private server a replicated one does not take: each
node gets a free port and a data directory of its own, and a replica
copies its primary without a password (trusted from 127.0.0.1)."""


class PostgresOptions(DiskOptions):
    """The ``[store]`` keys of a Postgres store."""

    fsync: bool | None = None
    synchronous_commit: Literal["on", "off", "local", "remote_write", "remote_apply"] | None = None
    user: str | None = None
    """The unprivileged user a root run starts the private server as."""
    replicas: int | None = None
    """Streaming replicas of a private server (0: a lone server); see
    :mod:`knell.stores.postgres.replication`."""
    synchronous: Literal["off", "on", "remote_apply"] | None = None
    """What a commit waits for on the replicas (``off``: nothing)."""

    @field_validator("replicas")
    @classmethod
    def _replicas_in_range(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= MAX_REPLICAS:
            raise ValueError(
                f"replicas = {value}: must be 0 (a lone server) to {MAX_REPLICAS} "
                "(each one is a whole server on this machine)"
            )
        return value

    @model_validator(mode="after")
    def _replication(self) -> PostgresOptions:
        if self.synchronous is not None and not self.replicas:
            raise ValueError(
                f"synchronous = {self.synchronous!r} needs replicas >= 1 (got "
                f"replicas = {self.replicas or 0}): a lone server has nothing to wait for"
            )
        if self.replicas and self.disk == "faulty":
            raise ValueError(f'replicas = {self.replicas}: not with disk = "faulty"')
        return self


class PostgresKind(StoreKind):
    """Postgres: a private server, an existing one, or a container."""

    name = "postgres"
    schemes = ("postgresql", "postgres")
    provisions = frozenset({"private", "existing", "compose"})
    network = True
    extra = "postgres"
    requires = ("psycopg",)
    options = PostgresOptions
    bus = "knell.stores.postgres.bus:open_postgres"
    reference = "knell.stores.postgres.bus:PostgresBus"
    mutants = "knell.stores.postgres.mutants"
    # The SSLRequest every libpq client may open with: a live server answers
    # one byte, N (no TLS) or S.
    greeting = Greeting(struct.pack("!ii", 8, 80877103), (b"N", b"S"))
    faults = {
        "private": frozenset({"crash", "pause"}),
        "replicated": frozenset({"crash", "pause", "failover", "split-brain", "replica-lag"}),
        "existing": frozenset({"crash"}),
        "compose": _ALL_FAULTS,
        # A primary and replicas in containers (knell.stores.postgres.composed).
        "compose-replicated": frozenset({"failover"}),
    }
    frozen_client_stalls = True
    bench = "knell.stores.postgres.bench:PostgresBench"
    queue_bench = "knell.stores.postgres.bench:QUEUE_BENCH"
    namespace_key = "schema"
    guarded_settings = frozenset({"listen_addresses"})
    compose = ComposeService(
        port=5432,
        link_port=15432,
        official_image="postgres:15-bookworm",
        image_variable="KNELL_POSTGRES_IMAGE",
        url="postgresql://knell:knell@{host}:{port}/knell",
        replicas=2,
    )
    capability = "run on a private Postgres server"

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        self.require()
        from knell.stores.postgres.server import PostgresServer

        o = spec.options
        if o.get("replicas"):
            return self._replicated(spec, run_dir, owner)
        return PostgresServer(
            run_dir,
            owner=owner,
            port=spec.port,
            fsync=True if o.get("fsync") is None else bool(o["fsync"]),
            synchronous_commit=o.get("synchronous_commit") or "on",
            disk=o.get("disk") or "plain",
            bin_dir=spec.bin,
            user=o.get("user"),
            data_dir=spec.data_dir,
            password=spec.password,
            settings=spec.settings,
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
        )

    def _replicated(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        from knell.stores.postgres.replication import ReplicatedPostgres

        for name in _REPLICATED_REFUSED:
            if getattr(spec, name) is not None:
                raise StoreError(
                    f"store option {name!r} does not apply with replicas = "
                    f"{spec.options['replicas']} (each node gets its own)"
                    if name != "password"
                    else f"store option 'password' does not apply with replicas = "
                    f"{spec.options['replicas']} (replicas copy their primary over trust)"
                )
        o = spec.options
        return ReplicatedPostgres(
            run_dir,
            replicas=int(o["replicas"]),
            synchronous=o.get("synchronous") or "off",
            owner=owner,
            synchronous_commit=o.get("synchronous_commit"),
            settings=spec.settings,
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
            fsync=True if o.get("fsync") is None else bool(o["fsync"]),
            bin_dir=spec.bin,
            user=o.get("user"),
        )

    def integrity(self, store: Store) -> Integrity | None:
        """``amcheck`` on a private server's relations
        (:mod:`knell.stores.postgres.integrity`); a server someone else
        runs is not knell's to probe."""
        from knell.stores.postgres.replication import ReplicatedPostgres
        from knell.stores.postgres.server import PostgresServer

        if isinstance(store, ReplicatedPostgres):
            store = store.current()
        if not isinstance(store, PostgresServer):
            return None
        from knell.stores.postgres.integrity import amcheck

        return amcheck(store.admin_url)

    def locate(self) -> object:
        from knell.stores.postgres.discovery import find_postgres

        return find_postgres()

    def doctor(self) -> list[Probe]:
        from knell.stores.postgres.discovery import find_postgres

        try:
            found = find_postgres()
        except StoreError as exc:
            hint = str(exc).split("; ", 1)[-1] if "; " in str(exc) else str(exc)
            return [Probe("postgres server", False, "not found", hint)]
        out = [
            Probe(
                "postgres server",
                True,
                f"{version_of([str(found.postgres), '--version'])} ({found.folder})",
            )
        ]
        if is_root():
            if user_exists("postgres"):
                out.append(Probe("postgres user", True, "runs the private server (knell is root)"))
            else:
                out.append(
                    Probe(
                        "postgres user",
                        False,
                        "no user 'postgres' (Postgres refuses to run as root)",
                        "create one (useradd postgres), or set [store] user = ...",
                    )
                )
        return out + self.client_probes()

    def compose_ready(self, host: str, port: int, timeout: float = 1.0) -> bool:
        """A startup message: a server ready for queries answers with an
        authentication request (``R``), one still starting or recovering
        with an error (``E``)."""
        return ready(host, port, timeout)

    def compose_replicated(
        self,
        options: dict[str, Any],
        make: Callable[[int, dict[str, str]], Any],
        run_dir: Path,
        *,
        poll: float,
        timeout: float,
    ) -> Store:
        """A primary and streaming replicas in containers
        (:mod:`knell.stores.postgres.composed`)."""
        from knell.stores.postgres.composed import composed

        return composed(options, make, run_dir, poll=poll, timeout=timeout)

    def namespace_pattern(self) -> re.Pattern[str]:
        from knell.stores.postgres.bus import SCHEMA_NAME

        return SCHEMA_NAME

    def fresh_namespace(self, run: str) -> str:
        return f"knell_{run}"

    def connect(self, client_url: str, namespace: str, *, create: bool, timeout: float) -> None:
        from knell.stores.postgres.external import connect

        connect(client_url, namespace, create=create, timeout=timeout)

    def drop(self, client_url: str, namespace: str, *, timeout: float) -> None:
        from knell.stores.postgres.external import drop

        drop(client_url, namespace, timeout=timeout)


def ready(
    host: str, port: int, timeout: float = 1.0, *, user: str = "knell", database: str = "knell"
) -> bool:
    """Postgres answers a startup message with an authentication request."""
    import socket

    params = b"user\0" + user.encode() + b"\0database\0" + database.encode() + b"\0\0"
    startup = struct.pack("!ii", 8 + len(params), 196608) + params
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(startup)
            return sock.recv(64)[:1] == b"R"
    except OSError:
        return False


STORE_KIND = PostgresKind()
"""What :mod:`knell.stores.registry` registers for this package."""
