"""What a store kind declares: everything knell needs to know about one store.

A store kind (SQLite, Postgres, Redis, or one of your own) is one package
that subclasses :class:`StoreKind` and registers it with
:mod:`knell.stores.registry`. The runner, the scenario loader, the doctor,
the matrix, the link faults and the CLI ask the registry, never name a
store: so adding a store is one package, not edits across knell.

A kind declares *what* it is (class attributes: its URL schemes, the
provisioning it supports, whether its bus reaches a server over the
network, the extra that installs its client library, its ``[store]``
options as a typed table, the greeting a link probe exchanges with it)
and *how* it is made (methods: a private server for a run, the
namespace a run gets on an existing server, its doctor probe). Nothing
here imports a client library: a kind is declared by importing its
package, and its heavy modules load only when a run uses it.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict

from knell.stores.base import StoreError

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.stores.base import Store
    from knell.stores.integrity import Integrity
    from knell.stores.spec import StoreSpec

__all__ = [
    "ComposeService",
    "Greeting",
    "MissingExtra",
    "NoOptions",
    "Probe",
    "StoreKind",
    "StoreOptions",
    "version_of",
]

PROVISIONS = ("private", "existing", "compose")
"""How a store can be had: started for the run (``private``), a namespace
on a server someone else runs (``existing``, ``store_url``), or containers
of a compose project (``compose``)."""


class MissingExtra(StoreError):
    """A store kind's client library is not installed (exit 3): the message
    names the extra that installs it."""


class StoreOptions(BaseModel):
    """Base of a kind's ``[store]`` options: strict, every key known."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoOptions(StoreOptions):
    """A kind with no options of its own."""


@dataclass(frozen=True)
class Greeting:
    """What a link probe sends through a proxied link to this store, and
    the replies that prove the store answered (a prefix of any is enough)."""

    request: bytes
    replies: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ComposeService:
    """How the compose stack (``provider = "compose"``) runs a kind: its
    service in ``compose/docker-compose.yml`` (named after the kind), behind
    a Toxiproxy link. The numbers here must match that file (a unit test
    reads both)."""

    port: int
    """The store's port on the compose network (and published direct)."""
    link_port: int
    """The Toxiproxy listen port in front of it."""
    official_image: str
    """What the compose file runs unless told otherwise."""
    image_variable: str
    """The variable through which the compose file takes its image."""
    url: str
    """The bus URL, with ``{host}`` and ``{port}``."""
    options: type[StoreOptions] | None = None
    """Its compose-only ``[store]`` keys (passed to the container)."""
    replicas: int = 0
    """The most replicas ``compose/docker-compose.replicated.yml`` runs
    for it (services ``<kind>-1`` .. ``<kind>-N``; 0: none)."""
    companions: tuple[tuple[str, int, int], ...] = ()
    """Services that run beside the replicas in that file, each behind a
    link of its own: ``(service, port, link port)`` (Redis: its three
    Sentinels, which clients ask where the primary is)."""


class Probe(NamedTuple):
    """One line of ``knell doctor``: what was checked, whether it is usable,
    what was found, and how to fix it."""

    name: str
    ok: bool
    detail: str
    hint: str = ""


def version_of(argv: list[str]) -> str:
    """The first line a ``--version`` style command prints, or why not (for
    a kind's doctor probe)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(cannot run: {exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else f"(exit {done.returncode}, no output)"


class StoreKind:
    """One kind of store. Subclass it, set the class attributes, override
    :meth:`private` (and, for a network store, the existing-server hooks),
    and register an instance."""

    name: ClassVar[str]
    """How scenarios name it: ``store = "<name>"``."""
    schemes: ClassVar[tuple[str, ...]] = ()
    """The URL schemes its bus opens (``scheme://...``); the first is the one
    knell writes."""
    provisions: ClassVar[frozenset[str]] = frozenset({"private"})
    """Which of :data:`PROVISIONS` it supports."""
    network: ClassVar[bool] = False
    """Whether its bus reaches a server over TCP (link faults then apply)."""
    extra: ClassVar[str | None] = None
    """The optional-dependency extra that installs its client library."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Modules that extra installs (checked before a run uses the kind)."""
    options: ClassVar[type[StoreOptions]] = NoOptions
    """Its ``[store]`` keys, as a typed table."""
    bus: ClassVar[str] = ""
    """``module:factory`` opening its reference bus from a URL."""
    reference: ClassVar[str] = ""
    """``module:Class`` of its reference bus (the contracts it declares)."""
    mutants: ClassVar[str | None] = None
    """The module declaring its seeded-bug buses (imported on first use)."""
    greeting: ClassVar[Greeting | None] = None
    """What a link probe exchanges with it (network stores)."""
    faults: ClassVar[dict[str, frozenset[str]]] = {}
    """The store faults it can suffer, per provisioning; ``replicated``: what
    a private store with ``[store] replicas`` >= 1 can suffer on top
    (``failover``; see :mod:`knell.stores.replicated`)."""
    frozen_client_stalls: ClassVar[bool] = True
    """Whether a client frozen mid-operation can stall the others."""
    namespace_key: ClassVar[str] = ""
    """The URL query key naming a run's namespace on an existing server."""
    capability: ClassVar[str] = ""
    """What ``knell doctor`` says the kind is for."""
    bench: ClassVar[str | None] = None
    """``module:Class`` of its bus bench (a :class:`knell.bench.network.ServerBench`)."""
    guarded_settings: ClassVar[frozenset[str]] = frozenset()
    """Server settings a private server's ``[store] settings`` may not
    change, because knell sets them to keep the server to this machine
    (Postgres ``listen_addresses``; Redis ``bind``, ``protected-mode``): a
    scenario file must not open a test server to the network. Compared
    lower-cased, ``-`` and ``_`` alike (both servers read them so)."""
    compose: ClassVar[ComposeService | None] = None
    """How the compose stack runs it (``None``: it does not)."""
    queue_bench: ClassVar[str | None] = None
    """``module:attr`` of its queue bench's (raw claim setup, baseline, settings)."""

    # -- declared, derived ----------------------------------------------------

    def missing_extra(self) -> str | None:
        """Why the kind's client library cannot be used (``None``: it can).
        Importing is the test: a broken install is as missing as none."""
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError:
                return self.extra_message(module)
        return None

    def extra_message(self, module: str) -> str:
        extra = self.extra or self.name
        return (
            f"the {self.name} store needs the Python module {module!r}, which is not installed: "
            f"pip install 'knell[{extra}]'"
        )

    def require(self) -> None:
        """Raise :class:`MissingExtra` when the client library is missing."""
        reason = self.missing_extra()
        if reason is not None:
            raise MissingExtra(reason)

    @staticmethod
    def load(target: str) -> Any:
        """The object a ``module:attr`` declaration names."""
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def reference_class(self) -> type[Any]:
        return self.load(self.reference)  # type: ignore[no-any-return]

    def open_bus(self) -> Any:
        """The factory of its reference bus (imports the client library)."""
        self.require()
        return self.load(self.bus)

    def capabilities(self, provider: str, url: str | None, both_commands: bool) -> frozenset[str]:
        """The store faults a ``[store]`` table will be able to suffer,
        before the store is made."""
        if provider == "compose":
            return self.faults.get("compose", frozenset())
        if url is not None:
            return self.faults.get("existing", frozenset()) if both_commands else frozenset()
        return self.faults.get("private", frozenset())

    # -- making one -----------------------------------------------------------

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        """A store started (or created) for the run from ``spec``."""
        raise StoreError(f"a {self.name} store cannot be started by knell")

    def integrity(self, store: Store) -> Integrity | None:
        """Probe ``store``'s files after the final phase, while it still
        runs and nothing writes to it (:mod:`knell.stores.integrity`).
        ``None``: this kind has no probe for this store (a server someone
        else runs, a store that keeps nothing on disk), and nothing is
        recorded. A probe that cannot run returns ``unknown`` with the
        reason; it never raises for the store's trouble."""
        return None

    def locate(self) -> object:
        """Find what a private store needs on this machine (a server's
        binaries); raise :class:`StoreError` saying what is missing and how
        to install it. An embedded store needs nothing."""
        return None

    def unavailable(self) -> str | None:
        """Why a private store of this kind cannot be started on this
        machine (``None``: it can): its server, then its client library."""
        try:
            self.locate()
        except StoreError as exc:
            return str(exc)
        return self.missing_extra()

    def client_probes(self) -> list[Probe]:
        """``knell doctor``'s line per client library (:attr:`requires`):
        its version, or the extra that installs it."""
        out = []
        for module in self.requires:
            try:
                found = importlib.import_module(module)
            except ImportError:
                hint = f"pip install 'knell[{self.extra or self.name}]'"
                out.append(Probe(module, False, "not installed", hint))
                continue
            out.append(Probe(module, True, f"{module} {getattr(found, '__version__', '?')}"))
        return out

    def doctor(self) -> list[Probe]:
        """What ``knell doctor`` checks for this kind."""
        reason = self.unavailable()
        return [Probe(self.name, reason is None, "usable" if reason is None else reason)]

    # -- in the compose stack --------------------------------------------------

    def compose_ready(self, host: str, port: int, timeout: float = 1.0) -> bool:
        """Whether the store answers at ``host:port`` (through its link or
        direct): a protocol-level probe, since Docker's port proxy and
        Toxiproxy accept a connection even when the store behind is dead.
        By default: its link greeting answered."""
        import socket

        if self.greeting is None:
            return False
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                sock.settimeout(timeout)
                sock.sendall(self.greeting.request)
                reply = sock.recv(64)
        except OSError:
            return False
        return bool(reply) and any(reply.startswith(r) for r in self.greeting.replies)

    def compose_replicated(
        self,
        options: dict[str, Any],
        make: Callable[[int, dict[str, str]], Any],
        run_dir: Path,
        *,
        poll: float,
        timeout: float,
    ) -> Store:
        """A primary and ``options["replicas"]`` replicas in containers
        (:attr:`ComposeService.replicas`): ``make(replicas, env)`` gives the
        compose store running them, ``env`` being the variables the kind's
        override file takes; the kind wraps it in a store that can fail
        over. A kind whose compose files run no replicas refuses."""
        raise StoreError(f'provider = "compose" runs no {self.name} replicas')

    def compose_env(self, options: dict[str, Any]) -> dict[str, str]:
        """The variables the compose file passes to its container, from the
        kind's compose-only keys (:attr:`ComposeService.options`)."""
        return {}

    # -- on an existing server (``store_url``) --------------------------------

    def namespace_pattern(self) -> re.Pattern[str]:
        raise StoreError(f"a {self.name} store cannot use an existing server")

    def fresh_namespace(self, run: str) -> str:
        """The namespace a run gets when the URL names none."""
        return f"knell_{run}"

    def connect(self, client_url: str, namespace: str, *, create: bool, timeout: float) -> None:
        """Connect once (creating the namespace when ``create``); raise
        :class:`StoreError` for a namespace that cannot be made, anything
        else for a server that cannot be reached or refused us."""
        raise StoreError(f"a {self.name} store cannot use an existing server")

    def drop(self, client_url: str, namespace: str, *, timeout: float) -> None:
        """Drop a run's namespace (raises on trouble; the caller logs it)."""
