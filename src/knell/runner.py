"""One run: provision, start, drive the schedule, heal, drain, check, report.

The phases, in Jepsen's order:

1. **Provision** a private store in the run directory and validate the
   driver before anything starts (a bad driver is a usage error, exit 2).
2. **Start** every worker process of the scenario.
3. **Drive** the seeded schedule: each step goes to its fault kind
   (:mod:`knell.nemesis`), which acts and records what it did as an event
   of the ``nemesis`` process. The runner knows no fault by name. A worker
   that exits on its own is recorded as a ``crash`` and restarted.
4. **Final phase**: every fault kind heals what it left broken, producers
   stop, readers stop, then one more incarnation of every handle that ever
   subscribed reads to the true head (the *drain*). Only a drained handle
   can prove loss. Queue claimers and role holders stop last, and each
   queue and role gets its own final worker (:mod:`knell.final_phase`).
5. **Check** the merged history and write the run directory.

Everything a run starts is recorded in the owner registry
(:mod:`knell.owners`), and stale records of dead runners are reaped as a
run starts. If the runner itself dies, its workers die with it (see
:mod:`knell.platform`); the per-process histories stay on disk and
``knell check RUN_DIR`` can still merge and check them.
"""

from __future__ import annotations

import contextvars
import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from knell.buses import (
    EXEC_CWD_VAR,
    DriverError,
    DriverExited,
    open_bus,
    reference_bus,
    require_contract,
    require_feature,
    resolve_driver,
)
from knell.buses.deadline import DriverTimeout, close_within, within
from knell.checker import CheckConfig, Verdict, check_events
from knell.checker.clocks import scan
from knell.checker.wellformed import WellFormed
from knell.errors import KnellError
from knell.final_phase import FINAL_ROLES, Final, finals
from knell.history import HistoryError, HistoryReader, HistoryWriter, merge_histories
from knell.history_files import (
    MERGED,
    MERGED_PLAIN,
    marked_lines,
    merged_path,
    part_path,
    part_paths,
    remove_parts,
    verify_merge,
)
from knell.logcap import last_error
from knell.nemesis import Action, FaultKind, NemesisContext
from knell.nemesis import registry as fault_kinds
from knell.online_run import OnlineRun
from knell.owners import Owner, reap
from knell.phases import PhaseTimer
from knell.platform import interrupt_on_terminate
from knell.provision import Provision
from knell.redact import bus_env, redact_settings, redact_url
from knell.report import RunSeries, RunStats, write_reports
from knell.report.describe import forget_after, process_roles, tested_contracts
from knell.rundir import RunDirError, atomic_write, new_dir, point_latest
from knell.scenario import Expectation, Scenario
from knell.schedule import Schedule, expand
from knell.supervisor import POLL, Supervisor
from knell.watch import RunWatch
from knell.workload.params import DrainParams, WorkerParams
from knell.workload.worker import WorkerSpec

__all__ = [
    "ENVIRONMENT_EXIT",
    "KEEP_HISTORY",
    "RunError",
    "RunOutcome",
    "Unavailable",
    "check_run",
    "current_run_dir",
    "exit_code",
    "run_scenario",
]

READER_ROLES = ("consumer", "waiter", "joiner", "tailer")
KEEP_HISTORY = ("all", "failing", "none")
"""What a run keeps of its merged history once checked (``--keep-history``):
a matrix or a campaign wants only the failing runs' (the ones someone reads)."""
RUN_SUBDIRS = ("history", "logs", "control", "store", "workers")
STOP_GRACE = 5.0
READY_TIMEOUT = 15.0
MAX_CRASHES = 5  # a worker that keeps dying on its own is not restarted forever
ENVIRONMENT_EXIT = 75
"""A worker's exit code when it cannot write its history (a full disk, a
read-only file system): knell's environment failed, not the bus."""

_RUN_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("run_dir", default=None)


def current_run_dir() -> Path | None:
    """The run directory being written or checked in this context, if any
    (an internal error's traceback is saved there)."""
    return _RUN_DIR.get()


class RunError(KnellError):
    """The run could not be set up (bad driver, unwritable reports folder)."""


class Unavailable(RunError):
    """This machine cannot run the scenario as written: a library, a kernel
    feature or a server build its faults need is missing here (libfaketime,
    a Redis that runs under it). Nothing about the bus: the matrix shows
    such a cell as not run here, the pytest plugin skips it (fails it where
    ``KNELL_REQUIRE_SERVERS=1`` says the machine must provide it)."""


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    verdict: Verdict
    exit_code: int
    crashes: list[str] = field(default_factory=list)
    """One line per worker that exited on its own, with its last error."""
    expect: Expectation | None = None
    """The finding the scenario exists to make, if any."""
    report_problems: list[str] = field(default_factory=list)
    """What could not be drawn in index.html (never changes the verdict)."""

    @property
    def expectation_met(self) -> bool | None:
        """Whether the run made the scenario's expected finding (None: the
        scenario expects none)."""
        if self.expect is None:
            return None
        return self.expect.met_by(self.verdict.valid, self.verdict.fired())


def exit_code(verdict: Verdict) -> int:
    """0 valid, 1 invalid, 2 unknown (Jepsen's three answers)."""
    if verdict.valid is True:
        return 0
    if verdict.valid is False:
        return 1
    return 2


def make_store(scenario: Scenario, run_dir: Path, owner: Owner | None) -> Any:
    """The run's store, not started: a SQLite file, a private Postgres or
    Redis server, an existing server (``url``), or a compose stack."""
    from knell.stores import StoreSpec, create_store

    table = scenario.store
    from knell.stores.disk import refusal

    refused = refusal(table.disk, url=table.url, provider=table.provider)
    if refused is not None:
        from knell.fs.mount import fuse_missing
        from knell.stores.base import StoreError

        if table.url is None and table.provider == "private" and fuse_missing() is not None:
            raise Unavailable(f"[store] {refused}")  # the machine lacks FUSE, not bad input
        raise StoreError(f"[store] {refused}")
    if table.provider == "compose":
        from knell.stores.compose.adapter import compose_store

        try:
            import docker  # noqa: F401  (the compose stack's client)
        except ImportError:
            from knell.stores.kind import MissingExtra

            raise MissingExtra(
                "provider = \"compose\" needs the Python module 'docker', which is not "
                "installed: pip install 'knell[compose]'"
            ) from None

        return compose_store(
            table, run_dir, owner, poll=scenario.poll_interval, timeout=scenario.op_timeout
        )
    spec = StoreSpec(
        kind=table.kind,
        poll_interval=scenario.poll_interval,
        op_timeout=scenario.op_timeout,
        **table.private_options(),
    )
    return create_store(spec, run_dir, owner=owner)


def start_env(scenario: Scenario, run_dir: Path) -> dict[str, dict[str, str]]:
    """Per process name (``store``: the store's server), the variables it
    needs from its start for a fault of the scenario to reach it (a clock
    fault's preload, :meth:`~knell.nemesis.kind.FaultKind.start_env`). A
    machine that cannot run such a fault refuses the run, saying why."""
    env: dict[str, dict[str, str]] = {}
    for index, fault in enumerate(scenario.nemesis):
        try:
            wanted = fault_kinds.kind(fault.fault).start_env(fault, scenario, run_dir)
        except Exception as exc:
            raise Unavailable(f"nemesis[{index}]: {fault.fault} cannot run here: {exc}") from None
        for name, variables in wanted.items():
            env.setdefault(name, {}).update(variables)
    return env


def _check_store_faults(scenario: Scenario, store: Any) -> None:
    """A scenario's store faults must be ones this store can suffer (each
    store fault kind names the capability it uses)."""
    for index, fault in enumerate(scenario.nemesis):
        need = getattr(fault_kinds.kind(fault.fault), "needs", None)
        if need is None or need in store.faults:
            continue
        if scenario.store.url:
            how = (
                " (an existing server is crashed only through crash_command and "
                "restart_command in [store])"
            )
        elif need in ("power-loss", "disk-fault"):
            how = ' (its data must be on the faulty disk: [store] disk = "faulty")'
        elif need in ("restart", "disconnect"):
            how = (
                ' (only a containerized store can: provider = "compose"; to cut a private'
                ' server off, partition its links: fault = "partition")'
            )
        else:
            how = ""
        raise RunError(
            f"nemesis[{index}]: {fault.fault} needs a store that can {need}, and this "
            f"{store.describe_short()} cannot{how}"
        )


class _Run:
    def __init__(
        self,
        scenario: Scenario,
        run_dir: Path,
        provision: Provision,
        schedule: Schedule,
        say: Callable[[str], None],
        owner: Owner,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.scenario = scenario
        self.run_dir = run_dir
        self.provision = provision
        self.timer = PhaseTimer()
        """Where the run's time goes (``timings.json``; the runner hands in its own)."""
        self.url = str(provision.store.url)
        self.driver = provision.driver
        self.schedule = schedule
        self.say = say
        self.owner = owner
        self.halt: threading.Event | None = None
        """Set by the online check at an anomaly: the schedule is left."""
        self.supervisor = supervisor or Supervisor(run_dir, self.owner)
        self.nemesis = HistoryWriter(part_path(run_dir / "history", "nemesis", 1), "nemesis", 1)
        self.stopping: set[str] = set()
        self.in_force: dict[int, Action] = {}
        """Fault number -> its apply, while the fault holds."""
        self.crashes: dict[str, int] = {}
        self.causes: dict[str, str | None] = {}
        self.ctx = NemesisContext(
            scenario=scenario,
            supervisor=self.supervisor,
            record=self.record,
            stores={"store": provision.store},
            say=say,
        )

    # -- setup -------------------------------------------------------------

    def _add_worker(
        self, name: str, role: str, params: WorkerParams, url: str, driver: str | None
    ) -> None:
        """Write the worker's spec and put it under the supervisor. The
        spec file (readable by anyone who can read the run directory, and
        uploaded with it) holds the bus URL without its password; the
        worker gets the real one through its environment
        (:func:`knell.redact.bus_env`)."""
        path = self.run_dir / "workers" / f"{name}.json"
        spec = WorkerSpec(
            name=name,
            role=role,
            bus_url=redact_url(url),
            driver=driver,
            history_dir=str((self.run_dir / "history").resolve()),
            control_dir=str((self.run_dir / "control").resolve()),
            params=params,
            reference=None if driver else reference_bus(url),
        )
        atomic_write(path, json.dumps(spec.to_json(), indent=2) + "\n")
        self.supervisor.add(name, path.resolve(), env=bus_env(url))

    def start_all(self) -> None:
        """Provision the links and bridges, then start every worker on its
        endpoint (the store directly, its link, or a bridge)."""
        self.nemesis.write("info", "begin", {"seed": self.schedule.seed})
        self.supervisor.say = self.say
        self.supervisor.warm()  # the zygote imports while the links and bridges start
        self.provision.start(self.supervisor)
        self.ctx.routes = self.provision.routes()
        if self.provision.links is not None:
            self.ctx.links["links"] = self.provision.links
            # Every kind, before the clock starts: the final sweep of a run
            # with links is every kind's (:meth:`sweepers`), and a link
            # fault's proof asks every link kind what proves its toxic.
            fault_kinds.kinds()
        workers = self.scenario.workers()
        for name, spec in workers.items():
            end = self.provision.endpoints[name]
            params = self.scenario.params_of(spec)
            self._add_worker(name, spec.role, params, end.url, end.driver)
        for name in workers:
            self.supervisor.start(name)
        self.say(f"started {len(self.supervisor.workers)} processes")

    def wait_ready(self) -> None:
        """Hold the fault schedule until every worker has written its
        ``start`` event (its bus is open). Starting a few interpreters can
        take seconds on a loaded machine, and a fault aimed at a process
        that is still importing tests nothing; the schedule's clock starts
        here (nemesis ``ready``), at most ``READY_TIMEOUT`` after ``begin``."""
        deadline = time.monotonic() + READY_TIMEOUT
        pending = set(self.scenario.workers())
        while pending and time.monotonic() < deadline:
            pending = {n for n in pending if not self._started(n)}
            if pending:
                self.watch_crashes()
                time.sleep(POLL)
        self.nemesis.write("info", "ready", {"pending": sorted(pending)})

    def _started(self, name: str) -> bool:
        worker = self.supervisor.workers[name]
        path = part_path(self.run_dir / "history", name, worker.incarnation)
        try:
            return path.stat().st_size > 0
        except OSError:
            return False

    # -- the schedule --------------------------------------------------------

    def record(
        self,
        f: str,
        target: str,
        *,
        action: Action | None = None,
        type_: str = "info",
        **value: Any,
    ) -> None:
        """Write a nemesis event. An action's apply also records what the
        fault is and touches, so its window can be read back from the
        history alone (:mod:`knell.checker.windows`)."""
        event: dict[str, Any] = {"target": target, **value}
        if action is not None:
            kind = fault_kinds.kind(action.kind)
            event.update(fault=action.fault, kind=action.kind)
            if action.step == "apply":
                event.update(
                    effect=kind.effect,
                    grace_s=kind.grace,
                    radius=kind.radius(action, self.ctx).to_json(),
                )
        self.nemesis.write(type_, f, event)

    def apply(self, action: Action) -> None:
        """Hand the step to its kind. An apply is an operation of the
        nemesis: its ``invoke`` is written before the kind acts (the fault's
        window opens there), its completion by the kind, or ``fail`` here
        when it did not apply."""
        kind = fault_kinds.kind(action.kind)
        if action.step != "apply":
            self.in_force.pop(action.fault, None)
            kind.heal(action, self.ctx)
            return
        self.record(kind.apply_f, action.target, action=action, type_="invoke")
        if kind.apply(action, self.ctx):
            self.in_force[action.fault] = action
        else:
            self.record(kind.apply_f, action.target, action=action, type_="fail")

    def watch_crashes(self) -> None:
        """A worker that exits on its own is a finding: record it, restart it."""
        lost = self.supervisor.lost()
        if lost:
            raise RunError(
                f"the worker fork server died and took {', '.join(lost)} with it; the run is "
                f"abandoned: this is knell, not the bus (see {self.run_dir / 'logs'})"
            )
        for name, worker in self.supervisor.workers.items():
            if name in self.ctx.expected_down or name in self.stopping:
                continue
            if worker.popen is not None and worker.popen.poll() is not None:
                code = worker.popen.returncode
                pid = worker.popen.pid
                self.supervisor.wait_exit([name], 0)
                log = f"logs/{name}.{worker.incarnation}.log"
                cause = last_error(worker.log.tail()) if worker.log is not None else None
                if code == ENVIRONMENT_EXIT:
                    why = cause or "no space left on the device, or a read-only file system"
                    raise RunError(
                        f"{name} could not write its history ({why}); the run is abandoned: "
                        f"this is knell's environment, not the bus (see {self.run_dir / log})"
                    )
                self.record("crash", name, pid=pid, exit=code, error=cause)
                self.crashes[name] = self.crashes.get(name, 0) + 1
                self.causes[name] = cause
                because = f": {cause}" if cause else ""
                if self.crashes[name] > MAX_CRASHES:
                    self.stopping.add(name)
                    self.record("give-up", name, pid=None, crashes=self.crashes[name])
                    self.say(
                        f"{name} keeps exiting on its own{because} (see {log}); not restarting it"
                    )
                    continue
                self.say(f"{name} exited on its own (code {code}{because}, see {log}); restarting")
                restarted = self.supervisor.start(name)
                self.record("restart", name, pid=restarted.pid, incarnation=restarted.incarnation)

    def drive(self) -> None:
        """Play the schedule on the fault clock. Applying or healing a fault
        can take a while (a store that must come back, a proof through a
        proxy); the fault clock stops meanwhile, so a nemesis that falls
        behind shifts the rest of the plan instead of squeezing it: every
        fault keeps its planned hold, and faults the plan keeps apart stay
        apart. The run lasts longer by that much."""
        t0 = time.monotonic()
        behind = 0.0
        for action in self.schedule.actions:
            if action.at >= self.scenario.duration:
                break
            due = t0 + action.at + behind
            if not self._sleep_until(due):
                return
            late = time.monotonic() - due
            if late > 0.01:  # the last apply or heal took longer than planned
                behind += late
            self.apply(action)
        self._sleep_until(t0 + self.scenario.duration + behind)

    def _sleep_until(self, deadline: float) -> bool:
        """Wait for ``deadline`` (False: the online check asked to stop)."""
        while True:
            self.watch_crashes()
            if self.halt is not None and self.halt.is_set():
                self.say(
                    "the online check found an anomaly: leaving the schedule for the final phase"
                )
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.05))

    # -- the final phase -----------------------------------------------------

    def heal(self) -> None:
        """The final heal. Each fault still in force is healed by its kind as
        its planned heal would have (so its window closes under its own
        fault number), the latest first; then every kind sweeps what it may
        have left broken (the last registered first: a kind may rely on
        those registered before it)."""
        for number, action in sorted(self.in_force.items(), reverse=True):
            fault_kinds.kind(action.kind).heal(replace(action, step="heal"), self.ctx)
            del self.in_force[number]
        for kind in reversed(list(self.sweepers().values())):
            kind.heal_all(self.ctx)
        self.nemesis.write("info", "heal", {})

    def sweepers(self) -> dict[str, FaultKind]:
        """The kinds whose final sweep can find anything, in registration
        order. A kind's sweep looks for what is left in the context: the
        processes and store marks down on purpose (``expected_down``, which
        any kind's sweep may bring back: ``kill`` restarts what a power
        loss left down), the run's links (every link kind heals any toxic
        on any link), or what only that kind leaves (a paused worker, a
        clock moved). So when nothing is down and the run has no link, the
        kinds this run imported (every kind its plan names, and only those
        act) are all that can have left something; otherwise it is every
        kind, as it always was."""
        if self.ctx.expected_down or self.ctx.links:
            return fault_kinds.kinds()
        return fault_kinds.loaded()

    def stop(self, roles: tuple[str, ...]) -> None:
        names = [n for n, s in self.scenario.instances().items() if s.role in roles]
        self.stopping.update(names)
        for name in names:
            (self.run_dir / "control" / f"stop-{name}").touch()
        stuck = self.supervisor.wait_exit(names, STOP_GRACE)
        for name in stuck:
            self.record(
                "kill",
                name,
                pid=self.supervisor.kill(name),
                reason="did not stop in time",
                waited_s=STOP_GRACE,
            )
        self.nemesis.write("info", "stop", {"roles": list(roles)})

    def handles(self) -> list[tuple[str, str]]:
        """Every (handle, channel) that any process tried to subscribe.

        Only the lines that name a subscription are parsed (a block search,
        :func:`knell.history_files.marked_lines`): a day's soak holds
        millions of events and a few subscriptions per incarnation, and the
        drain waits on this list. A line that names one but is not a whole
        event (a torn last line) is passed over here; the check reads every
        part whole and reports it."""
        seen: dict[tuple[str, str], None] = {}
        for path in part_paths(self.run_dir / "history"):
            try:
                lines = list(marked_lines(path, b'"subscribe"'))
            except OSError as exc:
                raise HistoryError(f"{path}: cannot read history: {exc.strerror}") from None
            for line in lines:
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if (
                    isinstance(event, dict)
                    and event.get("f") == "subscribe"
                    and event.get("type") == "invoke"
                    and "handle" in event
                    and "channel" in event
                ):
                    seen[(str(event["handle"]), str(event["channel"]))] = None
        return list(seen)

    def drain(self) -> None:
        handles = self.handles()
        pending: dict[str, tuple[str, str]] = {}
        for index, (handle, channel) in enumerate(handles, start=1):
            name = f"drain-{index}"
            params = DrainParams(handle=handle, channel=channel)
            self._add_worker(name, "drain", params, self.url, self.driver)
            self.nemesis.write(
                "invoke", "drain", {"handle": handle}, handle=handle, channel=channel
            )
            self.supervisor.start(name)
            pending[name] = (handle, channel)
        self.say(f"draining {len(handles)} handle(s) to the true head")
        stuck = set(self.supervisor.wait_exit(list(pending), self.scenario.drain_timeout))
        bus: Any
        shown = self.driver or "the store's bus"
        try:
            bus = within(
                "open",
                shown,
                "its factory (opening the bus)",
                lambda: open_bus(self.url, self.driver),
                discard=_close_quietly,
            )
        except (DriverExited, DriverTimeout):
            raise  # the driver ended itself or hung: its error, not an unproven drain
        except Exception as exc:  # the store is gone: the drain cannot be proven
            bus = _Unreadable(exc)
        wedged = False  # a call of the driver's hung: it is not called again
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
                try:
                    heads = {channel: self._true_head(bus, channel, shown)}
                except DriverTimeout:
                    wedged = True
                    raise
                except DriverExited:
                    raise
                except Exception as exc:
                    self.nemesis.write(
                        "info",
                        "drain",
                        {"handle": handle, "error": f"the runner could not read the head: {exc}"},
                        handle=handle,
                        channel=channel,
                    )
                    continue
                self.nemesis.write(
                    "ok",
                    "drain",
                    {"handle": handle, "heads": heads},
                    handle=handle,
                    channel=channel,
                )
        finally:
            if not wedged:
                close_within(bus, shown, self.url)

    def _true_head(self, bus: Any, channel: str, shown: str) -> int:
        """The channel's head after the drain, read by the runner itself; a
        store still settling after the final heal gets a few seconds. A
        read that does not return at all is the driver's error."""
        deadline = time.monotonic() + max(5.0, 2 * self.scenario.op_timeout)
        while True:
            try:
                return int(within("call", shown, f"head({channel!r})", lambda: bus.head(channel)))
            except (DriverExited, DriverTimeout):
                raise
            except Exception:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def final_phase(self) -> None:
        lap = self.timer.lap
        self.heal()
        self.settle_store()
        lap("final: heal")
        # Readers stop while producers still post: a waiter blocked in its
        # wait is rung by the next post and sees its stop file at once,
        # where after the producers it would sleep out its whole timeout
        # (1.5 s of every quickstart run). Nothing is owed to a stopped
        # reader: the drain reads every handle to the head afterwards.
        self.stop(READER_ROLES)
        self.stop(("producer",))
        lap("final: stop")
        self.drain()
        lap("final: drain")
        self.contract_finals()
        lap("final: contract finals")
        self.probe_integrity()
        lap("final: integrity")

    def settle_store(self) -> None:
        """Wait until the store serves again before anything is drained. A
        heal can end a fault before the store is back: Postgres that
        PANICked on a full disk restarts itself and runs crash recovery,
        refusing connections ("in recovery mode") for as long as that takes,
        seconds more on a loaded machine. A drain started then fails, and
        loss, integrity and evidence become unknown for a reason that is
        neither the bus's nor the fault's. How long the store stayed away
        after the window is the scenario's business (the availability
        check judges the operations that failed); the final phase only needs
        it back, so it waits up to ``drain_timeout`` and says so. A store
        that never returns is left to the drain, which records why it
        could not be proven."""
        from knell.stores.base import StoreError

        try:
            waited = self.provision.store.wait_ready(self.scenario.drain_timeout)
        except StoreError as exc:
            self.say(f"the store did not serve again after the final heal: {exc}")
            return
        if waited >= 0.5:
            self.say(f"the store served again {waited:.1f} s after the final heal")

    def probe_integrity(self) -> None:
        """The store kind's final integrity probe, once nothing writes to
        the store (:mod:`knell.stores.integrity`), recorded as one nemesis
        ``integrity`` event for the ``store-integrity`` check. A kind with
        no probe for this store records nothing. A probe that raises is
        knell's trouble, never the bus's: it is recorded as unknown."""
        from knell.stores.integrity import INTEGRITY_F, Integrity
        from knell.stores.registry import get

        try:
            found = get(self.scenario.store.kind).integrity(self.provision.store)
        except Exception as exc:
            found = Integrity.unknown(INTEGRITY_F, f"the probe failed: {type(exc).__name__}: {exc}")
        if found is None:
            return
        self.say(f"store integrity ({found.probe}): {found.status}")
        self.nemesis.write(found.event_type, INTEGRITY_F, {"target": "store", **found.to_json()})

    # -- the queue and at-most-once contracts' final phase (knell.final_phase) --

    def contract_finals(self) -> None:
        """Stop the claimers and holders, then run each queue's and each
        role's final worker, recorded as drains like the broadcast ones."""
        todo = finals(self.scenario)
        if not todo:
            return
        self.stop(FINAL_ROLES)
        for final in todo:
            self._add_worker(final.name, final.role, final.params, self.url, self.driver)
            self.nemesis.write(
                "invoke",
                "drain",
                self._final_value(final),
                handle=final.name,
                channel=final.channel,
            )
            self.supervisor.start(final.name)
        self.say(f"final phase of {len(todo)} queue(s), role(s) and stream(s)")
        stuck = set(self.supervisor.wait_exit([f.name for f in todo], self.scenario.drain_timeout))
        for final in todo:
            worker = self.supervisor.workers[final.name]
            code = worker.exits[-1] if worker.exits else None
            value = self._final_value(final)
            if final.name in stuck or code != 0:
                value["error"] = "timed out" if final.name in stuck else f"exited {code}"
                self.nemesis.write("info", "drain", value, handle=final.name, channel=final.channel)
            else:
                self.nemesis.write("ok", "drain", value, handle=final.name, channel=final.channel)

    @staticmethod
    def _final_value(final: Final) -> dict[str, Any]:
        return {"handle": final.name, "contract": final.contract}


def _close_quietly(bus: Any) -> None:
    """Close a bus that was opened after the runner stopped waiting for it."""
    bus.close()


class _Unreadable:
    """Stands in for a bus the runner could not open for the drain: every
    read fails with why, so each drain is recorded as unproven."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def head(self, channel: str) -> int:
        raise RuntimeError(f"cannot open the bus: {self.exc}")

    def close(self) -> None:
        pass


def run_scenario(
    scenario: Scenario,
    *,
    reports: Path,
    driver: str | None = None,
    schedule: Schedule | None = None,
    say: Callable[[str], None] = lambda _: None,
    watch: RunWatch | None = None,
    page: bool = True,
    keep_history: str = "all",
    online: OnlineRun | None = None,
) -> RunOutcome:
    """Run one scenario end to end and write its run directory.

    ``keep_history`` (:data:`KEEP_HISTORY`): ``all`` keeps the merged
    history, ``failing`` only for a run that is not VALID, ``none`` never
    (the verdict and the reports stay).

    ``schedule`` replays a saved fault plan instead of expanding the seed;
    ``watch`` is told when the run starts, changes phase and ends (live
    progress, :mod:`knell.watch`). ``page=False`` writes every verdict
    file but not ``index.html``: its plots are most of a short run's
    check time (1.3-2 s of a 1 s quickstart), so bulk runs (matrix,
    campaign, explore) draw it only for the runs a person will open, and
    ``knell report RUN_DIR`` draws any other when asked. ``online``:
    check the run while it goes (:mod:`knell.online_run`), and stop it
    at its first anomaly when it asks."""
    if schedule is not None:
        unknown = sorted(
            {
                a.target
                for a in schedule.actions
                if a.target not in fault_kinds.kind(a.kind).known_targets(scenario)
            }
        )
        if unknown:
            raise RunError(
                f"schedule targets {', '.join(unknown)} are not processes of {scenario.name!r}"
            )
    driver = driver or scenario.bus
    timer = PhaseTimer()
    reap()  # what dead runners left behind; never what a live one owns
    try:
        run_dir = new_dir(reports / scenario.name, *RUN_SUBDIRS)
    except RunDirError as exc:
        raise RunError(f"cannot create the run directory: {exc}") from None
    owner = Owner(run_dir)
    # An exec adapter's relative command is found where ``knell run`` was
    # typed: said before the supervisor copies the environment for every
    # worker and its zygote (which run in run directories).
    os.environ.setdefault(EXEC_CWD_VAR, os.getcwd())
    supervisor = Supervisor(run_dir, owner)
    supervisor.say = say
    store: Any = None
    try:
        store = make_store(scenario, run_dir, owner)
        _check_store_faults(scenario, store)
        Provision(scenario, run_dir, store, driver, owner).check()
        preload = start_env(scenario, run_dir)
        if "store" in preload:
            refused = getattr(store, "preload_refusal", lambda: "it is not a private server")()
            if refused is not None:
                raise Unavailable(f"a clock fault must move the store's clock, and {refused}")
            store.server_env = preload.pop("store")
        say(f"store: {store.describe_short()}")
        store.start()
        # The store serves: the zygote imports the worker's modules while
        # the runner opens the bus and writes the plan.
        supervisor.warm()
        try:
            shown = driver or store.describe_short()
            within("open", shown, "importing its module", lambda: resolve_driver(store.url, driver))
            bus = within(  # creates the schema before workers race to
                "open",
                shown,
                "its factory (opening the bus)",
                lambda: open_bus(store.url, driver),
                discard=_close_quietly,
            )
            try:
                for contract in scenario.contracts:
                    require_contract(bus, contract, shown, scenario.name)
                for feature in scenario.features:
                    require_feature(bus, feature, shown, scenario.name)
            finally:
                close_within(bus, shown, store.url)
        except DriverError as exc:
            raise RunError(str(exc)) from None
    except BaseException:
        supervisor.shutdown()
        if store is not None:
            store.stop()
        owner.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    schedule = schedule or expand(scenario)
    atomic_write(run_dir / "schedule.json", json.dumps(schedule.to_json(), indent=2) + "\n")
    atomic_write(
        run_dir / "scenario.json",
        json.dumps({**_public(scenario.model_dump()), "bus": driver}, indent=2) + "\n",
    )
    say(f"run directory {run_dir}")
    token = _RUN_DIR.set(run_dir)
    if watch is not None:
        watch.begin(run_dir, scenario, schedule)
    try:
        provision = Provision(scenario, run_dir, store, driver, owner)
        run = _Run(scenario, run_dir, provision, schedule, say, owner, supervisor)
        run.supervisor.start_env = preload
        run.timer = timer
        timer.lap("setup")
        if online is not None:
            run.halt = online.halt
            online.start(run_dir, _check_config(run_dir))
        try:
            with interrupt_on_terminate():
                run.start_all()
                run.wait_ready()
                timer.lap("start")
                run.drive()
                timer.lap("scenario")
                if online is not None:
                    online.final_phase()
                if watch is not None:
                    watch.phase("final")
                say("final phase: heal, stop producers, drain every handle")
                run.final_phase()
        finally:
            run.supervisor.shutdown()
            provision.stop()
            store.stop()
            run.nemesis.close()
            owner.close()
            if online is not None:
                online.end()
            timer.lap("shutdown")
        if watch is not None:
            watch.phase("check")
        outcome = check_run(run_dir, say=say, page=page, timer=timer, keep_history=keep_history)
        timer.write(run_dir)
    finally:
        if watch is not None:
            watch.end()
        _RUN_DIR.reset(token)
    note = point_latest(run_dir)
    if note:
        say(note)
    crashes = [
        f"{name} exited on its own {n} time(s)"
        + (f"; last: {run.causes[name]}" if run.causes.get(name) else "")
        for name, n in sorted(run.crashes.items())
    ]
    return RunOutcome(
        outcome.run_dir,
        outcome.verdict,
        outcome.exit_code,
        crashes,
        expect=scenario.expect,
        report_problems=outcome.report_problems,
    )


def _public(data: dict[str, Any]) -> dict[str, Any]:
    """The scenario as written to the run directory: no passwords (the
    store table through :func:`knell.redact.redact_settings`)."""
    store = data.get("store")
    if isinstance(store, dict):
        data = {**data, "store": redact_settings(store)}
    return data


_CONFIG_FIELDS = ("wake_bound", "op_timeout", "max_error_rate")


def _scenario_json(run_dir: Path) -> dict[str, Any]:
    """The run's ``scenario.json`` ({} when absent); a damaged one is named."""
    path = run_dir / "scenario.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a knell scenario.json ({exc})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a knell scenario.json (expected a JSON object)")
    return data


def _check_config(run_dir: Path) -> CheckConfig:
    """The checker's knobs from the stored scenario, and what it tests (so
    the checks of anything else stay dormant: :mod:`knell.checker.dormant`)."""
    data = _scenario_json(run_dir)
    values = {k: data[k] for k in _CONFIG_FIELDS if data.get(k) is not None}
    try:
        return CheckConfig(
            **values,
            contracts=tested_contracts(data),
            roles=process_roles(data),
            forget_after=forget_after(data),
        )
    except (TypeError, ValueError) as exc:
        raise RunError(f"{run_dir / 'scenario.json'}: {exc}") from None


def _expectation(run_dir: Path) -> Expectation | None:
    """The stored scenario's ``expect``, if it has one."""
    value = _scenario_json(run_dir).get("expect")
    if value is None:
        return None
    try:
        return Expectation.model_validate(value)
    except ValueError as exc:
        raise RunError(f"{run_dir / 'scenario.json'}: expect: {exc}") from None


def _writable(run_dir: Path) -> None:
    """``knell check`` rewrites the merged history and the reports: say so
    before starting rather than failing half-way."""
    if not os.access(run_dir, os.W_OK):
        raise RunError(
            f"{run_dir}: not writable (knell check writes history.jsonl, results.json, "
            "report.md and junit.xml there); copy the run directory somewhere writable"
        )


def _keep_once(run_dir: Path, parts: list[Path], merged: Path, count: int) -> None:
    """Remove the parts once the merge is proven whole, so the history is
    kept once; an unproven merge keeps the parts and is knell's own error
    (the checker would judge a history with events missing)."""
    refused = verify_merge(parts, merged, count)
    if refused is not None:
        merged.unlink(missing_ok=True)
        raise RunError(f"{refused}; run knell check {run_dir} again")
    remove_parts(parts)
    if merged.name == MERGED:
        (run_dir / MERGED_PLAIN).unlink(missing_ok=True)  # an older run's copy, now merged again


def _why_no_history(run_dir: Path) -> str:
    """Why a run directory has no history: not kept by the run's
    ``--keep-history``, or nothing there at all."""
    try:
        results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        results = None
    kept = results.get("history_kept") if isinstance(results, dict) else None
    if isinstance(kept, str):
        return f"not kept by the run: {kept}"
    return f"expected {MERGED}, {MERGED_PLAIN} or history/*.jsonl[.zst]"


def check_run(
    run_dir: Path,
    *,
    say: Callable[[str], None] = lambda _: None,
    page: bool = True,
    timer: PhaseTimer | None = None,
    keep_history: str = "all",
) -> RunOutcome:
    """Merge (if needed) and check a run directory in one pass (the checks
    and the run statistics read the history together), and (re)write its
    reports. A run directory that cannot be read or written, or holds no
    history, is a :class:`RunError` (exit 3)."""
    token = _RUN_DIR.set(run_dir)
    try:
        return _check_run(run_dir, say, page, timer or PhaseTimer(), keep_history)
    finally:
        _RUN_DIR.reset(token)


def _check_run(
    run_dir: Path,
    say: Callable[[str], None],
    page: bool,
    timer: PhaseTimer,
    keep_history: str,
) -> RunOutcome:
    config = _check_config(run_dir)
    expect = _expectation(run_dir)
    _writable(run_dir)
    parts = part_paths(run_dir / "history")
    merged = run_dir / MERGED if parts else merged_path(run_dir)
    torn: list[str] = []
    try:
        if parts:
            count, torn = merge_histories(parts, merged)
            _keep_once(run_dir, parts, merged, count)
        elif not merged.exists():
            raise RunError(f"{run_dir}: no history here ({_why_no_history(run_dir)})")
    except OSError as exc:
        reason = "no space left on the device" if exc.errno == errno.ENOSPC else exc.strerror
        raise RunError(f"{merged}: cannot write the merged history: {reason}") from None
    for line in torn:
        say(line)
    timer.lap("merge")
    stats = RunStats()
    series = RunSeries()
    reader = HistoryReader(merged)
    wellformed = WellFormed(merged, lambda: reader.line)
    verdict = check_events(
        wellformed.events(reader), config, extra=[stats, series], clocks=scan(merged)
    )
    for doubt in wellformed.doubts:
        verdict.cannot_judge(doubt)
    if reader.torn:
        # The merged file is written whole by knell: a torn line there means
        # it was truncated, and whatever followed is missing.
        torn += reader.torn
        verdict.undecided(
            f"{merged.name} is truncated (its last line is torn): events may be missing"
        )
    timer.lap("check")
    dropped = keep_history == "none" or (keep_history == "failing" and verdict.valid is True)
    try:
        problems = write_reports(
            run_dir,
            verdict,
            stats,
            torn,
            series=series,
            html=page,
            history_dropped=keep_history if dropped else None,
        )
    except OSError as exc:
        reason = "no space left on the device" if exc.errno == errno.ENOSPC else exc.strerror
        raise RunError(f"{run_dir}: cannot write the reports: {reason}") from None
    if dropped:
        merged.unlink(missing_ok=True)
    timer.lap("reports" if page else "reports (no page)")
    return RunOutcome(run_dir, verdict, exit_code(verdict), expect=expect, report_problems=problems)
