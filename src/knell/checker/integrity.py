"""store-integrity: the store must still read back after the run.

"Nothing acked is lost" is judged from what workers saw; a store can pass
every such check and still be broken on disk: a torn page under a B-tree,
a WAL whose frames no longer match, an AOF that Redis will refuse to load
at its next start. After the final phase the runner asks the store kind to
probe its files (:mod:`knell.stores.integrity`: SQLite ``PRAGMA
integrity_check``, Postgres ``amcheck``, Redis ``redis-check-aof``) and
records the outcome as one nemesis ``integrity`` event.

This is a check of its own, not an anomaly of an existing one: no-loss,
post-outcome and the rest judge operations against each other, while this
judges the store's state against its own format, whatever any operation
returned. Its decision:

* a probe that found damage (``corrupt``, written as ``fail``) is an
  anomaly ``corrupt-store``, the probe's event its witness: the bus and its
  store broke the promise, under whatever fault the run applied;
* a probe that could not run (``unknown``, written as ``info``: the tool
  is not installed, the server did not answer) makes the check "unknown"
  with the probe's reason, never invalid: it proves nothing either way;
* no probe at all (a store kind with none for this store: a server someone
  else runs, a store that keeps nothing on disk, a bare history) leaves
  nothing to judge and the check valid, with ``probes`` 0 in its counts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on
from knell.history import Event
from knell.stores.integrity import INTEGRITY_F

__all__ = ["IntegrityCheck"]


class IntegrityCheck(Check):
    name: ClassVar[str] = "store-integrity"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("corrupt-store",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._counts = {"probes": 0, "intact": 0, "unrunnable": 0}
        self._unknown: list[str] = []

    @on(INTEGRITY_F, "ok", "fail", "info")
    def _probe(self, event: Event) -> None:
        if event["process"] != "nemesis":
            return
        value = event.get("value") or {}
        probe = str(value.get("probe", "the probe"))
        detail = str(value.get("detail", ""))
        self._counts["probes"] += 1
        if event["type"] == "ok":
            self._counts["intact"] += 1
        elif event["type"] == "fail":
            self.log.add(
                "corrupt-store",
                f"the store failed its final integrity probe ({probe}): {detail}",
                witness(event),
            )
        else:
            self._counts["unrunnable"] += 1
            self._unknown.append(f"{probe}: {detail}")

    def result(self) -> CheckResult:
        reason = None
        if self._unknown:
            reason = "the store's integrity probe could not run: " + "; ".join(self._unknown)
        return self._result(dict(self._counts), unknown_reason=reason)
