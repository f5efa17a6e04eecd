"""Workers forked by the run's zygote (:mod:`knell.platform.forkserver`)
are real OS processes like spawned ones: a kill is SIGKILL of the worker's
own pid, a restart is a new process, each leads its own session in the run
directory with the run's token, and nothing is left behind when the
zygote or the runner dies (the runner's case: ``test_no_orphans.py``).

Each test drives a real :class:`~knell.supervisor.Supervisor` with a real
producer on a SQLite bus, so what is checked is what a run does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from knell.history_files import part_path
from knell.platform import OWNER_ENV
from knell.supervisor import Supervisor
from knell.workload.params import ProducerParams
from knell.workload.worker import WorkerSpec
from tests.integration.conftest import REPO, knell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote is Linux-only"),
]

NAME = "producer-1"


def _supervisor(tmp_path: Path, driver: str | None = None) -> Supervisor:
    run_dir = tmp_path / "run"
    for sub in ("history", "control", "workers"):
        (run_dir / sub).mkdir(parents=True)
    spec = WorkerSpec(
        name=NAME,
        role="producer",
        bus_url=f"sqlite:///{tmp_path / 'bus.db'}",
        driver=driver,
        history_dir=str((run_dir / "history").resolve()),
        control_dir=str((run_dir / "control").resolve()),
        params=ProducerParams(rate=20.0),
    )
    path = run_dir / "workers" / f"{NAME}.json"
    path.write_text(json.dumps(spec.to_json()), encoding="utf-8")
    supervisor = Supervisor(run_dir)
    supervisor.warm()
    if os.environ.get("KNELL_FORK_SERVER") != "0":
        assert supervisor.zygote is not None, "no zygote on Linux"
    supervisor.add(NAME, path.resolve())
    return supervisor


def _started(supervisor: Supervisor, incarnation: int, within: float = 30.0) -> bool:
    """Whether the incarnation wrote its ``start`` event (its bus is open)."""
    part = part_path(supervisor.run_dir / "history", NAME, incarnation)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if part.exists() and part.stat().st_size > 0:  # as the runner tells a start
            return True
        time.sleep(0.02)
    return False


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def _marked(marker: str) -> list[int]:
    """Live processes (this one aside) carrying the run's owner token."""
    found = []
    for proc in psutil.process_iter(["status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get(OWNER_ENV) == marker:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_a_forked_worker_is_sigkilled_by_its_own_pid_and_restarted(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path)
    zygote = supervisor.zygote
    assert zygote is not None
    try:
        first = supervisor.start(NAME)
        pid = first.pid
        assert pid is not None and not isinstance(first.popen, subprocess.Popen)
        assert _started(supervisor, 1), "the forked worker never opened its bus"
        proc = psutil.Process(pid)
        assert proc.ppid() == zygote.pid
        assert os.getsid(pid) == pid, "a forked worker leads its own session"
        assert proc.cwd() == str(supervisor.run_dir)
        assert proc.environ()[OWNER_ENV] == supervisor.marker

        assert supervisor.kill(NAME) == pid
        assert _gone(pid), "SIGKILL of the worker's pid did not end it"
        assert supervisor.workers[NAME].exits == [-signal.SIGKILL]

        second = supervisor.start(NAME)
        assert second.incarnation == 2 and second.pid not in (None, pid)
        assert _started(supervisor, 2), "the restarted worker never opened its bus"
        assert psutil.Process(second.pid).ppid() == zygote.pid
        log = (supervisor.logs / f"{NAME}.2.log").read_bytes()
        assert b"Traceback" not in log, log
    finally:
        supervisor.shutdown()
    assert _gone(zygote.pid), "the zygote outlived the shutdown"
    assert not _marked(supervisor.marker), "a process of the run outlived its shutdown"


def test_killing_the_zygote_leaves_nothing_and_the_run_spawns_again(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path)
    zygote = supervisor.zygote
    assert zygote is not None
    notes: list[str] = []
    supervisor.say = notes.append
    try:
        worker = supervisor.start(NAME)
        assert worker.pid is not None and _started(supervisor, 1)
        os.kill(zygote.pid, signal.SIGKILL)
        assert _gone(worker.pid), "a forked worker outlived its zygote"
        deadline = time.monotonic() + 5
        while not supervisor.lost() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert supervisor.lost() == [NAME], "the runner must know the worker died with the zygote"
        assert supervisor.wait_exit([NAME], 5) == []

        spawned = supervisor.start(NAME)
        assert isinstance(spawned.popen, subprocess.Popen), "no fallback to spawning"
        assert any("fork server is gone" in note for note in notes), notes
        assert _started(supervisor, 2)
    finally:
        supervisor.shutdown()
    assert not _marked(supervisor.marker), "a process of the run outlived its shutdown"


def test_a_worker_the_zygote_cannot_fork_is_spawned_and_the_others_live_on(
    tmp_path: Path,
) -> None:
    supervisor = _supervisor(tmp_path)
    notes: list[str] = []
    supervisor.say = notes.append
    other = supervisor.add("producer-2", supervisor.workers[NAME].spec_path)  # type: ignore[arg-type]
    for index in range(3):  # more than a request may carry (each under exec's limit)
        other.env[f"KNELL_PROBE_BULK_{index}"] = "x" * 60_000
    try:
        forked = supervisor.start(NAME)
        assert forked.pid is not None and _started(supervisor, 1)
        spawned = supervisor.start("producer-2")
        assert isinstance(spawned.popen, subprocess.Popen), "it could not have been forked"
        assert any("could not fork it" in note for note in notes), notes
        time.sleep(0.5)
        assert forked.alive() and not supervisor.lost(), "the zygote's worker died with it"
        assert supervisor.zygote is not None and supervisor.zygote.alive()
        assert _forked(supervisor, NAME)
    finally:
        supervisor.shutdown()
    assert not _marked(supervisor.marker), "a process of the run outlived its shutdown"


def _forked(supervisor: Supervisor, name: str) -> bool:
    """Whether ``name``'s next incarnation is forked (the zygote serves)."""
    supervisor.kill(name)
    return not isinstance(supervisor.start(name).popen, subprocess.Popen)


@pytest.mark.parametrize("fork", ["1", "0"], ids=["forked", "spawned"])
def test_a_stopped_worker_exits_once_its_history_and_bus_are_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: str
) -> None:
    """The interpreter's finalisation is not a worker's business: its
    history and bus are closed, so it leaves at once, even when a driver's
    library would hold it at exit (``lingering_exit.py``: 30 s), and a
    stop costs the final phase no teardown of modules."""
    monkeypatch.setenv("KNELL_FORK_SERVER", fork)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    supervisor = _supervisor(tmp_path, driver="lingering_exit:make_bus")
    try:
        supervisor.start(NAME)
        assert _started(supervisor, 1)
        (supervisor.run_dir / "control" / f"stop-{NAME}").touch()
        assert supervisor.wait_exit([NAME], 10) == [], "the worker lingered at exit"
        assert supervisor.workers[NAME].exits == [0]
    finally:
        supervisor.shutdown()


def test_a_quickstart_run_with_the_zygote_is_valid(tmp_path: Path) -> None:
    # --reports relative, as the README's quickstart command has it: the
    # zygote runs in the first run directory, its workers in their own
    reports = tmp_path / "reports"
    proc = knell(
        "run", str(REPO / "scenarios" / "quickstart.toml"), "--duration", "3s", "--no-page",
        "--reports", "reports", cwd=tmp_path, KNELL_STATE_DIR=str(tmp_path / "state"),
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: VALID" in proc.stdout, proc.stdout
    run_dir = (reports / "quickstart" / "latest").resolve()
    owners = [json.loads(x) for x in (run_dir / "owners.jsonl").read_text().splitlines()]
    assert any(r.get("name") == "forkserver" for r in owners), "the run did not use the zygote"
    assert list((run_dir / "logs").glob("consumer-*.2.log")), "no killed consumer restarted"


@pytest.mark.xdist_group("bench")
def test_the_runner_bench_sets_the_fork_server_against_spawning(tmp_path: Path) -> None:
    from knell.bench.runner import run_runner_bench

    said: list[str] = []
    rows = {r.name: r for r in run_runner_bench(tmp_path, short=True, say=said.append)}
    spawned = "same bench, workers spawned (KNELL_FORK_SERVER=0)"
    for name in (
        "kill -> restarted, p50 (fork server)",
        "kill -> restarted, p99 (fork server)",
        "knell run wall time beyond the configured duration (fork server)",
    ):
        row = rows[name]
        assert row.baseline_name == spawned, row
        assert row.value is not None and row.baseline is not None, row
    overhead = rows["knell run wall time beyond the configured duration (fork server)"]
    assert overhead.extra["spawned_phases_s"] and overhead.extra["phases_s"]
    assert any("fork server: exit 0" in line for line in said), said
    print("\n".join(f"{r.name}: {r.value} vs {r.baseline}" for r in rows.values()))


def test_a_run_whose_zygote_dies_is_abandoned_as_knells_failure(tmp_path: Path) -> None:
    """The workers die with their zygote: knell lost them, so the run
    ends with exit 3 naming the fork server, never with a finding."""
    runner = subprocess.Popen(
        [sys.executable, "-m", "knell", "run", "quickstart", "--duration", "30s", "--no-page",
         "--reports", str(tmp_path / "reports")],
        env={**os.environ, "KNELL_STATE_DIR": str(tmp_path / "state")},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        zygote = None
        while zygote is None and time.monotonic() < deadline and runner.poll() is None:
            for proc in psutil.Process(runner.pid).children():
                try:
                    forked = len(proc.children()) >= 3
                    if "knell.platform.forkserver" in proc.cmdline() and forked:
                        zygote = proc
                except psutil.Error:
                    continue
            time.sleep(0.05)
        assert zygote is not None, "no zygote with its workers"
        workers = zygote.children()
        zygote.kill()
        out, _ = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 3, out
    assert "fork server died" in out and "not the bus" in out, out
    assert "verdict" not in out, out
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, f"orphans left: {[p.pid for p in alive]}"


def test_a_wedged_zygote_is_not_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request the zygote leaves unanswered (here: it is stopped) makes
    it unusable, or its late answer would be taken for the next request's:
    the worker is spawned, and the zygote ended with what it forked."""
    from knell.platform import forkserver

    supervisor = _supervisor(tmp_path)
    zygote = supervisor.zygote
    assert zygote is not None
    supervisor.add("producer-2", supervisor.workers[NAME].spec_path)  # type: ignore[arg-type]
    try:
        assert supervisor.start(NAME).pid is not None and _started(supervisor, 1)
        monkeypatch.setattr(forkserver, "ZYGOTE_READY", 1.0)
        os.kill(zygote.pid, signal.SIGSTOP)
        spawned = supervisor.start("producer-2")
        assert isinstance(spawned.popen, subprocess.Popen)
        assert supervisor.zygote is None and not zygote.alive()
        assert supervisor.lost() == [NAME]
    finally:
        with contextlib.suppress(OSError):
            os.kill(zygote.pid, signal.SIGCONT)
        supervisor.shutdown()
    assert _gone(zygote.pid)
    assert not _marked(supervisor.marker), "a process of the run outlived its shutdown"
