"""The owner registry: what a dead runner left behind is reaped; what a
live runner owns is never touched."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from knell.owners import Owner, reap

pytestmark = pytest.mark.integration

RUNNER = """
import subprocess, sys, time
from pathlib import Path
from knell.owners import Owner
owner = Owner(states=Path(sys.argv[1]))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
owner.process(child.pid, "sleeper")
print(child.pid, flush=True)
time.sleep(120)
"""


def _start_runner(states: Path) -> tuple[subprocess.Popen[str], int]:
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(states)], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    child = int(runner.stdout.readline())
    return runner, child


def test_reap_removes_what_a_killed_runner_left_and_spares_a_live_one(tmp_path: Path) -> None:
    dead_runner, orphan = _start_runner(tmp_path)
    live_runner, kept = _start_runner(tmp_path)
    try:
        dead_runner.kill()  # SIGKILL: it cannot clean up
        dead_runner.wait()
        assert psutil.pid_exists(orphan)  # not leashed: only the registry knows it
        removed = reap(tmp_path)
        assert removed == [f"process sleeper (pid {orphan})"]
        deadline = time.monotonic() + 5
        while psutil.pid_exists(orphan) and time.monotonic() < deadline:
            try:
                if psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        assert not psutil.pid_exists(orphan) or (
            psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
        )
        assert psutil.pid_exists(kept)  # the live runner's child is untouched
        assert len(list(tmp_path.glob("runner-*.jsonl"))) == 1
        assert reap(tmp_path) == []
    finally:
        live_runner.kill()
        live_runner.wait()
        again = reap(tmp_path)
    assert again == [f"process sleeper (pid {kept})"], again


def test_a_reused_pid_is_never_killed(tmp_path: Path) -> None:
    owner = Owner(states=tmp_path)
    me = os.getpid()
    record = {"kind": "process", "pid": me, "started": 1.0, "name": "impostor"}
    with open(owner.path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    fake = tmp_path / "runner-1-dead.jsonl"
    fake.write_text(
        json.dumps({"kind": "runner", "pid": 999_999_999, "started": 1.0})
        + "\n"
        + json.dumps(record)
        + "\n",
        encoding="utf-8",
    )
    assert reap(tmp_path) == []  # pid `me` started later than recorded: not that process
    assert not fake.exists()
    assert owner.path.exists()
    owner.close()
    assert not owner.path.exists()


def test_a_run_records_its_workers(tmp_path: Path) -> None:
    from knell.runner import run_scenario
    from knell.scenario import load_scenario

    os.environ["KNELL_STATE_DIR"] = str(tmp_path / "state")
    try:
        scenario = load_scenario(Path("scenarios/quickstart.toml"), duration=1.5)
        outcome = run_scenario(scenario, reports=tmp_path / "reports")
    finally:
        del os.environ["KNELL_STATE_DIR"]
    lines = (outcome.run_dir / "owners.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["kind"] == "runner" and records[0]["pid"] == os.getpid()
    names = {r["name"] for r in records if r["kind"] == "process"}
    assert {"producer-1.1", "consumer-1.1", "waiter-1.1", "joiner-1.1"} <= names
    assert not list((tmp_path / "state").glob("runner-*.jsonl"))  # cleaned up after itself


PROXY_RUNNER = """
import sys, time
from pathlib import Path
from knell.owners import Owner
from knell.nemesis.toxiproxy import start_local_proxy
owner = Owner(states=Path(sys.argv[1]))
handle = start_local_proxy(owner=owner)
print(handle.pid, handle._work, flush=True)
time.sleep(120)
"""


def test_reap_removes_a_killed_runners_proxy_and_its_folder(tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", PROXY_RUNNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    pid_text, work_text = runner.stdout.readline().split(maxsplit=1)
    work = Path(work_text.strip())
    assert work.name.startswith("knell-proxy-") and work.is_dir()
    runner.kill()  # SIGKILL: neither the proxy's folder nor (until its leash fires) the proxy goes
    runner.wait()
    reap(tmp_path)
    assert not work.exists()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(int(pid_text)) and time.monotonic() < deadline:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(int(pid_text)).status() == psutil.STATUS_ZOMBIE:
                break
        time.sleep(0.05)
    assert not psutil.pid_exists(int(pid_text)) or (
        psutil.Process(int(pid_text)).status() == psutil.STATUS_ZOMBIE
    )


def test_a_recorded_folder_outside_the_known_prefixes_is_never_removed(tmp_path: Path) -> None:
    import tempfile

    from knell.stores import tempdirs

    stranger = Path(tempfile.mkdtemp(prefix="not-knell-"))
    nested = tmp_path / "knell-proxy-x"
    nested.mkdir()
    try:
        assert tempdirs.remove({"id": str(stranger)}) is False
        assert tempdirs.remove({"id": str(nested)}) is False  # not directly in the temp folder
        assert stranger.is_dir() and nested.is_dir()
    finally:
        stranger.rmdir()
