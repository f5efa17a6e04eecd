"""``knell run`` with a driver that calls ``sys.exit(0)`` in knell's own
process: exit 3 naming the driver, never exit 0 without a verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

# Exits in every factory call.
AT_SETUP = """
import sys

def make_bus(url):
    sys.exit(0)
"""

# The reference bus for the workers and the runner's setup; the runner's
# second call (the drain's read of the true head) exits, in the runner's
# process only (a marker file holds the pid of the first caller).
AT_DRAIN = """
import os, sys
from pathlib import Path
from knell.buses.sqlite import open_sqlite

MARK = Path(__file__).with_name("first-caller.pid")

def make_bus(url):
    if not MARK.exists():
        MARK.write_text(str(os.getpid()))
    elif MARK.read_text() == str(os.getpid()):
        sys.exit(0)
    return open_sqlite(url)
"""


def _run(tmp_path: Path, module: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "exiting_bus.py").write_text(module, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "knell",
            "run",
            str(REPO / "scenarios/quickstart.toml"),
            "--duration",
            "2s",
            "--bus",
            "exiting_bus:make_bus",
            "--reports",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(("module", "call"), [(AT_SETUP, "factory"), (AT_DRAIN, "factory")])
def test_a_driver_calling_sys_exit_is_exit_3(tmp_path: Path, module: str, call: str) -> None:
    proc = _run(tmp_path, module)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "exiting_bus:make_bus" in out and "sys.exit(0)" in out and call in out, out
    assert "Traceback" not in out
