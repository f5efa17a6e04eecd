"""End to end: ``knell matrix`` passes the reference bus, catches mutants with
the check that names their failure mode, and fails when one escapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.conftest import knell

pytestmark = pytest.mark.integration

CAUGHT_ON_QUICKSTART = ("flood-on-join", "no-idempotency", "ack-beyond-head-accepted")


def test_matrix_catches_mutants_and_passes_the_reference(tmp_path: Path) -> None:
    args = ["matrix", "--duration", "5s", "-s", "quickstart", "--reports", str(tmp_path)]
    for name in CAUGHT_ON_QUICKSTART:
        args += ["-m", name]
    proc = knell(*args, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "matrix: PASS" in proc.stdout
    out = tmp_path / "matrix" / "latest"
    data = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
    rows = {row["bus"]: row for row in data["rows"]}
    assert rows["reference"]["status"] == "valid"
    assert data["mutants"] == {"caught": 3, "weak": 0, "total": 3, "not_run": 0}
    for name in CAUGHT_ON_QUICKSTART:
        row = rows[name]
        assert row["status"] == "caught", row
        assert row["caught_by"] == ["quickstart"]
        assert row["detected_s"] is not None and 0 < row["detected_s"] < 60
        (cell,) = row["cells"]
        run_dir = Path(cell["run_dir"])
        assert run_dir.is_relative_to(out.resolve() / "runs" / name)
        assert json.loads((run_dir / "results.json").read_text())["valid"] is False
        assert cell["replay"].startswith(f"knell run quickstart --seed {cell['seed']} ")
        assert f"--schedule {run_dir}/schedule.json" in cell["replay"]
        assert cell["replay"] in proc.stdout  # listed under the terminal table
    text = (out / "matrix.md").read_text(encoding="utf-8")
    assert "PASS" in text and "`no-idempotency`" in text
    page = (out / "matrix.html").read_text(encoding="utf-8")
    links = re.findall(r'class="pill [A-Z]+" href="([^"]+)"', page)
    assert len(links) == 4  # the reference and three mutants, one run each
    for link in links:
        # Every run went as expected: no page was drawn, the links open
        # report.md (knell report RUN_DIR draws a page when asked).
        assert link.endswith("/report.md") and (out / link).is_file(), link
        assert not (out / link).with_name("index.html").exists(), link


def test_matrix_fails_when_a_mutant_escapes(tmp_path: Path) -> None:
    # kill-consumers has no doorbell waiter, so nothing can ring on its own posts.
    proc = knell(
        "matrix", "--duration", "3s", "-s", "kill-consumers", "-m", "own-post-ring",
        "--no-reference", "--reports", str(tmp_path), timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "matrix: FAIL" in proc.stdout
    data = json.loads((tmp_path / "matrix" / "latest" / "matrix.json").read_text())
    assert data["ok"] is False
    assert data["rows"][0]["status"] == "missed"
    # The escaped mutant's run is the one a person opens: its page is drawn.
    for cell in data["rows"][0]["cells"]:
        assert (Path(cell["run_dir"]) / "index.html").is_file()


def test_matrix_usage_errors(tmp_path: Path) -> None:
    proc = knell("matrix", "--short", "-m", "no-such-mutant", "--reports", str(tmp_path))
    assert proc.returncode == 3
    assert "no-such-mutant" in proc.stderr
    listed = knell("matrix", "--list")
    assert listed.returncode == 0 and "stale-ack-regresses" in listed.stdout
