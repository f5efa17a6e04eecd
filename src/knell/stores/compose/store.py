"""One store of a compose stack, behind the runner's Store interface.

The runner provisions a store per run and drives its lifecycle with the
same verbs whatever the provider (a private server started by knell, or a
container): ``start``, ``url``, ``wait_ready``, ``crash``, ``restart``,
``pause``, ``resume``, ``stop``. :class:`ComposeStore` maps them onto a
:class:`~knell.stores.compose.stack.ComposeStack` that runs just that store
and its Toxiproxy, and adds what only containers have (``disconnect`` /
``reconnect``, the stack itself for the Toxiproxy API).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from knell.owners import Owner
from knell.stores.compose.images import ImageSpec
from knell.stores.compose.options import ComposeOptions
from knell.stores.compose.stack import ComposeStack

__all__ = ["ComposeStore"]


class ComposeStore:
    """A Postgres or Redis store run as a container of its own stack."""

    def __init__(
        self,
        kind: str,
        *,
        options: ComposeOptions | None = None,
        owner: Owner | None = None,
        log_dir: Path | None = None,
        images: Mapping[str, ImageSpec] | None = None,
        replicas: int = 0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.stack = ComposeStack(
            (kind,),
            options=options,
            owner=owner,
            log_dir=log_dir,
            images=images,
            replicas=replicas,
            env=env,
        )

    def start(self) -> None:
        """Bring the stack up; returns once the store answers through its link."""
        self.stack.up()

    def url(self) -> str:
        """The store's URL through its Toxiproxy link (what workers open)."""
        return self.stack.url(self.kind)

    @property
    def toxiproxy_url(self) -> str:
        return self.stack.toxiproxy_url

    @property
    def link(self) -> str:
        """The Toxiproxy proxy name in front of the store."""
        return self.stack.link_name(self.kind)

    def wait_ready(self, timeout: float = 60) -> None:
        self.stack.wait_healthy([self.kind, "toxiproxy"], timeout=timeout)
        self.stack.wait_ready([self.kind], timeout=timeout)

    def crash(self) -> None:
        """SIGKILL the server (its container stays down until :meth:`restart`)."""
        self.stack.faults.kill(self.kind)

    def restart(self) -> None:
        """Start a crashed store again, or stop and start a running one."""
        if self.stack.container(self.kind).status in ("exited", "dead", "created"):
            self.stack.faults.start(self.kind)
        else:
            self.stack.faults.restart(self.kind)

    def pause(self) -> None:
        self.stack.faults.pause(self.kind)

    def resume(self) -> None:
        self.stack.faults.unpause(self.kind)

    def disconnect(self) -> None:
        self.stack.faults.disconnect(self.kind)

    def reconnect(self) -> None:
        self.stack.faults.reconnect(self.kind)

    def stop(self) -> None:
        """Remove the stack: containers, network, volume."""
        self.stack.down()
