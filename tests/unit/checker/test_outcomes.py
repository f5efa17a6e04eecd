"""post-outcome: a failed post stays unwritten; a retry of a landed key is answered."""

from __future__ import annotations

from knell.checker import CheckConfig, check_events
from knell.checker.outcomes import OutcomeCheck
from knell.checker.windows import FaultWindows

from .builder import History, only, run


def test_honest_outcomes_pass() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1", key="m1")
    h.fail("p1", "post", {**inv["value"], "error": "busy"}, channel="events")  # never landed
    h.post("p1", "events", "m2", 1, key="m2")
    h.post("p1", "events", "m2", 1, key="m2")  # a retry answered with the original
    h.fetch("c1", "w", "events", None, [(1, "m2")])
    r = run(h, OutcomeCheck)
    assert r.valid is True and r.counts["keyed-retries-after-landing"] == 1


def test_a_failed_post_that_was_delivered() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    fail = h.fail("p1", "post", {**inv["value"], "error": "database is locked"}, channel="events")
    _, seen = h.fetch("c1", "w", "events", None, [(1, "m1")])
    r = run(h, OutcomeCheck)
    assert only(r, "failed-but-applied") == [fail["index"], seen["index"]]


def test_a_failed_attempt_explained_by_a_later_success_is_not_a_finding() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1", key="m1")
    h.fail("p1", "post", {**inv["value"], "error": "busy"}, channel="events")
    h.post("p1", "events", "m1", 1, key="m1")
    h.handled("c1", "w", "events", 1, "m1")
    assert run(h, OutcomeCheck).valid is True


def test_a_retry_of_a_landed_key_refused_with_an_error() -> None:
    h = History()
    _, landed = h.post("p1", "events", "m1", 1, key="m1")
    retry = h.post_invoke("p1", "events", "m1", key="m1")
    refused = h.fail("p1", "post", {**retry["value"], "error": "UNIQUE constraint failed"},
                     channel="events")  # fmt: skip
    r = run(h, OutcomeCheck)
    assert only(r, "retry-refused") == [landed["index"], retry["index"], refused["index"]]


def test_a_key_seen_by_a_reader_has_landed_even_without_an_ok() -> None:
    h = History()
    first = h.post_invoke("p1", "events", "m1", key="m1")
    h.post_info(first)
    _, seen = h.fetch("c1", "w", "events", None, [(1, "m1")])
    retry = h.post_invoke("p2", "events", "m1", key="m1")
    refused = h.info("p2", "post", {**retry["value"], "error": "duplicate"}, channel="events")
    r = run(h, OutcomeCheck)
    assert only(r, "retry-refused") == [seen["index"], retry["index"], refused["index"]]


def test_a_refused_retry_inside_a_fault_window_is_excused() -> None:
    h = History()
    h.post("p1", "events", "m1", 1, key="m1")
    h.nemesis("pause", "p1")
    retry = h.post_invoke("p1", "events", "m1", key="m1")
    h.info("p1", "post", {**retry["value"], "error": "timeout"}, channel="events")
    h.nemesis("resume", "p1")
    assert run(h, OutcomeCheck).valid is True


def _kept(h: History) -> OutcomeCheck:
    made: list[OutcomeCheck] = []

    def factory(config: CheckConfig, windows: FaultWindows) -> OutcomeCheck:
        made.append(OutcomeCheck(config, windows))
        return made[0]

    check_events(h.events, CheckConfig(), checks=[factory])
    return made[0]


def test_a_landed_message_leaves_no_sighting_or_key_behind() -> None:
    # memory bounded by what can still matter: a post that landed can never
    # be failed-but-applied, and its key's landing is already known
    h = History()
    for n in range(1, 50):
        h.post("p1", "events", f"m{n}", n, key=f"m{n}")
        h.fetch("c1", "w", "events", n - 1, [(n, f"m{n}")])
    seen_first = h.post_invoke("p1", "events", "m50", key="m50")
    h.fetch("c1", "w", "events", 49, [(50, "m50")])  # shown before its post completed
    h.ok("p1", "post", {**seen_first["value"], "seq": 50}, channel="events")
    check = _kept(h)
    assert check._seen == {} and check._key_of == {}


def test_a_sighting_before_every_attempt_failed_is_kept_as_the_witness() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1", key="m1")
    _, seen = h.fetch("c1", "w", "events", None, [(1, "m1")])
    fail = h.fail("p1", "post", {**inv["value"], "error": "busy"}, channel="events")
    r = run(h, OutcomeCheck)
    assert only(r, "failed-but-applied") == [seen["index"], fail["index"]]
