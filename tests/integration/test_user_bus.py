"""A user's own bus module, sitting where the user types ``knell run``,
drives the same scenario through ``--bus module:factory``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

MYBUS = '''
from knell.buses.sqlite import SqliteBus, open_sqlite

class MyBus(SqliteBus):
    """The reference bus under another name, as a user's bus would be."""

def make_bus(url):
    ref = open_sqlite(url)
    ref.close()
    return MyBus(ref.path, poll_interval=ref.poll_interval)
'''


def test_user_bus_from_working_directory(tmp_path: Path) -> None:
    (tmp_path / "mybus.py").write_text(MYBUS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "knell",
            "run",
            str(REPO / "scenarios/quickstart.toml"),
            "--duration",
            "3s",
            "--bus",
            "mybus:make_bus",
            "--reports",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: VALID" in proc.stdout
    scenario = next((tmp_path / "r" / "quickstart").glob("2*/scenario.json")).read_text()
    assert '"bus": "mybus:make_bus"' in scenario
