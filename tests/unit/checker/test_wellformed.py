"""``knell check`` on files knell could not have written: refused with the
file, line and field (exit 3), or "unknown" with the reason, never a
verdict against the bus with made-up witnesses; and every stored real
history still accepted."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from knell.checker.wellformed import WellFormed, nemesis_fs
from knell.cli import main
from knell.history import HistoryError, HistoryReader

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
RUNS = sorted(p for p in CORPUS.iterdir() if (p / "history.jsonl.xz").exists())
REAL = lzma.decompress((CORPUS / "reference--quickstart" / "history.jsonl.xz").read_bytes())
LINES = REAL.splitlines()


def _events() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LINES]


def _write(run: Path, events: list[dict[str, Any]], *, renumber: bool = True) -> Path:
    if renumber:
        for index, event in enumerate(events):
            event["index"] = index
    path = run / "history.jsonl"
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    return path


def _check(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["check", str(run)])
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def _first(events: list[dict[str, Any]], f: str, type_: str, process: str = "") -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e["f"] == f and e["type"] == type_ and e["process"].startswith(process)
    )


def _refused(code: int, output: str, *needles: str) -> None:
    assert code == 3, output
    assert "Traceback" not in output
    assert "not a history knell could have written" in output
    flat = " ".join(output.split())  # the terminal wraps long lines
    for needle in needles:
        assert needle in flat, output


def test_the_real_history_itself_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "history.jsonl").write_bytes(REAL)
    code, output = _check(tmp_path, capsys)
    assert code == 0, output


def test_a_line_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [*LINES[:101], LINES[100], *LINES[101:]]
    (tmp_path / "history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "history.jsonl:102:", "index 100 where 101 is due")


def test_the_file_concatenated_to_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "history.jsonl").write_bytes(REAL + REAL)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{len(LINES) + 1}:", f"index 0 where {len(LINES)} is due")


def test_lines_out_of_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = list(LINES)
    lines[200], lines[300] = lines[300], lines[200]
    (tmp_path / "history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "history.jsonl:201:", "index 300 where 200 is due")


def test_a_seq_that_is_a_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "post", "ok")
    events[at]["value"]["seq"] = str(events[at]["value"]["seq"])
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", "post ok: value.seq must be an integer")


def test_a_value_that_is_null(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "ack", "ok")
    events[at]["value"] = None
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", "'value' must be an object, got None")


def test_an_ok_without_its_invoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "ack", "invoke")
    del events[at]  # renumbered: only the pairing can tell
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", "ok of ack by", "with no invoke before it")


def test_an_invoke_while_the_last_one_is_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events()
    at = _first(events, "post", "ok")
    del events[at]
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "while its post of line", "has no completion")


def test_an_unknown_f(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "handle", "ok")
    events[at]["f"] = "handel"
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", "no worker writes an event 'handel'")


def test_an_unknown_nemesis_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "drain", "ok")
    events[at]["f"] = "drained"
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "the nemesis writes no event 'drained'")


def test_a_missing_incarnation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    del events[7]["incarnation"]
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "history.jsonl:8:", "'incarnation' must be a whole number, got None")


def test_a_completion_of_another_handle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    at = _first(events, "ack", "ok")
    events[at]["handle"] = "someone-else"
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, "whose handle is", "not 'someone-else'")


def test_time_going_backwards_in_a_process_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Well-formed, and a stepped-back wall clock could write it: but every
    # check orders by time, so nothing it finds could be trusted.
    events = _events()
    at = _first(events, "handle", "ok")
    events[at]["time"] -= 10**9
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    assert code == 2, output
    assert "time goes backwards in process" in " ".join(output.split())
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["checks"]["valid"] == "unknown"


def test_a_doubt_outranks_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    lost = next(e["value"]["id"] for e in events if e["f"] == "handle")
    events = [e for e in events if not (e["f"] == "handle" and e["value"]["id"] == lost)]
    for event in events:  # the post is never handled: no-loss finds it lost...
        if event["f"] == "fetch" and event["type"] == "ok":
            event["value"]["messages"] = [m for m in event["value"]["messages"] if m["id"] != lost]
    events[_first(events, "ack", "ok")]["time"] -= 10**9  # ...but the clock went back
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    assert code == 2, output
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["checks"]["checks"]["no-loss"]["valid"] is False  # still shown
    assert results["checks"]["valid"] == "unknown"


def test_a_history_without_indexes_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events()
    for event in events:
        del event["index"]
    _write(tmp_path, events, renumber=False)
    code, output = _check(tmp_path, capsys)
    assert code == 0, output


def test_an_index_in_a_history_without_them(tmp_path: Path) -> None:
    events = _events()
    for event in events[:-1]:
        del event["index"]
    path = _write(tmp_path, events, renumber=False)
    reader = HistoryReader(path)
    with pytest.raises(HistoryError, match="whose first event has none"):
        for _ in WellFormed(path, lambda: reader.line).events(reader):
            pass


def test_every_runner_event_is_known() -> None:
    assert {"begin", "drain", "kill", "restart", "pause", "resume", "store-crash"} <= nemesis_fs()


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_every_stored_real_history_is_one_knell_could_have_written(
    run: Path, tmp_path: Path
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    reader = HistoryReader(path)
    wellformed = WellFormed(path, lambda: reader.line)
    assert sum(1 for _ in wellformed.events(reader)) > 0
    assert wellformed.doubts == []


def test_an_event_without_the_handle_it_happened_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events()
    at = _first(events, "handle", "ok")
    del events[at]["handle"]
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", "a handle event without its 'handle'")


@pytest.mark.parametrize(
    ("f", "type_", "field", "needle"),
    [
        ("kill", "info", "target", "kill info: value.target must be a string, got None"),
        ("post", "invoke", "key", "post invoke: value.key must be a string, got None"),
    ],
)
def test_an_optional_field_is_absent_or_of_its_type_never_null(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], f: str, type_: str, field: str, needle: str
) -> None:
    # A kill whose target is null would open a fault window over nothing,
    # and every error inside it would be charged to the bus.
    events = _events()
    at = _first(events, f, type_)
    events[at]["value"][field] = None
    _write(tmp_path, events)
    code, output = _check(tmp_path, capsys)
    _refused(code, output, f"history.jsonl:{at + 1}:", needle)
