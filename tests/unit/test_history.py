"""History files: kill-safe writes, tolerant reads, stable merge."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from knell.history import HistoryError, HistoryReader, HistoryWriter, merge_histories, read_history


def test_write_read_round_trip(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path / "p.1.jsonl", "p", 1)
    w.write("invoke", "ack", {"up_to": 3}, handle="h", channel="c")
    w.write("ok", "ack", {"cursor": 3}, handle="h", channel="c")
    w.close()
    events = list(HistoryReader(tmp_path / "p.1.jsonl"))
    assert [e["type"] for e in events] == ["invoke", "ok"]
    assert events[0]["handle"] == "h" and events[1]["value"] == {"cursor": 3}


def test_torn_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "p.1.jsonl"
    w = HistoryWriter(path, "p", 1)
    w.write("ok", "start", {})
    w.close()
    with open(path, "ab") as fh:
        fh.write(b'{"time": 12, "proc')
    reader = HistoryReader(path)
    assert len(list(reader)) == 1
    assert reader.torn and "p.1.jsonl:2" in reader.torn[0]


def test_torn_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.1.jsonl"
    ok = b'{"time": %d, "type": "ok", "process": "p", "f": "x"}\n'
    path.write_bytes(ok % 1 + b'{"time": 2, "ty\n' + ok % 3)
    with pytest.raises(HistoryError, match=r"p\.1\.jsonl:2: .*not the last line"):
        list(HistoryReader(path))


def test_merge_orders_by_time_and_keeps_file_order(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_bytes(
        b"".join(
            orjson.dumps({"time": t, "type": "ok", "process": "a", "f": "x", "n": f"a{t}"}) + b"\n"
            for t in (1, 3, 3, 7)
        )
    )
    b.write_bytes(
        b"".join(
            orjson.dumps({"time": t, "type": "ok", "process": "b", "f": "x", "n": f"b{t}"}) + b"\n"
            for t in (2, 3, 8)
        )
    )
    out = tmp_path / "history.jsonl"
    count, torn = merge_histories([b, a], out)
    events = list(read_history(out))
    assert count == 7 and not torn
    assert [e["n"] for e in events] == ["a1", "b2", "a3", "a3", "b3", "a7", "b8"]
    assert [e["index"] for e in events] == list(range(7))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"process": "p", "type": "ok", "f": "x"}', "'time' is missing or null"),
        (b'{"time": null, "process": "p", "type": "ok", "f": "x"}', "'time' is missing or null"),
        (b'{"time": "abc", "process": "p", "type": "ok", "f": "x"}', "'time' must be an integer"),
        (b'{"time": 1.5, "process": "p", "type": "ok", "f": "x"}', "'time' must be an integer"),
        (b'{"time": 1, "type": "ok", "f": "x"}', "'process' is missing or null"),
        (b'{"time": 1, "process": 7, "type": "ok", "f": "x"}', "'process' must be a string"),
        (b'{"time": 1, "process": "p", "f": "x"}', "'type' is missing or null"),
        (b'{"time": 1, "process": "p", "type": "done", "f": "x"}', "'type' must be one of"),
        (b'{"time": 1, "process": "p", "type": "ok"}', "'f' is missing or null"),
        (b"[1, 2, 3]", "a JSON list, not an object"),
    ],
)
def test_events_missing_required_fields_name_file_and_line(
    tmp_path: Path, line: bytes, message: str
) -> None:
    path = tmp_path / "p.1.jsonl"
    path.write_bytes(b'{"time": 1, "process": "p", "type": "ok", "f": "start"}\n' + line + b"\n")
    with pytest.raises(HistoryError) as caught:
        list(HistoryReader(path))
    assert f"{path}:2: " in str(caught.value) and message in str(caught.value)


def test_a_long_unterminated_last_line_is_torn_not_an_event(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(
        b'{"time": 1, "process": "p", "type": "ok", "f": "start"}\n' + b"x" * 5_000_000
    )
    reader = HistoryReader(path)
    assert len(list(reader)) == 1
    assert len(reader.torn) == 1 and "history.jsonl:2" in reader.torn[0]
