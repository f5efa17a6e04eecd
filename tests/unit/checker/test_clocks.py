"""Clock offsets: the store's clock read back from the nemesis's clock events,
and the checks that time a promise judging by it (docs/contracts.md, "Which
clock each promise depends on").

Each check change has a pass (the store's clock was moved: the bus followed
its clock, which is the contract) and a fail (only a client's clock was
moved: a bus that followed it is wrong), with the witness that proves it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import zstandard

from knell import history_files
from knell.checker.atmostonce import RoleExclusiveCheck, StrandedListedCheck
from knell.checker.clocks import STORE, ClockTimeline, scan
from knell.checker.dispatch import run_pass
from knell.checker.queue import LeaseExclusiveCheck, LeaseExpiryCheck, LeaseHolderCheck
from knell.checker.windows import FaultWindows
from knell.history import Event
from knell.nemesis.registry import kinds

from .builder import NS, indices, only, run
from .contracts import QueueHistory, RoleHistory, clock_change, clock_reset


def timeline(events: list[Event]) -> ClockTimeline:
    clocks = ClockTimeline()
    for event in events:
        clocks.feed(event)
    return clocks


# -- the timeline ---------------------------------------------------------------


def test_without_clock_events_every_bound_is_true_time() -> None:
    clocks = ClockTimeline()
    assert clocks.clock(STORE) is None and not clocks.moved
    assert clocks.sure_until(10 * NS, 11 * NS, 5 * NS) == 15 * NS
    assert clocks.latest_until(10 * NS, 11 * NS, 5 * NS) == 16 * NS
    assert clocks.true_time(12.5) == 12.5 * NS


def test_a_forward_store_jump_shortens_a_lease_in_true_time() -> None:
    h = QueueHistory()
    t0 = h.now
    h.sleep(1)
    clock_change(h, "clock-jump", "store", 30.0)
    clocks = timeline(h.events)
    jumped = h.now
    sure = clocks.sure_until(t0, t0, 60 * NS)
    latest = clocks.latest_until(t0, t0, 60 * NS)
    # 1 s ran before the jump, 30 s were skipped: 29 s of true time remain
    assert jumped + 28.9 * NS < sure <= latest < jumped + 29.1 * NS


def test_a_backward_store_jump_lengthens_a_lease_and_revives_a_lapsed_one() -> None:
    h = QueueHistory()
    t0 = h.now
    h.sleep(2)  # a 1 s lease has lapsed on every clock
    clock_change(h, "clock-jump", "store", -30.0)
    jumped = h.now
    clocks = timeline(h.events)
    assert clocks.sure_until(t0, t0, NS) == pytest.approx(t0 + NS, abs=0.01 * NS)
    # the store reads its deadline again after the jump: live for ~29 s more
    latest = clocks.latest_until(t0, t0, NS)
    assert jumped + 28.9 * NS < latest < jumped + 29.1 * NS


def test_a_client_skew_moves_that_client_and_not_the_store() -> None:
    h = QueueHistory()
    clock_change(h, "clock-skew", "claimer-1", 30.0, processes=["claimer-1"])
    clocks = timeline(h.events)
    assert clocks.clock(STORE) is None
    assert clocks.offset_s("claimer-1", h.now) == (30.0, 30.0)
    assert clocks.offset_s("claimer-2", h.now) == (0.0, 0.0)


def test_a_host_target_moves_the_store_and_a_reset_heals_it() -> None:
    h = QueueHistory()
    clock_change(h, "clock-jump", "host", 10.0, processes=["claimer-1"])
    assert timeline(h.events).offset_s(STORE, h.now) == (10.0, 10.0)
    h.sleep(5)
    clock_reset(h, "host", processes=["claimer-1"])
    h.sleep(0.1)
    clocks = timeline(h.events)
    assert clocks.offset_s(STORE, h.now) == (0.0, 0.0)
    assert clocks.offset_s("claimer-1", h.now) == (0.0, 0.0)


def test_a_change_is_uncertain_between_its_invoke_and_its_record() -> None:
    h = QueueHistory()
    inv, done = clock_change(h, "clock-skew", "store", 20.0, took_s=1.0)
    clocks = timeline(h.events)
    mid = (inv["time"] + done["time"]) // 2
    assert clocks.offset_s(STORE, mid) == (0.0, 20.0)
    assert clocks.offset_s(STORE, done["time"]) == (20.0, 20.0)


def test_a_rate_integrates_and_a_strobe_is_anywhere_between() -> None:
    h = QueueHistory()
    clock_change(h, "clock-rate", "store", 0.0, rate=2.0)
    t0 = h.now
    clocks = timeline(h.events)
    # at twice the speed a 10 s lease lasts 5 s of true time
    assert clocks.sure_until(t0, t0, 10 * NS) == pytest.approx(t0 + 5 * NS, abs=0.01 * NS)
    s = QueueHistory()
    clock_change(s, "clock-strobe", "store", 10.0)
    t1 = s.now
    strobed = timeline(s.events)
    assert strobed.sure_until(t1, t1, 20 * NS) == pytest.approx(t1 + 10 * NS, abs=0.01 * NS)
    assert strobed.latest_until(t1, t1, 20 * NS) == pytest.approx(t1 + 30 * NS, abs=0.01 * NS)


def test_a_stopped_store_clock_may_hold_a_promise_for_ever() -> None:
    h = QueueHistory()
    clock_change(h, "clock-rate", "store", 0.0, rate=0.0)
    t0 = h.now
    assert timeline(h.events).latest_until(t0, t0, NS) == math.inf


def test_a_store_reading_maps_back_to_the_earliest_true_time_it_was_read() -> None:
    h = QueueHistory()
    clock_change(h, "clock-skew", "store", 30.0)
    h.sleep(1)
    clocks = timeline(h.events)
    assert clocks.true_time(h.now / NS + 30.0) == pytest.approx(h.now, abs=0.01 * NS)
    # behind: the store read it first before the skew, on true time
    h.sleep(1)
    clock_change(h, "clock-skew", "store", -30.0, fault=2)
    h.sleep(1)
    back = timeline(h.events)
    assert back.true_time(h.now / NS - 30.0) == pytest.approx(h.now - 30 * NS, abs=0.01 * NS)


# -- lease-exclusive --------------------------------------------------------------


def _two_claims(target: str) -> tuple[QueueHistory, list[Event]]:
    """A 60 s lease, a +30 s clock jump of ``target``, and 31 s later
    another consumer's claim of the same message."""
    h = QueueHistory()
    first = h.claim("claimer-1", "jobs", "c1.1", 60.0, "p:1", 1)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, 30.0, processes=processes)
    h.sleep(31)
    second = h.claim("claimer-2", "jobs", "c2.1", 60.0, "p:1", 1, deliveries=2)
    return h, [*first, *second]


def test_a_lease_the_store_clock_lapsed_early_may_be_claimed_again() -> None:
    h, _ = _two_claims("store")
    assert run(h, LeaseExclusiveCheck).valid is True


def test_a_lease_lapsed_by_a_client_clock_is_two_live_leases() -> None:
    h, claims = _two_claims("claimer-2")
    r = run(h, LeaseExclusiveCheck)
    assert only(r, "two-live-leases") == indices(claims)


# -- lease-expiry -----------------------------------------------------------------


def _claim_after_backward_jump(target: str) -> tuple[QueueHistory, list[Event]]:
    """A 1 s lease, then ``target``'s clock jumps 30 s back, then 3 s later
    a claim returns nothing."""
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    post = h.post("sender-1", "jobs", "p:1", 1)
    _, leased = h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    h.sleep(0.5)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, -30.0, processes=processes)
    h.sleep(3)
    empty = h.claim("claimer-2", "jobs", "c2.1", 1.0, None)
    return h, [post[1], leased, *empty]


def test_a_lease_the_store_clock_keeps_live_is_not_claimable() -> None:
    h, _ = _claim_after_backward_jump("store")
    r = run(h, LeaseExpiryCheck)
    assert r.valid is True, r.to_json()


def test_a_lease_kept_by_a_client_clock_that_jumped_back_is_a_stuck_message() -> None:
    h, witness = _claim_after_backward_jump("claimer-1")
    r = run(h, LeaseExpiryCheck)
    assert only(r, "not-claimable") == indices(witness)


# -- lease-holder -----------------------------------------------------------------


def _done_after_backward_jump(target: str) -> tuple[QueueHistory, list[Event]]:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    _, claimed = h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, -30.0, processes=processes)
    h.sleep(3)
    done = h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    return h, [claimed, *done]


def test_done_accepted_while_the_store_clock_keeps_the_lease_live() -> None:
    h, _ = _done_after_backward_jump("store")
    assert run(h, LeaseHolderCheck).valid is True


def test_done_accepted_on_a_client_clock_that_jumped_back_is_stale() -> None:
    h, witness = _done_after_backward_jump("claimer-1")
    r = run(h, LeaseHolderCheck)
    assert only(r, "stale-holder-accepted") == indices(witness)


def _refused_after_forward_jump(target: str) -> tuple[QueueHistory, list[Event]]:
    h = QueueHistory()
    claim = h.claim("claimer-1", "jobs", "c1.1", 20.0, "p:1", 1)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, 30.0, processes=processes)
    h.sleep(0.5)
    done = h.verb("done", "claimer-1", "jobs", "c1.1", "p:1", outcome="fail")
    return h, [*claim, *done]


def test_a_refusal_after_the_store_clock_jumped_past_the_lease_is_right() -> None:
    h, _ = _refused_after_forward_jump("store")
    assert run(h, LeaseHolderCheck).valid is True


def test_a_refusal_because_a_client_clock_jumped_is_wrong() -> None:
    h, witness = _refused_after_forward_jump("claimer-1")
    r = run(h, LeaseHolderCheck)
    assert only(r, "wrong-refusal") == indices(witness)


# -- stranded-listed (role holds) ---------------------------------------------------


def _listing_after_forward_jump(target: str) -> tuple[RoleHistory, list[Event]]:
    """Run a receives m:1 and leaves; run b takes the role for 60 s; then
    ``target``'s clock jumps 120 s ahead and b lists nothing stranded."""
    h = RoleHistory()
    h.claim_role("holder-1", "inbox", "a", lease=60.0)
    got = h.receive("holder-1", "inbox", "a", [("m:1", 1)])
    h.release_role("holder-1", "inbox", "a")
    h.claim_role("holder-2", "inbox", "b", lease=60.0)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, 120.0, processes=processes)
    h.sleep(1)
    listing = h.stranded("holder-2", "inbox", "b", [])
    return h, [*got, *listing]


def test_a_listing_after_the_store_clock_lapsed_the_hold_is_not_judged() -> None:
    h, _ = _listing_after_forward_jump("store")
    r = run(h, StrandedListedCheck)
    assert r.valid is True, r.to_json()
    assert r.counts.get("listings-judged", 0) == 0 or r.counts.get("missing", 0) == 0


def test_a_listing_while_only_a_client_clock_jumped_is_judged() -> None:
    h, witness = _listing_after_forward_jump("holder-2")
    r = run(h, StrandedListedCheck)
    assert only(r, "missing") == indices(witness)


# -- fault windows: a clock fault excuses no wait -------------------------------------


class _ClockJumpStandIn:
    """What FaultWindows reads of a fault kind, for a clock kind (the real
    ones register themselves in knell.nemesis)."""

    name = "clock-jump"
    apply_f = "clock-jump"
    heal_f = "clock-reset"
    effect = "degraded"
    grace = 0.0


def test_a_clock_fault_window_is_no_excuse_where_a_check_says_so() -> None:
    h = QueueHistory()
    inv = h.post_invoke("waiter-1", "events", "m1")
    clock_change(h, "clock-jump", "host", -30.0, processes=["waiter-1"])
    h.events[-2]["value"]["radius"] = {"processes": ["waiter-1"]}  # the runner writes it
    h.nemesis("pause", "waiter-2")
    h.sleep(5)
    clock_reset(h, "host", processes=["waiter-1"])
    h.post_ok(inv, 1)
    registry: dict[str, Any] = {"clock-jump": _ClockJumpStandIn(), "pause": kinds()["pause"]}
    windows = FaultWindows(registry)
    run_pass(h.events, [windows])
    start, end = inv["time"], h.now
    found = windows.touching("waiter-1", start, end)
    assert found is not None and found.clock
    assert windows.touching("waiter-1", start, end, clocks=False) is None
    paused = windows.touching("waiter-2", start, end, clocks=False)
    assert paused is not None and not paused.clock
    assert windows.clocks.offset_s(STORE, end) == (0.0, 0.0)


# -- role-exclusive ---------------------------------------------------------------------


def test_holders_taking_turns_after_release_or_lapse_are_valid() -> None:
    h = RoleHistory()
    h.claim_role("holder-1", "inbox", "a", lease=5.0)
    h.claim_role("holder-1", "inbox", "a", lease=5.0)  # renews
    h.claim_role("holder-2", "inbox", "b", lease=5.0, outcome="fail")
    h.release_role("holder-1", "inbox", "a")
    h.claim_role("holder-2", "inbox", "b", lease=0.5)
    h.sleep(0.6)  # b's hold lapsed (b died holding it)
    h.claim_role("holder-3", "inbox", "c", lease=0.5)
    r = run(h, RoleExclusiveCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["holds-claimed"] == 4


def test_a_run_given_the_role_while_another_surely_holds_it() -> None:
    h = RoleHistory()
    first = h.claim_role("holder-1", "inbox", "a", lease=5.0)
    h.sleep(1)
    second = h.claim_role("holder-2", "inbox", "b", lease=5.0)
    r = run(h, RoleExclusiveCheck)
    assert only(r, "two-live-holds") == indices([*first, *second])
    assert "run b" in r.anomalies[0].message and "run a" in r.anomalies[0].message


def _takeover_after_forward_jump(target: str) -> tuple[RoleHistory, list[Event]]:
    """A 60 s hold, ``target``'s clock jumps 120 s ahead, another run takes
    the role a second later."""
    h = RoleHistory()
    first = h.claim_role("holder-1", "inbox", "a", lease=60.0)
    processes = [] if target == "store" else [target]
    clock_change(h, "clock-jump", target, 120.0, processes=processes)
    h.sleep(1)
    second = h.claim_role("holder-2", "inbox", "b", lease=60.0)
    return h, [*first, *second]


def test_a_takeover_after_the_store_clock_lapsed_the_hold_is_valid() -> None:
    h, _ = _takeover_after_forward_jump("store")
    assert run(h, RoleExclusiveCheck).valid is True


def test_a_takeover_judged_by_a_client_clock_is_two_live_holds() -> None:
    h, witness = _takeover_after_forward_jump("holder-2")
    r = run(h, RoleExclusiveCheck)
    assert only(r, "two-live-holds") == indices(witness)


def test_a_claim_between_a_jump_and_its_record_is_judged_by_the_jump() -> None:
    # the jump's offset is recorded only once proven, after claims went on:
    # a host step of +30 s lapses the 1 s lease at once, and a claim of the
    # message made before the record is the contract working
    h = QueueHistory()
    h.claim("steady-1", "jobs", "c1.1", 1.0, "p:1", 1)
    inv = h.invoke("nemesis", "clock-jump", {"target": "host", "fault": 1, "kind": "clock-jump"})
    h.claim("steady-2", "jobs", "c2.1", 1.0, "p:1", 1, deliveries=2)
    h.info(
        "nemesis",
        "clock-jump",
        {**inv["value"], "processes": ["steady-1"], "store": True, "offset_s": 30.0, "rate": 1.0},
    )
    assert run(h, LeaseExclusiveCheck).valid is True


def test_a_history_file_is_scanned_for_its_clock_events(tmp_path: Path) -> None:
    h = QueueHistory()
    h.post("sender-1", "jobs", "p:1", 1)
    jump = clock_change(h, "clock-jump", "store", 30.0)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in h.events) + "not json\n")
    assert scan(path) == list(jump)
    assert scan(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "zstd"])
@pytest.mark.parametrize("chunk", [7, 64, 1 << 22])
def test_the_block_scan_finds_what_a_line_by_line_read_finds(
    tmp_path: Path, chunk: int, compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # blocks of every size cut lines anywhere (mid-marker included); a torn
    # last line without a newline and a damaged clock line are both skipped
    h = QueueHistory()
    for n in range(1, 6):
        h.post("sender-1", "jobs", f"p:{n}", n)
        clock_change(h, "clock-jump", "store", float(n))
    lines = [json.dumps(e) + "\n" for e in h.events]
    lines.insert(3, '{"f": "clock-jump", torn\n')
    text = ("".join(lines) + '{"process": "nemesis", "f": "clock-reset"').encode()
    path = tmp_path / ("history.jsonl.zst" if compressed else "history.jsonl")
    if compressed:
        # a zstd history is written frame by frame; two frames cut mid-line
        frames = zstandard.ZstdCompressor()
        path.write_bytes(frames.compress(text[:100]) + frames.compress(text[100:]))
    else:
        path.write_bytes(text)
    expected = [e for e in h.events if e["f"].startswith("clock-")]
    monkeypatch.setattr(history_files, "MARK_CHUNK", chunk)
    assert scan(path) == expected
