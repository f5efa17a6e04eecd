"""head: never behind a post that completed, nor behind an earlier read."""

from __future__ import annotations

from knell.checker.head import HeadCheck

from .builder import History, only, run


def _read(h: History, process: str, channel: str, head: int) -> tuple[dict, dict]:  # type: ignore[type-arg]
    inv = h.invoke(process, "head", {}, channel=channel)
    return inv, h.ok(process, "head", {"head": head}, channel=channel)


def test_a_current_head_passes() -> None:
    h = History()
    h.post("p1", "events", "m1", 1)
    _read(h, "c1", "events", 1)
    h.drain("w", {"events": 1})
    assert run(h, HeadCheck).valid is True


def test_a_head_behind_a_completed_post() -> None:
    h = History()
    _, _ok = h.post("p1", "events", "m1", 1)
    _, ok2 = h.post("p1", "events", "m2", 2)
    inv, read = _read(h, "c1", "events", 1)
    r = run(h, HeadCheck)
    assert only(r, "stale-head") == [ok2["index"], inv["index"], read["index"]]


def test_a_head_behind_an_earlier_read() -> None:
    h = History()
    _, first = _read(h, "c1", "events", 5)
    inv, second = _read(h, "c2", "events", 3)
    r = run(h, HeadCheck)
    assert only(r, "stale-head") == [first["index"], inv["index"], second["index"]]


def test_a_concurrent_post_may_be_missed() -> None:
    h = History()
    h.invoke("c1", "head", {}, channel="events")
    h.post("p1", "events", "m1", 1)  # completed after the read began
    h.ok("c1", "head", {"head": 0}, channel="events")
    assert run(h, HeadCheck).valid is True


def test_the_drain_head_is_judged_too() -> None:
    h = History()
    _, ok = h.post("p1", "events", "m1", 1)
    _, drain = h.drain("w", {"events": 0})
    r = run(h, HeadCheck)
    assert only(r, "stale-head") == [ok["index"], drain["index"]]
