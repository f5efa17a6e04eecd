"""The single pass's own services, seen from outside: what it does to the
events it hands on."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import orjson

from knell.checker import Consumer, check_events, on_delivery
from knell.checker.dispatch import run_pass
from knell.history import Event

from .builder import History


def test_kept_strings_are_one_copy_per_message() -> None:
    # the checks key their tables by a post's channel, sender, key and id;
    # parsed separately, each event would carry its own copy of each
    h = History()
    for n in range(1, 4):
        h.post("producer-1", "events", f"producer-1:{n}", n, key=f"producer-1:{n}")
    h.handled("c1", "w", "events", 2, "producer-1:2")
    parsed: list[Event] = [orjson.loads(orjson.dumps(e)) for e in h.events]
    before = orjson.dumps(parsed)
    check_events(parsed)
    assert orjson.dumps(parsed) == before  # the same values
    posts = [e for e in parsed if e["f"] == "post"]
    assert len({id(e["channel"]) for e in posts}) == 1
    assert len({id(e["value"]["sender"]) for e in posts}) == 1
    assert all(e["value"]["key"] is e["value"]["id"] for e in posts)
    for n in range(3):  # each ok names its invoke's id: one copy for both
        assert posts[2 * n + 1]["value"]["id"] is posts[2 * n]["value"]["id"]
    (handled,) = [e for e in parsed if e["f"] == "handle" and e["type"] == "ok"]
    assert handled["value"]["id"] is posts[2]["value"]["id"]  # the posted copy


def test_unreadable_post_fields_are_left_for_the_checks() -> None:
    h = History()
    h.post("producer-1", "events", "m1", 1)
    parsed: list[Event] = [orjson.loads(orjson.dumps(e)) for e in h.events]
    parsed[0]["channel"] = ["not", "a", "string"]
    parsed[0]["value"] = "not an object"
    verdict = check_events(parsed)
    assert parsed[0]["channel"] == ["not", "a", "string"]
    assert verdict.valid == "unknown"  # judged by the checks, not crashed by the pass


def test_a_read_only_post_is_judged_as_it_is() -> None:
    h = History()
    h.post("producer-1", "events", "m1", 1)
    frozen = [MappingProxyType(e) for e in h.events]
    verdict = check_events(frozen)  # type: ignore[arg-type]
    assert verdict.checks["post-outcome"].valid is True


def test_each_message_shown_is_delivered_once_even_two_at_one_seq() -> None:
    class Shown(Consumer):
        def __init__(self) -> None:
            self.got: list[tuple[Any, Any, Any]] = []

        @on_delivery
        def shown(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
            self.got.append((channel, seq, mid))

    h = History()
    h.fetch("c1", "w", "events", None, [(1, "a"), (2, "b")])
    h.fetch("c2", "v", "events", None, [(1, "a"), (2, "x"), (2, "b")])  # x and b at seq 2
    h.handled("c2", "v", "events", 2, "x")
    h.handled("c2", "v", "events", 2, "y")
    h.fetch("c1", "w", "audit", None, [(1, "a")])  # another channel
    shown = Shown()
    run_pass(h.events, [shown])
    assert shown.got == [
        ("events", 1, "a"),
        ("events", 2, "b"),
        ("events", 2, "x"),
        ("events", 2, "y"),
        ("audit", 1, "a"),
    ]
