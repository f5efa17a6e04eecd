"""``knell run --keep-history`` on a real run: what is left on disk, what
the page says, and what ``knell check`` says afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import knell

pytestmark = pytest.mark.integration


def test_a_run_that_keeps_no_history_says_so_everywhere(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--duration", "2s", "--keep-history", "none",
        "--reports", str(tmp_path), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = (tmp_path / "quickstart").glob("2*")
    assert not list(run.glob("history.jsonl*"))
    assert not list((run / "history").iterdir())  # the parts went after the merge
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["stats"]["events"] > 100
    assert results["history_kept"] == "--keep-history none: removed once checked"
    assert "not kept (--keep-history none" in (run / "index.html").read_text("utf-8")
    again = knell("check", str(run), timeout=60)
    assert again.returncode == 3 and "Traceback" not in again.stderr
    assert "no history here (not kept by the run: --keep-history none" in again.stderr


def test_a_bad_keep_history_value_is_refused(tmp_path: Path) -> None:
    proc = knell("run", "quickstart", "--keep-history", "some", "--reports", str(tmp_path))
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert "'some' is not one of 'all', 'failing', 'none'" in proc.stderr
