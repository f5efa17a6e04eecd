"""``knell check`` on random and mangled histories.

Two properties, over Hypothesis-generated files, run in-process exactly as
the ``knell`` entry point runs:

* **never INVALID on a file knell could not have written**: a real history
  (a complete VALID run, and the start of one) mangled as a damaged or
  hand-edited file would be (a line twice, the file concatenated to
  itself, lines moved or shuffled, fields retyped or dropped, lines
  dropped or truncated; with its indexes, or stripped of them as another
  harness would write it) is refused (exit 3) or judged "unknown", never
  turned into a verdict against the bus with made-up witnesses;
* **never a traceback, exit code 0-3** (4 would be a bug in knell) on
  anything, including random events and bytes; an INVALID verdict on a
  random file comes with witnesses, and a VALID one only from a history
  with a completed post and a drain.

Cases per target: ``KNELL_FUZZ_EXAMPLES`` (default short, for ``make
test``; ``make fuzz`` runs more).
"""

from __future__ import annotations

import json
import lzma
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knell.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
START = lzma.decompress(
    (CORPUS / "reference--quickstart" / "history.jsonl.xz").read_bytes()
).splitlines()[:400]
WHOLE = lzma.decompress(
    (CORPUS / "reference--pause-waiters" / "history.jsonl.xz").read_bytes()
).splitlines()
EXAMPLES = int(os.environ.get("KNELL_FUZZ_EXAMPLES", "60"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
FS = ["post", "subscribe", "fetch", "handle", "ack", "cursor", "head", "arm", "wake", "drain",
      "kill", "pause", "resume", "restart", "start", "stop", "begin"]  # fmt: skip
events = st.fixed_dictionaries(
    {
        "time": st.integers(min_value=0, max_value=2**63 - 1) | json_values,
        "process": st.sampled_from(["p1", "c1", "nemesis", "w1"]) | json_values,
        "type": st.sampled_from(["invoke", "ok", "fail", "info"]) | json_values,
        "f": st.sampled_from(FS) | json_values,
    },
    optional={
        "incarnation": st.integers(0, 3),
        "handle": st.sampled_from(["worker", "w"]) | json_values,
        "channel": st.sampled_from(["events"]) | json_values,
        "value": json_values,
    },
)
MUTATIONS = ["drop", "duplicate", "concat", "swap", "shuffle", "delete-field", "retype",
             "retype-value", "truncate", "junk"]  # fmt: skip


def _fields(draw: Any, line: bytes) -> tuple[dict[str, Any], list[str]] | None:
    """The event on ``line`` and a path to one of its fields (in ``value``
    for ``retype-value``), or ``None`` when the line is no longer an event."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or not event:
        return None
    return event, [draw(st.sampled_from(sorted(event)))]


class Mangled:
    """A real history and the same file mangled; shown as the steps taken
    (the files themselves are hundreds of kilobytes)."""

    def __init__(self, original: bytes, data: bytes, steps: list[str]) -> None:
        self.original = original
        self.data = data
        self.steps = steps

    def __repr__(self) -> str:
        return f"Mangled({'; '.join(self.steps)})"


def _kind(value: Any) -> str:
    """A JSON value's type (an integer is a number where a number is due)."""
    return "bool" if isinstance(value, bool) else type(value).__name__


def _retyped(old: Any, new: Any) -> bool:
    """``new`` is of another JSON type than ``old``: a retype, where a new
    value of the same type may be a history another run could have written
    (a bus may well answer seq 0)."""
    return _kind(new) != _kind(old) and not (_kind(old) == "float" and _kind(new) == "int")


OPTIONAL = {"pid", "key", "cursors", "refused", "knell_side", "probe"}
"""Fields the format lets an event leave out: deleting one leaves a history
knell could have written (every other deletion must be caught)."""


def _mangle(draw: Any, lines: list[bytes], steps: list[str], indexed: bool) -> list[bytes]:
    # Without indexes a dropped line can go unseen: a single event gone
    # (a handle, say) leaves a history another harness could have written.
    mutations = MUTATIONS if indexed else [m for m in MUTATIONS if m != "drop"]
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(mutations))
        steps.append(f"{how} at line {i + 1}: {lines[i][:300]!r}")
        if how == "drop":
            del lines[i]
        elif how == "duplicate":
            lines.insert(i, lines[i])
        elif how == "concat":
            lines = lines + lines
        elif how == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "shuffle":
            j = min(len(lines), i + draw(st.integers(2, 40)))
            lines[i:j] = draw(st.permutations(lines[i:j]))
        elif how in ("delete-field", "retype", "retype-value"):
            found = _fields(draw, lines[i])
            if found is None:
                continue
            event, _ = found
            target = event
            if how == "retype-value":
                if not isinstance(event.get("value"), dict) or not event["value"]:
                    continue
                target = event["value"]
            if how == "delete-field":
                keys = [k for k in target if k not in OPTIONAL]
                if event.get("process") == "nemesis" and target is not event:
                    keys = []  # what the nemesis records beside its envelope is optional
                if not keys:
                    continue
                key = draw(st.sampled_from(sorted(keys)))
                del target[key]
            else:
                key = draw(st.sampled_from(sorted(target)))
                before = target[key]
                target[key] = draw(json_values.filter(lambda v, b=before: _retyped(b, v)))
            steps.append(f"  {key!r} -> {target.get(key, '(deleted)')!r}")
            lines[i] = json.dumps(event).encode()
        elif how == "truncate":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
        else:
            lines[i] = draw(st.binary(max_size=30))
    return lines


def _without_indexes(lines: list[bytes]) -> list[bytes]:
    out = []
    for line in lines:
        event = json.loads(line)
        del event["index"]
        out.append(json.dumps(event).encode())
    return out


@st.composite
def mangled(draw: Any) -> Mangled:
    """A real history and the same history mangled, with or without indexes."""
    whole = draw(st.booleans())
    lines = list(WHOLE if whole else START)
    steps = ["the whole run" if whole else "the start of a run"]
    indexed = draw(st.booleans())
    if not indexed:
        lines = _without_indexes(lines)
        steps.append("indexes stripped")
    original = b"\n".join(lines) + b"\n"
    mangled = _mangle(draw, list(lines), steps, indexed)
    data = b"\n".join(mangled) + draw(st.sampled_from([b"\n", b""]))
    return Mangled(original, data, steps)


@st.composite
def hostile(draw: Any) -> bytes:
    if draw(st.booleans()):
        return b"".join(json.dumps(e).encode() + b"\n" for e in draw(st.lists(events, max_size=30)))
    return draw(st.binary(max_size=200))


def _check(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["check", str(run)])
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def _a_prefix(original: bytes, data: bytes) -> bool:
    """``data`` is whole lines from the start of ``original``: a history
    knell could have written so far (a run still going)."""
    return original.startswith(data) and (not data or data.endswith(b"\n") or data == original)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.fuzz
@FUZZ
@given(case=mangled())
def test_knell_check_never_blames_the_bus_for_a_mangled_history(
    case: Mangled,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    original, data = case.original, case.data
    run = tmp_path_factory.mktemp("run")
    (run / "history.jsonl").write_bytes(data)
    code, output = _check(run, capsys)
    assert "Traceback" not in output
    assert code in (0, 1, 2, 3), output  # 4 would be a bug in knell
    if data == original or _a_prefix(original, data):
        return  # still a history knell could have written
    assert code != 1, output[-3000:]


@pytest.mark.fuzz
@FUZZ
@given(data=hostile())
def test_knell_check_on_random_histories(
    data: bytes, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path_factory.mktemp("run")
    (run / "history.jsonl").write_bytes(data)
    code, output = _check(run, capsys)
    assert "Traceback" not in output
    assert code in (0, 1, 2, 3), output
    if code == 3:
        return  # refused as input, with a message naming it
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    checks = results["checks"]["checks"]
    if code == 1:
        invalid = [c for c in checks.values() if c["valid"] is False]
        assert invalid and all(
            c["anomalies"] and all(a["witness"] for a in c["anomalies"]) for c in invalid
        )
    if code == 0:
        assert checks["evidence"]["counts"]["posts-ok"] > 0
        assert checks["evidence"]["counts"]["drains-ok"] > 0


def test_the_unmangled_start_of_a_real_history_is_not_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "history.jsonl").write_bytes(b"\n".join(START) + b"\n")  # no drain yet
    code, output = _check(tmp_path, capsys)
    assert code == 2 and "no final drain completed" in output


def test_the_whole_real_history_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "history.jsonl").write_bytes(b"\n".join(WHOLE) + b"\n")
    code, output = _check(tmp_path, capsys)
    assert code == 0, output
