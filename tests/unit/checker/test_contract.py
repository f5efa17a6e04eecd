"""The check contract: what a check declares is what it is fed.

Handlers are declared once, by decorators; the driver derives the
dispatch from them, pairs invokes with completions for every check, tells
of operations lost with their process, delivers each message once, and
charges unreadable events to the check that could not read them."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from knell.checker import Check, CheckConfig, CheckResult, check_events, on, on_delivery, on_op
from knell.checker.consumer import Handler
from knell.history import Event

from .builder import History


class Recorder(Check):
    name: ClassVar[str] = "recorder"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.events: list[tuple[str, str]] = []
        self.ops: list[tuple[str, str | None, str | None]] = []
        self.delivered: list[tuple[Any, Any, Any]] = []

    @on("handle", "ok")
    def _handled(self, event: Event) -> None:
        self.events.append(("handle", event["value"]["id"]))

    @on("ack", "invoke")
    def _ack_invoked(self, event: Event) -> None:
        self.events.append(("ack-invoke", str(event["value"]["up_to"])))

    @on_op("ack", "ok", "fail", "info", "lost")
    def _acked(self, invoke: Event | None, done: Event | None) -> None:
        self.ops.append(
            (
                "ack",
                None if invoke is None else str(invoke["value"]["up_to"]),
                None if done is None else done["type"],
            )
        )

    @on_delivery
    def _delivered(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        self.delivered.append((channel, seq, mid))

    def result(self) -> CheckResult:
        return self._result({})


def _run(h: History) -> Recorder:
    made: list[Recorder] = []

    def factory(config: CheckConfig, windows: Any) -> Recorder:
        made.append(Recorder(config, windows))
        return made[0]

    check_events(h.events, CheckConfig(), checks=[factory])
    return made[0]


def test_handlers_are_derived_from_the_decorators() -> None:
    declared = {(h.how, h.f, h.method) for h in Recorder.handlers}
    assert declared == {
        ("event", "handle", "_handled"),
        ("event", "ack", "_ack_invoked"),
        ("op", "ack", "_acked"),
        ("delivery", "", "_delivered"),
    }
    assert Handler("event", "handle", ("ok",), "_handled") in Recorder.handlers


def test_unknown_types_are_refused_at_declaration() -> None:
    with pytest.raises(ValueError, match="unknown event type"):
        on("post", "done")
    with pytest.raises(ValueError, match="unknown completion type"):
        on_op("post", "invoke")


def test_operations_are_paired_once_and_lost_ones_reported() -> None:
    h = History()
    h.ack("c1", "w", "events", 3, 3)  # invoke + ok
    h.ack_refused("c1", "w", "events", 9)  # invoke + fail
    h.invoke("c1", "ack", {"up_to": 4}, handle="w", channel="events")  # killed mid-ack
    h.ok("c1", "start", {"role": "consumer"}, incarnation=2)  # the next incarnation
    h.invoke("c1", "ack", {"up_to": 5}, handle="w", channel="events", incarnation=2)
    h.ok("c1", "ack", {"cursor": 5}, handle="w", channel="events", incarnation=2)
    h.ok("c2", "ack", {"cursor": 1}, handle="w", channel="events")  # no invoke seen
    h.invoke("c2", "ack", {"up_to": 6}, handle="w", channel="events")  # history ends
    check = _run(h)
    assert check.ops == [
        ("ack", "3", "ok"),
        ("ack", "9", "fail"),
        ("ack", "4", None),  # lost when incarnation 2 started
        ("ack", "5", "ok"),
        ("ack", None, "ok"),
        ("ack", "6", None),  # lost at the end of the history
    ]
    assert [e for e in check.events if e[0] == "ack-invoke"] == [
        ("ack-invoke", "3"),
        ("ack-invoke", "9"),
        ("ack-invoke", "4"),
        ("ack-invoke", "5"),
        ("ack-invoke", "6"),
    ]


def test_a_completion_of_another_f_does_not_complete_the_pending_op() -> None:
    h = History()
    h.invoke("w1", "ack", {"up_to": 1}, handle="w", channel="events")
    h.ok("w1", "handle", {"seq": 1, "id": "a"}, handle="w", channel="events")  # single event
    h.ok("w1", "ack", {"cursor": 1}, handle="w", channel="events")
    check = _run(h)
    assert check.ops == [("ack", "1", "ok")]
    assert check.events[-1] == ("handle", "a")


def test_each_message_is_delivered_once() -> None:
    h = History()
    h.fetch("c1", "w", "events", None, [(1, "a"), (2, "b")])
    h.handled("c1", "w", "events", 1, "a")
    h.fetch("c2", "w", "events", None, [(1, "a"), (2, "b"), (3, "c")])
    h.handled("c2", "w", "events", 3, "c")
    check = _run(h)
    assert check.delivered == [("events", 1, "a"), ("events", 2, "b"), ("events", 3, "c")]


def test_unreadable_operation_is_charged_to_its_check_only() -> None:
    h = History()
    h.invoke("c1", "ack", {}, handle="w", channel="events")  # no up_to
    h.ok("c1", "ack", {"cursor": 1}, handle="w", channel="events")
    h.post("p1", "events", "m1", 1)
    v = check_events(h.events, CheckConfig(), checks=[Recorder])
    r = v.checks["recorder"]
    assert r.valid == "unknown"
    assert r.counts["malformed-events"] == 2  # the invoke handler and the op handler
    assert "KeyError" in (r.unknown_reason or "")
