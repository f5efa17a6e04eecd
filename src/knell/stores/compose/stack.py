"""One run's compose stack: up, healthy, linked, faulted, down.

A :class:`ComposeStack` is one compose *project* (``knell-<pid>-<token>``):
its own containers, its own network, its own volumes, and ports published
on ephemeral 127.0.0.1 ports, so any number of runs share one engine
without colliding. Its life:

1. **up**: remove what dead runners left (:func:`.reaper.reap_labelled`),
   choose the image set (official, or the air-gapped override when
   no registry answers), build what is missing, record the project with the
   run's :class:`~knell.owners.Owner` *before* anything exists (so a runner
   killed during ``up`` still leaves a record to reap), ``compose up -d``,
   record each container, network and volume, wait for every healthcheck,
   create the links through Toxiproxy (:mod:`.links`) and probe each store
   through its link (:mod:`.probes`).
   With ``replicas`` (one store service only), docker-compose.replicated.yml
   is added and the replica services (``postgres-1`` ..) come up too, each
   with a link of its own (:func:`.links.replica_links`), and so do the
   services the kind runs beside them (:func:`.links.companion_links`).
2. **use**: :meth:`ComposeStack.url` gives the URL a bus driver opens (the
   store through its link), :attr:`ComposeStack.toxiproxy_url` the API for
   network faults, :attr:`ComposeStack.faults` the container faults.
3. **down**: ``compose down -v`` and then a sweep through the Docker API of
   anything still labelled with the project, so nothing outlives the run
   even if compose failed half-way.

Compose does the creating (one file serves knell, CI and people); the
Docker API does the looking (ports, health, containers), which is exact
and needs no parsing of compose's output, which differs between v1 and v2.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from knell.owners import Owner
from knell.stores.compose import images as img
from knell.stores.compose.command import ComposeCommand
from knell.stores.compose.engine import client
from knell.stores.compose.errors import ComposeError, StackFailed
from knell.stores.compose.faults import ContainerFaults
from knell.stores.compose.files import AIRGAP_FILE, BASE_FILE, REPLICATED_FILE, compose_dir
from knell.stores.compose.labels import PROJECT, SERVICE, OwnerTag
from knell.stores.compose.links import (
    API_PORT,
    LINKS,
    Link,
    companion_links,
    create_link,
    replica_links,
)
from knell.stores.compose.options import ComposeOptions
from knell.stores.compose.probes import probe_of

if TYPE_CHECKING:
    from docker.models.containers import Container
    from docker.models.networks import Network

__all__ = ["STORES", "ComposeStack"]

STORES = tuple(LINKS)
"""The store services a stack can run: the store kinds that declare one."""
PROXY = "toxiproxy"
POLL = 0.2
UP_TIMEOUT = 900.0
"""``compose up`` may pull the official images first."""
_AIRGAP_DECIDED: dict[tuple[str, ...], bool] = {}

Say = Callable[[str], None]


class ComposeStack:
    """The containers of one run. Use as a context manager, or call
    :meth:`up` and (always, in a ``finally``) :meth:`down`."""

    def __init__(
        self,
        services: Sequence[str] = STORES,
        *,
        options: ComposeOptions | None = None,
        owner: Owner | None = None,
        log_dir: Path | None = None,
        images: Mapping[str, img.ImageSpec] | None = None,
        say: Say = lambda _: None,
        replicas: int = 0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        unknown = [s for s in services if s not in LINKS]
        if unknown or not services:
            raise ComposeError(
                f"store services {list(services)!r}: choose one or more of {', '.join(STORES)}"
            )
        self.services = tuple(dict.fromkeys(services))
        self.replicas = replicas
        self.env = dict(env or {})
        """Variables for the compose files beyond the options' own (a
        replicated Postgres's synchronous settings)."""
        """Streaming replicas of the (one) store service, from
        docker-compose.replicated.yml (``postgres-1`` ..)."""
        self.links: dict[str, Link] = {s: LINKS[s] for s in self.services}
        """Every store node's link: each store service's, then its replicas'."""
        if replicas:
            if len(self.services) != 1:
                raise ComposeError(
                    f"replicas = {replicas}: a replicated stack runs one store, "
                    f"not {list(self.services)!r}"
                )
            self.links.update(replica_links(self.services[0], replicas))
            self.links.update(companion_links(self.services[0]))
        self.options = options or ComposeOptions()
        self.owner = owner
        self.tag = OwnerTag.of(owner)
        self.project = f"knell-{self.tag.pid}-{uuid.uuid4().hex[:8]}"
        self.dir = compose_dir(self.options.compose_dir)
        self.log = (log_dir or Path(tempfile.gettempdir())) / f"{self.project}.log"
        self.say = say
        self.airgap: bool | None = None
        self.compose: ComposeCommand | None = None
        self.images: dict[str, str] = {}
        """The image each service runs (tags of built images; empty: official)."""
        self.timings: dict[str, float] = {}
        """Seconds spent: ``base``, ``wheels``, ``build``, ``up``, ``healthy``, ``down``."""
        self.faults = ContainerFaults(self)
        self._image_overrides = dict(images or {})
        if replicas:
            # Only the knell-built image makes a replica of its primary
            # (its entrypoint's replica mode), whatever the other images.
            for service in self.services:
                self._image_overrides.setdefault(service, img.airgap_images(self.dir)[service])
        self._started = False
        self._ids: dict[str, str] = {}

    # -- life ---------------------------------------------------------------

    def __enter__(self) -> ComposeStack:
        self.up()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    @property
    def files(self) -> list[Path]:
        files = [self.dir / BASE_FILE]
        if self.airgap:
            files.append(self.dir / AIRGAP_FILE)
        if self.replicas:
            files.append(self.dir / REPLICATED_FILE)
        return files + [Path(f).resolve() for f in self.options.files]

    def up(self) -> None:
        """Bring the stack up and wait until every store answers through
        its link. On failure everything created is removed again."""
        from knell.stores.compose.reaper import reap_labelled

        start = time.monotonic()
        self.compose = ComposeCommand.detect()
        reap_labelled(say=self.say)  # what runners that died before us left
        if self.owner is not None:
            self.owner.resource("compose-project", self.project, engine=_engine_name())
        self._started = True
        try:
            self.airgap = self._decide_airgap()
            self._prepare_images()
            begun = time.monotonic()
            self._compose(["up", "-d", "--no-build", *self.links, PROXY], timeout=UP_TIMEOUT)
            self._record_resources()
            self.wait_healthy()
            for link in self.links.values():
                create_link(self.toxiproxy_url, link)
            self.wait_ready()
            self.timings["up"] = time.monotonic() - begun
        except BaseException:
            with contextlib.suppress(ComposeError):
                self.down()  # the first failure is the one to report
            raise
        self.timings["total_up"] = time.monotonic() - start

    def down(self) -> None:
        """Remove every container, network and volume of the project.
        Safe to call twice, and after a failed :meth:`up`."""
        if not self._started:
            return
        from knell.stores.compose.reaper import remove_project

        start = time.monotonic()
        problem: ComposeError | None = None
        if self.compose is not None:
            try:
                self._compose(["down", "-v", "--remove-orphans", "-t", "0"], timeout=120)
            except ComposeError as exc:
                problem = exc
        remove_project({"id": self.project})  # whatever compose left
        self._started = False
        self._ids.clear()
        self.timings["down"] = time.monotonic() - start
        if problem is None and self.log.exists() and not self._keep_log():
            self.log.unlink(missing_ok=True)

    def _keep_log(self) -> bool:
        return self.log.parent != Path(tempfile.gettempdir())

    def _compose(self, args: list[str], *, timeout: float) -> str:
        assert self.compose is not None
        env = {**os.environ, **self.tag.env(), **self.options.store_env(), **self.env}
        for service, image in self.images.items():
            env[img.ENV_VARS[service]] = image
        return self.compose.run(
            self.project,
            self.files,
            args,
            env=env,
            timeout=timeout,
            log=self.log,
        )

    # -- images -------------------------------------------------------------

    def _decide_airgap(self) -> bool:
        setting = self.options.airgap
        forced = os.environ.get("KNELL_COMPOSE_AIRGAP", "").strip().lower()
        if forced in ("1", "yes", "true"):
            return True
        if forced in ("0", "no", "false"):
            return False
        if setting != "auto":
            return setting == "yes"
        wanted = tuple(img.OFFICIAL[s] for s in (*self.services, PROXY))
        if wanted not in _AIRGAP_DECIDED:
            missing = [tag for tag in wanted if not img.image_present(tag)]
            if missing:
                self.say(f"official images missing ({', '.join(missing)}): trying to pull")
            _AIRGAP_DECIDED[wanted] = not all(img.pull(tag, timeout=60) for tag in missing)
            if _AIRGAP_DECIDED[wanted]:
                self.say("no registry gives them: using the air-gapped images")
        return _AIRGAP_DECIDED[wanted]

    def _prepare_images(self) -> None:
        if not self.airgap and not self._image_overrides:
            return
        specs: dict[str, img.ImageSpec] = {}
        if self.airgap:
            every = img.airgap_images(self.dir)
            specs = {s: every[s] for s in (*self.services, PROXY)}
        specs.update(self._image_overrides)
        build = self.options.build
        if build != "never" and any(
            build == "always" or not img.image_present(spec.tag) for spec in specs.values()
        ):
            self.timings["base"] = img.ensure_base(self.dir, log=self.log, say=self.say)
            if any(spec.context == self.dir.parent for spec in specs.values()):
                self.timings["wheels"] = img.ensure_wheelhouse(self.dir, log=self.log, say=self.say)
            built = img.build_images(specs, log=self.log, force=build == "always", say=self.say)
            self.timings["build"] = sum(built.values())
        self.images = {service: spec.tag for service, spec in specs.items()}
        missing = [tag for tag in self.images.values() if not img.image_present(tag)]
        if missing:
            raise StackFailed(
                f"images missing and build = 'never': {', '.join(missing)} "
                "(build them: knell compose build)"
            )

    # -- looking ------------------------------------------------------------

    def container(self, service: str) -> Container:
        """The container of ``service`` (a store or ``toxiproxy``)."""
        from docker.errors import NotFound

        engine = client()
        known = self._ids.get(service)
        if known is not None:
            try:
                return engine.containers.get(known)
            except NotFound:
                del self._ids[service]
        found = [
            c
            for c in engine.containers.list(
                all=True, filters={"label": [f"{PROJECT}={self.project}", f"{SERVICE}={service}"]}
            )
            if c.labels.get("com.docker.compose.oneoff", "False") != "True"
        ]
        if not found:
            raise StackFailed(f"{self.project}: no {service} container (is the stack up?)")
        self._ids[service] = str(found[0].id)
        return found[0]

    def network(self) -> Network:
        """The project's network (compose's ``default``)."""
        found = client().networks.list(filters={"label": f"{PROJECT}={self.project}"})
        if not found:
            raise StackFailed(f"{self.project}: no network (is the stack up?)")
        return found[0]

    def ip(self, service: str) -> str:
        """``service``'s address on the project's network (what its peers
        inside the stack, and a Sentinel, know it by)."""
        container = self.container(service)
        networks: dict[str, Any] = container.attrs["NetworkSettings"]["Networks"] or {}
        for settings in networks.values():
            if settings.get("IPAddress"):
                return str(settings["IPAddress"])
        raise StackFailed(f"{self.project}: {service} has no address on the stack's network")

    def published(self, service: str, port: int) -> int:
        """The 127.0.0.1 host port where ``service``'s ``port`` is published."""
        container = self.container(service)
        ports: dict[str, Any] = container.attrs["NetworkSettings"]["Ports"] or {}
        for binding in ports.get(f"{port}/tcp") or []:
            if binding.get("HostIp") in ("127.0.0.1", "", "0.0.0.0"):
                return int(binding["HostPort"])
        state = container.attrs["State"]["Status"]
        raise StackFailed(f"{self.project}: {service} port {port} is not published ({state})")

    def address(self, service: str, *, direct: bool = False) -> tuple[str, int]:
        """Where to reach a store: through its Toxiproxy link (the default,
        what workers use), or ``direct`` at the store's own published port
        (which moves when the container restarts)."""
        if service not in self.links:
            raise ComposeError(f"{service!r} is not a store of this stack ({tuple(self.links)})")
        if direct:
            return "127.0.0.1", self.published(service, self.port_of(service))
        return "127.0.0.1", self.published(PROXY, self.links[service].listen_port)

    def port_of(self, service: str) -> int:
        """The port ``service`` listens on in its container (its link's
        upstream's: a companion's differs from its kind's)."""
        return int(self.links[service].upstream.rpartition(":")[2])

    def kind_of(self, service: str) -> str:
        """The store kind a node service runs (``postgres-1``: ``postgres``)."""
        return service if service in LINKS else self.services[0]

    def url(self, service: str, *, direct: bool = False) -> str:
        """The URL a bus driver opens for ``service``."""
        from knell.stores import registry

        host, port = self.address(service, direct=direct)
        declared = registry.get(self.kind_of(service)).compose
        assert declared is not None  # a service of the stack is a compose kind
        return declared.url.format(host=host, port=port)

    @property
    def toxiproxy_url(self) -> str:
        """The Toxiproxy API (``http://127.0.0.1:PORT``) for network faults."""
        return f"http://127.0.0.1:{self.published(PROXY, API_PORT)}"

    def link_name(self, service: str) -> str:
        """The Toxiproxy proxy in front of ``service``."""
        return self.links[service].name

    # -- waiting ------------------------------------------------------------

    def wait_healthy(
        self, services: Sequence[str] | None = None, timeout: float | None = None
    ) -> None:
        """Wait until every container's healthcheck passes; a container
        that exits fails at once, with its last log lines."""
        names = list(services or (*self.links, PROXY))
        limit = timeout or self.options.health_timeout
        start = time.monotonic()
        deadline = start + limit
        while True:
            pending = []
            for service in names:
                container = self.container(service)
                state = container.attrs["State"]
                if state["Status"] in ("exited", "dead"):
                    logs = container.logs(tail=15).decode(errors="replace")
                    raise StackFailed(
                        f"{self.project}: {service} exited (code {state.get('ExitCode')}):\n{logs}"
                    )
                health = (state.get("Health") or {}).get("Status", "healthy")
                if health != "healthy":
                    pending.append((service, state))
            if not pending:
                self.timings.setdefault("healthy", time.monotonic() - start)
                return
            if time.monotonic() > deadline:
                service, state = pending[0]
                last = ((state.get("Health") or {}).get("Log") or [{}])[-1]
                raise StackFailed(
                    f"{self.project}: {', '.join(s for s, _ in pending)} not healthy after "
                    f"{limit:.0f} s; {service}'s last check: {last.get('Output', '').strip()!r}"
                )
            time.sleep(POLL)

    def wait_ready(self, services: Sequence[str] | None = None, timeout: float = 60) -> None:
        """Wait until each store answers its protocol probe through its link."""
        names = list(services or self.links)
        deadline = time.monotonic() + timeout
        for service in names:
            probe = probe_of(self.kind_of(service))
            while not probe(*self.address(service), 1.0):
                if time.monotonic() > deadline:
                    raise StackFailed(
                        f"{self.project}: {service} does not answer through its link "
                        f"after {timeout:.0f} s"
                    )
                time.sleep(POLL)

    def ready(self, service: str, *, direct: bool = False, timeout: float = 1.0) -> bool:
        """Whether ``service`` answers its protocol probe right now."""
        try:
            host, port = self.address(service, direct=direct)
        except StackFailed:
            return False
        return probe_of(self.kind_of(service))(host, port, timeout)

    # -- records ------------------------------------------------------------

    def _record_resources(self) -> None:
        if self.owner is None:
            return
        engine = client()
        project: dict[str, str | list[str] | bool] = {"label": f"{PROJECT}={self.project}"}
        engine_name = _engine_name()
        for volume in engine.volumes.list(filters=project):
            self.owner.resource(
                "volume", str(volume.name), project=self.project, engine=engine_name
            )
        for network in engine.networks.list(filters=project):
            self.owner.resource(
                "network", str(network.id), name=network.name, project=self.project,
                engine=engine_name,
            )  # fmt: skip
        for container in engine.containers.list(all=True, filters=project):
            self.owner.resource(
                "container", str(container.id), name=container.name, project=self.project,
                engine=engine_name,
            )  # fmt: skip


def _engine_name() -> str:
    return os.environ.get("DOCKER_HOST", "local")
