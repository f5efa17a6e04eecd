from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
