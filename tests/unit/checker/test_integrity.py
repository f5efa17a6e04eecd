"""store-integrity: a probe that found damage is a finding, one that could
not run is "unknown" (never invalid), and no probe leaves nothing to judge."""

from __future__ import annotations

from knell.checker.integrity import IntegrityCheck
from knell.checker.verdict import CHECK_CONTRACT
from knell.stores.integrity import Integrity

from .builder import History, run, verdict


def _record(h: History, found: Integrity) -> None:
    write = {"ok": h.ok, "fail": h.fail, "info": h.info}[found.event_type]
    write("nemesis", "integrity", {"target": "store", **found.to_json()})


def _finished() -> History:
    h = History()
    h.post("p1", "events", "m1", 1)
    h.drain("w", {"events": 1})
    return h


def test_an_intact_store_passes() -> None:
    h = _finished()
    _record(h, Integrity.ok("PRAGMA integrity_check", "bus.db: ok"))
    r = run(h, IntegrityCheck)
    assert r.valid is True
    assert r.counts["probes"] == 1 and r.counts["intact"] == 1


def test_a_corrupt_store_is_a_finding_with_the_probe_as_witness() -> None:
    h = _finished()
    _record(h, Integrity.corrupt("amcheck", "SQLSTATE XX002: index is corrupted"))
    r = run(h, IntegrityCheck)
    assert r.valid is False
    assert r.counts["corrupt-store"] == 1
    (anomaly,) = r.anomalies
    assert "amcheck" in anomaly.message and "XX002" in anomaly.message
    assert [e["f"] for e in anomaly.witness] == ["integrity"]
    assert verdict(h).fired() == {"store-integrity": ["corrupt-store"]}


def test_a_probe_that_could_not_run_is_unknown_never_invalid() -> None:
    h = _finished()
    _record(h, Integrity.unknown("redis-check-aof", "could not run: not installed"))
    r = run(h, IntegrityCheck)
    assert r.valid == "unknown"
    assert "redis-check-aof: could not run: not installed" in (r.unknown_reason or "")
    assert r.counts["anomalies"] == 0
    assert verdict(h).valid == "unknown"


def test_no_probe_leaves_nothing_to_judge() -> None:
    r = run(_finished(), IntegrityCheck)
    assert r.valid is True and r.counts["probes"] == 0


def test_a_worker_cannot_forge_a_probe() -> None:
    h = _finished()
    h.fail("p1", "integrity", {"probe": "x", "status": "corrupt", "detail": "made up"})
    assert run(h, IntegrityCheck).counts["probes"] == 0


def test_it_judges_every_scenario_whatever_its_contract() -> None:
    assert CHECK_CONTRACT["store-integrity"] is None


def test_the_event_type_follows_the_status() -> None:
    assert Integrity.ok("p", "d").event_type == "ok"
    assert Integrity.corrupt("p", "d").event_type == "fail"
    assert Integrity.unknown("p", "d").event_type == "info"
