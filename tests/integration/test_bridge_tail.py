"""SSE tails through real bridge processes: resume after a kill, and the two resume mutants.

Each test starts ``knell bridge`` processes (:mod:`tests.integration.bridges`)
in front of a SQLite file and reads a tail with the ``http://`` driver's
iterator, killing and restarting the bridge under it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from knell.buses import Message, open_bus
from knell.buses.http import HttpBus
from knell.buses.http_tail import TailBehind, TailConnect, TailDrop, TailItem, TailOpen
from tests.histories import events_of
from tests.integration.bridges import Bridges, sqlite_url
from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def _until_message(items: Iterator[TailItem], log: list[TailItem]) -> Message:
    for item in items:
        log.append(item)
        if isinstance(item, Message):
            return item
    raise AssertionError("the tail ended")


def _tail_across_a_kill(bridges: Bridges, tmp_path: Path, *args: str) -> list[int]:
    """Read seqs 2 and 3 (the tail starts at head 1), kill the bridge, post
    4 and 5 while it is down, restart it, and read what the resumed tail
    sends first: the seqs of the first two messages after the reconnect."""
    url = sqlite_url(tmp_path / "bus.db")
    bridge = bridges.start("--bus", url, *args)
    writer = open_bus(url)
    writer.post("events", "m1", "p")
    client = open_bus(bridge.url)
    assert isinstance(client, HttpBus)
    log: list[TailItem] = []
    tail = client.follow("events", None, ping=0.1)
    try:
        assert isinstance(next(tail), TailConnect)
        assert isinstance(next(tail), TailOpen)
        writer.post("events", "m2", "p")
        writer.post("events", "m3", "p")
        assert [_until_message(tail, log).seq for _ in range(2)] == [2, 3]
        bridge.kill()
        writer.post("events", "m4", "p")
        writer.post("events", "m5", "p")
        bridges.restart(bridge)
        seen = [_until_message(tail, log).seq for _ in range(2)]
    finally:
        tail.close()
        client.close()
        writer.close()
    drops = [i for i in log if isinstance(i, TailDrop)]
    assert drops and drops[0].opened
    resumed = [i.last_event_id for i in log if isinstance(i, TailConnect)]
    assert resumed and set(resumed) == {3}  # every reconnect sent the last seq read
    return seen


def test_a_tail_resumes_strictly_after_last_event_id(bridges: Bridges, tmp_path: Path) -> None:
    assert _tail_across_a_kill(bridges, tmp_path) == [4, 5]


def test_a_bridge_resuming_inclusive_sends_the_last_event_twice(
    bridges: Bridges, tmp_path: Path
) -> None:
    args = ("--mutant", "bridge-tail-resume-inclusive")
    assert _tail_across_a_kill(bridges, tmp_path, *args) == [3, 4]


def test_a_bridge_resuming_at_head_skips_what_was_posted_meanwhile(
    bridges: Bridges, tmp_path: Path
) -> None:
    url = sqlite_url(tmp_path / "bus.db")
    bridge = bridges.start("--bus", url, "--mutant", "bridge-tail-resume-at-head")
    writer = open_bus(url)
    client = open_bus(bridge.url)
    assert isinstance(client, HttpBus)
    tail = client.follow("events", None, ping=0.1)
    log: list[TailItem] = []
    try:
        next(tail), next(tail)
        writer.post("events", "m1", "p")
        assert _until_message(tail, log).seq == 1
        bridge.kill()
        writer.post("events", "m2", "p")
        bridges.restart(bridge)
        for item in tail:
            if isinstance(item, TailOpen):
                break
        writer.post("events", "m3", "p")
        assert _until_message(tail, log).seq == 3  # 2 was never sent
    finally:
        tail.close()
        client.close()
        writer.close()


def test_the_tail_route_answers_bad_requests_before_streaming(
    bridges: Bridges, tmp_path: Path
) -> None:
    url = sqlite_url(tmp_path / "bus.db")
    bridge = bridges.start("--bus", url)
    writer = open_bus(url)
    writer.post("events", "m1", "p")
    writer.post("events", "m2", "p")
    writer.declare_queue("jobs", 3)  # type: ignore[attr-defined]
    with httpx.Client(base_url=bridge.url, timeout=5) as http:
        queue = http.get("/channels/jobs/tail")
        assert queue.status_code == 409 and queue.json()["error"] == "wrong-kind"
        bad = http.get("/channels/events/tail", headers={"Last-Event-ID": "soon"})
        assert bad.status_code == 422
        assert bad.json()["error"] == "invalid-request"
        assert "Last-Event-ID" in bad.json()["detail"]
        slow = http.get("/channels/events/tail", params={"ping": "0"})
        assert slow.status_code == 422 and "'ping'" in slow.json()["detail"]
        with http.stream("GET", "/channels/events/tail", params={"after": "1", "ping": "0.1"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            lines: list[str] = []
            for line in r.iter_lines():
                lines.append(line)
                if len(lines) >= 8:
                    break
    writer.close()
    assert lines[:2] == [": ping", ""]
    assert lines[2:4] == ["event: message", "id: 2"]
    assert lines[4].startswith("data: {") and '"seq":2' in lines[4]
    assert lines[6] == ": ping"  # idle: pings, and the message before 1 was never sent


def test_tailers_through_bridges_that_are_killed_paused_and_partitioned(tmp_path: Path) -> None:
    """The shipped scenario in its short form: the tailers reconnect with
    the last seq they read, and the reference bridge resumes each tail
    exactly there (tail-continuity judged real events and reconnects)."""
    proc = knell("run", "bridge-sse-tail-kill", "--duration", "5s", "--reports", str(tmp_path),
                 timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = next((tmp_path / "bridge-sse-tail-kill").glob("2*"))
    results = json.loads((run / "results.json").read_text())
    counts = results["checks"]["checks"]["tail-continuity"]["counts"]
    assert counts["tailers"] == 3 and counts["events"] > 100, counts
    assert counts["reconnects"] > 0, counts
    events = events_of(run)
    resumed = [
        e["value"]["last_event_id"]
        for e in events
        if e["f"] == "tail" and e["type"] == "invoke" and "last_event_id" in e["value"]
    ]
    assert resumed, "no tailer reconnected with a Last-Event-ID"


def _stream_tail_from(
    bridges: Bridges, tmp_path: Path, ring: int, posts: int, last: int, *args: str
) -> list[TailItem]:
    """A ring of ``ring`` with ``posts`` posts; a tail through a bridge
    (started with ``args``) resuming after ``last``: the messages and
    behind notices it sends up to the last seq posted."""
    url = sqlite_url(tmp_path / "bus.db")
    bridge = bridges.start("--bus", url, *args)
    writer = open_bus(url)
    writer.declare_stream("ticks", ring)  # type: ignore[attr-defined]
    for i in range(1, posts + 1):
        writer.post("ticks", f"m{i}", "p")
    client = open_bus(bridge.url)
    assert isinstance(client, HttpBus)
    tail = client.follow("ticks", last, ping=0.1)
    got: list[TailItem] = []
    try:
        for item in tail:
            if isinstance(item, (Message, TailBehind)):
                got.append(item)
            if isinstance(item, Message) and item.seq >= posts:
                break
    finally:
        tail.close()
        client.close()
        writer.close()
    return got


def test_a_stream_tail_behind_the_ring_is_told_so_then_resumes_at_its_start(
    bridges: Bridges, tmp_path: Path
) -> None:
    got = _stream_tail_from(bridges, tmp_path, 5, 20, 2)  # the ring holds 16..20
    assert got[0] == TailBehind("ticks", 2, 16)
    assert [m.seq for m in got[1:] if isinstance(m, Message)] == [16, 17, 18, 19, 20]
    (tmp_path / "again").mkdir()
    within = _stream_tail_from(bridges, tmp_path / "again", 5, 20, 17)
    assert [m.seq for m in within if isinstance(m, Message)] == [18, 19, 20]
    assert not any(isinstance(i, TailBehind) for i in within)  # nothing dropped


def test_a_bridge_with_its_own_buffer_blames_the_ring(bridges: Bridges, tmp_path: Path) -> None:
    """The mutant serves the newest 10 from its own buffer: a ring of 100
    holding all 30 posts is said to have dropped 3..20."""
    args = ("--mutant", "bridge-stream-own-buffer")
    got = _stream_tail_from(bridges, tmp_path, 100, 30, 2, *args)
    assert got[0] == TailBehind("ticks", 2, 21)  # the ring holds 1..30
    assert [m.seq for m in got[1:] if isinstance(m, Message)] == list(range(21, 31))
