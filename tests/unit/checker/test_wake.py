"""wake: rings on others' posts and backlog, never on one's own."""

from __future__ import annotations

import pytest

from knell.checker import CheckConfig, check_events
from knell.checker.wake import WakeCheck
from knell.checker.windows import FaultWindows
from knell.history import Event

from .builder import History, only, run

CONFIG = CheckConfig(wake_bound=1.0)


def waiting() -> History:
    h = History()
    h.subscribe("waiter-1", "reviewer", "events", 0)  # 0, 1
    return h


def test_ring_on_post_by_other_is_valid_and_measured() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 5.0)
    h.sleep(0.2)
    h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(0.05)
    h.wake("waiter-1", "reviewer", "events", 1, "producer")
    h.arm_ok(arm, True)
    r = run(h, WakeCheck, CONFIG)
    assert r.valid is True, r.to_json()
    assert r.counts["rang"] == 1
    assert r.metrics["latency-count"] == 1
    p50 = r.metrics["latency-p50-ms"]
    assert isinstance(p50, float) and 50.0 <= p50 <= 52.0
    assert r.metrics["bound-ms"] == 1000.0


def test_no_waiters_is_valid_with_zero_count() -> None:
    h = History()
    h.post("p1", "events", "a", 1)
    r = run(h, WakeCheck, CONFIG)
    assert r.valid is True
    assert r.metrics["latency-count"] == 0
    assert r.metrics["latency-p99-ms"] is None


def test_timeout_with_no_posts_and_own_posts_is_valid() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.post("waiter-1", "events", "own", 1, sender="reviewer")  # own post: no ring due
    h.sleep(2.0)
    h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert r.valid is True
    assert r.counts["timed-out"] == 1


def test_ring_on_own_post() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 5.0)
    _, post_ok = h.post("waiter-2", "events", "own", 1, sender="reviewer")
    wake = h.wake("waiter-1", "reviewer", "events", 1, "reviewer")
    h.arm_ok(arm, True)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "own-post-ring") == [post_ok["index"], wake["index"]]


def test_ring_on_own_post_uses_the_post_sender_not_the_wake_field() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 5.0)
    _, post_ok = h.post("waiter-2", "events", "own", 1, sender="reviewer")
    wake = h.wake("waiter-1", "reviewer", "events", 1, "someone-else")
    h.arm_ok(arm, True)
    assert only(run(h, WakeCheck, CONFIG), "own-post-ring") == [post_ok["index"], wake["index"]]


def test_timeout_over_unacked_backlog_is_missed_backlog() -> None:
    h = waiting()
    _, post_ok = h.post("p1", "events", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.sleep(2.0)
    done = h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "missed-backlog") == [post_ok["index"], arm["index"], done["index"]]


def test_acked_backlog_needs_no_ring() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    h.ack("waiter-1", "reviewer", "events", 1)
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.sleep(2.0)
    h.arm_ok(arm, False)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_backlog_on_unsubscribed_channel_needs_no_ring() -> None:
    h = waiting()
    h.post("p1", "audit", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.sleep(2.0)
    h.arm_ok(arm, False)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_short_arm_over_backlog_is_within_bound() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 0.5)
    h.sleep(0.5)
    h.arm_ok(arm, False)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_timeout_after_post_by_other_is_missed_post() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.sleep(0.5)
    _, post_ok = h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(2.5)
    done = h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "missed-post") == [arm["index"], post_ok["index"], done["index"]]


def test_post_just_before_timeout_is_within_bound() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.sleep(2.5)
    h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(0.4)
    h.arm_ok(arm, False)
    assert run(h, WakeCheck, CONFIG).valid is True


@pytest.mark.parametrize("resume_before_end", [True, False])
def test_paused_waiter_is_excluded(resume_before_end: bool) -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.nemesis("pause", "waiter-1")
    h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(2.0)
    if resume_before_end:
        h.nemesis("resume", "waiter-1")
    h.sleep(1.0)
    h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert r.valid is True
    assert r.counts["excluded-paused"] == 1


def test_pause_of_another_process_does_not_excuse() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.nemesis("pause", "consumer-1")
    _, post_ok = h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(3.0)
    done = h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "missed-post") == [arm["index"], post_ok["index"], done["index"]]


def test_arm_without_completion_is_ignored() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.sleep(5.0)
    h.nemesis("kill", "waiter-1")
    assert run(h, WakeCheck, CONFIG).valid is True


def test_wake_bound_is_configurable() -> None:
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(3.0)
    h.arm_ok(arm, False)
    assert run(h, WakeCheck, CheckConfig(wake_bound=5.0)).valid is True
    assert run(h, WakeCheck, CheckConfig(wake_bound=1.0)).valid is False


def test_killed_arm_stops_collecting_and_new_incarnation_is_judged() -> None:
    h = waiting()
    h.arm_invoke("waiter-1", "reviewer", 3.0)
    h.nemesis("kill", "waiter-1")
    h.post("p1", "events", "a", 1, sender="producer")
    h.ack("waiter-1", "reviewer", "events", 1)
    arm = h.invoke("waiter-1", "arm", {"timeout": 3.0}, handle="reviewer", incarnation=2)
    h.sleep(3.0)
    h.event("waiter-1", "ok", "arm", {"rang": False}, handle="reviewer", incarnation=2)
    made: list[WakeCheck] = []

    def factory(config: CheckConfig, windows: FaultWindows) -> WakeCheck:
        made.append(WakeCheck(config, windows))
        return made[0]

    v = check_events(h.events, CONFIG, checks=[factory])
    assert not made[0]._active
    assert arm
    assert v.valid is True
    assert v.checks["wake"].counts["timed-out"] == 1


def test_a_ring_for_what_was_acked_before_arming_is_spurious() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    h.ack("waiter-1", "reviewer", "events", 1)
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0, cursors={"events": 1})
    ring = h.wake("waiter-1", "reviewer", "events", 1, "producer", reason="backlog")
    h.arm_ok(arm, True)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "spurious-ring") == [arm["index"], ring["index"]]


def test_a_ring_above_the_armed_cursor_is_not_spurious() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0, cursors={"events": 0})
    h.wake("waiter-1", "reviewer", "events", 1, "producer", reason="backlog")
    h.arm_ok(arm, True)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_ringing_twice_for_one_message_after_a_successful_ack() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.wake("waiter-1", "reviewer", "events", 1, "producer", reason="backlog")
    h.arm_ok(arm, True)
    h.ack("waiter-1", "reviewer", "other", 1)  # an ack, but not of the message that rang
    arm2 = h.arm_invoke("waiter-1", "reviewer", 2.0)
    again = h.wake("waiter-1", "reviewer", "events", 1, "producer", reason="backlog")
    h.arm_ok(arm2, True)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "repeated-ring") == [arm2["index"], again["index"]]


def _acked_3_then_rung_for_2(cursors: dict[str, int] | None) -> tuple[History, Event, Event]:
    """A waiter handles and acks seqs 1..3, arms, and is rung for seq 2."""
    h = waiting()
    for seq in (1, 2, 3):
        h.post("p1", "events", f"m{seq}", seq, sender="producer")
    h.ack("waiter-1", "reviewer", "events", 3)
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0, cursors=cursors)
    ring = h.wake("waiter-1", "reviewer", "events", 2, "producer", reason="backlog")
    h.arm_ok(arm, True)
    return h, arm, ring


@pytest.mark.parametrize("cursors", [None, {"events": 3}], ids=["derived", "recorded"])
def test_a_ring_below_what_the_waiter_had_acked_is_spurious(
    cursors: dict[str, int] | None,
) -> None:
    # Without the arm's own record (the documented shape), what the waiter
    # knew is read back from the acks its process completed before arming.
    h, arm, ring = _acked_3_then_rung_for_2(cursors)
    r = run(h, WakeCheck, CONFIG)
    assert r.valid is False
    assert only(r, "spurious-ring") == [arm["index"], ring["index"]]
    assert "cursor 3" in r.anomalies[0].message


def test_what_another_process_acked_is_not_what_the_waiter_knew() -> None:
    h = waiting()
    for seq in (1, 2, 3):
        h.post("p1", "events", f"m{seq}", seq, sender="producer")
    h.ack("consumer-1", "reviewer", "events", 3)  # the same handle, from another process
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.wake("waiter-1", "reviewer", "events", 2, "producer", reason="backlog")
    h.arm_ok(arm, True)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_a_ring_above_what_the_waiter_had_acked_is_valid_without_the_record() -> None:
    h = waiting()
    for seq in (1, 2, 3):
        h.post("p1", "events", f"m{seq}", seq, sender="producer")
    h.ack("waiter-1", "reviewer", "events", 2)
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.wake("waiter-1", "reviewer", "events", 3, "producer", reason="backlog")
    h.arm_ok(arm, True)
    assert run(h, WakeCheck, CONFIG).valid is True


def test_a_restarted_waiter_may_ring_again_for_unacked_backlog() -> None:
    h = waiting()
    h.post("p1", "events", "a", 1, sender="producer")
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.wake("waiter-1", "reviewer", "events", 1, "producer", reason="backlog")
    h.arm_ok(arm, True)
    h.nemesis("kill", "waiter-1")
    arm2 = h.arm_invoke("waiter-1", "reviewer", 2.0, incarnation=2)
    h.event("waiter-1", "ok", "wake", {"seq": 1, "sender": "producer", "reason": "backlog"},
            handle="reviewer", channel="events", incarnation=2)  # fmt: skip
    h.event("waiter-1", "ok", "arm", {"rang": True}, handle="reviewer", incarnation=2)
    assert arm2 and run(h, WakeCheck, CONFIG).valid is True


def test_a_clock_jump_does_not_excuse_a_missed_post() -> None:
    # a wait's timeout is a duration: a stepped wall clock changes nothing
    h = waiting()
    arm = h.arm_invoke("waiter-1", "reviewer", 3.0)
    radius = {"processes": ["waiter-1"], "indirect": []}
    value = {"target": "host", "fault": 1, "kind": "clock-jump", "radius": radius}
    h.invoke("nemesis", "clock-jump", value)
    h.info("nemesis", "clock-jump", {**value, "processes": ["waiter-1"], "offset_s": 30.0})
    _, post_ok = h.post("p1", "events", "a", 1, sender="producer")
    h.sleep(3.0)
    done = h.arm_ok(arm, False)
    r = run(h, WakeCheck, CONFIG)
    assert only(r, "missed-post") == [arm["index"], post_ok["index"], done["index"]]
