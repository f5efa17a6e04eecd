"""Container faults: what happens to a store when its container does.

Each fault is one Docker Engine call on the store's container, so it is the
real thing, not a simulation:

==============  ===========================================  ================
fault           what the store sees                          heal
==============  ===========================================  ================
``kill``        SIGKILL of PID 1 (the server): a crash,      ``start``
                data on disk only, clients reset
``pause``       cgroup freezer: the server stops mid-        ``unpause``
                instruction, connections hang
``restart``     stop (the image's stop signal, then SIGKILL  (none needed)
                after ``timeout``) and start again
``disconnect``  the container leaves the project network:    ``reconnect``
                its name no longer resolves, packets to it
                go nowhere (a partition of the store)
==============  ===========================================  ================

:meth:`ContainerFaults.heal` undoes whatever is still in effect, for the
final phase of a run. ``reconnect`` restores the container's network
aliases (its service name), so the links through Toxiproxy find it again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from knell.stores.compose.errors import StackFailed

if TYPE_CHECKING:
    from docker.models.containers import Container
    from docker.models.networks import Network

__all__ = ["ContainerFaults", "StackView"]


class StackView(Protocol):
    """What the faults use of a stack (a ``ComposeStack`` fits): its
    project name, store services, containers and network. A protocol, so
    the stack, which owns its faults, is the only one that imports."""

    @property
    def project(self) -> str: ...

    @property
    def services(self) -> Sequence[str]: ...

    def container(self, service: str) -> Container: ...

    def network(self) -> Network: ...


class ContainerFaults:
    """The faults of one stack's containers, by service name."""

    def __init__(self, stack: StackView) -> None:
        self._stack = stack
        self._cut: dict[str, tuple[str, list[str]]] = {}
        """service -> (network id, aliases) while disconnected."""

    def _do(self, service: str, what: str, action: str, *args: object, **kw: object) -> Container:
        from docker.errors import DockerException

        container = self._stack.container(service)
        try:
            getattr(container, action)(*args, **kw)
        except DockerException as exc:
            raise StackFailed(f"{self._stack.project}: cannot {what} {service}: {exc}") from None
        return container

    def kill(self, service: str) -> None:
        """SIGKILL the server; the container stays down until :meth:`start`."""
        container = self._do(service, "kill", "kill", signal="SIGKILL")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            container.reload()
            if container.status in ("exited", "dead"):
                return
            time.sleep(0.05)
        raise StackFailed(f"{self._stack.project}: {service} still runs 10 s after SIGKILL")

    def start(self, service: str) -> None:
        """Start a killed container again (same volume: crash recovery)."""
        self._do(service, "start", "start")

    def pause(self, service: str) -> None:
        self._do(service, "pause", "pause")

    def unpause(self, service: str) -> None:
        self._do(service, "unpause", "unpause")

    def restart(self, service: str, *, timeout: int = 2) -> None:
        """Stop (the image's stop signal; SIGKILL after ``timeout`` s) and start."""
        self._do(service, "restart", "restart", timeout=timeout)

    def disconnect(self, service: str) -> None:
        """Take the container off the project network."""
        from docker.errors import DockerException

        container = self._stack.container(service)
        network = self._stack.network()
        endpoint = container.attrs["NetworkSettings"]["Networks"].get(network.name) or {}
        short = str(container.id)[:12]
        aliases = [a for a in endpoint.get("Aliases") or [] if a != short]
        try:
            network.disconnect(container, force=True)
        except DockerException as exc:
            raise StackFailed(
                f"{self._stack.project}: cannot disconnect {service}: {exc}"
            ) from None
        self._cut[service] = (str(network.id), aliases or [service])

    def reconnect(self, service: str) -> None:
        """Put a disconnected container back, under its service name."""
        from docker.errors import DockerException

        if service not in self._cut:
            raise StackFailed(f"{self._stack.project}: {service} is not disconnected")
        _, aliases = self._cut[service]
        container = self._stack.container(service)
        try:
            self._stack.network().connect(container, aliases=aliases)
        except DockerException as exc:
            raise StackFailed(f"{self._stack.project}: cannot reconnect {service}: {exc}") from None
        del self._cut[service]

    def heal(self) -> list[str]:
        """Undo every fault still in effect; return what was done."""
        done: list[str] = []
        for service in [*self._stack.services, "toxiproxy"]:
            if service in self._cut:
                self.reconnect(service)
                done.append(f"reconnect {service}")
            container = self._stack.container(service)
            if container.status == "paused":
                self.unpause(service)
                done.append(f"unpause {service}")
            elif container.status in ("exited", "dead", "created"):
                self.start(service)
                done.append(f"start {service}")
        return done
