"""From a :class:`~knell.stores.spec.StoreSpec` to a :class:`~knell.stores.base.Store`.

:func:`create_store` asks the store kind (:mod:`knell.stores.registry`)
for the store that serves a spec: without ``url`` the kind's private store
(a file, or a server started for the run), with ``url`` a fresh namespace
on that existing server (:class:`~knell.stores.external.ExternalStore`).

Options a kind does not use are refused (``fsync`` on Redis is a mistake
worth naming, not ignoring). Every refusal is a :class:`StoreError` that
names the option.
"""

from __future__ import annotations

from pathlib import Path

from knell.owners import Owner
from knell.stores.base import Store, StoreError
from knell.stores.external import ExternalStore
from knell.stores.spec import EXISTING_ONLY, PRIVATE_ONLY, StoreSpec

# The registry is read when a store is made, not when this module loads:
# knell.stores imports this module while its own package is still loading,
# and the registry walks that package for the built-in kinds.

__all__ = ["create_store"]


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
    if spec.options.get("disk") == "faulty" and spec.data_dir is not None:
        raise StoreError(
            'store option data_dir does not apply with disk = "faulty": the data directory '
            "is on the faulty disk knell mounts"
        )
    for name in PRIVATE_ONLY:
        if getattr(spec, name) not in (None, {}) and (not kind.network or spec.url is not None):
            where = "an external server (store_url)" if spec.url else f"a {spec.kind} store"
            raise StoreError(f"store option {name!r} does not apply to {where}")
    for name in EXISTING_ONLY:
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
