"""Forgetting a stream's dropped messages: a long stream history checked at a
flat cost, judged the same (knell.checker.stream.settle).

A message settles once a page reporting a ``first`` above its seq completed
and every tail asked for before that page completed; it is forgotten
``forget_after`` seconds later. Each history is checked with forgetting on
and, where it says so, off."""

from __future__ import annotations

from typing import Any

from knell.checker import CheckConfig

from .builder import History, check_keeping, indices, only
from .test_stream import CH, P, declare, page

ROLES = ("producer", "streamer")
FORGET = CheckConfig(contracts=("stream",), roles=ROLES, forget_after=1.0)
KEEP = CheckConfig(contracts=("stream",), roles=ROLES)
RING = 5


def _check(h: History, config: CheckConfig) -> Any:
    """The verdict and the check instances, the stream's final phase
    recorded at the end."""
    return check_keeping(_ended(h), config)


def _ended(h: History) -> History:
    ended = History()
    ended.events = list(h.events)
    ended.now = h.now
    value = {"handle": "stream-drain-1", "contract": "stream"}
    where = {"handle": "stream-drain-1", "channel": CH}
    ended.invoke("nemesis", "drain", value, **where)
    ended.ok("nemesis", "drain", value, **where)
    return ended


def _kept(checks: dict[str, Any]) -> dict[str, int]:
    """Messages (or rises of first) each stream check still keeps."""
    return {
        "ring-content": sum(map(len, checks["ring-content"]._at.values())),
        "ring-content ids": sum(map(len, checks["ring-content"]._asked.values())),
        "ring-bound": sum(map(len, checks["ring-bound"]._at.values())),
        "ring-tail": sum(len(f.firsts) for f in checks["ring-tail"]._firsts.values()),
    }


def _stream(h: History, first: int, n: int, after: int = 0) -> int:
    """Post ``n`` messages from seq ``first``, reading each as it lands
    (a ring of :data:`RING`); the seq read up to."""
    for seq in range(first, first + n):
        h.post(P, CH, f"m{seq}", seq)
        low = max(1, seq - RING + 1)
        page(h, after, low, seq, list(range(max(after + 1, low), seq + 1)))
        after = seq
        h.sleep(0.05)
    return after


def _history(n: int = 200) -> History:
    h = History()
    declare(h, max_len=RING, max_age_s=60.0)
    _stream(h, 1, n)
    return h


def test_forgetting_gives_the_same_verdict_and_counts_and_keeps_only_the_horizon() -> None:
    h = _history()
    kept_verdict, _ = _check(h, KEEP)
    verdict, checks = _check(h, FORGET)
    assert verdict.valid is True and kept_verdict.valid is True
    for name, result in verdict.checks.items():
        assert result.counts == kept_verdict.checks[name].counts, name
    # 200 messages at 20 a second, forgotten 1 s after the ring dropped them
    assert verdict.forgetting["messages"] > 150
    for what, n in _kept(checks).items():
        assert n < 40, (what, n)


def test_a_tail_asked_before_the_first_rose_holds_what_it_may_rightly_show() -> None:
    """A paused streamer's page, asked while seq 1 was in the ring, may show
    it however late it returns: nothing below that page's view is forgotten
    while it is in flight."""
    h = History()
    declare(h, max_len=RING)
    h.post(P, CH, "m1", 1)
    h.invoke("streamer-2", "stream_tail", {"after": 0, "limit": 10}, channel=CH)
    _stream(h, 2, 60, after=1)
    _, checks = _check(h, FORGET)
    assert checks["ring-content"]._at[CH].get(1) is not None
    h.ok(
        "streamer-2",
        "stream_tail",
        {"after": 0, "limit": 10, "first": 1, "head": 1, "messages": [{"seq": 1, "id": "m1"}]},
        channel=CH,
    )
    _stream(h, 62, 40, after=61)
    verdict, checks = _check(h, FORGET)
    assert verdict.valid is True, [a.message for r in verdict.checks.values() for a in r.anomalies]
    assert checks["ring-content"]._at[CH].get(1) is None  # forgotten once it returned


def test_a_killed_streamers_tail_holds_nothing() -> None:
    h = History()
    declare(h, max_len=RING)
    h.post(P, CH, "m1", 1)
    h.invoke("streamer-2", "stream_tail", {"after": 0, "limit": 10}, channel=CH)
    h.nemesis("kill", "streamer-2")
    _stream(h, 2, 60, after=1)
    _, checks = _check(h, FORGET)
    assert checks["ring-content"]._at[CH].get(1) is None


def test_a_forgotten_message_shown_again_is_still_found() -> None:
    """A ring that brings back a message it dropped long ago: ring-tail names
    the page (its first went back), though the post is forgotten."""
    h = _history(100)
    earlier = h.events[-1]
    assert earlier["f"] == "stream_tail"
    inv, bad = page(h, 0, 1, 100, [1, 2, 3])  # seq 1..3 again, first 1
    verdict, checks = _check(h, FORGET)
    assert checks["ring-content"]._at[CH].get(1) is None  # forgotten: not compared
    assert only(verdict.checks["ring-tail"], "first-regressed") == indices([earlier, inv, bad])


def test_a_forgotten_id_at_a_new_seq_is_still_an_anomaly() -> None:
    h = _history(100)
    _, bad = page(h, 100, 96, 101, [(101, "m3")])  # m3 (long dropped) shown at a new seq
    verdict, _ = _check(h, FORGET)
    kept, _ = _check(h, KEEP)
    assert only(kept.checks["ring-content"], "wrong-body")  # while its post is known
    assert only(verdict.checks["ring-content"], "phantom") == [bad["index"]]


def test_a_post_whose_ok_comes_after_its_seq_settled_is_forgotten_later() -> None:
    h = History()
    declare(h, max_len=RING)
    late = h.post_invoke("producer-2", CH, "m1")  # paused before its ok
    after = _stream(h, 2, 60)
    h.post_ok(late, 1)
    _stream(h, after + 1, 40, after=after)
    verdict, checks = _check(h, FORGET)
    assert verdict.valid is True
    assert checks["ring-content"]._at[CH].get(1) is None
    assert "m1" not in checks["ring-content"]._seq_of[CH]
