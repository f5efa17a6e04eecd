"""What a store's final integrity probe found: intact, corrupt, or unknown.

Power cuts, failed fsyncs and a full disk can do worse than lose the last
writes: they can leave a store that no longer reads back (a torn page, a
broken index, an AOF that does not load). The checks judge what workers saw
through the bus; a store corrupted on disk may still answer the final drain
and pass them. So after the final phase the runner asks the store kind to
probe its own files (:meth:`knell.stores.kind.StoreKind.integrity`):
SQLite's ``PRAGMA integrity_check``, Postgres's ``amcheck``, Redis's
``redis-check-aof``. The result is one nemesis ``integrity`` event, which
the ``store-integrity`` check (:mod:`knell.checker.integrity`) judges.

Three outcomes, kept apart on purpose:

* ``ok``: the probe ran and found the store intact;
* ``corrupt``: the probe ran and the store failed it: a finding about the
  bus and its store, never about knell;
* ``unknown``: the probe could not run (its tool is not installed, the
  server did not answer, the file was locked). knell cannot vouch for the
  store, so the run cannot be VALID, but it is never INVALID for it either:
  a probe that cannot run proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["INTEGRITY_F", "STATUSES", "Integrity", "IntegrityStatus"]

INTEGRITY_F = "integrity"
"""The ``f`` of the nemesis event that records a probe."""

IntegrityStatus = Literal["ok", "corrupt", "unknown"]
STATUSES: tuple[IntegrityStatus, ...] = ("ok", "corrupt", "unknown")

_EVENT_TYPE: dict[IntegrityStatus, str] = {"ok": "ok", "corrupt": "fail", "unknown": "info"}


@dataclass(frozen=True)
class Integrity:
    """One probe's outcome: which probe (``probe``: what it ran), its
    ``status``, and ``detail`` for a person (what it checked, what it found,
    or why it could not run)."""

    probe: str
    status: IntegrityStatus
    detail: str

    @classmethod
    def ok(cls, probe: str, detail: str) -> Integrity:
        return cls(probe, "ok", detail)

    @classmethod
    def corrupt(cls, probe: str, detail: str) -> Integrity:
        return cls(probe, "corrupt", detail)

    @classmethod
    def unknown(cls, probe: str, detail: str) -> Integrity:
        return cls(probe, "unknown", detail)

    @property
    def event_type(self) -> str:
        """The history type it is written with: ``ok``, ``fail`` (corrupt)
        or ``info`` (the probe could not run)."""
        return _EVENT_TYPE[self.status]

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "status": self.status, "detail": self.detail}
