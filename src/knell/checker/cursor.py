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
invoke snapshots that value (kept until the operation completes or is
lost); its completion is compared with the snapshot.

Acks also judge reads: a ``fetch`` with ``after: null`` reads from the
durable cursor, so when it was invoked after an ``ack`` of that (handle,
channel) had completed with cursor ``c``, every message it returns must
have ``seq > c``; otherwise it is a ``fetch-below-cursor`` (the handle is
handed messages it already acknowledged). Only acks count here: a fetch
below a *subscribe* cursor is a join flood, judged by no-flood-on-join.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["CursorCheck"]

# (largest completed cursor, the completion that observed it, its serial)
_Best = tuple[int, Event, int]


class CursorCheck(Check):
    name: ClassVar[str] = "no-cursor-regression"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("cursor-regression", "fetch-below-cursor")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._best: dict[tuple[Any, Any], _Best] = {}
        self._acked: dict[tuple[Any, Any], _Best] = {}
        # id(invoke) -> the snapshot taken when it was invoked
        self._snaps: dict[int, _Best | None] = {}
        self._observations = 0
        self._cursor_fetches = 0
        self._serial = 0
        # (kind, handle, channel, serial of the larger observation) reported:
        # later operations that still see the smaller value are the same
        # regression, counted in "regressed-observations" only.
        self._reported: set[tuple[str, Any, Any, int]] = set()
        self._regressed = 0

    # -- invoke: snapshot what had completed ---------------------------------

    @on("ack", "invoke")
    @on("cursor", "invoke")
    @on("subscribe", "invoke")
    def _invoke(self, event: Event) -> None:
        self._snaps[id(event)] = self._best.get((event.get("handle"), event.get("channel")))

    @on("fetch", "invoke")
    def _fetch_invoke(self, event: Event) -> None:
        # a fetch reads from the durable cursor: only acks bound it
        self._snaps[id(event)] = self._acked.get((event.get("handle"), event.get("channel")))

    @on_op("ack", "fail", "info", "lost")
    @on_op("cursor", "fail", "info", "lost")
    @on_op("subscribe", "fail", "info", "lost")
    @on_op("fetch", "fail", "info", "lost")
    def _drop(self, inv: Event | None, event: Event | None) -> None:
        if inv is not None:
            self._snaps.pop(id(inv), None)

    # -- completions ---------------------------------------------------------

    @on_op("fetch", "ok")
    def _fetch_ok(self, inv: Event | None, event: Event) -> None:
        # most fetches page on with an explicit ``after``: nothing to judge
        if inv is None:
            return
        snap = self._snaps.pop(id(inv), None)
        if (inv.get("value") or {}).get("after") is not None:
            return
        self._cursor_fetches += 1
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
                    self._report_fetch(hc, c, m, snap[1], inv, event)
                break

    @on_op("ack", "ok")
    @on_op("cursor", "ok")
    @on_op("subscribe", "ok")
    def _complete(self, inv: Event | None, event: Event) -> None:
        """An ack, cursor or subscribe completion: judge the cursor it saw."""
        f = event["f"]
        snap = self._snaps.pop(id(inv), None) if inv is not None else None
        hc = (event.get("handle"), event.get("channel"))
        value = event.get("value") or {}
        cursor = value.get("cursor")
        if cursor is None and f == "ack" and inv is not None:
            cursor = (inv.get("value") or {}).get("up_to")
        if not isinstance(cursor, int):
            return
        self._observations += 1
        self._serial += 1
        if inv is not None and snap is not None and cursor < snap[0]:
            self._regressed += 1
            rk = ("cursor-regression", hc[0], hc[1], snap[2])
            if rk not in self._reported:
                self._reported.add(rk)
                self.log.add(
                    "cursor-regression",
                    f"cursor of handle {hc[0]} on channel {hc[1]} went back: {f} by "
                    f"{event['process']} observed {cursor} after {snap[1]['f']} by "
                    f"{snap[1]['process']} had completed observing {snap[0]}",
                    witness(snap[1], inv, event),
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
