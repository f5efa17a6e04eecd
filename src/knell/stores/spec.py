"""From a scenario's store options to a :class:`~knell.stores.base.Store`.

The scenario file names the store and its options (the runner's ``[store]``
table); :class:`StoreSpec` is those options as plain values, and
:func:`create_store` asks the store kind (:mod:`knell.stores.registry`)
for the store that serves them: without ``url`` the kind's private store
(a file, or a server started for the run), with ``url`` a fresh namespace
on that existing server (:class:`~knell.stores.external.ExternalStore`).

Options a kind does not use are refused (``fsync`` on Redis is a mistake
worth naming, not ignoring). Every refusal is a :class:`StoreError` that
names the option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.owners import Owner
from knell.stores.base import Store, StoreError

__all__ = ["StoreSpec", "create_store"]

_PRIVATE_ONLY = ("port", "bin", "data_dir", "password", "settings")
_EXISTING_ONLY = ("crash_command", "restart_command", "keep")


@dataclass(frozen=True, init=False)
class StoreSpec:
    """A run's store, as the scenario describes it. ``None`` means "the
    default"; see each store class for what the options do. Keywords
    beyond the common ones are the kind's own options (its
    :attr:`~knell.stores.kind.StoreKind.options`), kept in :attr:`options`."""

    kind: str = "sqlite"
    """A registered store kind's name."""
    url: str | None = None
    """An existing server (``store_url``), in a URL scheme of the kind."""
    poll_interval: float = 0.1
    op_timeout: float = 5.0
    # private servers
    port: int | None = None
    bin: str | None = None
    """The server's binaries (a folder or a path, as the kind says)."""
    data_dir: str | None = None
    password: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """Extra server settings."""
    # an existing server
    keep: bool | None = None
    crash_command: str | None = None
    restart_command: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """The kind's own options (``fsync``, ``persistence``, ...)."""

    def __init__(
        self,
        kind: str = "sqlite",
        url: str | None = None,
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        *,
        port: int | None = None,
        bin: str | None = None,
        data_dir: str | None = None,
        password: str | None = None,
        settings: dict[str, str] | None = None,
        keep: bool | None = None,
        crash_command: str | None = None,
        restart_command: str | None = None,
        **options: Any,
    ) -> None:
        values = dict(
            kind=kind,
            url=url,
            poll_interval=poll_interval,
            op_timeout=op_timeout,
            port=port,
            bin=bin,
            data_dir=data_dir,
            password=password,
            settings=dict(settings or {}),
            keep=keep,
            crash_command=crash_command,
            restart_command=restart_command,
            options={k: v for k, v in options.items() if v is not None},
        )
        for name, value in values.items():
            object.__setattr__(self, name, value)


def _check(spec: StoreSpec) -> None:
    from knell.stores import registry

    if spec.kind not in registry.kinds():
        names = list(registry.kinds())
        known = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise StoreError(f"store kind must be {known}, got {spec.kind!r}")
    kind = registry.get(spec.kind)
    if spec.url is not None and "existing" not in kind.provisions:
        servers = " or ".join(
            k.name for k in registry.kinds().values() if "existing" in k.provisions
        )
        raise StoreError(
            f"store_url is for {servers}; a {spec.kind} store is the run's own"
            + (" file" if spec.kind == "sqlite" else " store")
        )
    for name in spec.options:
        if name not in kind.options.model_fields:
            raise StoreError(f"store option {name!r} does not apply to a {spec.kind} store")
    for name in _PRIVATE_ONLY:
        if getattr(spec, name) not in (None, {}) and (not kind.network or spec.url is not None):
            where = "an external server (store_url)" if spec.url else f"a {spec.kind} store"
            raise StoreError(f"store option {name!r} does not apply to {where}")
    for name in _EXISTING_ONLY:
        if getattr(spec, name) is not None and spec.url is None:
            if "existing" not in kind.provisions:
                raise StoreError(f"store option {name!r} does not apply to a {spec.kind} store")
            raise StoreError(
                f"store option {name!r} is for an external server (store_url); "
                "a private server is crashed and dropped by knell itself"
            )


def create_store(spec: StoreSpec, run_dir: Path, *, owner: Owner | None = None) -> Store:
    """The store for ``spec`` in ``run_dir`` (not started yet)."""
    from knell.stores import registry

    _check(spec)
    kind = registry.get(spec.kind)
    if spec.url is None:
        return kind.private(spec, run_dir, owner)
    from knell.stores.external import ExternalStore

    store = ExternalStore(
        run_dir,
        spec.url,
        owner=owner,
        keep=bool(spec.keep),
        crash_command=spec.crash_command,
        restart_command=spec.restart_command,
        poll_interval=spec.poll_interval,
        op_timeout=spec.op_timeout,
    )
    if store.kind != spec.kind:
        raise StoreError(f"store = {spec.kind!r} but store_url is a {store.kind} URL")
    return store
