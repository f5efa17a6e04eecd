"""no-cursor-regression: a handle's durable cursor only moves forward.

The cursor of a (handle, channel) is the handle's memory of what it has
handled. It is shared by every process of the handle and survives their
deaths, and ``ack`` is forward-only (``MAX(old, up_to)`` inside the write
transaction), so a stale ack from a slow or resurrected process is a no-op.
If the cursor ever goes *back*, messages are redelivered; worse, if a
lagging write overwrote a newer cursor with an older one and a later write
then jumps ahead, messages can be skipped. Either way the bus broke its
promise.

Real-time order is what matters (linearizability of the cursor register):
if operation B was *invoked* after operation A *completed* (A's completion
precedes B's invoke in the merged history), B must observe a cursor at
least as large as A did. Cursor observations are ``ack`` ok ``{cursor}``,
``cursor`` ok ``{cursor}`` and ``subscribe`` ok ``{cursor}``.

Single pass: per (handle, channel) the check keeps the largest cursor any
*completed* operation observed, with the event that observed it. Each
invoke snapshots that value; its completion is compared with the snapshot.

Acks also judge reads: a ``fetch`` with ``after: null`` reads from the
durable cursor, so when it was invoked after an ``ack`` of that (handle,
channel) had completed with cursor ``c``, every message it returns must
have ``seq > c``; otherwise it is a ``fetch-below-cursor`` (the handle is
handed messages it already acknowledged). Only acks count here: a fetch
below a *subscribe* cursor is a join flood, judged by no-flood-on-join.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from knell.checker.base import BaseCheck, CheckConfig, CheckResult, OpKey, witness
from knell.history import Event

__all__ = ["CursorCheck"]

# (largest completed cursor, the completion that observed it, its serial)
_Best = tuple[int, Event, int]


class CursorCheck(BaseCheck):
    name: ClassVar[str] = "no-cursor-regression"
    fs: ClassVar[frozenset[str]] = frozenset({"ack", "cursor", "subscribe", "fetch"})
    kinds: ClassVar[tuple[str, ...]] = ("cursor-regression", "fetch-below-cursor")
    handlers: ClassVar[Mapping[tuple[str, str], str]] = {
        ("fetch", "invoke"): "_fetch_invoke",
        ("fetch", "ok"): "_fetch_ok",
        ("ack", "invoke"): "_invoke",
        ("ack", "ok"): "_ack_ok",
    }

    def __init__(self, config: CheckConfig) -> None:
        super().__init__(config)
        self._best: dict[tuple[Any, Any], _Best] = {}
        self._acked: dict[tuple[Any, Any], _Best] = {}
        self._pending: dict[OpKey, tuple[Event, _Best | None]] = {}
        self._observations = 0
        self._cursor_fetches = 0
        self._serial = 0
        # (kind, handle, channel, serial of the larger observation) reported:
        # later operations that still see the smaller value are the same
        # regression, counted in "regressed-observations" only.
        self._reported: set[tuple[str, Any, Any, int]] = set()
        self._regressed = 0

    def observe(self, event: Event) -> None:
        f = event["f"]
        if event["type"] == "invoke":
            if f == "fetch":
                self._fetch_invoke(event)
            else:
                self._invoke(event)
            return
        if f == "fetch":
            if event["type"] == "ok":
                self._fetch_ok(event)
            else:
                self._drop(event)
        else:
            self._complete(event, f)

    def _invoke(self, event: Event) -> None:
        key = (event["process"], event.get("incarnation"))
        self._pending[key] = (event, self._best.get((event.get("handle"), event.get("channel"))))

    def _fetch_invoke(self, event: Event) -> None:
        # a fetch reads from the durable cursor: only acks bound it
        key = (event["process"], event.get("incarnation"))
        self._pending[key] = (event, self._acked.get((event.get("handle"), event.get("channel"))))

    def _drop(self, event: Event) -> None:
        self._pending.pop((event["process"], event.get("incarnation")), None)

    def _fetch_ok(self, event: Event) -> None:
        pending = self._pending.pop((event["process"], event.get("incarnation")), None)
        # most fetches page on with an explicit ``after``: nothing to judge
        if pending is None or pending[0]["f"] != "fetch":
            return
        if (pending[0].get("value") or {}).get("after") is not None:
            return
        self._cursor_fetches += 1
        snap = pending[1]
        if snap is None:
            return
        c = snap[0]
        for m in (event.get("value") or {}).get("messages") or ():
            seq = m.get("seq")
            if seq is not None and seq <= c:
                self._regressed += 1
                hc = (event.get("handle"), event.get("channel"))
                rk = ("fetch-below-cursor", hc[0], hc[1], snap[2])
                if rk not in self._reported:
                    self._reported.add(rk)
                    self._report_fetch(hc, c, m, snap[1], pending[0], event)
                break

    def _ack_ok(self, event: Event) -> None:
        self._complete(event, "ack")

    def _complete(self, event: Event, f: str) -> None:
        """An ack, cursor or subscribe completion: judge the cursor it saw."""
        key = (event["process"], event.get("incarnation"))
        pending = self._pending.pop(key, None)
        if pending is not None and pending[0]["f"] != f:
            pending = None
        if event["type"] != "ok":
            return
        hc = (event.get("handle"), event.get("channel"))
        value = event.get("value") or {}
        snap = pending[1] if pending is not None else None
        cursor = value.get("cursor")
        if cursor is None and f == "ack" and pending is not None:
            cursor = (pending[0].get("value") or {}).get("up_to")
        if not isinstance(cursor, int):
            return
        self._observations += 1
        self._serial += 1
        if pending is not None and snap is not None and cursor < snap[0]:
            self._regressed += 1
            rk = ("cursor-regression", hc[0], hc[1], snap[2])
            if rk not in self._reported:
                self._reported.add(rk)
                self.log.add(
                    "cursor-regression",
                    f"cursor of handle {hc[0]} on channel {hc[1]} went back: {f} by "
                    f"{event['process']} observed {cursor} after {snap[1]['f']} by "
                    f"{snap[1]['process']} had completed observing {snap[0]}",
                    witness(snap[1], pending[0], event),
                )
        best = self._best.get(hc)
        if best is None or cursor > best[0]:
            self._best[hc] = (cursor, event, self._serial)
        if f == "ack":
            acked = self._acked.get(hc)
            if acked is None or cursor > acked[0]:
                self._acked[hc] = (cursor, event, self._serial)

    def _report_fetch(
        self,
        hc: tuple[Any, Any],
        c: int,
        message: dict[str, Any],
        earlier: Event,
        invoke: Event,
        ok: Event,
    ) -> None:
        self.log.add(
            "fetch-below-cursor",
            f"fetch from the durable cursor by {ok['process']} (handle {hc[0]}, channel "
            f"{hc[1]}) returned message {message.get('id')} at seq {message.get('seq')} "
            f"although {earlier['f']} by {earlier['process']} had completed with cursor {c}",
            witness(earlier, invoke, ok),
        )

    def result(self) -> CheckResult:
        return self._result(
            {
                "observations": self._observations,
                "cursor-fetches": self._cursor_fetches,
                "keys": len(self._best),
                "regressed-observations": self._regressed,
            }
        )
