"""A store kind written outside knell: a toy store behind its own ``toy://`` URLs.

The store is a SQLite file in a folder of its own (``store/<folder>/``),
and its bus is the reference SQLite bus opened on that file: what is new
is the seam, not the storage. It exists to prove that a store is one
package: one :class:`~knell.stores.kind.StoreKind` subclass registered
with :func:`~knell.stores.registry.register_store_kind` (in the runner)
or the ``knell.stores`` entry-point group (in the worker processes), and
the scenario loader, ``--store``, the runner and the workers all know it,
with no change to knell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from knell.buses import Bus
from knell.buses.sqlite import open_sqlite
from knell.owners import Owner
from knell.stores.base import Store, StoreError
from knell.stores.kind import Probe, StoreKind, StoreOptions
from knell.stores.spec import StoreSpec

SCHEME = "toy"


def open_toy(url: str) -> Bus:
    """The bus at ``toy:///abs/path/bus.db?...``: SQLite's, on that file."""
    if not url.startswith(f"{SCHEME}://"):
        raise ValueError(f"not a {SCHEME}:// URL: {url!r}")
    return open_sqlite("sqlite://" + url[len(SCHEME) + 3 :])


class ToyOptions(StoreOptions):
    """The toy store's own ``[store]`` key: the folder its file lives in."""

    folder: str = "toy"


class ToyStore(Store):
    """``store/<folder>/bus.db`` in the run directory."""

    kind = SCHEME

    def __init__(self, run_dir: Path, folder: str, *, poll_interval: float, op_timeout: float):
        super().__init__(run_dir, poll_interval=poll_interval, op_timeout=op_timeout)
        self.path = self.store_dir / folder / "bus.db"

    @property
    def url(self) -> str:
        query = urlencode({"poll_interval": f"{self.poll_interval:g}"})
        return f"{SCHEME}://{self.path.as_posix()}?{query}"

    def start(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"toy store folder {self.path.parent} is not writable: {exc}"
            ) from None

    def wait_ready(self, timeout: float = 30.0) -> float:
        return 0.0

    def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path)}

    def describe_short(self) -> str:
        return f"toy file {self.path}"


class ToyKind(StoreKind):
    name = SCHEME
    schemes = (SCHEME,)
    options = ToyOptions
    bus = "toy_store:open_toy"
    reference = "knell.buses.sqlite:SqliteBus"
    capability = "run on the toy store"

    def private(self, spec: StoreSpec, run_dir: Path, owner: Owner | None) -> Store:
        folder = ToyOptions.model_validate(spec.options).folder
        return ToyStore(
            run_dir, folder, poll_interval=spec.poll_interval, op_timeout=spec.op_timeout
        )

    def doctor(self) -> list[Probe]:
        return [Probe("toy", True, "a SQLite file behind toy:// URLs")]
