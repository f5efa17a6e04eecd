"""The driver: one pass, dispatch by f, Jepsen's merge, JSON output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from knell.checker import (
    CHECKS,
    CheckConfig,
    CheckResult,
    Verdict,
    check_events,
    check_history,
)
from knell.checker.base import AnomalyLog, Check, merge_validity, pick_shown
from knell.checker.consumer import on
from knell.checker.ordering import OrderingCheck
from knell.history import Event

from .builder import History, verdict


def healthy() -> History:
    """A small run where every promise holds."""
    h = History()
    h.invoke("producer-1", "start", {"role": "producer"})
    h.subscribe("consumer-1", "worker", "events", 0)
    h.subscribe("waiter-1", "reviewer", "events", 0)
    arm = h.arm_invoke("waiter-1", "reviewer", 2.0)
    h.post("producer-1", "events", "p1:1", 1, sender="producer", key="k1")
    h.wake("waiter-1", "reviewer", "events", 1, "producer")
    h.arm_ok(arm, True)
    h.post("producer-1", "events", "p1:2", 2, sender="producer")
    h.consume("consumer-1", "worker", "events", [(1, "p1:1"), (2, "p1:2")])
    h.consume("waiter-1", "reviewer", "events", [(1, "p1:1"), (2, "p1:2")])
    h.ack_refused("consumer-1", "worker", "events", 1_000_002)
    h.nemesis("kill", "consumer-1")
    h.drain("worker", {"events": 2})
    h.drain("reviewer", {"events": 2})
    h.ok("consumer-1", "stop")
    return h


def test_healthy_history_passes_every_check() -> None:
    v = verdict(healthy())
    bad = {n: r.to_json() for n, r in v.checks.items() if r.valid is not True}
    assert v.valid is True, bad
    assert list(v.checks) == [c.name for c in CHECKS]
    assert v.events == len(healthy().events)
    assert v.seconds >= 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], True),
        ([True, True], True),
        ([True, "unknown"], "unknown"),
        (["unknown", False, True], False),
        ([False, "unknown"], False),
    ],
)
def test_jepsen_priority(values: list[bool | str], expected: bool | str) -> None:
    assert merge_validity(values) == expected  # type: ignore[arg-type]


def test_verdict_merges_false_over_unknown() -> None:
    h = healthy()
    h.events = [e for e in h.events if e["f"] != "drain"]  # loss becomes unknown
    v = verdict(h)
    assert v.valid == "unknown"
    assert v.checks["no-loss"].valid == "unknown"
    h.fetch("c9", "worker", "events", None, [(2, "p1:2"), (1, "p1:1")])  # ordering: False
    v = verdict(h)
    assert v.valid is False
    assert v.checks["ordering"].valid is False


def test_to_json_is_serialisable_and_complete() -> None:
    h = healthy()
    h.fetch("c9", "worker", "events", None, [(2, "p1:2"), (1, "p1:1")])
    data = verdict(h).to_json()
    text = json.dumps(data)
    assert orjson.loads(text) == data
    assert set(data["checks"]) == {c.name for c in CHECKS}
    assert data["valid"] is False
    assert data["config"]["wake_bound"] == 1.0
    ordering = data["checks"]["ordering"]
    assert ordering["anomalies"][0]["kind"] == "fetch-out-of-order"
    assert ordering["anomalies"][0]["witness"][0]["process"] == "c9"
    assert set(ordering) >= {"name", "valid", "counts", "anomalies", "metrics", "unknown_reason"}


def test_single_pass_over_a_generator() -> None:
    pulled = 0

    def stream() -> Iterator[Event]:
        nonlocal pulled
        for event in healthy().events:
            pulled += 1
            yield event

    gen = stream()
    v = check_events(gen, CheckConfig())
    assert v.valid is True
    assert pulled == v.events == len(healthy().events)
    assert next(gen, None) is None  # consumed exactly once


class _Spy(Check):
    name: ClassVar[str] = "spy"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: list[str] = []

    @on("post")
    def observe(self, event: Event) -> None:
        self.seen.append(event["f"])

    def result(self) -> CheckResult:
        return self._result({"seen": len(self.seen), "non-post": self.seen.count("x")})


def test_checks_see_only_their_f_and_unknown_f_is_ignored() -> None:
    h = History()
    h.ok("w1", "start", {"role": "consumer"})
    h.post("p1", "events", "a", 1)
    h.info("nemesis", "partition", {"link": "store"})
    h.event("w1", "ok", "something-new", {"x": 1})
    h.ok("w1", "stop")
    v = check_events(h.events, CheckConfig(), checks=[_Spy, OrderingCheck])
    assert v.checks["spy"].counts["seen"] == 2
    assert v.valid is True
    assert v.events == 6


def test_anomalies_are_capped_but_all_counted() -> None:
    h = History()
    for i in range(10):
        h.fetch("c1", "w", "events", None, [(2, f"b{i}"), (1, f"a{i}")])
    v = check_events(h.events, CheckConfig(max_anomalies=3), checks=[OrderingCheck])
    r = v.checks["ordering"]
    assert len(r.anomalies) == 3
    assert r.counts["fetch-out-of-order"] == 10
    assert r.counts["anomalies"] == 10


def test_past_the_cap_the_first_of_a_new_kind_is_stored() -> None:
    """A flood of one kind fills the log; a kind found later still gets
    its witness (its first only), and every anomaly is counted."""
    h = History()
    for i in range(10):
        h.fetch("c1", "w", "events", None, [(2, f"b{i}"), (1, f"a{i}")])
    late = [h.fetch("c1", "w", "events", 5, [(3 + i, f"c{i}")])[1] for i in range(2)]
    v = check_events(h.events, CheckConfig(max_anomalies=3), checks=[OrderingCheck])
    r = v.checks["ordering"]
    assert [a.kind for a in r.anomalies] == ["fetch-out-of-order"] * 3 + ["fetch-below-after"]
    assert r.anomalies[-1].witness[-1] == late[0]
    assert r.counts["fetch-out-of-order"] == 10
    assert r.counts["fetch-below-after"] == 2
    assert v.fired() == {"ordering": ["fetch-below-after", "fetch-out-of-order"]}


def test_a_log_with_no_room_still_keeps_one_of_each_kind() -> None:
    log = AnomalyLog(0)
    assert not log.full("a")
    log.add("a", "first a", [])
    assert log.full("a") and not log.full("b")
    log.count("a")
    log.add("b", "first b", [])
    assert [a.message for a in log.stored] == ["first a", "first b"]
    assert log.counts == {"a": 2, "b": 1} and log.total == 3


@pytest.mark.parametrize(
    ("kinds", "limit", "shown"),
    [
        (["a", "a", "a"], 5, [0, 1, 2]),  # room for all
        (["a"] * 20 + ["b"], 4, [0, 1, 19, 20]),  # the late kind, then early and last
        (["a"] * 20 + ["b"], 5, [0, 1, 2, 19, 20]),
        (["a"] * 20 + ["b"], 7, [0, 1, 2, 3, 11, 19, 20]),  # ... and midway
        (["a", "b", "c", "a"], 2, [0, 1]),  # fewer places than kinds: the first kinds
        (["a", "a", "b", "a"], 1, [0]),
        (["a", "b"], 0, []),
        ([], 3, []),
    ],
)
def test_a_report_shows_every_kind_then_early_midway_and_late(
    kinds: list[str], limit: int, shown: list[int]
) -> None:
    assert pick_shown(kinds, limit) == shown


def test_check_history_reads_a_merged_file(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in healthy().events))
    v = check_history(path, CheckConfig(wake_bound=2.0))
    assert isinstance(v, Verdict)
    assert v.valid is True
    assert v.config.wake_bound == 2.0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_config_rejects_bad_bound(bad: float) -> None:
    with pytest.raises(ValueError, match="wake_bound"):
        CheckConfig(wake_bound=bad)


def test_config_rejects_non_numbers() -> None:
    with pytest.raises(TypeError, match="wake_bound"):
        CheckConfig(wake_bound="1s")  # type: ignore[arg-type]


def test_unreadable_event_makes_the_check_unknown_not_a_crash() -> None:
    h = healthy()
    broken = h.ok("consumer-1", "handle", {"seq": 3}, handle="worker", channel="events")  # no id
    v = verdict(h)
    for name in ("no-loss", "unexpected", "no-duplicate-seq", "redelivery"):
        r = v.checks[name]
        assert r.valid == "unknown", name
        assert r.counts["malformed-events"] == 1
        assert r.unknown_reason is not None
        assert f"index {broken['index']}" in r.unknown_reason
        assert "KeyError" in r.unknown_reason
    assert v.checks["ordering"].valid is True
    assert v.valid == "unknown"


def test_every_built_in_check_names_the_contract_it_judges() -> None:
    """A new check must say which contract it judges, or a broadcast run
    would count it as passed without anything to judge."""
    from knell.checker import CHECKS
    from knell.checker.verdict import CHECK_CONTRACT

    assert {c.name for c in CHECKS} == set(CHECK_CONTRACT)


def test_checks_of_an_untested_contract_are_not_applicable_never_a_finding() -> None:
    from knell.checker import CheckResult, Verdict
    from knell.checker.verdict import not_applicable

    results = {
        "no-loss": CheckResult(name="no-loss", valid=True),
        "no-duplicate-seq": CheckResult(name="no-duplicate-seq", valid=True),
        "lease-exclusive": CheckResult(name="lease-exclusive", valid=True),
        "at-most-once": CheckResult(name="at-most-once", valid=True),
        "lease-holder": CheckResult(name="lease-holder", valid=False),  # a finding: shown
        "dead-letter": CheckResult(name="dead-letter", valid="unknown"),  # undecided: shown
    }
    broadcast = Verdict(valid=False, checks=results, contracts=("broadcast",))
    assert broadcast.not_applicable == ["lease-exclusive", "at-most-once"]
    data = broadcast.to_json()
    assert data["not_applicable"] == ["lease-exclusive", "at-most-once"]
    assert data["contracts"] == ["broadcast"]
    assert data["checks"]["lease-exclusive"]["valid"] is True  # the verdict keeps its meaning
    # a check of a tested contract that saw nothing stays what it is
    queue = Verdict(valid=False, checks=results, contracts=("queue",))
    assert queue.not_applicable == ["no-loss", "at-most-once"]
    # not knowing what the scenario tests sets nothing apart
    assert Verdict(valid=False, checks=results).not_applicable == []
    assert Verdict(valid=False, checks=results).to_json()["not_applicable"] == []
    assert not_applicable({"my-own-check": True}, ()) == []


def test_a_role_check_without_its_role_is_not_applicable() -> None:
    """tail-continuity judges SSE tailers: a broadcast run without one
    tests the contract but gives the check nothing, so it is set apart;
    with a tailer, or roles unknown, it stays; a finding always shows."""
    from knell.checker import CheckResult, Verdict

    results = {
        "no-loss": CheckResult(name="no-loss", valid=True),
        "tail-continuity": CheckResult(name="tail-continuity", valid=True),
    }
    roles = ("producer", "consumer")
    plain = Verdict(valid=True, checks=results, contracts=("broadcast",), roles=roles)
    assert plain.not_applicable == ["tail-continuity"]
    tails = Verdict(valid=True, checks=results, contracts=("broadcast",), roles=(*roles, "tailer"))
    assert tails.not_applicable == []
    assert Verdict(valid=True, checks=results, contracts=("broadcast",)).not_applicable == []
    found = {**results, "tail-continuity": CheckResult(name="tail-continuity", valid=False)}
    assert Verdict(False, checks=found, contracts=("broadcast",), roles=roles).not_applicable == []
