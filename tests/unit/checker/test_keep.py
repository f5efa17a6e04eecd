"""Kept events: packed once, shared by every check, given back unchanged."""

from __future__ import annotations

import sys
from typing import Any

from knell.checker import CheckConfig, check_events
from knell.checker.base import witness
from knell.checker.keep import Kept, keep, unkeep
from knell.checker.seq import SeqCheck

from .builder import History


def _post_ok() -> dict[str, Any]:
    return {
        "time": 1_795_000_000_003_821_175,
        "process": "producer-1",
        "incarnation": 1,
        "pid": 4001,
        "type": "ok",
        "f": "post",
        "channel": "events",
        "value": {"id": "producer-1.1:1", "sender": "producer-1", "key": "k", "seq": 1},
        "index": 22,
    }


def _deep_size(obj: Any) -> int:
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in obj.items())
    return size


def test_a_kept_event_reads_back_equal_and_is_smaller() -> None:
    event = _post_ok()
    kept = keep(event)
    assert isinstance(kept, Kept)
    assert unkeep(kept) == event
    assert kept["value"]["seq"] == 1
    assert kept.get("missing", "no") == "no"
    assert sys.getsizeof(kept) + sys.getsizeof(kept.raw) < _deep_size(event) / 2


def test_every_check_keeping_one_event_shares_one_copy() -> None:
    event = _post_ok()
    assert keep(event) is keep(event)
    assert keep(_post_ok()) is not keep(event)  # an equal but other event is packed apart


def test_an_event_json_would_change_is_kept_as_it_is() -> None:
    event = {**_post_ok(), "value": {"id": "a", "seq": 1, "span": (1, 2)}}  # a tuple
    assert keep(event) is event
    big = {**_post_ok(), "time": 2**70}  # beyond 64 bits
    assert keep(big) is big


def test_a_witness_lists_a_kept_event_and_its_original_once() -> None:
    event = _post_ok()
    other = {**_post_ok(), "index": 30, "time": event["time"] + 1}
    assert witness(keep(event), other, event) == [event, other]
    assert witness(event, keep(event)) == [event]


def test_an_anomaly_witness_from_kept_posts_is_the_recorded_events() -> None:
    h = History()
    _, a = h.post("p1", "events", "a", 1)
    _, b = h.post("p2", "events", "b", 1)
    verdict = check_events(h.events, CheckConfig(), checks=[SeqCheck])
    (anomaly,) = verdict.checks["no-duplicate-seq"].anomalies
    assert anomaly.witness == [a, b]
    assert all(type(e) is dict for e in anomaly.witness)
