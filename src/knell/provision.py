"""Provisioning: the system under test for one run, before any worker starts.

Jepsen sets up "the DB" on its nodes before the test; here that is the
run's **store** (a SQLite file, or a private Postgres or Redis server,
see :mod:`knell.stores`), the **links** between the processes and what
they talk to (each behind a Toxiproxy proxy, see
:mod:`knell.nemesis.links`, so network faults can cut real bytes), and
the **bridges** (``knell bridge`` processes in front of the bus, started
and faulted like any other process). :class:`Provision` decides, for each
worker, the URL and driver it opens the bus with: the store directly,
through its link's proxy, or through a bridge (and that bridge's link).

Links are made only where bytes can be cut: to a network store, and to a
bridge. A SQLite file is reached through the file system, so a run on it
proxies only its bridges. Links are per process group unless a network
fault needs finer ones (it targets one instance, or a ``share`` of a
group), or the scenario asks for ``links = "instance"``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knell.errors import KnellError
from knell.nemesis.links import LinkSet, url_address, with_address
from knell.redact import BUS_URL_ENV
from knell.rundir import atomic_write

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.scenario import AnySpec, Scenario
    from knell.supervisor import Supervisor

__all__ = ["BRIDGE_READY_TIMEOUT", "Provision", "ProvisionError"]

BRIDGE_READY_TIMEOUT = 20.0


def _network_store(kind: str) -> bool:
    """Whether a store of ``kind`` is reached over TCP (so a link, and link
    faults, can sit in front of it); its link probe's exchange is named
    after it (its kind's greeting)."""
    from knell.stores import registry

    found = registry.kinds().get(kind)
    return found is not None and found.network


class ProvisionError(KnellError):
    """The run's store, proxies or bridges could not be set up (exit 3)."""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Endpoint:
    """How one worker reaches the bus."""

    url: str
    driver: str | None


@dataclass
class Provision:
    """The store, links and bridges of one run (see the module docstring)."""

    scenario: Scenario
    run_dir: Path
    store: Any
    """The run's store: ``url``, ``kind``, and for store faults its lifecycle."""
    driver: str | None
    owner: Owner | None = None
    links: LinkSet | None = None
    bridge_urls: dict[str, str] = field(default_factory=dict)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)

    # -- decisions ----------------------------------------------------------------

    def needs_links(self) -> bool:
        return _network_store(self.store.kind) or bool(self.scenario.bridges())

    def per_instance(self) -> bool:
        """Whether links must be per instance: the scenario says so, or a
        network fault hits one instance or a share of a group."""
        if getattr(self.scenario, "links", "group") == "instance":
            return True
        groups = {spec.group for spec in self.scenario.process}
        for fault in self.scenario.nemesis:
            # A split brain leaving part of a group with the old primary.
            splits = getattr(fault, "needs_instance_links", None)
            if splits is not None and splits(self.scenario):
                return True
            share = getattr(fault, "share", None)
            if share is not None and (
                share < 1
                or fault.target not in groups | {spec.role for spec in self.scenario.process}
            ):
                return True
        return False

    def _source(self, name: str, spec: AnySpec) -> str:
        return name if self.per_instance() else spec.group

    # -- starting -----------------------------------------------------------------

    def check(self) -> None:
        """Refuse, before anything starts, a network fault on a process that
        has no link to cut (it reaches a SQLite file directly)."""
        from knell.nemesis.network import LinkFaultSpec
        from knell.nemesis.registry import kind

        workers = self.scenario.workers()
        for index, fault in enumerate(self.scenario.nemesis):
            needs_links = getattr(kind(fault.fault), "needs_store_links", False)
            if needs_links and not _network_store(self.store.kind):
                raise ProvisionError(
                    f"nemesis[{index}] ({fault.fault}) cuts the clients' links to the store, and "
                    f"this run's links to the {self.store.describe_short()} do not go through "
                    "the fault proxy"
                )
            if not isinstance(fault, LinkFaultSpec):
                continue
            for name in self.scenario.targets(fault.target):
                spec = workers.get(name)
                if spec is None:
                    continue  # a bridge: its own links are to the store
                if spec.via != "bridge" and not _network_store(self.store.kind):
                    raise ProvisionError(
                        f"nemesis[{index}] ({fault.fault}) targets {name}, which reaches a "
                        f"{self.store.kind} store directly: there is no network link to fault "
                        '(route it through a bridge with via = "bridge", or use a network store)'
                    )

    def start(self, supervisor: Supervisor) -> None:
        """Links (if any), then bridges (started and ready), then every
        worker's endpoint. Workers start after this returns."""
        self.check()
        if self.needs_links():
            try:
                self.links = LinkSet.start(os.getpid(), self.owner)
            except ImportError as exc:
                raise ProvisionError(
                    "the links to a network store or a bridge go through a fault proxy, whose "
                    f"client needs the Python module {exc.name or 'toxiproxy'!r}, which is not "
                    "installed: pip install 'knell[network]'"
                ) from None
            except Exception as exc:
                raise ProvisionError(f"cannot start a fault proxy for the links: {exc}") from exc
        self._start_bridges(supervisor)
        self._endpoints()
        if self.links is not None:
            atomic_write(
                self.run_dir / "links.json", json.dumps(self.links.describe(), indent=2) + "\n"
            )

    def _link(self, source: str, upstream_name: str, upstream: str, processes: list[str],
              exchange: str, name: str | None = None) -> str:  # fmt: skip
        """The listen address of the link ``source`` -> ``upstream_name``
        (called ``name``, by default ``source--upstream_name``)."""
        assert self.links is not None
        name = name or f"{source}--{upstream_name}"
        link = self.links.links.get(name)
        if link is None:
            link = self.links.add(name, upstream_name, upstream, processes, exchange)
        return link.listen

    def _store_url_for(self, source: str, processes: list[str]) -> str:
        url = str(self.store.url)
        if self.links is None or not _network_store(self.store.kind):
            return url
        nodes = getattr(self.store, "node_addresses", None)
        if nodes is not None:
            # A replicated store (knell.stores.replicated): a link in front
            # of each node, and a URL that names them all; a partition of a
            # process cuts its way to every node.
            listens = [
                self._link(source, "store", address, processes, self.store.kind,
                           name=f"{source}--store" if i == 0 else f"{source}--store-{node}")
                for i, (node, address) in enumerate(nodes().items())
            ]  # fmt: skip
            return str(self.store.url_for(listens))
        listen = self._link(source, "store", url_address(url), processes, self.store.kind)
        return with_address(url, listen)

    def _start_bridges(self, supervisor: Supervisor) -> None:
        from knell.scenario import BridgeSpec

        bridges = self.scenario.bridges()
        if not bridges:
            return
        instances = self.scenario.instances()
        for name in bridges:
            spec = instances[name]
            assert isinstance(spec, BridgeSpec)
            port = _free_port()
            ready = self.run_dir / "control" / f"{name}.ready.json"
            store_url = self._store_url_for(self._source(name, spec), [name])
            # The store URL (it may hold a password) goes through the
            # bridge's environment, never its command line (see knell.redact).
            command = [
                "-m", "knell.bridge", "--listen", f"127.0.0.1:{port}",
                "--ready-file", str(ready.resolve()), "--parent-pid", str(os.getpid()),
            ]  # fmt: skip
            driver = spec.bus or self.driver
            if driver:
                command += ["--driver", driver]
            supervisor.add_command(name, command, ready, env={BUS_URL_ENV: store_url})
            supervisor.start(name)
            self.bridge_urls[name] = f"http://127.0.0.1:{port}"
        self._wait_bridges(supervisor, bridges)

    def _wait_bridges(self, supervisor: Supervisor, bridges: list[str]) -> None:
        deadline = time.monotonic() + BRIDGE_READY_TIMEOUT
        pending = list(bridges)
        while pending:
            pending = [
                n for n in pending if not (self.run_dir / "control" / f"{n}.ready.json").exists()
            ]
            for name in pending:
                worker = supervisor.workers[name]
                if not worker.alive():
                    tail = worker.log.tail() if worker.log is not None else ""
                    raise ProvisionError(
                        f"bridge {name} exited before it was ready: "
                        f"{tail.strip().splitlines()[-1] if tail.strip() else 'no output'}"
                    )
            if pending and time.monotonic() > deadline:
                raise ProvisionError(
                    f"bridge(s) {', '.join(pending)} not ready within {BRIDGE_READY_TIMEOUT:g} s"
                )
            if pending:
                time.sleep(0.05)

    def _endpoints(self) -> None:
        bridges = self.scenario.bridges()
        for name, spec in self.scenario.workers().items():
            source = self._source(name, spec)
            members = self._members(name, spec)
            if spec.via != "bridge":
                self.endpoints[name] = Endpoint(self._store_url_for(source, members), self.driver)
                continue
            index = int(name.rsplit("-", 1)[-1]) - 1
            order = [bridges[(index + k) % len(bridges)] for k in range(len(bridges))]
            urls = [self._bridge_url_for(source, b, members) for b in order]
            url = urls[0]
            if spec.failover and len(urls) > 1:
                others = ",".join(u.removeprefix("http://") for u in urls[1:])
                url = f"{url}?failover={others}"
            self.endpoints[name] = Endpoint(url, None)

    def routes(self) -> dict[str, frozenset[str]]:
        """Bridge -> the workers that may reach the bus through it."""
        out: dict[str, set[str]] = {b: set() for b in self.scenario.bridges()}
        for name, end in self.endpoints.items():
            for bridge, url in self.bridge_urls.items():
                port = url.rsplit(":", 1)[-1]
                listens = {
                    link.listen for link in (self.links or []) if link.upstream_name == bridge
                }
                if f":{port}" in end.url or any(listen in end.url for listen in listens):
                    out[bridge].add(name)
        return {b: frozenset(ws) for b, ws in out.items()}

    def _members(self, name: str, spec: AnySpec) -> list[str]:
        if self.per_instance():
            return [name]
        return [n for n, s in self.scenario.instances().items() if s.group == spec.group]

    def _bridge_url_for(self, source: str, bridge: str, processes: list[str]) -> str:
        url = self.bridge_urls[bridge]
        if self.links is None:
            return url
        listen = self._link(source, bridge, url_address(url), processes, "http")
        return with_address(url, listen)

    # -- the end ------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "store": self.store.describe() if hasattr(self.store, "describe") else {},
            "links": None if self.links is None else self.links.describe(),
            "bridges": dict(self.bridge_urls),
        }

    def stop(self) -> None:
        """Close the links (the supervisor stops bridges with the workers)."""
        if self.links is not None:
            self.links.close()
