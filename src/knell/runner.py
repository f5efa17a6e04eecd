"""One run: provision, start, drive the schedule, heal, drain, check, report.

The phases, in Jepsen's order:

1. **Provision** a private store in the run directory and validate the
   driver before anything starts (a bad driver is a usage error, exit 2).
2. **Start** every worker process of the scenario.
3. **Drive** the seeded schedule: kill / restart, pause / resume, each
   action recorded as an event of the ``nemesis`` process. A worker that
   exits on its own is recorded as a ``crash`` and restarted.
4. **Final phase**: heal everything, stop producers, stop readers, then
   start one more incarnation of every handle that ever subscribed to read
   to the true head (the *drain*). Only a drained handle can prove loss.
5. **Check** the merged history and write the run directory.

If the runner itself dies, its workers die with it (see
:mod:`knell.supervisor`); the per-process histories stay on disk and
``knell check RUN_DIR`` can still merge and check them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from knell.buses import DriverError, open_bus, resolve_driver
from knell.checker import CheckConfig, Verdict, check_history
from knell.history import HistoryReader, HistoryWriter, merge_histories
from knell.report import write_reports
from knell.scenario import Scenario
from knell.schedule import Action, Schedule, expand
from knell.supervisor import Supervisor

__all__ = ["RunError", "RunOutcome", "check_run", "exit_code", "run_scenario"]

READER_ROLES = ("consumer", "waiter", "joiner")
STOP_GRACE = 5.0
READY_TIMEOUT = 15.0
MAX_CRASHES = 5  # a worker that keeps dying on its own is not restarted forever


class RunError(Exception):
    """The run could not be set up (bad driver, unwritable reports folder)."""


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    verdict: Verdict
    exit_code: int


def exit_code(verdict: Verdict) -> int:
    """0 valid, 1 invalid, 2 unknown (Jepsen's three answers)."""
    if verdict.valid is True:
        return 0
    if verdict.valid is False:
        return 1
    return 2


def _new_run_dir(reports: Path, name: str) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run_dir = reports / name / stamp
    for sub in ("history", "logs", "control", "store", "workers"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    return run_dir


def _point_latest(run_dir: Path) -> None:
    """``reports/<scenario>/latest`` -> this run (a symlink, or a one-line
    file naming the run where symlinks are not allowed, as on Windows)."""
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    try:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, latest)
    except OSError:
        if latest.is_symlink() or latest.is_file():
            latest.unlink()
        elif latest.is_dir():
            shutil.rmtree(latest)
        latest.write_text(run_dir.name + "\n", encoding="utf-8")


def store_url(scenario: Scenario, run_dir: Path) -> str:
    """The run's private store. SQLite only for now; Postgres and Redis
    provisioning slot in here."""
    path = (run_dir / "store" / "bus.db").resolve()
    return f"sqlite:///{path.as_posix().lstrip('/')}?poll_interval={scenario.poll_interval}"


class _Run:
    def __init__(
        self,
        scenario: Scenario,
        run_dir: Path,
        url: str,
        driver: str | None,
        schedule: Schedule,
        say: Callable[[str], None],
    ) -> None:
        self.scenario = scenario
        self.run_dir = run_dir
        self.url = url
        self.driver = driver
        self.schedule = schedule
        self.say = say
        self.supervisor = Supervisor(run_dir)
        self.nemesis = HistoryWriter(run_dir / "history" / "nemesis.1.jsonl", "nemesis", 1)
        self.expected_down: set[str] = set()
        self.stopping: set[str] = set()
        self.crashes: dict[str, int] = {}

    # -- setup -------------------------------------------------------------

    def _spec(self, name: str, role: str, params: dict[str, Any]) -> Path:
        path = self.run_dir / "workers" / f"{name}.json"
        spec = {
            "name": name,
            "role": role,
            "bus_url": self.url,
            "driver": self.driver,
            "history_dir": str((self.run_dir / "history").resolve()),
            "control_dir": str((self.run_dir / "control").resolve()),
            "params": params,
        }
        path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        return path.resolve()

    def start_all(self) -> None:
        self.nemesis.write("info", "begin", {"seed": self.schedule.seed})
        for name, spec in self.scenario.instances().items():
            params = spec.model_dump(exclude={"name", "count", "role"})
            self.supervisor.add(name, self._spec(name, spec.role, params))
        for name in self.supervisor.workers:
            self.supervisor.start(name)
        self.say(f"started {len(self.supervisor.workers)} processes")

    def wait_ready(self) -> None:
        """Hold the fault schedule until every worker has written its
        ``start`` event (its bus is open). Starting a few interpreters can
        take seconds on a loaded machine, and a fault aimed at a process
        that is still importing tests nothing; the schedule's clock starts
        here (nemesis ``ready``), at most ``READY_TIMEOUT`` after ``begin``."""
        deadline = time.monotonic() + READY_TIMEOUT
        pending = set(self.supervisor.workers)
        while pending and time.monotonic() < deadline:
            pending = {n for n in pending if not self._started(n)}
            if pending:
                self.watch_crashes()
                time.sleep(0.02)
        self.nemesis.write("info", "ready", {"pending": sorted(pending)})

    def _started(self, name: str) -> bool:
        worker = self.supervisor.workers[name]
        path = self.run_dir / "history" / f"{name}.{worker.incarnation}.jsonl"
        try:
            return path.stat().st_size > 0
        except OSError:
            return False

    # -- the schedule --------------------------------------------------------

    def _record(self, op: str, target: str, pid: int | None, **extra: Any) -> None:
        self.nemesis.write("info", op, {"target": target, "pid": pid, **extra})

    def apply(self, action: Action) -> None:
        name = action.target
        sup = self.supervisor
        if action.op == "kill":
            pid = sup.kill(name)
            if pid is not None:
                self.expected_down.add(name)
                self._record("kill", name, pid)
        elif action.op == "restart":
            if name in self.expected_down and not sup.workers[name].alive():
                worker = sup.start(name)
                self.expected_down.discard(name)
                self._record("restart", name, worker.pid, incarnation=worker.incarnation)
        elif action.op == "pause":
            pid = sup.pause(name)
            if pid is not None:
                self._record("pause", name, pid)
        elif action.op == "resume":
            pid = sup.resume(name)
            if pid is not None:
                self._record("resume", name, pid)

    def watch_crashes(self) -> None:
        """A worker that exits on its own is a finding: record it, restart it."""
        for name, worker in self.supervisor.workers.items():
            if name in self.expected_down or name in self.stopping:
                continue
            if worker.popen is not None and worker.popen.poll() is not None:
                code = worker.popen.returncode
                pid = worker.popen.pid
                self.supervisor.wait_exit([name], 0)
                self._record("crash", name, pid, exit=code)
                self.crashes[name] = self.crashes.get(name, 0) + 1
                log = f"logs/{name}.{worker.incarnation}.log"
                if self.crashes[name] > MAX_CRASHES:
                    self.stopping.add(name)
                    self._record("give-up", name, None, crashes=self.crashes[name])
                    self.say(f"{name} keeps exiting on its own (see {log}); not restarting it")
                    continue
                self.say(f"{name} exited on its own (code {code}, see {log}); restarting")
                restarted = self.supervisor.start(name)
                self._record("restart", name, restarted.pid, incarnation=restarted.incarnation)

    def drive(self) -> None:
        t0 = time.monotonic()
        for action in self.schedule.actions:
            if action.at >= self.scenario.duration:
                break
            self._sleep_until(t0 + action.at)
            self.apply(action)
        self._sleep_until(t0 + self.scenario.duration)

    def _sleep_until(self, deadline: float) -> None:
        while True:
            self.watch_crashes()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    # -- the final phase -----------------------------------------------------

    def heal(self) -> None:
        sup = self.supervisor
        for name, worker in sup.workers.items():
            if worker.paused:
                self._record("resume", name, sup.resume(name))
        for name in sorted(self.expected_down):
            worker = sup.start(name)
            self._record("restart", name, worker.pid, incarnation=worker.incarnation)
        self.expected_down.clear()
        self.nemesis.write("info", "heal", {})

    def stop(self, roles: tuple[str, ...]) -> None:
        names = [n for n, s in self.scenario.instances().items() if s.role in roles]
        self.stopping.update(names)
        for name in names:
            (self.run_dir / "control" / f"stop-{name}").touch()
        stuck = self.supervisor.wait_exit(names, STOP_GRACE)
        for name in stuck:
            self._record("kill", name, self.supervisor.kill(name), reason="did not stop in time")
        self.nemesis.write("info", "stop", {"roles": list(roles)})

    def handles(self) -> list[tuple[str, str]]:
        """Every (handle, channel) that any process tried to subscribe."""
        seen: dict[tuple[str, str], None] = {}
        for path in sorted((self.run_dir / "history").glob("*.jsonl")):
            for event in HistoryReader(path):
                if event.get("f") == "subscribe" and event.get("type") == "invoke":
                    seen[(str(event["handle"]), str(event["channel"]))] = None
        return list(seen)

    def drain(self) -> None:
        handles = self.handles()
        pending: dict[str, tuple[str, str]] = {}
        for index, (handle, channel) in enumerate(handles, start=1):
            name = f"drain-{index}"
            params = {"handle": handle, "channel": channel, "batch": 200}
            self.supervisor.add(name, self._spec(name, "drain", params))
            self.nemesis.write(
                "invoke", "drain", {"handle": handle}, handle=handle, channel=channel
            )
            self.supervisor.start(name)
            pending[name] = (handle, channel)
        self.say(f"draining {len(handles)} handle(s) to the true head")
        stuck = set(self.supervisor.wait_exit(list(pending), self.scenario.drain_timeout))
        bus = open_bus(self.url, self.driver)
        try:
            for name, (handle, channel) in pending.items():
                worker = self.supervisor.workers[name]
                code = worker.exits[-1] if worker.exits else None
                if name in stuck or code != 0:
                    error = "timed out" if name in stuck else f"drain worker exited {code}"
                    self.nemesis.write(
                        "info",
                        "drain",
                        {"handle": handle, "error": error},
                        handle=handle,
                        channel=channel,
                    )
                    continue
                heads = {channel: bus.head(channel)}
                self.nemesis.write(
                    "ok",
                    "drain",
                    {"handle": handle, "heads": heads},
                    handle=handle,
                    channel=channel,
                )
        finally:
            bus.close()

    def final_phase(self) -> None:
        self.heal()
        self.stop(("producer",))
        self.stop(READER_ROLES)
        self.drain()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _terminate_as_interrupt() -> signal.Handlers | Callable[..., Any] | int | None:
    """SIGTERM unwinds the run like Ctrl-C, so every worker is killed and
    reaped before the runner exits (SIGKILL is covered by the workers' leash)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def run_scenario(
    scenario: Scenario,
    *,
    reports: Path,
    driver: str | None = None,
    schedule: Schedule | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> RunOutcome:
    """Run one scenario end to end and write its run directory.

    ``schedule`` replays a saved fault plan instead of expanding the seed."""
    if schedule is not None:
        known = set(scenario.instances())
        unknown = sorted({a.target for a in schedule.actions} - known)
        if unknown:
            raise RunError(
                f"schedule targets {', '.join(unknown)} are not processes of {scenario.name!r}"
            )
    driver = driver or scenario.bus
    try:
        run_dir = _new_run_dir(reports, scenario.name)
    except OSError as exc:
        raise RunError(f"{reports}: cannot create the run directory: {exc.strerror}") from None
    url = store_url(scenario, run_dir)
    try:
        resolve_driver(url, driver)
        open_bus(url, driver).close()  # creates the schema before workers race to
    except DriverError as exc:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise RunError(str(exc)) from None
    schedule = schedule or expand(scenario)
    schedule.save(run_dir / "schedule.json")
    (run_dir / "scenario.json").write_text(
        json.dumps({**scenario.model_dump(), "bus": driver}, indent=2) + "\n", encoding="utf-8"
    )
    say(f"run directory {run_dir}")
    run = _Run(scenario, run_dir, url, driver, schedule, say)
    previous = _terminate_as_interrupt()
    try:
        run.start_all()
        run.wait_ready()
        run.drive()
        say("final phase: heal, stop producers, drain every handle")
        run.final_phase()
    finally:
        run.supervisor.shutdown()
        run.nemesis.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    outcome = check_run(run_dir, say=say)
    _point_latest(run_dir)
    return outcome


def _check_config(run_dir: Path) -> CheckConfig:
    scenario_file = run_dir / "scenario.json"
    if not scenario_file.exists():
        return CheckConfig()
    data = json.loads(scenario_file.read_text(encoding="utf-8"))
    return CheckConfig(wake_bound=float(data.get("wake_bound", CheckConfig().wake_bound)))


def check_run(run_dir: Path, *, say: Callable[[str], None] = lambda _: None) -> RunOutcome:
    """Merge (if needed) and check a run directory, and (re)write its reports."""
    parts = sorted((run_dir / "history").glob("*.jsonl"))
    merged = run_dir / "history.jsonl"
    torn: list[str] = []
    if parts:
        _, torn = merge_histories(parts, merged)
    elif not merged.exists():
        raise RunError(f"{run_dir}: no history here (expected history.jsonl or history/*.jsonl)")
    for line in torn:
        say(line)
    verdict = check_history(merged, _check_config(run_dir))
    write_reports(run_dir, verdict, torn)
    return RunOutcome(run_dir, verdict, exit_code(verdict))
