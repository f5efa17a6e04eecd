"""History files on disk: zstd parts torn anywhere, the tail of a compressed
part, the verified merge, old plain run directories, ``--keep-history``."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import threading
import time
from pathlib import Path

import orjson
import pytest
import zstandard

from knell import history_files
from knell.history import HistoryError, HistoryReader, HistoryWriter, merge_histories
from knell.history_files import (
    MERGED,
    MERGED_PLAIN,
    HistoryFileError,
    PartsWatch,
    ZstdBlocks,
    count_events,
    file_lines,
    history_lines,
    marked_lines,
    merged_path,
    open_merged_writer,
    part_path,
    part_paths,
    verify_merge,
)
from knell.runner import RunError, _keep_once, check_run
from knell.tail import HistoryTail

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _part(folder: Path, name: str, events: int, *, close: bool = True) -> Path:
    path = part_path(folder, name, 1)
    writer = HistoryWriter(path, name, 1)
    for i in range(events):
        writer.write("invoke", "post", {"id": f"{name}:{i}"}, channel="events")
    if close:
        writer.close()
    return path


def test_a_part_is_a_zstd_stream_of_the_events_it_was_given(tmp_path: Path) -> None:
    path = _part(tmp_path, "producer-1", 200)
    assert path.name == "producer-1.1.jsonl.zst"
    assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    events = list(HistoryReader(path))
    assert [e["value"]["id"] for e in events] == [f"producer-1:{i}" for i in range(200)]
    plain = sum(len(orjson.dumps(e)) + 1 for e in events)
    assert path.stat().st_size < plain / 4  # each event against the ones before it


@pytest.mark.parametrize("chunk", [5, 97, 1 << 22])
def test_the_marked_lines_of_a_part_are_those_a_line_by_line_read_finds(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block search the final drain and the clock scan use: every line
    naming the mark, whole, wherever the blocks cut (mid-mark included),
    and a torn last part of a line left for the parser to refuse."""
    path = part_path(tmp_path, "consumer-1", 1)
    writer = HistoryWriter(path, "consumer-1", 1)
    for i in range(300):
        f = "subscribe" if i % 37 == 0 else "fetch"
        writer.write("invoke", f, {"n": i}, handle=f"h{i % 3}", channel="events")
    writer.close()
    torn = path.read_bytes() + b"x"  # a torn block: not a line of the file
    path.write_bytes(torn)
    monkeypatch.setattr(history_files, "MARK_CHUNK", chunk)
    wanted = [line for line in file_lines(path) if b'"subscribe"' in line]
    assert len(wanted) == 9
    assert list(marked_lines(path, b'"subscribe"')) == wanted
    assert list(marked_lines(path, b'"no-such-mark"')) == []


def test_a_part_cut_at_any_byte_yields_its_whole_events_and_reports_the_torn_rest(
    tmp_path: Path,
) -> None:
    # A writer killed mid-write leaves any prefix of what it meant to write:
    # every such prefix must give exactly the events whose block is whole.
    # Each event's block is one write(), so the prefixes ending on a write
    # are the untorn ones.
    whole = _part(tmp_path, "p", 30, close=False).read_bytes()
    ends = []
    writer_blocks = ZstdBlocks("probe")
    for cut in range(1, len(whole) + 1):
        if writer_blocks.feed(whole[cut - 1 : cut]).endswith(b"\n"):
            ends.append(cut)  # a block ends here
    assert len(ends) == 30
    cut_path = tmp_path / "cut.1.jsonl.zst"
    for cut in range(len(whole) + 1):
        cut_path.write_bytes(whole[:cut])
        reader = HistoryReader(cut_path)
        events = list(reader)
        expected = sum(1 for end in ends if end <= cut)
        assert [e["value"]["id"] for e in events] == [f"p:{i}" for i in range(expected)]
        torn = cut not in ends and cut > 0
        assert bool(reader.torn) == torn, cut
        if torn:
            assert "torn last line skipped" in reader.torn[0]
            assert f"cut.1.jsonl.zst:{expected + 1}:" in reader.torn[0]
        assert count_events(cut_path) == expected


def test_a_closed_part_ends_its_frame_and_reads_the_same(tmp_path: Path) -> None:
    open_part = _part(tmp_path / "a", "p", 10, close=False)
    closed = _part(tmp_path / "b", "p", 10)
    for path, ended in ((open_part, False), (closed, True)):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        dobj.decompress(path.read_bytes())
        assert dobj.eof == ended  # zstd's own reader sees the frame's end
    assert [e["value"] for e in HistoryReader(closed)] == [
        e["value"] for e in HistoryReader(open_part)
    ]


def test_a_damaged_zstd_part_is_named_not_taken_for_a_torn_one(tmp_path: Path) -> None:
    path = _part(tmp_path, "p", 5)
    path.write_bytes(b"not zstd at all\n" + path.read_bytes())
    with pytest.raises(HistoryFileError, match=r"p\.1\.jsonl\.zst: byte 0: not a zstd frame"):
        list(HistoryReader(path))


def test_the_tail_follows_a_compressed_part_block_by_block(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    path = part_path(folder, "producer-1", 1)
    writer = HistoryWriter(path, "producer-1", 1)
    tail = HistoryTail(folder)
    assert tail.poll() == []
    writer.write("invoke", "post", {"id": "a"})
    writer.write("ok", "post", {"id": "a", "seq": 1})
    assert [e["type"] for e in tail.poll()] == ["invoke", "ok"]
    # Half a block on disk (a write in progress): nothing yet, then the rest.
    before = path.stat().st_size
    writer.write("invoke", "post", {"id": "b"})
    data = path.read_bytes()
    path.write_bytes(data[: before + 4])
    assert tail.poll() == []
    with open(path, "ab") as fh:
        fh.write(data[before + 4 :])
    assert [e["value"]["id"] for e in tail.poll()] == ["b"]
    writer.close()
    assert tail.poll() == []


def test_the_merge_is_compressed_whole_and_the_parts_can_go(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    parts = [_part(folder, "a", 40), _part(folder, "b", 60)]
    merged = tmp_path / MERGED
    count, torn = merge_histories(parts, merged)
    assert (count, torn) == (100, [])
    assert verify_merge(parts, merged, count) is None
    assert [orjson.loads(line)["index"] for line in history_lines(tmp_path)] == list(range(100))


def test_a_part_that_grew_after_the_merge_keeps_every_part(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    still_going = HistoryWriter(part_path(folder, "b", 1), "b", 1)
    for i in range(60):
        still_going.write("invoke", "post", {"id": f"b:{i}"})
    parts = [_part(folder, "a", 40), still_going.path]
    merged = tmp_path / MERGED
    count, _ = merge_histories(parts, merged)
    still_going.write("invoke", "post", {"id": "late"})  # after the merge read its part
    refused = verify_merge(parts, merged, count)
    assert refused is not None
    assert "101 event(s) in the 2 part(s)" in refused and "100 merged" in refused
    with pytest.raises(RunError, match=r"merge not verified.*the parts are kept"):
        _keep_once(tmp_path, parts, merged, count)
    assert all(p.exists() for p in parts)
    assert not merged.exists()  # never read as if it were whole


def test_a_verified_merge_removes_the_parts_and_an_older_plain_copy(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    parts = [_part(folder, "a", 10)]
    (tmp_path / MERGED_PLAIN).write_text("{}\n")
    merged = tmp_path / MERGED
    count, _ = merge_histories(parts, merged)
    _keep_once(tmp_path, parts, merged, count)
    assert part_paths(folder) == []
    assert not (tmp_path / MERGED_PLAIN).exists()
    assert merged_path(tmp_path) == merged


def _old_run(tmp_path: Path, name: str = "reference--quickstart") -> Path:
    """A run directory as an older knell wrote it: plain ``history.jsonl``."""
    run = tmp_path / name
    run.mkdir()
    shutil.copy(CORPUS / name / "scenario.json", run / "scenario.json")
    data = lzma.decompress((CORPUS / name / "history.jsonl.xz").read_bytes())
    (run / MERGED_PLAIN).write_bytes(data)
    return run


def test_an_old_plain_run_directory_is_still_checked_in_place(tmp_path: Path) -> None:
    run = _old_run(tmp_path)
    before = (run / MERGED_PLAIN).read_bytes()
    outcome = check_run(run)
    assert outcome.verdict.valid is True
    assert outcome.verdict.events == before.count(b"\n")
    assert (run / MERGED_PLAIN).read_bytes() == before  # read, never rewritten
    assert not (run / MERGED).exists()
    assert list(file_lines(run / MERGED_PLAIN)) == before.splitlines(True)


def test_old_plain_parts_are_merged_into_the_compressed_file(tmp_path: Path) -> None:
    run = _old_run(tmp_path)
    lines = (run / MERGED_PLAIN).read_bytes().splitlines(True)
    (run / "history").mkdir()
    by_process: dict[str, list[bytes]] = {}
    for line in lines:
        event = orjson.loads(line)
        del event["index"]
        by_process.setdefault(f"{event['process']}.{event.get('incarnation', 1)}", []).append(
            orjson.dumps(event) + b"\n"
        )
    for name, part in by_process.items():
        (run / "history" / f"{name}.jsonl").write_bytes(b"".join(part))
    outcome = check_run(run)
    assert outcome.verdict.valid is True
    assert outcome.verdict.events == len(lines)
    assert not (run / MERGED_PLAIN).exists() and (run / MERGED).exists()
    assert part_paths(run / "history") == []


@pytest.mark.parametrize(
    ("run_name", "keep", "kept"),
    [
        ("reference--quickstart", "all", True),
        ("reference--quickstart", "failing", False),
        ("reference--quickstart", "none", False),
        ("off-by-one-read--quickstart", "failing", True),
        ("off-by-one-read--quickstart", "none", False),
    ],
)
def test_keep_history_keeps_what_it_names_and_the_page_says_so(
    tmp_path: Path, run_name: str, keep: str, kept: bool
) -> None:
    run = _old_run(tmp_path, run_name)
    outcome = check_run(run, keep_history=keep)
    assert (run / MERGED_PLAIN).exists() == kept
    results = json.loads((run / "results.json").read_text())
    page = (run / "index.html").read_text("utf-8")
    assert (outcome.verdict.valid is True) == (run_name.startswith("reference"))
    if kept:
        assert "history_kept" not in results and "not kept" not in page
        assert 'href="history.jsonl"' in page
    else:
        assert results["history_kept"] == f"--keep-history {keep}: removed once checked"
        assert f"not kept (--keep-history {keep}" in page
        assert 'href="history.jsonl' not in page  # no link to a file that is gone
        with pytest.raises(RunError, match=rf"no history here.*not kept by the run.*{keep}"):
            check_run(run)


def test_a_bad_line_inside_a_compressed_file_is_an_error_not_a_torn_end(tmp_path: Path) -> None:
    # Only the last line can be torn: a damaged line with events after it
    # must stop the read with an error, in a zstd file as in a plain one.
    lines = [
        orjson.dumps({"time": i, "process": "p", "type": "invoke", "f": "post", "value": {}})
        + b"\n"
        for i in range(100)
    ]
    lines[50] = b'{"time": 50, "proc\n'
    merged = tmp_path / MERGED
    with open_merged_writer(tmp_path / "tmp", merged) as out:
        out.write(b"".join(lines))
    (tmp_path / "tmp").rename(merged)
    with pytest.raises(HistoryError, match=r"history\.jsonl\.zst:51: .*not the last line"):
        list(HistoryReader(merged))


def test_threads_sharing_a_writer_never_interleave_inside_the_stream(tmp_path: Path) -> None:
    # The runner's nemesis writer is shared with fault threads (a clock
    # fault's ticker): one compressor's stream must take one event at a time.
    path = part_path(tmp_path, "nemesis", 1)
    writer = HistoryWriter(path, "nemesis", 1)

    def burst(thread: int) -> None:
        for i in range(1500):
            writer.write("info", "tick", {"thread": thread, "i": i, "pad": "x" * (i % 300)})

    threads = [threading.Thread(target=burst, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    seen = sorted((e["value"]["thread"], e["value"]["i"]) for e in HistoryReader(path))
    assert seen == [(t, i) for t in range(6) for i in range(1500)]


def test_the_tail_forgets_a_part_once_a_newer_incarnation_appeared(tmp_path: Path) -> None:
    """A soak restarts a process every second: what the tail keeps per part
    (a zstd decoder, its offset) goes once the part's writer is gone."""
    folder = tmp_path / "history"
    tail = HistoryTail(folder)
    first = HistoryWriter(part_path(folder, "consumer-1", 1), "consumer-1", 1)
    first.write("invoke", "fetch", {})
    assert [e["incarnation"] for e in tail.poll()] == [1]
    first.write("ok", "fetch", {"messages": []})  # its last event, written before the kill
    second = HistoryWriter(part_path(folder, "consumer-1", 2), "consumer-1", 2)
    second.write("ok", "start", {})
    seen = tail.poll()
    assert [(e["incarnation"], e["type"]) for e in seen] == [(1, "ok"), (2, "ok")]
    assert [p.name for p in tail._blocks] == ["consumer-1.2.jsonl.zst"]
    assert list(tail._offsets) == [part_path(folder, "consumer-1", 2)]
    first.write("info", "fetch", {})  # never read again: its writer was superseded
    second.write("invoke", "post", {"id": "a"})
    assert [(e["incarnation"], e["f"]) for e in tail.poll()] == [(2, "post")]
    first.close()
    second.close()
    assert tail._paths == [part_path(folder, "consumer-1", 2)]  # the retired part is not visited


class _Clocks:
    """A monotonic clock and a wall clock the test moves by hand."""

    def __init__(self, wall: int) -> None:
        self.now = 0.0
        self.wall = wall


def _watch(folder: Path) -> tuple[PartsWatch, _Clocks]:
    """A watch of ``folder``, whose time is set ten seconds back (so that a
    part created now surely moves it, whatever the kernel's tick)."""
    old = time.time_ns() - 10 * 10**9
    os.utime(folder, ns=(old, old))
    clocks = _Clocks(old + 10 * PartsWatch.QUIET_NS)
    watch = PartsWatch(folder, clock=lambda: clocks.now, wall=lambda: clocks.wall)
    return watch, clocks


def test_a_quiet_unchanged_folder_is_not_listed_again(tmp_path: Path) -> None:
    """A soak's feed polls twenty times a second over a folder of thousands
    of parts: it lists them only when a part was created since."""
    folder = tmp_path / "history"
    _part(folder, "p", 1)
    watch, clocks = _watch(folder)
    assert watch.listing() == [part_path(folder, "p", 1).name]
    clocks.now += 0.5
    assert watch.listing() is None
    assert watch.listings == 1
    newer = _part(folder, "q", 1)  # the folder's time moves
    assert watch.listing() == sorted([part_path(folder, "p", 1).name, newer.name])
    assert watch.listing(force=True) is not None and watch.listings == 3


def test_a_stamp_from_the_last_tick_is_not_trusted(tmp_path: Path) -> None:
    """The kernel stamps a folder from a coarse clock: a part created in the
    tick of the stamp just read would leave it unchanged, so a folder
    changed less than QUIET_NS before a listing is listed again next time."""
    folder = tmp_path / "history"
    _part(folder, "p", 1)
    watch, clocks = _watch(folder)
    clocks.wall = folder.stat().st_mtime_ns + PartsWatch.QUIET_NS // 2
    watch.listing()
    assert watch.listing() is not None
    clocks.wall += PartsWatch.QUIET_NS
    assert watch.listing() is not None  # quiet now: trusted from here on
    assert watch.listing() is None


def test_an_unchanged_folder_is_still_listed_every_relist_interval(tmp_path: Path) -> None:
    """A file system that keeps no folder time, or a clock stepped back:
    a part is found at most RELIST_EVERY seconds late."""
    folder = tmp_path / "history"
    _part(folder, "p", 1)
    watch, clocks = _watch(folder)
    watch.listing()
    clocks.now += PartsWatch.RELIST_EVERY - 0.01
    assert watch.listing() is None
    clocks.now += 0.02
    assert watch.listing() is not None


def test_a_missing_folder_is_listed_each_time(tmp_path: Path) -> None:
    watch = PartsWatch(tmp_path / "not-yet")
    assert watch.listing() == [] and watch.listing() == []
    assert watch.listings == 2
