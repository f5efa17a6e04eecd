"""no-flood-on-join: a new handle joins at the head, not at the beginning.

An agent session that subscribes for the first time with ``at="head"``
wants what happens *from now on*. A bus that starts it at seq 0 instead
hands it the channel's entire history at once: thousands of stale
messages, each of which the agent will dutifully act on. That is the
history flood. (``at="start"`` asks for the history explicitly and is not
judged here.)

The *join* of a (handle, channel) is its first subscribe: every subscribe
invoked before any subscribe on that (handle, channel) completed ``ok``
(several processes sharing a handle may race to join; they must agree).
Two anomalies:

* ``join-below-head``: the join cursor is below the seq of a post on the
  channel that completed ``ok`` before the *earliest* subscribe of that
  (handle, channel) was invoked. The head was at least that seq, so the
  handle joined in the past.
* ``flood``: after joining, the handle is handed a message with ``seq <=``
  its join cursor, by a ``handle`` event or by a ``fetch`` from its durable
  cursor (``after: null``). Explicit-``after`` pages are the reader's own
  choice and are judged by the ordering check instead.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["JoinCheck"]


class _Join:
    __slots__ = ("completed", "cursor", "first_invoke", "head", "joins", "start")

    def __init__(self, first_invoke: Event, head: tuple[int, Event] | None) -> None:
        self.first_invoke = first_invoke
        self.head = head  # largest completed post on the channel at first invoke
        self.completed = False  # some subscribe on the key completed ok
        self.start = False  # some joining subscribe asked for at != "head"
        self.cursor: int | None = None  # smallest join cursor
        self.joins: list[tuple[Event, Event]] = []  # (invoke, ok) of the join


class JoinCheck(Check):
    name: ClassVar[str] = "no-flood-on-join"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("flood", "join-below-head")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._head: dict[Any, tuple[int, Event]] = {}
        self._keys: dict[tuple[Any, Any], _Join] = {}
        # id(subscribe invoke) of those that joined (no subscribe of the key
        # had completed yet when they were invoked)
        self._joining: set[int] = set()
        self._flooded: set[tuple[Any, Any, Any]] = set()

    @on("handle", "ok")
    def _handle_ok(self, event: Event) -> None:
        st = self._keys.get((event["handle"], event["channel"]))
        if st is None or st.cursor is None or st.start:
            return
        value = event["value"]
        seq = value["seq"]
        if seq <= st.cursor:
            self._flood(st, seq, value["id"], event, None)

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        seq = event["value"]["seq"]
        channel = event["channel"]
        head = self._head.get(channel)
        if head is None or seq > head[0]:
            self._head[channel] = (seq, event)

    # fetch: only reads from the durable cursor (after: null) are judged
    @on_op("fetch", "ok")
    def _fetch_done(self, inv: Event | None, event: Event) -> None:
        if inv is None or inv["value"].get("after") is not None:
            return
        st = self._keys.get((event["handle"], event["channel"]))
        if st is None or st.cursor is None or st.start:
            return
        cursor = st.cursor
        for m in event["value"]["messages"]:
            seq = m["seq"]
            if seq <= cursor:
                self._flood(st, seq, m["id"], event, inv)

    @on("subscribe", "invoke")
    def _subscribe_invoke(self, event: Event) -> None:
        hc = (event.get("handle"), event.get("channel"))
        st = self._keys.get(hc)
        if st is None:
            st = self._keys[hc] = _Join(event, self._head.get(hc[1]))
        if not st.completed:
            self._joining.add(id(event))
            if (event.get("value") or {}).get("at", "head") != "head":
                st.start = True

    @on_op("subscribe", "fail", "info", "lost")
    def _subscribe_failed(self, inv: Event | None, event: Event | None) -> None:
        if inv is not None:
            self._joining.discard(id(inv))

    @on_op("subscribe", "ok")
    def _subscribe_ok(self, inv: Event | None, event: Event) -> None:
        hc = (event.get("handle"), event.get("channel"))
        st = self._keys.get(hc)
        joining = inv is not None and id(inv) in self._joining
        if inv is not None:
            self._joining.discard(id(inv))
        if st is None:
            return
        st.completed = True
        if not joining or st.start or inv is None:
            return
        cursor = (event.get("value") or {}).get("cursor")
        if not isinstance(cursor, int):
            return
        st.joins.append((inv, event))
        if st.cursor is None or cursor < st.cursor:
            st.cursor = cursor
        if st.head is not None and cursor < st.head[0]:
            kind = "join-below-head"
            if self.log.full(kind):
                self.log.count(kind)
                return
            self.log.add(
                kind,
                f"handle {hc[0]} joined channel {hc[1]} at cursor {cursor}, below seq "
                f"{st.head[0]} whose post completed before the handle's first subscribe",
                witness(st.head[1], st.first_invoke, inv, event),
            )

    def _flood(
        self,
        st: _Join,
        seq: int,
        mid: Any,
        event: Event,
        invoke: Event | None,
    ) -> None:
        hc = (event["handle"], event["channel"])
        fk = (hc[0], hc[1], seq)
        if fk in self._flooded:
            return
        self._flooded.add(fk)
        if self.log.full("flood"):
            self.log.count("flood")
            return
        join_inv, join_ok = st.joins[0]
        for j_inv, j_ok in st.joins:
            if (j_ok.get("value") or {}).get("cursor") == st.cursor:
                join_inv, join_ok = j_inv, j_ok
                break
        how = "handled" if event["f"] == "handle" else "fetched from its cursor"
        self.log.add(
            "flood",
            f"handle {hc[0]} joined channel {hc[1]} at head {st.cursor} but {how} "
            f"message {mid} at seq {seq} from before its join",
            witness(join_inv, join_ok, invoke, event),
        )

    def result(self) -> CheckResult:
        head_joins = sum(1 for st in self._keys.values() if st.joins and not st.start)
        start_joins = sum(1 for st in self._keys.values() if st.start)
        return self._result({"head-joins": head_joins, "start-joins": start_joins})
