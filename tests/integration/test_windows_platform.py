"""Windows process control, on a real Windows kernel.

These run only on Windows (the windows-latest legs of
.github/workflows/knell.yml) and are skipped elsewhere: a job object, a
``TerminateProcess``, a suspension and a lock released after a hard kill
cannot be shown on Linux without pretending. docs/ci.md lists them as
unverified until that workflow has run them.

Each test starts real processes and leaves none behind: whatever is still
alive at the end is killed and the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from knell.buses.sqlite import SqliteBus
from knell.buses.sqlite_url import sqlite_url
from knell.platform import SPAWN_GROUP, contain, kill_tree, resume_tree, suspend_tree
from tests.integration.conftest import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "win32",
        reason="needs a Windows kernel: runs on the windows-latest legs of knell.yml",
    ),
]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
GONE_WITHIN = 10.0


def _gone(pids: list[int], timeout: float = GONE_WITHIN) -> list[int]:
    """The pids still running after ``timeout`` (killed, so nothing leaks)."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        proc.kill()
    return [p.pid for p in alive]


_HOLDER = """
import json, subprocess, sys, time
from knell.platform import SPAWN_GROUP, contain
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, **SPAWN_GROUP)
print(json.dumps({"child": child.pid, "contained": contain(child)}), flush=True)
time.sleep(120)
"""

_PARENT_OF_ONE = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
    "time.sleep(120)"
)


def test_a_contained_tree_dies_with_the_process_that_holds_the_job() -> None:
    """The counterpart of the parent-death signal: the holder is hard
    killed, and its contained child and grandchild, which have no watchdog
    of their own, die with it because the kernel closes the job."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, sys.executable, "-c", _PARENT_OF_ONE],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    pids: list[int] = []
    try:
        assert holder.stdout is not None
        said = json.loads(holder.stdout.readline())
        assert said["contained"] is True
        child = psutil.Process(said["child"])
        deadline = time.monotonic() + 20
        while not child.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        grandchildren = child.children()
        assert grandchildren, "the child did not start its own child"
        pids = [child.pid, *(g.pid for g in grandchildren)]
        psutil.Process(holder.pid).kill()  # TerminateProcess: no cleanup code runs
        holder.wait(10)
        assert _gone(pids) == [], "the job did not kill its processes"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        _gone(pids, timeout=0)


_LEAVES_ONE = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', sys.argv[1]])"
)


def _marked(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


def test_what_an_exited_child_left_behind_dies_with_the_job() -> None:
    """An adapter that started a helper and exited: the helper is in no
    tree any more (its parent is gone), but it is still in the job of the
    worker that started the adapter, and dies with that worker."""
    marker = f"knell-probe-{uuid.uuid4().hex}"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, sys.executable, "-c", _LEAVES_ONE, marker],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    pids: list[int] = []
    try:
        assert holder.stdout is not None
        said = json.loads(holder.stdout.readline())
        assert said["contained"] is True
        deadline = time.monotonic() + 20
        while not _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [p.pid for p in _marked(marker)]
        assert pids, "the child did not leave its helper"
        assert _gone([said["child"]]) == [], "the child did not exit by itself"
        psutil.Process(holder.pid).kill()  # TerminateProcess: the worker crashes
        holder.wait(10)
        assert _gone(pids) == [], "the helper outlived the job"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        _gone(pids, timeout=0)


def test_an_adapters_own_job_ends_with_it() -> None:
    """An adapter that started a helper and exited: ending the adapter's
    own job (what the stdio driver does when an adapter ends) kills the
    helper at once, while the process that started the adapter lives on."""
    from knell.platform import end_group

    marker = f"knell-probe-{uuid.uuid4().hex}"
    child = subprocess.Popen([sys.executable, "-c", _LEAVES_ONE, marker], **SPAWN_GROUP)
    pids: list[int] = []
    try:
        assert contain(child, own_job=True) is True
        deadline = time.monotonic() + 20
        while not _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [p.pid for p in _marked(marker)]
        assert pids, "the child did not leave its helper"
        assert end_group(child, GONE_WITHIN) == 0
        assert _gone(pids) == [], "the helper outlived its adapter's job"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        _gone(pids, timeout=0)


def test_a_session_signal_with_a_marker_spares_a_tree_without_it() -> None:
    """What a worker's recorded pid names after it was reaped may be anyone
    else's process: only one that carries the run's token is killed."""
    from knell.platform import OWNER_ENV, signal_session

    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    stranger = subprocess.Popen(SLEEPER, env=env, **SPAWN_GROUP)
    ours = subprocess.Popen(SLEEPER, env={**env, OWNER_ENV: "tok123"}, **SPAWN_GROUP)
    try:
        deadline = time.monotonic() + 10  # the environment is readable once it started
        while time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(ours.pid).environ().get(OWNER_ENV) == "tok123":
                    break
            time.sleep(0.1)
        assert signal_session({stranger.pid, ours.pid}, "kill", "tok123") == 1
        assert ours.wait(10) != 0
        assert stranger.poll() is None, "a process without the token was killed"
    finally:
        for proc in (stranger, ours):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_contain_reports_a_child_that_already_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], **SPAWN_GROUP)
    child.wait()
    assert contain(child) is False


def test_kill_pause_and_resume_act_on_the_whole_tree() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT_OF_ONE], **SPAWN_GROUP)
    pids = [parent.pid]
    try:
        assert contain(parent) is True
        proc = psutil.Process(parent.pid)
        deadline = time.monotonic() + 20
        while not proc.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        tree = [proc, *proc.children()]
        pids = [p.pid for p in tree]
        suspend_tree(parent.pid)
        assert all(p.status() == psutil.STATUS_STOPPED for p in tree)
        resume_tree(parent.pid)
        assert all(p.status() != psutil.STATUS_STOPPED for p in tree)
        kill_tree(parent.pid)  # TerminateProcess on every process of the tree
        assert parent.wait(10) != 0
        assert _gone(pids) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _gone(pids, timeout=0)


def test_the_keeper_takes_its_server_down_when_it_is_terminated(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    keeper = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell.platform.keeper",
            str(psutil.Process().pid),
            "--pidfile",
            str(pidfile),
            "--",
            *SLEEPER,
        ],
        cwd=REPO,
        **SPAWN_GROUP,
    )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int(pidfile.read_text(encoding="utf-8"))]
        psutil.Process(keeper.pid).kill()  # the keeper gets no chance to kill it itself
        keeper.wait(10)
        assert _gone(pids) == [], "the server outlived its keeper"
    finally:
        if keeper.poll() is None:
            keeper.kill()
            keeper.wait()
        _gone(pids, timeout=0)


def test_the_runner_terminated_leaves_no_worker(tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knell",
            "run",
            str(REPO / "scenarios" / "quickstart.toml"),
            "--reports",
            str(tmp_path),
            "--duration",
            "30s",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = psutil.Process(runner.pid).children(recursive=True)
            if len(workers) >= 6:
                break
            time.sleep(0.1)
        assert len(workers) >= 6, "workers did not start"
        time.sleep(1.5)  # let the schedule kill and pause something
        workers = psutil.Process(runner.pid).children(recursive=True)
        psutil.Process(runner.pid).kill()  # TerminateProcess
        runner.wait(20)
        assert _gone([w.pid for w in workers]) == [], "orphans left"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        _gone([w.pid for w in workers], timeout=0)


_WRITER = """
import sys
from knell.buses.sqlite import open_sqlite
bus = open_sqlite(sys.argv[1])
bus.subscribe("w", "c")
print("ready", flush=True)
i = 0
while True:
    i += 1
    bus.post("c", f"m{i}", "writer")
    bus.ack("w", "c", i)
"""


class _CountingBus(SqliteBus):
    attempts = 0

    def _open_file(self) -> sqlite3.Connection:
        type(self).attempts += 1
        return super()._open_file()


def test_the_store_reopens_right_after_a_writer_is_terminated(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """A writer is TerminateProcess'd mid-transaction, again and again, and
    the next opener gets the file at once or within the retry bound. The
    attempts each open took are recorded in junit.xml (``open_attempts``):
    more than one means Windows was still releasing the dead writer's locks."""
    url = sqlite_url(tmp_path / "bus.db", busy_timeout=0.05)
    assert re.match(r"sqlite:///[A-Za-z]:/", url), url
    attempts = []
    for _ in range(5):
        with subprocess.Popen(
            [sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE, text=True, cwd=REPO
        ) as writer:
            try:
                assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
                time.sleep(0.2)
                kill_tree(writer.pid)  # TerminateProcess, mid-transaction as likely as not
                writer.wait(10)
            finally:
                if writer.poll() is None:
                    writer.kill()
                    writer.wait()
        _CountingBus.attempts = 0
        bus = _CountingBus(tmp_path / "bus.db", busy_timeout=0.05, open_timeout=10)
        try:
            attempts.append(_CountingBus.attempts)
            assert bus.head("c") >= 1
            assert bus.cursor("w", "c") <= bus.head("c")
        finally:
            bus.close()
    record_property("open_attempts", ",".join(map(str, attempts)))
