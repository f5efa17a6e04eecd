"""done-terminal: a message marked done is never claimed again."""

from __future__ import annotations

from knell.checker.queue import DoneTerminalCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def test_done_messages_stay_done() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:2", 2)
    h.claim("claimer-1", "jobs", "c1.1", 1.0, None)
    r = run(h, DoneTerminalCheck)
    assert r.valid is True and r.counts["done"] == 1


def test_a_claim_concurrent_with_the_done_is_not_proof() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 0.1, "p:1", 1)
    h.sleep(0.2)
    done_inv = h.invoke("claimer-1", "done", {"consumer": "c1.1", "id": "p:1"}, channel="jobs")
    claim_inv = h.claim_invoke("claimer-2", "jobs", "c2.1", 1.0)
    h.ok("claimer-1", "done", done_inv["value"], channel="jobs")
    h.claim_ok(claim_inv, "p:1", 1, deliveries=2)
    assert run(h, DoneTerminalCheck).valid is True


def test_claimed_after_done() -> None:
    h = QueueHistory()
    h.claim("claimer-1", "jobs", "c1.1", 1.0, "p:1", 1)
    done = h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    claim = h.claim("claimer-2", "jobs", "c2.1", 1.0, "p:1", 1, deliveries=2)
    r = run(h, DoneTerminalCheck)
    assert only(r, "claimed-after-done") == indices([*done, *claim])
