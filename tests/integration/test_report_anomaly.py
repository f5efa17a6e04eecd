"""The report of a mutant-bus run shows the anomaly where and when it happened.

``stale-ack-regresses`` lets a stale ack move a cursor back. On a scenario
that kills one twin consumer every 0.4 s and pauses another from the first
moment, the report must show each anomaly with its witness events on its
timeline at their times, and name exactly the fault windows open at its
onset and those that ended shortly before, all checked against the run's
``results.json`` and ``schedule.json``. The run also shows the live
progress as plain lines (CI is set) and ends with the replay line and the
index; ``knell report`` draws the same page again from the files.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

SCENARIO = REPO / "tests" / "fixtures" / "scenarios" / "kill-twins.toml"
BUS = "knell.buses.mutants:stale_ack_regresses"
RECENT_NS = 5 * 10**9


@pytest.fixture(scope="module")
def mutant_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    reports = tmp_path_factory.mktemp("reports")
    proc = knell("run", str(SCENARIO), "--bus", BUS, "--reports", str(reports), CI="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("html: "))
    return reports, Path(line.removeprefix("html: ").strip()).parent, proc.stdout


def _sections(page: str) -> dict[int, str]:
    out = {}
    for match in re.finditer(r'<section class="anomaly" id="anomaly-(\d+)"', page):
        start = match.start()
        out[int(match.group(1))] = page[start : page.index("</section>", start)]
    return out


def _until(w: dict[str, Any]) -> float:
    return float("inf") if w["end"] is None else w["end"] + w["grace_s"] * 1e9


def test_the_run_says_what_happens_and_how_to_replay_it(mutant_run: tuple[Path, Path, str]) -> None:
    reports, run, stdout = mutant_run
    assert re.search(r"\[ *\d+\.\d+ s\] fault \d+: kill consumer-1 \(down\)", stdout)
    assert re.search(r"\[ *\d+\.\d+ s\] fault \d+: healed: restart consumer-1", stdout)
    assert f"index: {reports / 'index.html'}" in stdout
    replay = next(x for x in stdout.splitlines() if x.startswith("replay: "))
    assert f"--seed 3 --duration 3s --bus {BUS} --schedule {run}/schedule.json" in replay
    index = (reports / "index.html").read_text(encoding="utf-8")
    assert f'href="./kill-twins/{run.name}/index.html"' in index


def test_anomalies_their_witnesses_and_their_fault_windows(
    mutant_run: tuple[Path, Path, str],
) -> None:
    _, run, _ = mutant_run
    results = json.loads((run / "results.json").read_text())
    schedule = json.loads((run / "schedule.json").read_text())
    page = (run / "index.html").read_text(encoding="utf-8")
    t0 = results["time"]["first"]
    applies = {a["fault"]: a for a in schedule["actions"] if a["step"] == "apply"}
    stored = results["checks"]["checks"]["no-cursor-regression"]["anomalies"]
    sections = _sections(page)
    assert sections and min(sections) == 1 and max(sections) <= len(stored)
    named_any = False
    for number, section in sections.items():
        anomaly = stored[number - 1]
        assert f'data-check="no-cursor-regression" data-kind="{anomaly["kind"]}"' in section
        # every witness event is on the timeline, at its time, in time order
        svg = section[section.index("<svg") : section.index("</svg>")]
        xs = []
        for event in anomaly["witness"]:
            t = round((event["time"] - t0) / 1e9, 6)
            found = re.search(
                rf'data-index="{event["index"]}" data-t="{re.escape(str(t))}" data-x="([\d.]+)"',
                svg,
            )
            assert found, (number, event["index"], t)
            xs.append((event["time"], float(found.group(1))))
        assert [x for _, x in sorted(xs)] == sorted(x for _, x in xs)
        # the windows open at its onset, and those that ended shortly before
        onset = min(e["time"] for e in anomaly["witness"])
        open_at = [w for w in results["windows"] if w["start"] <= onset <= _until(w)]
        before = sorted(
            (w for w in results["windows"] if _until(w) < onset and onset - _until(w) <= RECENT_NS),
            key=_until,
            reverse=True,
        )[:3]
        opened = section[section.index("open-at-onset") : section.index('class="recent"')]
        recent = section[
            section.index('class="recent"') : section.index(
                "</div>", section.index('class="recent"')
            )
        ]
        assert re.findall(r'data-fault="(\d+)"', opened) == [str(w["fault"]) for w in open_at]
        assert re.findall(r'data-fault="(\d+)"', recent) == [str(w["fault"]) for w in before]
        for w in open_at + before:
            action = applies[w["fault"]]  # the window is a fault the schedule planned
            assert action["kind"] == w["kind"] and action["target"] in w["radius"]["processes"]
            assert f"{w['kind']} {action['target']} (fault {w['fault']}," in section
            named_any = True
        if not open_at:
            assert "none" in opened
    assert named_any, "no anomaly of this run happened inside or after a fault window"


def test_knell_report_draws_it_again_from_the_files(
    mutant_run: tuple[Path, Path, str], tmp_path: Path
) -> None:
    _, run, _ = mutant_run
    copy = tmp_path / "copied-from-ci"
    shutil.copytree(run, copy, symlinks=True)
    (copy / "series.json").unlink()
    (copy / "index.html").unlink()
    proc = knell("report", str(copy), "--reports", str(tmp_path / "nowhere"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"html: {copy / 'index.html'}" in proc.stdout
    assert "replay: knell run kill-twins --seed 3" in proc.stdout
    assert "index:" not in proc.stdout  # the copy is not inside that reports folder
    again = (copy / "index.html").read_text(encoding="utf-8")
    original = (run / "index.html").read_text(encoding="utf-8")
    assert sorted(_sections(again)) == sorted(_sections(original))
    assert (copy / "series.json").exists()
    bad = knell("report", str(tmp_path / "no-such-run"))
    assert bad.returncode == 3 and "not a run directory" in bad.stderr
