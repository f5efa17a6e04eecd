"""no-loss: posts that returned ok reach every handle subscribed before them."""

from __future__ import annotations

from knell.checker.loss import LossCheck

from .builder import History, only, run


def base() -> History:
    h = History()
    h.subscribe("consumer-1", "worker", "events", 0)  # 0, 1
    return h


def test_every_message_handled_after_drain_is_valid() -> None:
    h = base()
    h.post("producer-1", "events", "p1:1", 1)
    h.post("producer-1", "events", "p1:2", 2)
    h.consume("consumer-1", "worker", "events", [(1, "p1:1"), (2, "p1:2")])
    h.drain("worker", {"events": 2})
    r = run(h, LossCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["posted"] == 2
    assert r.counts["required"] == 2
    assert r.counts["lost"] == 0
    assert r.unknown_reason is None


def test_message_never_handled_by_drained_handle_is_lost() -> None:
    h = base()
    inv, ok = h.post("producer-1", "events", "p1:1", 1)  # 2, 3
    h.post("producer-1", "events", "p1:2", 2)
    h.consume("consumer-1", "worker", "events", [(2, "p1:2")])
    _, drain_ok = h.drain("worker", {"events": 2})
    r = run(h, LossCheck)
    assert only(r, "lost") == [1, inv["index"], ok["index"], drain_ok["index"]]
    assert r.counts["lost"] == 1
    assert r.counts["lost[worker]"] == 1
    assert "p1:1" in r.anomalies[0].message and "worker" in r.anomalies[0].message


def test_observed_info_post_must_be_handled() -> None:
    h = base()
    inv = h.post_invoke("producer-1", "events", "p1:1")  # 2
    h.post_info(inv)
    # another handle (joined after the post, so not owed it) saw it: it landed
    h.subscribe("consumer-2", "reviewer", "events", 0)
    _, seen = h.fetch("consumer-2", "reviewer", "events", None, [(1, "p1:1")])
    h.drain("worker", {"events": 1})
    h.drain("reviewer", {"events": 1})
    r = run(h, LossCheck)
    assert only(r, "lost") == [1, inv["index"], seen["index"], h.events[-3]["index"]]
    assert r.counts["observed-indeterminate"] == 1


def test_unobserved_info_post_and_uncompleted_post_are_not_required() -> None:
    h = base()
    h.post_info(h.post_invoke("producer-1", "events", "p1:1"))
    h.post_invoke("producer-2", "events", "p2:1")  # killed: never completes
    h.drain("worker", {"events": 0})
    r = run(h, LossCheck)
    assert r.valid is True
    assert r.counts["unobserved-indeterminate"] == 2


def test_handle_subscribed_after_post_invoke_is_not_required() -> None:
    h = History()
    inv = h.post_invoke("producer-1", "events", "p1:1")
    h.subscribe("consumer-1", "worker", "events", 0)  # completes before the post does
    h.post_ok(inv, 1)
    h.drain("worker", {"events": 1})
    r = run(h, LossCheck)
    assert r.valid is True
    assert r.counts["required"] == 0


def test_missing_drain_for_handle_is_unknown_with_reason() -> None:
    h = base()
    h.subscribe("consumer-2", "reviewer", "events", 0)
    h.post("producer-1", "events", "p1:1", 1)
    h.consume("consumer-2", "reviewer", "events", [(1, "p1:1")])
    h.drain("reviewer", {"events": 1})
    r = run(h, LossCheck)
    assert r.valid == "unknown"
    assert r.unknown_reason is not None
    assert "no final drain recorded for handle worker" in r.unknown_reason
    assert r.counts["unresolved"] == 1


def test_drain_info_is_unknown_with_error() -> None:
    h = base()
    h.post("producer-1", "events", "p1:1", 1)
    h.drain_info("worker", "drain worker exited 9")
    r = run(h, LossCheck)
    assert r.valid == "unknown"
    assert r.unknown_reason is not None and "drain worker exited 9" in r.unknown_reason


def test_no_drain_at_all_is_unknown() -> None:
    h = base()
    h.post("producer-1", "events", "p1:1", 1)
    h.consume("consumer-1", "worker", "events", [(1, "p1:1")])
    r = run(h, LossCheck)
    assert r.valid == "unknown"
    assert r.unknown_reason is not None and "no final drain" in r.unknown_reason


def test_drains_are_per_handle_and_channel() -> None:
    h = base()
    h.subscribe("consumer-1", "worker", "audit", 0)
    h.post("producer-1", "events", "p1:1", 1)
    h.post("producer-1", "audit", "p1:2", 1)
    h.consume("consumer-1", "worker", "events", [(1, "p1:1")])
    # drain of worker/events only (the runner drains per (handle, channel))
    h.invoke("nemesis", "drain", {"handle": "worker"}, handle="worker", channel="events")
    h.ok(
        "nemesis",
        "drain",
        {"handle": "worker", "heads": {"events": 1}},
        handle="worker",
        channel="events",
    )
    r = run(h, LossCheck)
    assert r.valid == "unknown"
    assert r.unknown_reason is not None and "channel audit" in r.unknown_reason


def test_post_landing_after_the_drain_head_is_not_required() -> None:
    h = base()
    inv = h.post_invoke("producer-1", "events", "p1:1")
    h.drain("worker", {"events": 0})
    h.post_ok(inv, 1)
    r = run(h, LossCheck)
    assert r.valid is True
    assert r.counts["after-drain"] == 1


def test_a_handle_that_joined_at_start_is_owed_the_whole_history() -> None:
    h = base()
    early = h.post("producer-1", "events", "p1:1", 1)
    h.subscribe("joiner-1", "late", "events", 0, at="start")
    h.drain("worker", {"events": 1})
    drain = h.drain("late", {"events": 1})
    r = run(h, LossCheck)
    lost = [a for a in r.anomalies if "late" in a.message]
    assert len(lost) == 1 and "p1:1" in lost[0].message
    assert early[0] in lost[0].witness and drain[1] in lost[0].witness
