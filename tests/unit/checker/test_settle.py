"""Forgetting settled messages: a long history checked at a flat cost, judged
the same (knell.checker.settle).

Each test is run with forgetting on (``forget_after``) and, where it says
so, off, on the same handcrafted history: what is still open is judged as
before, what settled is tallied and dropped.
"""

from __future__ import annotations

from typing import Any

from knell.checker import CheckConfig, check_events
from knell.checker.dispatch import run_pass
from knell.checker.expiry import ExpiryCheck
from knell.checker.loss import LossCheck
from knell.checker.registry import CHECKS
from knell.checker.seq import SeqCheck
from knell.checker.settle import Forgotten, Settling
from knell.checker.unexpected import UnexpectedCheck
from knell.checker.wake import WakeCheck

from .builder import History, only, run

ROLES = ("producer", "consumer", "waiter")
FORGET = CheckConfig(contracts=("broadcast",), roles=ROLES, forget_after=1.0)
KEEP = CheckConfig(contracts=("broadcast",), roles=ROLES)


def _steady(h: History, n: int, *, first: int = 1, handles: tuple[str, ...] = ("w", "x")) -> None:
    """``n`` posts, each handled and acked by every handle at once, 10 ms apart."""
    for seq in range(first, first + n):
        h.post("p1", "events", f"m{seq}", seq, key=f"m{seq}")
        for handle in handles:
            h.handled(f"c-{handle}", handle, "events", seq, f"m{seq}")
            h.ack(f"c-{handle}", handle, "events", seq)
        h.sleep(0.01)


def _start(h: History, handles: tuple[str, ...] = ("w", "x")) -> None:
    for handle in handles:
        h.subscribe(f"c-{handle}", handle, "events", 0)


def _end(h: History, head: int, handles: tuple[str, ...] = ("w", "x")) -> None:
    for handle in handles:
        h.drain(handle, {"events": head})


def _settling(h: History, after: float = 1.0) -> Settling:
    settling = Settling(after, [])
    for event in h.events:
        for handler in settling.handlers:
            if event["f"] == handler.f and event["type"] in handler.types:
                getattr(settling, handler.method)(event)
    return settling


def test_the_forgotten_bitmap_marks_each_seq_once() -> None:
    bits = Forgotten()
    assert bits.mark("events", 9) is True
    assert bits.mark("events", 9) is False
    assert bits.has("events", 9) and not bits.has("events", 8) and not bits.has("other", 9)
    assert not bits.has("events", "nine") and not bits.has("events", 10_000)
    assert bits.count == 1 and bits.channels() == {"events": 1}


def test_a_message_every_handle_handled_and_acked_is_forgotten_once_its_time_passed() -> None:
    h = History()
    _start(h)
    _steady(h, 300)  # 3 s of posts: the first 2 s are past the 1 s horizon
    settling = _settling(h)
    assert 150 < settling.forgotten.count < 300
    assert settling.forgotten.has("events", 1)
    assert not settling.forgotten.has("events", 300)
    assert settling.live() == 300 - settling.forgotten.count


def test_a_message_not_yet_acked_by_one_handle_is_kept() -> None:
    h = History()
    _start(h)
    for seq in range(1, 201):
        h.post("p1", "events", f"m{seq}", seq)
        h.handled("c-w", "w", "events", seq, f"m{seq}")
        h.ack("c-w", "w", "events", seq)
        h.handled("c-x", "x", "events", seq, f"m{seq}")  # x handles, never acks
        h.sleep(0.01)
    assert _settling(h).forgotten.count == 0
    h.ack("c-x", "x", "events", 100)  # x acks half: that half settles
    h.sleep(2.0)
    h.post("p1", "events", "late", 201)
    assert _settling(h).forgotten.count == 100


def test_an_abandoned_handle_keeps_what_it_owes_and_a_channel_nobody_reads_forgets_nothing() -> (
    None
):
    h = History()
    _start(h, ("w", "x", "gone"))  # "gone" subscribed and never came back
    _steady(h, 300)
    for seq in range(1, 301):
        h.post("p1", "queue", f"q{seq}", seq)
        h.sleep(0.01)
    assert _settling(h).forgotten.count == 0


def test_a_join_at_the_start_stops_forgetting_on_its_channel() -> None:
    h = History()
    _start(h)
    _steady(h, 200)
    h.subscribe("c-new", "new", "events", 0, at="start")
    settling = _settling(h)
    before = settling.forgotten.count
    assert before > 0
    _steady(h, 300, first=201)
    assert _settling(h).forgotten.count == before


def test_a_valid_history_is_judged_the_same_with_forgetting() -> None:
    h = History()
    _start(h)
    _steady(h, 400)
    # a resend of a message long settled, answered with its original seq
    inv = h.post_invoke("p1", "events", "m5", key="m5")
    h.post_ok(inv, 5)
    h.handled("c-w", "w", "events", 5, "m5")  # and a redelivery of it
    _end(h, 400)
    kept = check_events(h.events, KEEP)
    forgot = check_events(h.events, FORGET)
    assert kept.valid is True and forgot.valid is True
    for name in ("no-loss", "no-duplicate-seq", "idempotency", "unexpected", "wake"):
        assert forgot.checks[name].counts == kept.checks[name].counts, name
    assert forgot.checks["no-loss"].counts["required"] == 800


def test_a_loss_is_still_proven_while_the_settled_messages_around_it_are_forgotten() -> None:
    h = History()
    _start(h)
    _steady(h, 200)
    inv, ok = h.post("p1", "events", "lost", 201)
    h.handled("c-x", "x", "events", 201, "lost")  # w never handles it, and acks past it
    h.ack("c-w", "w", "events", 201)
    h.ack("c-x", "x", "events", 201)
    _steady(h, 200, first=202)
    _, drained = h.drain("w", {"events": 401})
    h.drain("x", {"events": 401})
    result = run(h, LossCheck, FORGET)
    subscribed = h.events[1]
    witness = [subscribed["index"], inv["index"], ok["index"], drained["index"]]
    assert only(result, "lost") == witness
    assert result.counts["required"] == 802


def test_a_second_message_at_a_settled_seq_within_the_horizon_is_caught() -> None:
    h = History()
    _start(h)
    _steady(h, 200)  # seq 200 settled last, 0 s before the next post: still known
    first = next(e for e in h.events if e["f"] == "post" and e["value"].get("seq") == 200)
    _, second = h.post("p2", "events", "other", 200)
    result = run(h, SeqCheck, FORGET)
    assert only(result, "duplicate-seq") == [first["index"], second["index"]]


def test_a_sighting_of_a_forgotten_seq_is_passed_over_not_judged_unexpected() -> None:
    h = History()
    _start(h)
    _steady(h, 300)
    h.fetch("c-w", "w", "events", 0, [(1, "m1"), (2, "m2")])  # a reader went back
    result = run(h, UnexpectedCheck, FORGET)
    assert result.valid is True
    verdict = check_events(h.events, FORGET, checks=[UnexpectedCheck])
    assert verdict.checks["unexpected"].valid is True


def test_an_id_shown_again_at_a_new_seq_after_it_was_forgotten_is_still_a_finding() -> None:
    h = History()
    _start(h)
    _steady(h, 300)
    _, fetched = h.fetch("c-w", "w", "events", 300, [(301, "m1")])  # a second copy of m1
    result = run(h, UnexpectedCheck, FORGET)
    assert only(result, "unexpected") == [fetched["index"]]
    assert "forgotten" in result.anomalies[0].message


def test_a_join_at_the_start_after_forgetting_makes_loss_unknown_naming_it() -> None:
    h = History()
    _start(h)
    _steady(h, 300)
    h.subscribe("c-new", "new", "events", 0, at="start")
    for seq in range(1, 301):
        h.handled("c-new", "new", "events", seq, f"m{seq}")
    _end(h, 300, ("w", "x", "new"))
    result = run(h, LossCheck, FORGET)
    assert result.valid == "unknown"
    assert "handle new joined channel events at the start" in (result.unknown_reason or "")


def test_wakes_are_judged_when_their_message_is_forgotten() -> None:
    h = History()
    _start(h)
    inv = h.invoke("waiter-1", "arm", {"timeout": 5.0}, handle="x", channel="events")
    h.post("p1", "events", "m1", 1, sender="x")  # x's own post
    rang = {"seq": 1, "sender": "x", "reason": "post"}
    wake = h.ok("waiter-1", "wake", rang, handle="x", channel="events")
    h.ok("waiter-1", "arm", {"rang": True}, handle="x", channel="events")
    del inv
    for handle in ("w", "x"):
        h.handled(f"c-{handle}", handle, "events", 1, "m1")
        h.ack(f"c-{handle}", handle, "events", 1)
    _steady(h, 300, first=2)
    forgot = run(h, WakeCheck, FORGET)
    kept = run(h, WakeCheck, KEEP)
    assert only(forgot, "own-post-ring")[-1] == wake["index"]
    assert forgot.counts == kept.counts


def _forgetting_pass(h: History) -> tuple[list[Any], Settling]:
    """Every check over ``h`` with a 1 s horizon, and the settling that
    forgot for them (their state is read after)."""
    checks = [factory(FORGET, None) for factory in CHECKS]
    settling = Settling(1.0, [c for c in checks if hasattr(c, "forget")])
    for check in checks:
        check.forgotten = settling.forgotten
    run_pass(h.events, [*checks, settling])
    return checks, settling


def test_the_checks_that_forget_keep_state_bounded_by_the_horizon() -> None:
    """The state left at the end of a 20 s history with a 1 s horizon is
    about a twentieth of the messages, whatever the history's length."""
    sizes = []
    for n in (1000, 2000):
        h = History()
        _start(h)
        _steady(h, n)
        checks, settling = _forgetting_pass(h)
        loss = next(c for c in checks if isinstance(c, LossCheck))
        sizes.append((settling.live(), len(loss._posts["events"])))
    assert sizes[0] == sizes[1]
    assert sizes[0][0] <= 110


def _waiter_life(h: History, incarnation: int, seq: int) -> None:
    """One incarnation of waiter-1: subscribe, arm, ring for ``seq``, ack it."""
    kw = {"handle": "r", "channel": "events", "incarnation": incarnation}
    h.invoke("waiter-1", "subscribe", {"at": "head"}, **kw)
    h.ok("waiter-1", "subscribe", {"cursor": seq - 1}, **kw)
    h.invoke("waiter-1", "arm", {"timeout": 5.0}, handle="r", incarnation=incarnation)
    h.post("p1", "events", f"m{seq}", seq, key=f"m{seq}")
    h.ok("waiter-1", "wake", {"seq": seq, "sender": "p1", "reason": "post"}, **kw)
    h.ok("waiter-1", "arm", {"rang": True}, handle="r", incarnation=incarnation)
    for handle in ("w", "x", "r"):
        process = "waiter-1" if handle == "r" else f"c-{handle}"
        inc = incarnation if handle == "r" else 1
        h.ok(
            process,
            "handle",
            {"seq": seq, "id": f"m{seq}"},
            handle=handle,
            channel="events",
            incarnation=inc,
        )
        h.invoke(process, "ack", {"up_to": seq}, handle=handle, channel="events", incarnation=inc)
        h.ok(process, "ack", {"cursor": seq}, handle=handle, channel="events", incarnation=inc)
    h.sleep(0.05)


def test_a_waiter_restarted_again_and_again_leaves_only_its_newest_incarnation() -> None:
    """A soak restarts a waiter every second: the wake check keeps the acks,
    rings and cursors of its newest incarnation only, and what rang for a
    forgotten message goes with it, so its state does not grow with the
    number of restarts or of rings."""
    h = History()
    _start(h)
    for incarnation in range(1, 201):
        _waiter_life(h, incarnation, incarnation)
    checks, settling = _forgetting_pass(h)
    wake = next(c for c in checks if isinstance(c, WakeCheck))
    waiter = [k for k in wake._seen if k[0] == "waiter-1"]
    assert waiter == [("waiter-1", 200, "r")]
    assert {k for k in wake._acks if k[0] == "waiter-1"} == {("waiter-1", 200)}
    assert set(wake._rung) <= {("waiter-1", 200)}
    assert sum(len(r) for r in wake._rung.values()) <= 1
    expiry = next(c for c in checks if isinstance(c, ExpiryCheck))
    assert expiry._arms == {"waiter-1": (200, expiry._arms["waiter-1"][1])}
    assert settling.forgotten.has("events", 150)
    result = wake.result()
    assert result.valid is True, result.to_json()
    assert result.counts["rang"] == 200


def test_a_late_event_of_a_gone_incarnation_leaves_the_newest_alone() -> None:
    h = History()
    _start(h)
    _waiter_life(h, 2, 1)
    h.ok("waiter-1", "cursor", {"cursor": 0}, handle="r", channel="events", incarnation=1)
    checks = [factory(KEEP, None) for factory in CHECKS]
    run_pass(h.events, checks)
    wake = next(c for c in checks if isinstance(c, WakeCheck))
    assert ("waiter-1", 2, "r") in wake._seen and ("waiter-1", 2) in wake._acks
