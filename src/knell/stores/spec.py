"""From a scenario's store options to a :class:`~knell.stores.base.Store`.

The scenario file names the store and its options (the runner's ``[store]``
table); :class:`StoreSpec` is those options as plain values, and
:func:`create_store` picks the store that serves them:

==================  =============================================  ====================
``kind``            with ``url``                                   without ``url``
==================  =============================================  ====================
``sqlite``          (not allowed)                                  :class:`SqliteStore`
``postgres``        :class:`ExternalStore` (fresh schema per run)  :class:`PostgresServer`
``redis``           :class:`ExternalStore` (fresh key prefix)      :class:`RedisServer`
==================  =============================================  ====================

Options a kind does not use are refused (``fsync`` on Redis is a mistake
worth naming, not ignoring). Every refusal is a :class:`StoreError` that
names the option.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from knell.owners import Owner
from knell.stores.base import Store, StoreError

__all__ = ["StoreSpec", "create_store"]

_PRIVATE_ONLY = ("port", "bin", "data_dir", "password", "settings")
_USED_BY: dict[str, tuple[str, ...]] = {
    "fsync": ("postgres",),
    "synchronous_commit": ("postgres",),
    "user": ("postgres",),
    "persistence": ("redis",),
    "synchronous": ("sqlite",),
    "crash_command": ("postgres", "redis"),
    "restart_command": ("postgres", "redis"),
    "keep": ("postgres", "redis"),
}


@dataclass(frozen=True)
class StoreSpec:
    """A run's store, as the scenario describes it. ``None`` means "the
    default"; see each store class for what the options do."""

    kind: str = "sqlite"
    """``sqlite`` | ``postgres`` | ``redis``."""
    url: str | None = None
    """An existing server (``store_url``): ``postgresql://...`` or ``redis://...``."""
    poll_interval: float = 0.1
    op_timeout: float = 5.0
    # private servers
    port: int | None = None
    bin: str | None = None
    """Postgres: the folder with ``initdb`` and ``postgres``; Redis: the ``redis-server`` path."""
    data_dir: str | None = None
    password: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """Extra server settings (``-c key=value`` / ``--key value``)."""
    # postgres
    fsync: bool | None = None
    synchronous_commit: str | None = None
    user: str | None = None
    # redis
    persistence: str | None = None
    """``none`` | ``everysec`` | ``always``."""
    # sqlite
    synchronous: str | None = None
    # external
    keep: bool | None = None
    crash_command: str | None = None
    restart_command: str | None = None


def _check(spec: StoreSpec) -> None:
    if spec.kind not in ("sqlite", "postgres", "redis"):
        raise StoreError(f"store kind must be sqlite, postgres or redis, got {spec.kind!r}")
    if spec.kind == "sqlite" and spec.url is not None:
        raise StoreError("store_url is for postgres or redis; a sqlite store is the run's own file")
    defaults = StoreSpec()
    for f in fields(StoreSpec):
        value, default = getattr(spec, f.name), getattr(defaults, f.name)
        if value == default:
            continue
        used_by = _USED_BY.get(f.name)
        if used_by is not None and spec.kind not in used_by:
            raise StoreError(f"store option {f.name!r} does not apply to a {spec.kind} store")
        if f.name in _PRIVATE_ONLY and (spec.kind == "sqlite" or spec.url is not None):
            where = "an external server (store_url)" if spec.url else "a sqlite store"
            raise StoreError(f"store option {f.name!r} does not apply to {where}")
        if f.name in ("crash_command", "restart_command", "keep") and spec.url is None:
            raise StoreError(
                f"store option {f.name!r} is for an external server (store_url); "
                "a private server is crashed and dropped by knell itself"
            )


def create_store(spec: StoreSpec, run_dir: Path, *, owner: Owner | None = None) -> Store:
    """The store for ``spec`` in ``run_dir`` (not started yet)."""
    _check(spec)
    poll, timeout = spec.poll_interval, spec.op_timeout
    if spec.kind == "sqlite":
        from knell.stores.sqlite import SqliteStore

        return SqliteStore(
            run_dir,
            synchronous=spec.synchronous or "normal",
            poll_interval=poll,
            op_timeout=timeout,
        )
    if spec.url is not None:
        from knell.stores.external import ExternalStore

        store = ExternalStore(
            run_dir,
            spec.url,
            owner=owner,
            keep=bool(spec.keep),
            crash_command=spec.crash_command,
            restart_command=spec.restart_command,
            poll_interval=poll,
            op_timeout=timeout,
        )
        if store.kind != spec.kind:
            raise StoreError(f"store = {spec.kind!r} but store_url is a {store.kind} URL")
        return store
    if spec.kind == "postgres":
        from knell.stores.postgres import PostgresServer

        return PostgresServer(
            run_dir,
            owner=owner,
            port=spec.port,
            fsync=True if spec.fsync is None else spec.fsync,
            synchronous_commit=spec.synchronous_commit or "on",
            bin_dir=spec.bin,
            user=spec.user,
            data_dir=spec.data_dir,
            password=spec.password,
            settings=spec.settings,
            poll_interval=poll,
            op_timeout=timeout,
        )
    from knell.stores.redis import RedisServer

    return RedisServer(
        run_dir,
        owner=owner,
        port=spec.port,
        persistence=spec.persistence or "always",
        binary=spec.bin,
        data_dir=spec.data_dir,
        password=spec.password,
        settings=spec.settings,
        poll_interval=poll,
        op_timeout=timeout,
    )
