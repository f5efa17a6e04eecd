"""End to end: the quickstart passes on the reference bus, and the same
scenario catches a deliberately broken bus loaded through module:factory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories import events_of
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration


def _results(stdout: str) -> tuple[Path, dict]:
    line = next(x for x in stdout.splitlines() if x.startswith("report: "))
    report = Path(line.removeprefix("report: ").strip())
    return report.parent, json.loads((report.parent / "results.json").read_text())


def test_quickstart_is_valid(tmp_path: Path) -> None:
    proc = knell("run", str(REPO / "scenarios/quickstart.toml"), "--reports", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: VALID" in proc.stdout
    run_dir, results = _results(proc.stdout)
    assert results["valid"] is True
    for name in (
        "history.jsonl.zst", "schedule.json", "results.json", "report.md", "junit.xml",
        "series.json", "index.html", "timings.json",
    ):  # fmt: skip
        assert (run_dir / name).exists(), name
    assert (run_dir.parent / "latest").resolve() == run_dir.resolve()
    # `make run` prints the verdict, the page and the index of every run
    assert f"html: {run_dir / 'index.html'}" in proc.stdout
    assert f"index: {tmp_path / 'index.html'}" in proc.stdout
    assert (run_dir / "index.html").stat().st_size > 10_000
    assert "replay: knell run " in proc.stdout and "--schedule" in proc.stdout
    stats = results["stats"]
    assert stats["faults"].get("kill", 0) >= 2, stats
    assert stats["posts"]["ok"] > 100 and stats["handled"] > 100, stats
    checks = results["checks"]["checks"]
    assert checks["no-loss"]["valid"] is True
    # the re-check of a stored run gives the same verdict
    again = knell("check", str(run_dir))
    assert again.returncode == 0, again.stdout + again.stderr


def test_broken_bus_is_caught(tmp_path: Path) -> None:
    proc = knell(
        "run",
        str(REPO / "scenarios/quickstart.toml"),
        "--reports",
        str(tmp_path),
        "--bus",
        "broken_bus:open_stale_ack",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: INVALID" in proc.stdout
    _, results = _results(proc.stdout)
    cursor = results["checks"]["checks"]["no-cursor-regression"]
    assert cursor["valid"] is False
    assert any(a["kind"] == "cursor-regression" for a in cursor["anomalies"])
    witness = cursor["anomalies"][0]["witness"]
    assert {e["f"] for e in witness} <= {"ack", "cursor", "subscribe"}


def test_no_page_then_report_draws_it(tmp_path: Path) -> None:
    """``--no-page`` writes every verdict file but index.html, and says where
    the time went (timings.json); ``knell report RUN_DIR`` draws the page."""
    proc = knell(
        "run", str(REPO / "scenarios/quickstart.toml"), "--duration", "2s", "--no-page",
        "--reports", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir, results = _results(proc.stdout)
    assert results["valid"] is True and not (run_dir / "index.html").exists()
    assert "html: " not in proc.stdout
    phases = json.loads((run_dir / "timings.json").read_text())["phases"]
    for phase in ("setup", "start", "scenario", "final: stop", "final: drain", "check"):
        assert phases[phase] >= 0, phase
    assert "reports (no page)" in phases and "reports" not in phases
    assert 1.9 < phases["scenario"] < 4, phases
    # Readers stop while producers still post (a waiter is rung out of its
    # wait instead of sleeping out its timeout), producers after them.
    stops = [
        e["value"]["roles"]
        for e in events_of(run_dir)
        if e.get("f") == "stop" and e.get("process") == "nemesis"
    ]
    assert stops == [["consumer", "waiter", "joiner", "tailer"], ["producer"]], stops
    drawn = knell("report", str(run_dir), "--reports", str(tmp_path))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    assert (run_dir / "index.html").stat().st_size > 10_000
