"""A compose store as a run's store: the runner's one Store lifecycle.

:class:`~knell.stores.compose.store.ComposeStore` drives a container stack;
this puts it behind :class:`~knell.stores.base.Store`, so the runner,
the store fault kinds and the links treat a containerized Postgres or
Redis exactly as a private server (``crash`` is a SIGKILL of the
container, ``pause`` the cgroup freezer, ``restart`` starts it again with
its volume). Containers can suffer two faults a private server cannot: a
polite restart (``bounce``, ``docker restart``) and leaving the network
(``disconnect`` / ``reconnect``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from knell.stores.base import Store, StoreError

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.stores.compose.store import ComposeStore

__all__ = ["ComposeTable", "ComposedStore", "compose_store"]


class ComposeTable(Protocol):
    """What a compose store reads of a scenario's ``[store]`` table (the
    scenario's ``StoreTable`` fits): the store kind and the compose keys. A
    protocol, so the stores sit below the scenario that names them."""

    @property
    def kind(self) -> str: ...

    def compose_options(self) -> dict[str, Any]: ...


class ComposedStore(Store):
    """A store in containers (``[store] provider = "compose"``)."""

    faults = frozenset({"crash", "pause", "restart", "disconnect"})

    def __init__(self, inner: ComposeStore, run_dir: Path, poll: float, timeout: float) -> None:
        super().__init__(run_dir, poll_interval=poll, op_timeout=timeout)
        self.inner = inner
        self.kind = inner.kind
        from knell.stores import registry

        self.frozen_client_stalls = registry.get(inner.kind).frozen_client_stalls

    @property
    def url(self) -> str:
        url = self.inner.url()
        sep = "&" if "?" in url else "?"
        return f"{url}{sep}poll_interval={self.poll_interval:g}&op_timeout={self.op_timeout:g}"

    def start(self) -> None:
        try:
            self.inner.start()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"the compose stack did not come up: {exc}") from exc

    def wait_ready(self, timeout: float = 30.0) -> float:
        import time

        from knell.stores.compose.errors import ComposeError

        started = time.monotonic()
        try:
            self.inner.wait_ready(timeout)
        except ComposeError as exc:
            raise StoreError(str(exc)) from exc
        return time.monotonic() - started

    def crash(self) -> None:
        self.inner.crash()

    def restart(self) -> None:
        self.inner.restart()

    def pause(self) -> None:
        self.inner.pause()

    def resume(self) -> None:
        self.inner.resume()

    def bounce(self) -> None:
        self.inner.restart()

    def disconnect(self) -> None:
        self.inner.disconnect()

    def reconnect(self) -> None:
        self.inner.reconnect()

    def stop(self) -> None:
        # stop never raises: the labels and knell reap catch what is left
        with contextlib.suppress(Exception):
            self.inner.stop()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "provider": "compose"}

    def describe_short(self) -> str:
        return f"{self.kind} (compose)"


def compose_store(
    table: ComposeTable, run_dir: Path, owner: Owner | None, *, poll: float, timeout: float
) -> Store:
    """The compose store a scenario's ``[store]`` table asks for (with
    ``replicas``: the kind's replicated form, which can fail over)."""
    from knell.stores import registry
    from knell.stores.compose.options import ComposeOptions
    from knell.stores.compose.store import ComposeStore

    kind = registry.get(table.kind)
    if "compose" not in kind.provisions:
        able = " or ".join(k.name for k in registry.kinds().values() if "compose" in k.provisions)
        raise StoreError(f"provider = compose runs {able}, not {table.kind}")
    options = ComposeOptions.model_validate(table.compose_options())
    own = getattr(table, "model_extra", None) or {}
    replicas = int(own.get("replicas") or 0)
    if replicas:

        def make(count: int, env: dict[str, str]) -> ComposeStore:
            return ComposeStore(
                table.kind,
                options=options,
                owner=owner,
                log_dir=run_dir / "store",
                replicas=count,
                env=env,
            )

        return kind.compose_replicated(own, make, run_dir, poll=poll, timeout=timeout)
    inner = ComposeStore(
        table.kind,
        options=options,
        owner=owner,
        log_dir=run_dir / "store",
    )
    return ComposedStore(inner, run_dir, poll=poll, timeout=timeout)
