from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from knell.checker import CheckResult, check_events
from knell.history import read_history
from knell.history_files import merged_path
from knell.runner import _check_config

REPO = Path(__file__).resolve().parents[2]


def knell(
    *args: str, cwd: Path = REPO, timeout: float = 180, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the real ``knell`` CLI in a child process."""
    full_env = {**os.environ, **env}
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).parent), full_env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "knell", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def only_results(reports: Path, scenario: str) -> dict[str, Any]:
    """``results.json`` of the one run of ``scenario`` under ``reports``."""
    (run,) = (reports / scenario).glob("2*")
    results: dict[str, Any] = json.loads((run / "results.json").read_text(encoding="utf-8"))
    return results


def recheck(reports: Path, scenario: str, check: str) -> CheckResult:
    """Check the one run of ``scenario`` under ``reports`` again, as the
    run did (its scenario's configuration, forgetting included), but
    storing every anomaly: a run stores only the first 50 of a check's, and
    the ones a test looks for may come later."""
    (run,) = (reports / scenario).glob("2*")
    config = replace(_check_config(run), max_anomalies=100_000)
    verdict = check_events(read_history(merged_path(run)), config)
    return verdict.checks[check]


@pytest.fixture
def run_knell():
    return knell


@pytest.fixture
def bridges(tmp_path: Path):
    """Start real bridge processes; all are killed, reaped and checked gone at the end."""
    from tests.integration.bridges import Bridges

    keeper = Bridges(tmp_path)
    try:
        yield keeper
    finally:
        keeper.close()
