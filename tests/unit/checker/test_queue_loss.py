"""queue-no-loss: every message on a queue ends done or dead."""

from __future__ import annotations

from knell.checker.queue import QueueLossCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def base() -> QueueHistory:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 2)
    return h


def test_done_and_dead_messages_after_the_final_phase_are_valid() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    h.post("sender-1", "jobs", "p:2", 2)
    h.post("sender-1", "jobs", "p:3", 3)
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:3", 3)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:3", outcome="info")  # may have landed
    h.final("jobs")
    h.dead("queue-drain-1", "jobs", [("p:2", 2, 2)])
    r = run(h, QueueLossCheck)
    assert r.valid is True, r.to_json()
    assert (r.counts["done"], r.counts["maybe-done"], r.counts["dead"]) == (1, 1, 1)


def test_a_message_neither_done_nor_dead_is_lost() -> None:
    h = base()
    post = h.post("sender-1", "jobs", "p:1", 1)
    _, last = h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    _, listing = h.dead("queue-drain-1", "jobs", [])
    _, drained = h.final("jobs")
    r = run(h, QueueLossCheck)
    assert only(r, "lost") == indices([*post, last, listing, drained])


def test_without_a_final_phase_it_is_unknown() -> None:
    h = base()
    h.post("sender-1", "jobs", "p:1", 1)
    r = run(h, QueueLossCheck)
    assert r.valid == "unknown"
    assert "no final phase" in (r.unknown_reason or "")


def test_broadcast_channels_are_not_judged() -> None:
    h = QueueHistory()
    h.post("producer-1", "events", "p:1", 1)
    assert run(h, QueueLossCheck).valid is True
