"""evidence: a history without a completed post and drain is never VALID."""

from __future__ import annotations

from knell.checker.evidence import EvidenceCheck

from .builder import History, run


def test_a_finished_run_is_evidence() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.drain("w", {"events": 1})
    assert run(h, EvidenceCheck).valid is True


def test_nothing_at_all() -> None:
    r = run(History(), EvidenceCheck)
    assert r.valid == "unknown" and "no post completed" in (r.unknown_reason or "")


def test_no_drain() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    r = run(h, EvidenceCheck)
    assert r.valid == "unknown" and "no final drain completed" in (r.unknown_reason or "")


def test_a_drain_that_failed_is_no_drain() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.drain_info("w")
    assert run(h, EvidenceCheck).valid == "unknown"


def test_a_fault_that_did_not_happen_makes_the_run_undecided() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.info("nemesis", "fault-failed", {"target": "consumer", "error": "the toxic did not take"})
    h.drain("w", {"events": 1})
    r = run(h, EvidenceCheck)
    assert r.valid == "unknown" and "the toxic did not take" in (r.unknown_reason or "")
