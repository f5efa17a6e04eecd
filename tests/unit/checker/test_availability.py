"""availability: errors outside fault windows are findings; required
refusals and errors inside windows are not."""

from __future__ import annotations

from knell.checker import CheckConfig
from knell.checker.availability import AvailabilityCheck

from .builder import History, only, run


def test_clean_operations_and_required_refusals_pass() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.ack("c1", "w", "events", 1)
    h.ack_refused("c1", "w", "events", 1_000_001)  # the probe: beyond any post
    r = run(h, AvailabilityCheck)
    assert r.valid is True
    assert r.counts["required-refusals"] == 1 and r.counts["errors-outside"] == 0


def test_an_error_outside_any_fault_is_invalid_with_the_error() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    inv = h.fetch_invoke("c1", "w", "events", None)
    err = h.info("c1", "fetch", {"after": None, "error": "database is locked"}, handle="w",
                 channel="events")  # fmt: skip
    h.fetch("c1", "w", "events", None, [(1, "m1")])
    r = run(h, AvailabilityCheck)
    assert only(r, "errors-outside-faults") == [inv["index"], err["index"]]
    assert (
        "1 of 2 fetch" in r.anomalies[0].message and "database is locked" in r.anomalies[0].message
    )
    assert r.counts["errors-outside[fetch]"] == 1 and r.counts["ops-outside[fetch]"] == 2


def test_errors_inside_a_window_and_its_grace_are_counted_not_judged() -> None:
    h = History()
    h.nemesis("pause", "c1")
    inv = h.fetch_invoke("c1", "w", "events", None)
    h.fail(inv["process"], "fetch", {"after": None, "error": "busy"}, handle="w", channel="events")
    h.nemesis("resume", "c1")
    r = run(h, AvailabilityCheck)
    assert r.valid is True
    assert r.counts["errors-inside[fetch]"] == 1 and r.counts["errors-outside"] == 0


def test_an_ack_refused_below_the_head_is_an_error() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.ack_refused("c1", "w", "events", 1)  # nothing in the history bounds the head below 1
    r = run(h, AvailabilityCheck)
    assert r.valid is False and r.counts["required-refusals"] == 0


def test_the_rate_limit_allows_a_share_of_errors() -> None:
    h = History()
    for i in range(1, 11):
        h.post("p1", "events", f"m{i}", i)
    inv = h.post_invoke("p1", "events", "m11")
    h.post_info(inv)
    assert run(h, AvailabilityCheck, CheckConfig(max_error_rate=0.1)).valid is True
    assert run(h, AvailabilityCheck, CheckConfig(max_error_rate=0.05)).valid is False
