"""The online feed releases a growing run's events in the merge's order,
holding each only as long as a live part could still write an earlier one."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import orjson

from knell.history import merge_histories
from knell.history_feed import TORN_KEPT, HistoryFeed
from knell.history_files import LineEncoder, file_lines, part_path


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Part:
    """A part written by the test, event by event (each its own zstd block)."""

    def __init__(self, folder: Path, process: str, incarnation: int = 0) -> None:
        self.path = part_path(folder, process, incarnation)
        self.process = process
        self.incarnation = incarnation
        self.encoder = LineEncoder(self.path)
        self.path.write_bytes(b"")

    def write(self, time: int, f: str = "head") -> None:
        event = {
            "time": time,
            "process": self.process,
            "incarnation": self.incarnation,
            "type": "ok",
            "f": f,
            "value": {},
        }
        with open(self.path, "ab") as fh:
            fh.write(self.encoder.encode(orjson.dumps(event) + b"\n"))

    def close(self) -> None:
        with open(self.path, "ab") as fh:
            fh.write(self.encoder.finish())


def times(events: list[dict[str, object]]) -> list[object]:
    return [(e["time"], e["process"]) for e in events]


def test_events_are_held_until_every_live_part_has_passed_them(tmp_path: Path) -> None:
    clock = Clock()
    feed = HistoryFeed(tmp_path, window=1.0, clock=clock)
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    assert feed.poll() == []  # parts found, registered unread
    a.write(10)
    a.write(30)
    b.write(20)
    assert times(feed.poll()) == [(10, "a"), (20, "b")]  # a's 30 waits for b
    b.write(40)
    assert times(feed.poll()) == [(30, "a")]
    assert times(feed.finish()) == [(40, "b")]
    assert feed.late == 0


def test_a_late_event_inside_the_window_takes_its_place(tmp_path: Path) -> None:
    clock = Clock()
    feed = HistoryFeed(tmp_path, window=1.0, clock=clock)
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    feed.poll()
    a.write(10)
    a.write(30)
    assert feed.poll() == []  # b is live and has shown nothing
    clock.now += 0.5
    b.write(20)  # b lagged, within the window
    assert times(feed.poll()) == [(10, "a"), (20, "b")]
    clock.now += 0.6  # a's 30 was read 1.1 s ago: the window no longer holds it
    assert times(feed.poll()) == [(30, "a")]
    b.write(25)  # later than the window: released at once, counted out of order
    assert times(feed.poll()) == [(25, "b")]
    assert feed.late == 1


def test_a_part_that_ends_no_longer_holds_the_window(tmp_path: Path) -> None:
    clock = Clock()
    feed = HistoryFeed(tmp_path, window=60.0, clock=clock)
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    feed.poll()
    b.write(5)
    b.close()
    a.write(10)
    assert times(feed.poll()) == [(5, "b"), (10, "a")]


def test_a_killed_incarnation_no_longer_holds_once_its_successor_appears(
    tmp_path: Path,
) -> None:
    clock = Clock()
    feed = HistoryFeed(tmp_path, window=60.0, clock=clock)
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    feed.poll()
    b.write(5)  # then b is killed: its part just stops
    a.write(10)
    assert times(feed.poll()) == [(5, "b")]
    b1 = Part(tmp_path, "b", 1)
    assert feed.poll() == []  # a's 10 is held by the successor, registered empty
    b1.write(12)
    a.write(20)
    assert times(feed.poll()) == [(10, "a"), (12, "b")]
    assert times(feed.finish()) == [(20, "a")]


def test_a_part_that_appears_holds_the_window_until_it_writes(tmp_path: Path) -> None:
    clock = Clock()
    feed = HistoryFeed(tmp_path, window=60.0, clock=clock)
    a = Part(tmp_path, "a")
    feed.poll()
    a.write(10)
    c = Part(tmp_path, "c")  # created before it stamps anything
    assert feed.poll() == []  # a's 10 is held: c was found in the same poll
    c.write(11)
    assert times(feed.poll()) == [(10, "a")]


def test_the_order_is_the_merge_order_ties_included(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    clock = Clock()
    feed = HistoryFeed(folder, window=60.0, clock=clock)
    parts = [Part(folder, name) for name in ("c", "a", "b")]
    got: list[dict[str, object]] = []
    for step, time in enumerate([1, 1, 2, 3, 3, 3, 5, 8, 8, 9]):
        parts[step % 3].write(time)
        parts[(step * 2) % 3].write(time)
        got += feed.poll()
    got += feed.finish()
    merged = tmp_path / "history.jsonl"
    count, torn = merge_histories(folder.iterdir(), merged)
    offline = [orjson.loads(line) for line in file_lines(merged)]
    assert count == len(got) and not torn
    assert got == offline  # same events, same order, same index


def test_a_torn_last_block_is_skipped_and_reported(tmp_path: Path) -> None:
    feed = HistoryFeed(tmp_path, window=60.0, clock=Clock())
    a = Part(tmp_path, "a")
    a.write(10)
    with open(a.path, "ab") as fh:
        fh.write(a.encoder.encode(b'{"time": 11, "process": "a"')[:5])
    assert times(feed.finish()) == [(10, "a")]
    assert len(feed.torn) == 1 and "torn" in feed.torn[0]
    assert feed.torn_count == 1


def test_a_soaks_torn_tails_are_counted_and_a_few_said(tmp_path: Path) -> None:
    """A soak tears a part per kill: the feed says the first few and counts
    the rest, so what it keeps does not grow with the soak."""
    feed = HistoryFeed(tmp_path, window=60.0, clock=Clock())
    for incarnation in range(TORN_KEPT + 5):
        part = Part(tmp_path, "a", incarnation)
        part.write(10 + incarnation)
        with open(part.path, "ab") as fh:
            fh.write(part.encoder.encode(b'{"time": 99, "process": "a"')[:5])
    feed.finish()
    assert len(feed.torn) == TORN_KEPT and feed.torn_count == TORN_KEPT + 5


class RacingFeed(HistoryFeed):
    """A feed in which something is written between a poll's reading of the
    known parts and its listing of the folder (the race a real run has)."""

    race: list[Part]

    def _discover(self, now: float, *, force: bool = False) -> None:
        for part in self.race:
            part.write(7)
        self.race = []
        super()._discover(now, force=force)


def test_a_killed_incarnation_is_read_to_its_end_before_it_stops_holding(
    tmp_path: Path,
) -> None:
    clock = Clock()
    feed = RacingFeed(tmp_path, window=60.0, clock=clock)
    feed.race = []
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    feed.poll()
    b.write(5)
    a.write(10)
    assert times(feed.poll()) == [(5, "b")]
    a.write(20)
    feed.race = [b]  # b's last event lands after the read, then b dies
    b1 = Part(tmp_path, "b", 1)  # ... and is restarted
    assert feed.poll() == []  # everything waits for the empty successor
    b1.write(8)
    assert times(feed.poll()) == [(7, "b"), (8, "b")]  # b's last event was not lost
    assert times(feed.finish()) == [(10, "a"), (20, "a")]
    assert feed.late == 0


def test_parts_done_and_released_are_forgotten(tmp_path: Path) -> None:
    feed = HistoryFeed(tmp_path, window=60.0, clock=Clock())
    a, b = Part(tmp_path, "a"), Part(tmp_path, "b")
    feed.poll()
    b.write(5)
    b.close()
    a.write(10)
    assert times(feed.poll()) == [(5, "b"), (10, "a")]
    assert [p.name for p in feed.parts.values()] == [a.path.name]  # b is done: not read again
    a.write(11)
    assert times(feed.poll()) == [(11, "a")]  # a alone: nobody else can write earlier
    assert [p.name for p in feed.parts.values()] == [a.path.name]


def test_retired_parts_cost_no_memory_per_part(tmp_path: Path) -> None:
    """A soak restarts a process at every kill (some 90,000 parts a day):
    the feed remembers how far each process's parts are retired, not a path
    per part, so its memory does not grow with them; each event is still
    released once, in order."""
    feed = HistoryFeed(tmp_path, window=60.0, clock=Clock())
    released = [0]  # how many, checked as they come (a list of them would grow too)

    def restarts(first: int, count: int) -> None:
        for n in range(first, first + count):
            part = Part(tmp_path, "consumer-1", n)  # killed and restarted, one event each
            part.write(n)
            part.close()
            if n % 50 == 49:  # a poll finds the new parts, the next one reads them
                for event in feed.poll() + feed.poll():
                    assert (event["time"], event["process"]) == (released[0], "consumer-1")
                    released[0] += 1

    restarts(0, 600)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        restarts(600, 600)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert released == [1200]
    assert feed.parts == {}
    assert times(feed.poll()) == [] and feed.late == 0  # nothing read twice
    assert grown < 600 * 100, f"{grown / 600:.0f} bytes kept per retired part"
