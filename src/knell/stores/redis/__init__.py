"""The Redis store kind: everything knell knows about Redis, in one package.

* :mod:`.bus` (with :mod:`.queue`, :mod:`.roles`, :mod:`.kinds`): the
  reference bus on a Redis server, ``redis://`` URLs;
* :mod:`.mutants`: that bus with one seeded bug each;
* :mod:`.server`: a private ``redis-server`` for a run; :mod:`.discovery`:
  where it is;
* :mod:`.external`: a run's key prefix on a server someone else runs;
* this module: the :class:`RedisKind` declaration the registry reads.

Importing this package loads no client library: redis-py is imported by
the modules above, when a run uses Redis (``pip install 'knell[redis]'``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationInfo, field_validator, model_validator

from knell.stores.base import StoreError
from knell.stores.disk import DiskOptions
from knell.stores.kind import (
    ComposeService,
    Greeting,
    Probe,
    StoreKind,
    StoreOptions,
    version_of,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from knell.owners import Owner
    from knell.stores.base import Store
    from knell.stores.integrity import Integrity
    from knell.stores.spec import StoreSpec

__all__ = ["STORE_KIND", "RedisKind", "RedisOptions"]


class RedisOptions(DiskOptions):
    """The ``[store]`` keys of a Redis store."""

    persistence: Literal["none", "everysec", "always"] | None = None
    """appendonly with this appendfsync, or none."""
    replicas: int | None = None
    """Replicas of a private server, with three Sentinels (0: one server)."""
    min_replicas_to_write: int | None = None
    """The primary refuses writes while fewer replicas are in sync."""

    @field_validator("replicas", "min_replicas_to_write")
    @classmethod
    def _count(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"{info.field_name} = {value}: must be 0 or more")
        return value

    @model_validator(mode="after")
    def _replication(self) -> RedisOptions:
        replicas = self.replicas or 0
        least = self.min_replicas_to_write or 0
        if least > replicas:
            raise ValueError(
                f"min_replicas_to_write = {least} is more than replicas = {replicas}: "
                "the primary would refuse every write"
            )
        if replicas and self.disk == "faulty":
            raise ValueError(f'replicas = {replicas} does not run on disk = "faulty" yet')
        return self


class RedisComposeOptions(StoreOptions):
    """The ``[store]`` keys of a Redis run in the compose stack."""

    redis_appendonly: bool = True
    """Persistence: an append-only file ..."""
    redis_appendfsync: Literal["always", "everysec", "no"] = "everysec"
    """... fsync'd always, every second, or never."""
    redis_save: str = ""
    """The RDB snapshot rule (``"60 1"``); empty: none."""


class RedisKind(StoreKind):
    """Redis: a private server, an existing one, or a container."""

    name = "redis"
    schemes = ("redis", "rediss", "redis+sentinel")
    provisions = frozenset({"private", "existing", "compose"})
    network = True
    extra = "redis"
    requires = ("redis",)
    options = RedisOptions
    bus = "knell.stores.redis.bus:open_redis"
    reference = "knell.stores.redis.bus:RedisBus"
    mutants = "knell.stores.redis.mutants"
    # A PING; an instance with a password answers -NOAUTH, which proves it
    # is there just as well.
    greeting = Greeting(b"PING\r\n", (b"+PONG\r\n", b"-NOAUTH", b"-ERR"))
    faults = {
        "private": frozenset({"crash", "pause"}),
        # failover-rejoin: an old primary comes back (ReplicatedRedis.rejoin).
        "replicated": frozenset({"crash", "pause", "failover", "failover-rejoin", "split-brain"}),
        "existing": frozenset({"crash"}),
        "compose": frozenset({"crash", "pause", "restart", "disconnect"}),
        # A primary, replicas and Sentinels in containers (knell.stores.redis.composed).
        "compose-replicated": frozenset({"failover"}),
    }
    # The server runs each command whole: a frozen client holds nothing.
    frozen_client_stalls = False
    bench = "knell.stores.redis.bench:RedisBench"
    queue_bench = "knell.stores.redis.bench:QUEUE_BENCH"
    namespace_key = "prefix"
    guarded_settings = frozenset({"bind", "protected-mode"})
    compose = ComposeService(
        port=6379,
        link_port=16379,
        official_image="redis:7-bookworm",
        image_variable="KNELL_REDIS_IMAGE",
        url="redis://{host}:{port}/0",
        options=RedisComposeOptions,
        replicas=2,
        # The Sentinels, each on 26379 in its container, behind links
        # 26379 .. 26381 (compose/docker-compose.replicated.yml).
        companions=(
            ("redis-sentinel-0", 26379, 26379),
            ("redis-sentinel-1", 26379, 26380),
            ("redis-sentinel-2", 26379, 26381),
        ),
    )
    capability = "run on a private Redis server"

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        self.require()
        replicas = int(spec.options.get("replicas") or 0)
        if replicas:
            return self._replicated(spec, run_dir, owner, replicas)
        from knell.stores.redis.server import RedisServer

        return RedisServer(
            run_dir,
            owner=owner,
            port=spec.port,
            persistence=spec.options.get("persistence") or "always",
            disk=spec.options.get("disk") or "plain",
            binary=spec.bin,
            data_dir=spec.data_dir,
            password=spec.password,
            settings=spec.settings,
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
        )

    def compose_replicated(
        self,
        options: dict[str, Any],
        make: Callable[[int, dict[str, str]], Any],
        run_dir: Path,
        *,
        poll: float,
        timeout: float,
    ) -> Store:
        """A primary, replicas and three Sentinels in containers
        (:mod:`knell.stores.redis.composed`)."""
        from knell.stores.redis.composed import composed

        return composed(options, make, run_dir, poll=poll, timeout=timeout)

    def _replicated(
        self, spec: StoreSpec, run_dir: Path, owner: Owner | None, replicas: int
    ) -> Store:
        """A primary, ``replicas`` replicas and three Sentinels
        (:mod:`knell.stores.redis.replicated`)."""
        from knell.stores.redis.replicated import ReplicatedRedis

        if spec.data_dir is not None:
            raise StoreError(
                "store option data_dir does not apply with replicas: each node keeps its "
                "data in the run directory"
            )
        return ReplicatedRedis(
            run_dir,
            replicas=replicas,
            min_replicas_to_write=int(spec.options.get("min_replicas_to_write") or 0),
            owner=owner,
            port=spec.port,
            persistence=spec.options.get("persistence") or "always",
            binary=spec.bin,
            password=spec.password,
            settings=spec.settings,
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
        )

    def integrity(self, store: Store) -> Integrity | None:
        """A private server's AOF (or RDB) parsed as loading would
        (:mod:`knell.stores.redis.integrity`); of a replicated store, the
        current primary's; none kept on disk: no probe."""
        from knell.stores.redis.replicated import ReplicatedRedis
        from knell.stores.redis.server import RedisServer

        if isinstance(store, ReplicatedRedis):
            store = store.node(store.primary())  # the files the Sentinels vouch for
        if not isinstance(store, RedisServer):
            return None
        from knell.stores.redis.integrity import check_files

        dirname = store.settings.get("appenddirname", "appendonlydir")
        return check_files(store.data_dir.resolve(), store.binary, dirname)

    def locate(self) -> object:
        from knell.stores.redis.discovery import find_redis_server

        return find_redis_server()

    def doctor(self) -> list[Probe]:
        from knell.stores.redis.discovery import find_redis_server

        try:
            binary = find_redis_server()
        except StoreError as exc:
            hint = (
                "Debian: apt-get install redis-server; macOS: brew install redis;"
                " or set KNELL_REDIS_SERVER"
                if "install" in str(exc)
                else str(exc)
            )
            return [Probe("redis server", False, "not found", hint)]
        out = [Probe("redis server", True, f"{version_of([str(binary), '--version'])} ({binary})")]
        return out + self.client_probes()

    def compose_env(self, options: dict[str, Any]) -> dict[str, str]:
        o = RedisComposeOptions.model_validate(options)
        return {
            "KNELL_REDIS_APPENDONLY": "yes" if o.redis_appendonly else "no",
            "KNELL_REDIS_APPENDFSYNC": o.redis_appendfsync,
            "KNELL_REDIS_SAVE": o.redis_save,
        }

    def compose_ready(self, host: str, port: int, timeout: float = 1.0) -> bool:
        """Redis answers ``PING`` with ``+PONG`` (not -LOADING, not -NOAUTH)."""
        return _exchange(host, port, b"PING\r\n", timeout).startswith(b"+PONG")

    def namespace_pattern(self) -> re.Pattern[str]:
        from knell.stores.redis.bus import PREFIX

        return PREFIX

    def fresh_namespace(self, run: str) -> str:
        return f"knell:{run}:"

    def connect(self, client_url: str, namespace: str, *, create: bool, timeout: float) -> None:
        from knell.stores.redis.external import connect

        connect(client_url, namespace, create=create, timeout=timeout)

    def drop(self, client_url: str, namespace: str, *, timeout: float) -> None:
        from knell.stores.redis.external import drop

        drop(client_url, namespace, timeout=timeout)


def _exchange(host: str, port: int, message: bytes, timeout: float) -> bytes:
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(message)
            return sock.recv(64)
    except OSError:
        return b""


STORE_KIND = RedisKind()
"""What :mod:`knell.stores.registry` registers for this package."""
