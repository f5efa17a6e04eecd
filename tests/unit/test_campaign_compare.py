"""Comparing two merged campaigns on handcrafted ``campaign.json`` files:
new, fixed and still-failing findings per cell, failure rates, detection
times, cells only one side ran, and the refusals; and the detection time a
run's summary records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from knell.campaign.compare import CompareError, compare, load_result
from knell.campaign.summary import Finding, RunSummary, detection_seconds
from knell.checker import CheckResult, Verdict
from knell.checker.base import Anomaly
from knell.cli import main

LOST = Finding("no-loss", "lost", "aaaaaaaaaaaa")
REGRESS = Finding("no-cursor-regression", "cursor-regression", "bbbbbbbbbbbb")
DUP = Finding("no-duplicate-seq", "duplicate-seq", "cccccccccccc")
Run = tuple[str, str, list[Finding], float | None]
"""(scenario, bus, findings, detected): a run on SQLite; no finding: valid."""


def _result(path: Path, runs: list[Run], plan: str = "p1") -> Path:
    lines = []
    for k, (scenario, bus, found, detected) in enumerate(runs):
        verdict = "invalid" if found else "valid"
        line = RunSummary(plan, k, 100 + k, scenario, "sqlite", bus, "0.1.0", verdict)
        line.findings, line.detected = found, detected
        lines.append(line.to_json())
    path.mkdir(parents=True)
    body = {"campaign": "gate", "plan": plan, "verdict": "FAIL", "runs": lines}
    (path / "campaign.json").write_text(json.dumps(body), encoding="utf-8")
    return path


def test_new_fixed_and_still_failing_findings_per_cell(tmp_path: Path) -> None:
    a = _result(
        tmp_path / "a",
        [
            ("quickstart", "v1", [LOST], 4.0),
            ("quickstart", "v1", [], None),
            ("kill", "v1", [REGRESS], 1.0),
            ("kill", "v1", [REGRESS], 2.0),
        ],
    )
    b = _result(
        tmp_path / "b",
        [
            ("quickstart", "v1", [REGRESS], 0.5),
            ("quickstart", "v1", [DUP], None),
            ("kill", "v1", [REGRESS], 1.5),
            ("kill", "v1", [REGRESS], 1.55),
        ],
        plan="p2",
    )
    c = compare(load_result(a), load_result(b))
    status = {f.key[0]: f.status for f in c.findings}
    assert status == {
        "no-duplicate-seq": "new",
        "no-loss": "fixed",
        "no-cursor-regression": "still",
    }
    (still,) = c.of("still")
    quick, kill = ("quickstart", "sqlite", "v1"), ("kill", "sqlite", "v1")
    assert (still.a, still.b) == ({kill: 2}, {kill: 2, quick: 1})  # spread to another cell
    assert [x.cell for x in c.cells if x.rate_changed] == [quick]  # 1/2 -> 2/2
    # Medians: quickstart 4.0 -> 0.5 (listed); kill 1.5 -> 1.525 (within 0.1 s: not).
    assert [(x.cell, x.a_detected, x.b_detected) for x in c.cells if x.detection_changed] == [
        (quick, 4.0, 0.5)
    ]
    assert c.exit_code == 1  # B makes a finding A did not
    body = c.to_json()
    assert body["counts"] == {"new": 1, "fixed": 1, "still": 1}
    assert body["detection_recorded"] is True


def test_cells_only_one_side_ran_are_named_and_left_out(tmp_path: Path) -> None:
    a = _result(tmp_path / "a", [("quickstart", "v1", [LOST], None), ("kill", "v1", [], None)])
    b = _result(tmp_path / "b", [("quickstart", "v1", [LOST], None), ("new", "v1", [DUP], None)])
    c = compare(load_result(a), load_result(b))
    assert c.only_a == [("kill", "sqlite", "v1")] and c.only_b == [("new", "sqlite", "v1")]
    assert [f.status for f in c.findings] == ["still"]  # DUP is in a cell A never ran
    assert c.exit_code == 0 and not c.timed


def test_campaigns_without_a_common_cell_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _result(tmp_path / "a", [("quickstart", "v1", [], None)])
    b = _result(tmp_path / "b", [("quickstart", "v2", [], None)], plan="p2")
    with pytest.raises(SystemExit) as done:
        main(["campaign", "compare", str(a), str(b)])
    out = capsys.readouterr()
    assert done.value.code == 3 and "Traceback" not in out.err
    assert "have no cell (scenario, store, bus) in common" in out.err


def test_the_console_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _result(tmp_path / "a", [("quickstart", "v1", [LOST], None)])
    b = _result(tmp_path / "b", [("quickstart", "v1", [], None)])
    with pytest.raises(SystemExit) as done:
        main(["campaign", "compare", str(a), str(b)])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "FIXED  no-loss: lost [aaaaaaaaaaaa]  A: quickstart sqlite v1 x1  B: -" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("  quickstart"))
    assert row == ["quickstart", "sqlite", "v1", "1/1", "0/1", "-", "-", "rate", "changed"]
    assert "time to first anomaly, not recorded in either campaign's summaries" in out
    with pytest.raises(SystemExit):
        main(["campaign", "compare", str(a / "campaign.json"), str(b), "--json"])
    body = json.loads(capsys.readouterr().out)
    assert body["counts"]["fixed"] == 1 and body["rate_changed"][0]["a"]["failed"] == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not readable JSON"),
        ('{"campaign": "g", "plan": "p"}', "runs: missing"),
        ('{"campaign": "g", "plan": "p", "runs": [{"k": 0}]}', "runs[0]: not a run summary"),
        ('{"campaign": "g", "plan": "p", "runs": [{"a\\nb": 0}]}', "runs[0]: not a run summary"),
        (  # every field of the right type, or the cells cannot be ordered (found by the fuzzer)
            '{"campaign": "g", "plan": "p", "runs": [{"plan": "p", "k": 0, "seed": 0,'
            ' "scenario": "q", "store": "sqlite", "bus": null, "knell": "0", "verdict": "valid"}]}',
            "runs[0]: not a run summary: bus: expected a string, got None",
        ),
    ],
)
def test_a_damaged_result_is_named(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "campaign.json").write_text(text, encoding="utf-8")
    with pytest.raises(CompareError, match=re.escape(words)) as raised:
        load_result(tmp_path)
    assert str(tmp_path / "campaign.json") in str(raised.value)
    assert "\n" not in str(raised.value)  # one line, whatever the file holds


def _event(t: int, process: str = "consumer-1", f: str = "ack") -> dict[str, object]:
    return {"time": t, "process": process, "incarnation": 1, "pid": 1, "type": "ok", "f": f}


def test_detection_is_the_first_proven_anomaly_after_the_nemesis_begin(tmp_path: Path) -> None:
    s = 1_000_000_000
    history = tmp_path / "history.jsonl"
    events = [_event(5 * s, "producer-1", "post"), _event(7 * s, "nemesis", "begin")]
    history.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    late = Anomaly("lost", "m", [_event(8 * s), _event(12 * s)])  # proven at 12 s
    early = Anomaly("cursor-regression", "m", [_event(9 * s), _event(10 * s)])  # at 10 s
    verdict = Verdict(
        False,
        {
            "no-loss": CheckResult("no-loss", False, anomalies=[late]),
            "no-cursor-regression": CheckResult("no-cursor-regression", False, anomalies=[early]),
            "passing": CheckResult("passing", True, anomalies=[Anomaly("x", "m", [_event(s)])]),
        },
    )
    assert detection_seconds(verdict, history) == 3.0  # 10 s - the begin at 7 s
    assert detection_seconds(Verdict(True, {}), history) is None
    assert detection_seconds(verdict, tmp_path / "none.jsonl") is None  # no start to measure
