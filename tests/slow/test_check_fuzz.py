"""``knell check`` on random and mangled histories: never a traceback,
never "invalid" without a witness, never VALID for a history without a
completed post and a drain. (Hypothesis generates the histories; the
command runs in-process, exactly as the ``knell`` entry point does.)"""

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

pytestmark = pytest.mark.fuzz  # make fuzz runs it longer (KNELL_FUZZ_EXAMPLES)

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "reference--quickstart"
LINES = lzma.decompress((CORPUS / "history.jsonl.xz").read_bytes()).splitlines()[:400]

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


def _mangle(draw: Any) -> bytes:
    lines = list(LINES)
    for _ in range(draw(st.integers(0, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["drop", "swap", "delete-field", "retype", "truncate", "junk"]))
        if how == "drop":
            del lines[i]
        elif how == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif how in ("delete-field", "retype"):
            try:
                event = json.loads(lines[i])
            except ValueError:
                continue  # already mangled past reading
            if not isinstance(event, dict) or not event:
                continue
            key = draw(st.sampled_from(sorted(event)))
            if how == "delete-field":
                del event[key]
            else:
                event[key] = draw(json_values)
            lines[i] = json.dumps(event).encode()
        elif how == "truncate":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
        else:
            lines[i] = draw(st.binary(max_size=30))
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b""]))


@st.composite
def histories(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["random", "mangled", "binary"]))
    if kind == "random":
        return b"".join(json.dumps(e).encode() + b"\n" for e in draw(st.lists(events, max_size=30)))
    if kind == "binary":
        return draw(st.binary(max_size=200))
    return _mangle(draw)


def _check(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["check", str(run)])
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


@settings(
    max_examples=int(os.environ.get("KNELL_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=histories())
def test_knell_check_on_hostile_histories(
    data: bytes, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path_factory.mktemp("run")
    (run / "history.jsonl").write_bytes(data)
    code, output = _check(run, capsys)
    assert "Traceback" not in output
    assert code in (0, 1, 2, 3), output  # 4 would be a bug in knell
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
    (tmp_path / "history.jsonl").write_bytes(b"\n".join(LINES) + b"\n")  # no drain yet
    code, output = _check(tmp_path, capsys)
    assert code == 2 and "no final drain completed" in output
