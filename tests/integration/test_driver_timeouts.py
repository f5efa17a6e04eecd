"""``knell run`` with a driver whose call never returns in knell's own
process ends within the bound, as the driver's error (exit 3, naming the
call), and leaves no process behind. It used to hang forever. A ``close()``
that raises is the driver's error too (it was exit 4, a bug in knell)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

BOUND = 2.0
"""Seconds: ``$KNELL_DRIVER_TIMEOUT`` for these runs (the real bounds are a minute)."""


def _run(tmp_path: Path, driver: str) -> tuple[int, str, float, list[psutil.Process]]:
    """Run quickstart on ``driver``; its exit code, output, seconds taken and
    every process it started while it ran."""
    env = {**os.environ, "KNELL_DRIVER_TIMEOUT": f"{BOUND:g}"}
    env["PYTHONPATH"] = str(Path(__file__).parent)
    argv = [sys.executable, "-m", "knell", "run", str(REPO / "scenarios/quickstart.toml")]
    argv += ["--duration", "2s", "--bus", driver, "--reports", str(tmp_path / "r")]
    started = time.monotonic()
    runner = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: dict[int, psutil.Process] = {}
    try:
        while runner.poll() is None and time.monotonic() - started < 60:
            try:
                for child in psutil.Process(runner.pid).children(recursive=True):
                    seen.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.1)
        code = runner.wait(5)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.stdout is not None
    return code, runner.stdout.read(), time.monotonic() - started, list(seen.values())


@pytest.mark.parametrize(
    ("driver", "call"),
    [
        ("hanging_import:make_bus", "importing its module did not return"),
        ("hanging_buses:factory_sleeps", "its factory (opening the bus) did not return"),
        ("hanging_buses:close_hangs", "close() did not return"),
        ("hanging_buses:head_hangs", "head('events') did not return"),
        ("hanging_buses:close_raises", "close() raised RuntimeError: the connection pool"),
    ],
    ids=["import", "factory", "close", "drain-head", "close-raises"],
)
def test_a_hung_driver_call_ends_the_run_with_exit_3(
    tmp_path: Path, driver: str, call: str
) -> None:
    code, out, took, started = _run(tmp_path, driver)
    assert code == 3, out
    assert driver in out and call in out, out
    assert "did not return" not in call or f"within {BOUND:g} s" in out, out
    assert "Traceback" not in out
    assert took < 60, f"took {took:.1f} s"
    _, alive = psutil.wait_procs(started, timeout=5)
    assert not alive, f"left behind: {[p.pid for p in alive]}"
