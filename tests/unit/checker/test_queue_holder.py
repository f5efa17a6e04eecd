"""lease-holder: only the holder of a live lease may renew, finish or release."""

from __future__ import annotations

from knell.checker.queue import LeaseHolderCheck

from .builder import indices, only, run
from .contracts import QueueHistory


def test_a_holder_finishing_in_time_and_a_lapsed_one_refused_is_valid() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    h.claim("claimer-1", "jobs", "c1.1", 0.5, "p:1", 1)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    h.claim("claimer-2", "jobs", "c2.1", 0.2, "p:2", 2)
    h.sleep(0.5)
    for f in ("renew", "done", "release"):
        h.verb(f, "claimer-2", "jobs", "c2.1", "p:2", outcome="fail", lease=0.2)
    r = run(h, LeaseHolderCheck)
    assert r.valid is True, r.to_json()
    assert r.counts["accepted"] == 1 and r.counts["refused-lease-lost"] == 3


def test_done_accepted_after_the_lease_lapsed() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3)
    _, claim_ok = h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    done = h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    r = run(h, LeaseHolderCheck)
    assert only(r, "stale-holder-accepted") == indices([claim_ok, *done])
    assert "lapsed" in r.anomalies[0].message


def test_the_declared_sweep_interval_is_allowed() -> None:
    h = QueueHistory()
    h.declare("claimer-1", "jobs", 3, sweep=1.0)
    h.claim("claimer-1", "jobs", "c1.1", 0.2, "p:1", 1)
    h.sleep(0.5)
    h.verb("done", "claimer-1", "jobs", "c1.1", "p:1")
    assert run(h, LeaseHolderCheck).valid is True


def test_release_accepted_after_another_consumer_claimed_the_message() -> None:
    h = QueueHistory()
    _, mine = h.claim("claimer-1", "jobs", "c1.1", 5.0, "p:1", 1)
    _, theirs = h.claim("claimer-2", "jobs", "c2.1", 5.0, "p:1", 1)
    release = h.verb("release", "claimer-1", "jobs", "c1.1", "p:1")
    r = run(h, LeaseHolderCheck)
    assert only(r, "stale-holder-accepted") == indices([mine, theirs, *release])
    assert "c2.1 had claimed it since" in r.anomalies[0].message


def test_refused_while_the_lease_was_surely_live() -> None:
    h = QueueHistory()
    claim = h.claim("claimer-1", "jobs", "c1.1", 5.0, "p:1", 1)
    done = h.verb("done", "claimer-1", "jobs", "c1.1", "p:1", outcome="fail")
    r = run(h, LeaseHolderCheck)
    assert only(r, "wrong-refusal") == indices([*claim, *done])
