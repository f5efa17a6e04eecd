"""Stores on the faulty disk (``[store] disk = "faulty"``), run by the real
CLI: the store's files go through ``knell fs`` into the run's
``store-disk/`` while knell's own files stay off it, a private Redis and a
private Postgres run on it, and nothing is left mounted after a run, a
failed start, or a SIGKILLed runner followed by ``knell reap``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require_server
from tests.integration.conftest import REPO, knell
from tests.integration.fs.conftest import require_fuse

QUICK = """
name = "{name}"
description = "a {kind} store on the faulty disk"
duration = "{duration}"
seed = 7
poll_interval = "50ms"

[store]
kind = "{kind}"
disk = "faulty"
{extra}

[[process]]
role = "producer"
count = 2
rate = 50
idempotency = true
retry_every = 25

[[process]]
role = "consumer"
handle = "worker"
count = 2
batch = 20
ack_probe_every = 10

[[nemesis]]
fault = "kill"
target = "consumer"
every = "1s"
restart_after = "100ms"
start = "0.5s"
"""


def _scenario(tmp: Path, kind: str, duration: str = "3s", extra: str = "") -> Path:
    path = tmp / f"{kind}-disk.toml"
    text = QUICK.format(name=f"{kind}-disk", duration=duration, kind=kind, extra=extra)
    path.write_text(text, encoding="utf-8")
    return path


def _knell_mounts() -> list[str]:
    """Every knell fs mount in this machine's mount table (also dead ones)."""
    lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if "knell-fs:" in line]


def _ours(reports: Path) -> list[str]:
    return [line for line in _knell_mounts() if str(reports) in line]


def _run_dir(reports: Path, name: str) -> Path:
    (found,) = [p for p in (reports / name).iterdir() if p.is_dir() and p.name != "latest"]
    return found


def _require(kind: str) -> None:
    require_fuse()
    if kind != "sqlite":
        from knell.stores import registry

        reason = registry.get(kind).unavailable()
        require_server(kind, reason is None, reason or "")


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_a_store_on_the_faulty_disk_runs_valid_and_keeps_knells_files_off_it(
    tmp_path: Path, kind: str
) -> None:
    _require(kind)
    reports = tmp_path / "reports"
    done = knell("run", str(_scenario(tmp_path, kind)), "--reports", str(reports))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VALID" in done.stdout
    run = _run_dir(reports, f"{kind}-disk")
    backing = run / "store-disk"
    stored = {p.relative_to(backing).as_posix() for p in backing.rglob("*") if p.is_file()}
    expected = {"sqlite": "bus.db", "redis": "redis/", "postgres": "pgdata/PG_VERSION"}[kind]
    assert any(name.startswith(expected) for name in stored), sorted(stored)[:20]
    assert not any(".jsonl" in name for name in stored)  # no history on the disk
    assert (run / "history.jsonl.zst").exists()
    described = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    assert described["store"]["disk"] == "faulty"
    assert _ours(reports) == []
    records = [json.loads(line) for line in (run / "owners.jsonl").read_text().splitlines()]
    mounts = [r["id"] for r in records if r["kind"] == "fs-mount"]
    assert len(mounts) == 1 and not Path(mounts[0]).parent.exists()


def test_a_store_that_fails_to_start_leaves_nothing_mounted(tmp_path: Path) -> None:
    _require("redis")
    reports = tmp_path / "reports"
    # Redis refuses an unknown setting and exits: after the disk was mounted.
    bad = _scenario(tmp_path, "redis", extra='settings = { "no-such-setting" = "1" }')
    done = knell("run", str(bad), "--reports", str(reports))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "no-such-setting" in done.stdout + done.stderr  # it failed after mounting
    assert _ours(reports) == []


def test_reap_unmounts_what_a_sigkilled_runner_left_mounted(tmp_path: Path) -> None:
    _require("sqlite")
    reports, states = tmp_path / "reports", tmp_path / "states"
    scenario = _scenario(tmp_path, "sqlite", duration="60s")
    env = {**os.environ, "KNELL_STATE_DIR": str(states)}
    runner = subprocess.Popen(
        [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(reports)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _ours(reports) and time.monotonic() < deadline:
            assert runner.poll() is None, "the run ended before its disk was mounted"
            time.sleep(0.1)
        assert _ours(reports), "the faulty disk was never mounted"
        time.sleep(1.0)  # the workers are on it
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        assert _ours(reports), "a SIGKILLed runner cannot unmount: reap must"
        reaped = knell("reap", KNELL_STATE_DIR=str(states))
        assert reaped.returncode == 0, reaped.stdout + reaped.stderr
        assert "fs-mount" in reaped.stdout + reaped.stderr
        assert _ours(reports) == []
    finally:
        if runner.poll() is None:
            runner.kill()
        for line in _ours(reports):
            subprocess.run(["fusermount3", "-u", "-z", line.split()[4]], check=False)


def test_an_interrupted_run_unmounts_its_disk(tmp_path: Path) -> None:
    _require("sqlite")
    reports = tmp_path / "reports"
    scenario = _scenario(tmp_path, "sqlite", duration="60s")
    runner = subprocess.Popen(
        [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(reports)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _ours(reports) and time.monotonic() < deadline:
            assert runner.poll() is None, "the run ended before its disk was mounted"
            time.sleep(0.1)
        time.sleep(1.0)
        runner.send_signal(signal.SIGTERM)  # what Ctrl-C does, for a run in the background
        _, err = runner.communicate(timeout=60)
        assert "interrupted" in err
        assert _ours(reports) == []
    finally:
        if runner.poll() is None:
            runner.kill()


def test_an_existing_server_is_not_knells_to_mount(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "postgres")
    done = knell(
        "run",
        str(scenario),
        "--reports",
        str(tmp_path / "reports"),
        "--store-url",
        "postgresql://knell@127.0.0.1:1/knell",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not knell's to mount" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
