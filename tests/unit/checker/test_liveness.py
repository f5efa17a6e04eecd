"""liveness: operations return, unless a fault explains why they did not."""

from __future__ import annotations

from knell.checker import CheckConfig
from knell.checker.liveness import LivenessCheck

from .builder import History, only, run

CONFIG = CheckConfig(op_timeout=2.0)


def test_prompt_operations_and_a_long_wait_within_its_timeout_pass() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    arm = h.arm_invoke("w1", "w1", 3.0)
    h.sleep(6.0)  # under its timeout plus the bound (2 x op_timeout)
    h.arm_ok(arm, False)
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True and r.counts["operations"] == 2


def test_slower_than_op_timeout_is_slow_not_hung() -> None:
    # A client adds its connect and transport time to the server's timeout.
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    h.sleep(3.5)
    h.post_ok(inv, 1)
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True and r.metrics["bound-s"] == 4.0


def test_a_slow_operation_nobody_touched_is_hung() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    h.sleep(4.5)
    ok = h.post_ok(inv, 1)
    r = run(h, LivenessCheck, CONFIG)
    assert only(r, "hung") == [inv["index"], ok["index"]]


def test_an_operation_still_outstanding_at_the_end_is_hung() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    h.sleep(4.5)
    last = h.drain("worker", {"events": 0})[1]
    r = run(h, LivenessCheck, CONFIG)
    assert only(r, "hung") == [inv["index"]]
    assert "still outstanding" in r.anomalies[0].message
    assert last["index"] > inv["index"]


def test_a_paused_process_is_excused() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    h.nemesis("pause", "p1")
    h.sleep(4.5)
    h.nemesis("resume", "p1")
    h.post_ok(inv, 1)
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True and r.counts["slow-inside-faults"] == 1


def test_a_process_stuck_in_a_call_at_shutdown() -> None:
    h = History()
    inv = h.post_invoke("p1", "events", "m1")
    h.sleep(1.5)  # in the call through the whole 1 s grace
    kill = h.info(
        "nemesis",
        "kill",
        {"target": "p1", "pid": 1, "reason": "did not stop in time", "waited_s": 1.0},
    )
    r = run(h, LivenessCheck, CONFIG)
    assert only(r, "stuck-at-shutdown") == [inv["index"], kill["index"]]


def test_a_worker_killed_early_in_a_call_was_slow_to_stop_not_stuck() -> None:
    h = History()
    h.post_invoke("p1", "events", "m1")
    h.sleep(0.05)
    h.info(
        "nemesis",
        "kill",
        {"target": "p1", "pid": 1, "reason": "did not stop in time", "waited_s": 1.0},
    )
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True and r.counts["slow-to-stop"] == 1


def test_a_nemesis_kill_mid_operation_is_not_a_finding() -> None:
    h = History()
    h.post_invoke("p1", "events", "m1")
    h.nemesis("kill", "p1")
    h.sleep(3.0)
    h.ok("p1", "start", {"role": "producer"}, incarnation=2)
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True


def _host_jump(h: History, target: str = "w1") -> None:
    """A backward host clock jump touching ``target``, as the runner and
    the clock-jump kind record it (invoke with the radius, then the apply)."""
    radius = {"processes": [target], "indirect": []}
    value = {"target": "host", "fault": 1, "kind": "clock-jump", "radius": radius}
    h.invoke("nemesis", "clock-jump", value)
    h.info(
        "nemesis",
        "clock-jump",
        {**value, "processes": [target], "store": True, "offset_s": -30.0, "rate": 1.0},
    )


def test_a_wait_that_hangs_after_its_clock_jumped_back_is_hung() -> None:
    # the timeout is a duration: no wall clock, stepped or not, excuses it
    h = History()
    arm = h.arm_invoke("w1", "w1", 1.0)
    _host_jump(h)
    h.sleep(31.0)
    ok = h.arm_ok(arm, False)
    r = run(h, LivenessCheck, CONFIG)
    assert only(r, "hung") == [arm["index"], ok["index"]]
    assert "only a clock fault touched it" in r.anomalies[0].message


def test_a_pause_still_excuses_under_a_clock_jump() -> None:
    h = History()
    arm = h.arm_invoke("w1", "w1", 1.0)
    _host_jump(h)
    h.nemesis("pause", "w1")
    h.sleep(31.0)
    h.nemesis("resume", "w1")
    h.arm_ok(arm, False)
    r = run(h, LivenessCheck, CONFIG)
    assert r.valid is True and r.counts["slow-inside-faults"] == 1
