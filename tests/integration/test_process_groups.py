"""Nothing a worker's adapter starts outlives the run: the adapter leads its
own process group inside its worker's session, and the supervisor, the
adapter's own end and ``knell reap`` kill those whole.

The adapter here (``adapters/forking.py``) forks a grandchild that closes
its stdin and sleeps: the end of input never stops it, and once the
adapter exits it is re-parented out of every process tree. Each test finds
such grandchildren by a marker unique to the test in their argv.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import REPO, knell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="Windows contains adapters in job objects"),
]

FORKING = Path(__file__).parent / "adapters" / "forking.py"
ADAPTER = REPO / "examples" / "python-adapter" / "adapter.py"


def forking_bus(marker: str) -> str:
    return f"exec:{sys.executable} {FORKING} {marker} -- {sys.executable} {ADAPTER}"


def marked(marker: str) -> list[psutil.Process]:
    """Every live process (zombies aside) with ``marker`` in its argv."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def left_after(marker: str, within: float = 3.0) -> list[int]:
    """The marked processes still alive ``within`` seconds from now (a
    SIGKILL takes a moment to land); the rest of them killed by the test."""
    deadline = time.monotonic() + within
    left = marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = marked(marker)
    for proc in left:  # never leave the machine dirty, whatever the verdict
        proc.kill()
    return [p.pid for p in left]


def test_a_run_leaves_no_grandchild_of_an_adapter(tmp_path: Path) -> None:
    marker = f"knell-probe-{uuid.uuid4().hex}"
    proc = knell(
        "run", "quickstart", "--duration", "2s", "--reports", str(tmp_path / "reports"),
        "--bus", forking_bus(marker), KNELL_STATE_DIR=str(tmp_path / "state"), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not left_after(marker), "an adapter's grandchildren outlived the run"


def test_reap_after_a_sigkilled_runner_kills_the_grandchildren(tmp_path: Path) -> None:
    marker = f"knell-probe-{uuid.uuid4().hex}"
    state = tmp_path / "state"
    runner = subprocess.Popen(
        [sys.executable, "-m", "knell", "run", "quickstart", "--duration", "60s",
         "--reports", str(tmp_path / "reports"), "--bus", forking_bus(marker)],
        cwd=REPO, env={**os.environ, "KNELL_STATE_DIR": str(state)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # The scenario kills workers (and their adapters) as it goes, so the
        # count dips and recovers: what was seen is kept, not asked again.
        deadline = time.monotonic() + 60
        seen = len(marked(marker))
        while seen < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = max(seen, len(marked(marker)))
        assert seen >= 4, f"the adapters did not start ({seen} marked processes in 60 s)"
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(20)
        time.sleep(0.5)  # the leashes take the workers and adapters
        assert marked(marker), "nothing was left for reap to find: the test proves nothing"
        proc = knell("reap", KNELL_STATE_DIR=str(state), timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not left_after(marker), "knell reap left an adapter's grandchildren"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        left_after(marker, within=0)


WORKER = """
import sys, time
from knell.buses.stdio import StdioBus
bus = StdioBus([sys.executable, {forking!r}, {marker!r}, "--", sys.executable, {adapter!r}],
               "sqlite:///" + {db!r}.lstrip("/"))
bus.subscribe("w", "events")
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def supervised(tmp_path: Path):
    """A supervisor with one worker-like process holding a forking adapter,
    and the marker of that adapter's grandchild.

    The grandchild is what the tests are about, so it must be seen alive
    before they start. On a loaded CI machine it once was not (the worker
    had said "ready", so its adapter ran, yet no process carried the
    marker): a start that shows no grandchild is stopped and made again,
    with a new marker, and only three such starts in a row fail."""
    from knell.supervisor import Supervisor

    why: list[str] = []
    for attempt in range(1, 4):
        marker = f"knell-probe-{uuid.uuid4().hex}"
        here = tmp_path / f"attempt-{attempt}"
        here.mkdir()
        script = here / "worker.py"
        code = WORKER.format(
            forking=str(FORKING), marker=marker, adapter=str(ADAPTER), db=str(here / "bus.db")
        )
        script.write_text(code)
        supervisor = Supervisor(here / "run")
        supervisor.add_command("holder", [str(script)])
        holder = supervisor.start("holder")
        started = False
        try:
            deadline = time.monotonic() + 30
            while (
                not marked(marker) and time.monotonic() < deadline and holder.popen.poll() is None
            ):
                time.sleep(0.05)
            started = bool(marked(marker))
            if not started:
                time.sleep(0.5)  # the log's reader thread catches up
                log = here / "run" / "logs" / "holder.1.log"
                said = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
                why.append(
                    f"start {attempt}: holder exit {holder.popen.poll()}, its output: {said}"
                )
                continue
            yield supervisor, marker
            return
        finally:
            supervisor.shutdown()
            left_after(marker, within=0)
    raise AssertionError("the adapter's grandchild did not start: " + "; ".join(why))


def test_a_fault_kill_of_a_worker_kills_its_adapters_grandchildren(supervised) -> None:
    supervisor, marker = supervised
    assert supervisor.kill("holder") is not None
    assert not left_after(marker), "the killed worker's adapter left a grandchild"


def _settles(process: psutil.Process, wanted: Callable[[str], bool], within: float = 5.0) -> bool:
    """Whether ``process``'s state satisfies ``wanted`` within ``within`` seconds."""
    deadline = time.monotonic() + within
    while not wanted(process.status()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_pausing_a_worker_pauses_its_adapters_grandchildren(supervised) -> None:
    supervisor, marker = supervised
    supervisor.pause("holder")
    (grandchild,) = marked(marker)
    # A signal to a process group is delivered, not awaited: on a loaded
    # machine the state changes a moment after killpg returns.
    assert _settles(grandchild, lambda s: s == psutil.STATUS_STOPPED)
    supervisor.resume("holder")
    assert _settles(grandchild, lambda s: s != psutil.STATUS_STOPPED)
    supervisor.shutdown()
    assert not left_after(marker), "shutdown left the adapter's grandchild"


def test_reap_spares_a_session_that_reused_a_recorded_id(tmp_path: Path) -> None:
    """A dead runner's worker session whose id the kernel gave to someone
    else: that session's processes do not carry the runner's token, and
    reap leaves them alone."""
    from knell.owners import reap

    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "KNELL_OWNER"},
    )
    try:
        worker = {"kind": "process", "pid": stranger.pid, "started": 1.0, "name": "w.1"}
        worker.update(session=stranger.pid, marker="deadbeef0000")
        runner = {"kind": "runner", "pid": 999_999_999, "started": 1.0}
        lines = [json.dumps(runner), json.dumps(worker)]
        (tmp_path / "runner-1-dead.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert reap(tmp_path) == []
        assert stranger.poll() is None, "reap killed a session that was not the run's"
    finally:
        stranger.kill()
        stranger.wait()


DAEMONISER = """
import os, sys
if os.fork() == 0:
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
    os._exit(0)
os.wait()
"""


def test_shutdown_kills_what_a_worker_that_exited_left_in_its_session(tmp_path: Path) -> None:
    """A worker that daemonised a helper and exited by itself: the helper
    is in no tree and no adapter's group, only in the worker's session."""
    from knell.supervisor import Supervisor

    marker = f"knell-probe-{uuid.uuid4().hex}"
    script = tmp_path / "worker.py"
    script.write_text(DAEMONISER.format(marker=marker))
    supervisor = Supervisor(tmp_path / "run")
    supervisor.add_command("daemoniser", [str(script)])
    supervisor.start("daemoniser")
    try:
        assert supervisor.wait_exit(["daemoniser"], timeout=20) == []
        assert marked(marker), "the helper did not start"
        assert supervisor.shutdown() == []  # nothing was alive to kill...
        assert not left_after(marker), "...but the helper had to go"
    finally:
        left_after(marker, within=0)
