"""A tiny history builder for handcrafted checker tests.

Every event gets the next ``index`` and a strictly increasing ``time``
(1 ms apart unless :meth:`History.sleep` moves the clock), exactly like a
merged ``history.jsonl``. Helpers return the events they append so tests
can assert on witness indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knell.checker import CheckConfig, CheckResult, Verdict, check_events
from knell.checker.base import Check
from knell.checker.registry import CHECKS
from knell.history import Event

NS = 1_000_000_000
START = 1_732_871_234_000_000_000


class History:
    def __init__(self, step_ms: float = 1.0) -> None:
        self.events: list[Event] = []
        self.now = START
        self.step = int(step_ms * 1_000_000)

    # -- raw events ------------------------------------------------------

    def event(
        self,
        process: str,
        type_: str,
        f: str,
        value: dict[str, Any] | None = None,
        *,
        handle: str | None = None,
        channel: str | None = None,
        incarnation: int = 1,
    ) -> Event:
        self.now += self.step
        event: Event = {
            "time": self.now,
            "process": process,
            "incarnation": incarnation,
            "pid": 1000 + len(process),
            "type": type_,
            "f": f,
        }
        if handle is not None:
            event["handle"] = handle
        if channel is not None:
            event["channel"] = channel
        event["value"] = dict(value or {})
        event["index"] = len(self.events)
        self.events.append(event)
        return event

    def invoke(self, process: str, f: str, value: dict[str, Any] | None = None, **kw: Any) -> Event:
        return self.event(process, "invoke", f, value, **kw)

    def ok(self, process: str, f: str, value: dict[str, Any] | None = None, **kw: Any) -> Event:
        return self.event(process, "ok", f, value, **kw)

    def fail(self, process: str, f: str, value: dict[str, Any] | None = None, **kw: Any) -> Event:
        return self.event(process, "fail", f, value, **kw)

    def info(self, process: str, f: str, value: dict[str, Any] | None = None, **kw: Any) -> Event:
        return self.event(process, "info", f, value, **kw)

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * NS)

    # -- operations ------------------------------------------------------

    def post_invoke(
        self,
        process: str,
        channel: str,
        mid: str,
        *,
        sender: str | None = None,
        key: str | None = None,
        incarnation: int = 1,
    ) -> Event:
        value: dict[str, Any] = {"id": mid, "sender": sender or process}
        if key is not None:
            value["key"] = key
        return self.invoke(process, "post", value, channel=channel, incarnation=incarnation)

    def post_ok(self, invoke: Event, seq: int) -> Event:
        return self.ok(
            invoke["process"],
            "post",
            {**invoke["value"], "seq": seq},
            channel=invoke["channel"],
            incarnation=invoke["incarnation"],
        )

    def post_info(self, invoke: Event, error: str = "timeout") -> Event:
        return self.info(
            invoke["process"],
            "post",
            {**invoke["value"], "error": error},
            channel=invoke["channel"],
            incarnation=invoke["incarnation"],
        )

    def post(
        self,
        process: str,
        channel: str,
        mid: str,
        seq: int,
        *,
        sender: str | None = None,
        key: str | None = None,
    ) -> tuple[Event, Event]:
        inv = self.post_invoke(process, channel, mid, sender=sender, key=key)
        return inv, self.post_ok(inv, seq)

    def subscribe(
        self, process: str, handle: str, channel: str, cursor: int, *, at: str = "head"
    ) -> tuple[Event, Event]:
        inv = self.invoke(process, "subscribe", {"at": at}, handle=handle, channel=channel)
        ok = self.ok(process, "subscribe", {"cursor": cursor}, handle=handle, channel=channel)
        return inv, ok

    def fetch_invoke(self, process: str, handle: str, channel: str, after: int | None) -> Event:
        return self.invoke(process, "fetch", {"after": after}, handle=handle, channel=channel)

    def fetch_ok(self, invoke: Event, messages: Sequence[tuple[int, str]]) -> Event:
        return self.ok(
            invoke["process"],
            "fetch",
            {"messages": [{"seq": s, "id": i} for s, i in messages]},
            handle=invoke["handle"],
            channel=invoke["channel"],
        )

    def fetch(
        self,
        process: str,
        handle: str,
        channel: str,
        after: int | None,
        messages: Sequence[tuple[int, str]],
    ) -> tuple[Event, Event]:
        inv = self.fetch_invoke(process, handle, channel, after)
        return inv, self.fetch_ok(inv, messages)

    def handled(self, process: str, handle: str, channel: str, seq: int, mid: str) -> Event:
        return self.ok(process, "handle", {"seq": seq, "id": mid}, handle=handle, channel=channel)

    def ack(
        self, process: str, handle: str, channel: str, up_to: int, cursor: int | None = None
    ) -> tuple[Event, Event]:
        inv = self.invoke(process, "ack", {"up_to": up_to}, handle=handle, channel=channel)
        ok = self.ok(
            process,
            "ack",
            {"cursor": up_to if cursor is None else cursor},
            handle=handle,
            channel=channel,
        )
        return inv, ok

    def ack_refused(
        self, process: str, handle: str, channel: str, up_to: int
    ) -> tuple[Event, Event]:
        inv = self.invoke(process, "ack", {"up_to": up_to}, handle=handle, channel=channel)
        fail = self.fail(
            process,
            "ack",
            {"up_to": up_to, "error": "AckBeyondHead"},
            handle=handle,
            channel=channel,
        )
        return inv, fail

    def cursor(self, process: str, handle: str, channel: str, cursor: int) -> tuple[Event, Event]:
        inv = self.invoke(process, "cursor", {}, handle=handle, channel=channel)
        ok = self.ok(process, "cursor", {"cursor": cursor}, handle=handle, channel=channel)
        return inv, ok

    def consume(
        self, process: str, handle: str, channel: str, messages: Sequence[tuple[int, str]]
    ) -> None:
        """A consumer's loop body: fetch from the cursor, handle each, ack the last."""
        self.fetch(process, handle, channel, None, messages)
        for seq, mid in messages:
            self.handled(process, handle, channel, seq, mid)
        if messages:
            self.ack(process, handle, channel, messages[-1][0])

    def drain(self, handle: str, heads: dict[str, int]) -> tuple[Event, Event]:
        where = {"handle": handle, "channel": next(iter(heads), "events")}  # as the runner
        inv = self.invoke("nemesis", "drain", {"handle": handle}, **where)
        ok = self.ok("nemesis", "drain", {"handle": handle, "heads": heads}, **where)
        return inv, ok

    def drain_info(
        self, handle: str, error: str = "timed out", channel: str = "events"
    ) -> tuple[Event, Event]:
        where = {"handle": handle, "channel": channel}
        inv = self.invoke("nemesis", "drain", {"handle": handle}, **where)
        info = self.info("nemesis", "drain", {"handle": handle, "error": error}, **where)
        return inv, info

    def nemesis(self, f: str, target: str) -> Event:
        return self.info("nemesis", f, {"target": target, "pid": 1000 + len(target)})

    def arm_invoke(
        self,
        process: str,
        handle: str,
        timeout: float,
        cursors: dict[str, int] | None = None,
        incarnation: int = 1,
    ) -> Event:
        value: dict[str, Any] = {"timeout": timeout}
        if cursors is not None:
            value["cursors"] = cursors
        return self.invoke(process, "arm", value, handle=handle, incarnation=incarnation)

    def arm_ok(self, invoke: Event, rang: bool) -> Event:
        return self.ok(invoke["process"], "arm", {"rang": rang}, handle=invoke["handle"])

    def wake(
        self, process: str, handle: str, channel: str, seq: int, sender: str, reason: str = "post"
    ) -> Event:
        return self.ok(
            process,
            "wake",
            {"seq": seq, "sender": sender, "reason": reason},
            handle=handle,
            channel=channel,
        )


def verdict(h: History, config: CheckConfig | None = None) -> Verdict:
    return check_events(h.events, config or CheckConfig())


def run(h: History, check: type[Check], config: CheckConfig | None = None) -> CheckResult:
    """Run one check alone over the history."""
    return check_events(h.events, config or CheckConfig(), checks=[check]).checks[check.name]


def check_keeping(
    h: History, config: CheckConfig, checks: Sequence[type[Check]] | None = None
) -> tuple[Verdict, dict[str, Any]]:
    """The verdict, and the check instances by name, to look at what each
    still keeps (every registered check unless ``checks`` says which)."""
    made: list[Check] = []

    def factory(cls: type[Check]) -> Any:
        def make(*args: Any) -> Check:
            check = cls(*args)
            made.append(check)
            return check

        return make

    picked = checks or [c for c in CHECKS if isinstance(c, type) and issubclass(c, Check)]
    found = check_events(h.events, config, checks=[factory(c) for c in picked])
    return found, {c.name: c for c in made}


def indices(events: Sequence[Event]) -> list[int]:
    return [e["index"] for e in events]


def only(result: CheckResult, kind: str) -> list[int]:
    """The witness indices of the single anomaly of ``kind`` in ``result``."""
    found = [a for a in result.anomalies if a.kind == kind]
    assert len(found) == 1, [a.message for a in result.anomalies]
    assert result.valid is False
    return indices(found[0].witness)
