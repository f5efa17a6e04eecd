"""The runner SIGKILLed mid-run takes every worker with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration


@pytest.mark.skipif(sys.platform == "win32", reason="signals to the runner are POSIX-only here")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_runner_killed_leaves_no_worker(tmp_path: Path, sig: signal.Signals) -> None:
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell",
            "run",
            str(REPO / "scenarios/quickstart.toml"),
            "--reports",
            str(tmp_path),
            "--duration",
            "30s",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline:
            workers = psutil.Process(runner.pid).children(recursive=True)
            if len(workers) >= 6:
                break
            time.sleep(0.1)
        assert len(workers) >= 6, "workers did not start"
        time.sleep(1.5)  # let the schedule kill and pause something
        workers = psutil.Process(runner.pid).children(recursive=True)
        if sys.platform.startswith("linux"):  # the zygote and the workers it forked go too
            assert any("knell.platform.forkserver" in _cmdline(p) for p in workers), workers
        os.kill(runner.pid, sig)
        code = runner.wait(20)
        if sig == signal.SIGTERM:
            assert code == 130  # unwound like Ctrl-C: workers killed and reaped first
        _, alive = psutil.wait_procs(workers, timeout=5)
        assert not alive, f"orphans left: {[p.pid for p in alive]}"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def test_bad_scenario_exits_3_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ndescription = "d"\nduration = "-2s"\n[[process]]\nrole = "eater"\n')
    proc = knell("run", str(bad), timeout=60)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr and "duration" in proc.stderr and "'eater'" in proc.stderr


def test_check_without_history_is_a_clear_error(tmp_path: Path) -> None:
    proc = knell("check", str(tmp_path), timeout=60)
    assert proc.returncode == 3 and "no history" in proc.stderr and "Traceback" not in proc.stderr


def test_check_with_torn_middle_line_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "p.1.jsonl").write_text(
        '{"time": 1, "type": "ok", "f": "start", "process": "p"}\n'
        '{"time": 2, "ty\n'
        '{"time": 3, "type": "ok", "f": "stop", "process": "p"}\n'
    )
    proc = knell("check", str(tmp_path), timeout=60)
    assert proc.returncode == 3 and "p.1.jsonl:2" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history"]  # nothing half-written


def test_bad_schedule_file_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "schedule.json"
    bogus.write_text('{"seed": 1}')
    proc = knell("run", "quickstart", "--schedule", str(bogus), timeout=60)
    assert proc.returncode == 3 and str(bogus) in proc.stderr and "Traceback" not in proc.stderr


def test_schedule_naming_unknown_process_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "schedule.json"
    plan.write_text(
        '{"seed": 1, "duration": 5, "actions": '
        '[{"at": 1, "op": "kill", "target": "reviewer-9", "fault": 0}]}'
    )
    proc = knell(
        "run", "quickstart", "--schedule", str(plan), "--reports", str(tmp_path), timeout=60
    )
    assert proc.returncode == 3 and "reviewer-9" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "quickstart").exists()  # nothing half-written


def test_zero_duration_flag_names_the_flag() -> None:
    for command in ("run", "matrix"):
        args = [command, "quickstart"] if command == "run" else [command, "-s", "quickstart"]
        proc = knell(*args, "--duration", "0s", timeout=60)
        assert proc.returncode == 3, (command, proc.stderr)
        assert "--duration: must be positive, got '0s'" in proc.stderr
        assert "Traceback" not in proc.stderr
