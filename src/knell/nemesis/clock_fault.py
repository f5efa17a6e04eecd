"""What the clock fault kinds share: a wall clock moved under some processes.

Leases, lease expiry, dead-letter timing, role holds and waiter timeouts
all depend on clocks, and a laptop that sleeps, an NTP step, a resumed VM
or a drifting container moves time under a bus. Jepsen's clock nemesis
(bump, strobe, reset) finds what follows; knell's four kinds are
``clock-skew``, ``clock-jump``, ``clock-strobe`` and ``clock-rate``, one
module each over this base.

**What is faked.** Only the realtime (wall) clock: ``time.time()``,
``datetime.now()``, ``gettimeofday``, ``clock_gettime(CLOCK_REALTIME)``,
and for the store server Postgres ``now()``/``clock_timestamp()`` and
Redis ``TIME`` and ``PX`` expiry. Monotonic clocks are true, and so are
sleeps and timeouts (``time.sleep``, ``Event.wait``, ``select``, socket
timeouts): a clock step moves no duration. That is what NTP, a skewed
machine or a resumed VM do, and why a bus that measures durations on a
monotonic clock stays right while one that measures them on the wall
clock is caught. The mechanism is libfaketime (:mod:`knell.faketime`),
preloaded at start into exactly the processes some clock spec of the
scenario can target (:meth:`ClockFault.start_env`), each with a control
file of its own that the nemesis rewrites at run time.

**What a bus can still observe.** True time is one system call away (the
raw ``clock_gettime``, which libfaketime does not wrap: knell's own
history uses it, :mod:`knell.faketime.truetime`); so are file
modification times (the kernel stamps them) and the clock of any process
that was not targeted. A bus that asks the store for the time (Postgres
``now()``, Redis ``TIME``) sees the store's clock, which a fault moves only
when it targets ``store`` or ``host``.

**Targets.** An instance, group or role (a seeded instance of it, as for
other faults: a client on another machine of a network store); ``store``
(the private Postgres or Redis server, whose own clock computes ``now()``
and ``PX`` expiry); ``host`` (every process and the store server at once:
an NTP step, a resumed laptop). A SQLite store has no clock of its own:
its processes share the host's, so a clock fault there must target
``host``; a per-process target is refused when the scenario loads.

**Proof and heal.** An apply writes the control files, then waits until
every target shows the wanted offset (:mod:`knell.faketime.probe`); one
that does not is ``fault-failed`` (the run's verdict is then unknown), and
its clocks are set back. A heal sets the clocks back to true time and
proves that too; the final phase heals whatever is still moved before
the drain. Every apply records ``processes``, ``store``, ``offset_s`` and
``rate`` (a strobe also ``period_s``); every heal records ``clock-reset``
with ``offset_s = 0`` and ``rate = 1``, so the history alone gives each
process's and the store's offset as a function of true time.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field

from knell.durations import Duration, parse_duration
from knell.faketime.control import (
    CLOCK_DIR,
    CONTROL_ENV,
    STORE,
    control_path,
    preload_env,
    report_path,
    setting,
    write_setting,
)
from knell.faketime.library import find_library
from knell.faketime.probe import PROOF_TIMEOUT, TOLERANCE, prove, read_report, store_offset
from knell.faketime.truetime import time_ns
from knell.nemesis.kind import Action, Effect, FaultKind, FaultSpec, NemesisContext, Radius
from knell.nemesis.targets import FaultTargets

__all__ = [
    "HOST",
    "ClockFault",
    "ClockOffsetSpec",
    "ClockSpec",
    "Moved",
    "SignedDuration",
    "parse_signed",
]

HOST = "host"
"""The target that moves every process's clock and the store server's."""


def parse_signed(value: Any) -> float:
    """A signed duration: ``"30s"``, ``"-30s"``, ``"+2m"``, ``-1.5``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            return -parse_duration(text[1:])
        return parse_duration(text.removeprefix("+"))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return -parse_duration(-value)
    return parse_duration(value)


SignedDuration = Annotated[float, BeforeValidator(parse_signed)]


class ClockSpec(FaultSpec):
    """The fields every clock fault shares: which clock, for how long."""

    duration: Duration = Field(default=5.0, gt=0, description="the clock is moved this long")


class ClockOffsetSpec(ClockSpec):
    """A clock fault that moves the clock by a signed ``offset``."""

    offset: SignedDuration = Field(description='signed: "30s" ahead, "-30s" behind')


@dataclass
class Moved:
    """One clock fault in force: what it moved, and its ticker if the
    setting changes while it holds (a strobe, a rate)."""

    target: str
    processes: list[str]
    store: bool
    controls: list[Path]
    stop: threading.Event = field(default_factory=threading.Event)
    ticker: threading.Thread | None = None

    def halt(self) -> None:
        self.stop.set()
        if self.ticker is not None:
            self.ticker.join(timeout=2)


def _networked(scenario: FaultTargets) -> bool:
    """Whether the run's store is a server its bus reaches over the network
    (else it is embedded in every process, and has the host's clock)."""
    from knell.stores import registry

    kind = registry.kinds().get(scenario.store.kind)
    return kind is not None and kind.network


def _server_store(scenario: FaultTargets) -> bool:
    """Whether the run's store is a private server knell starts itself."""
    store = scenario.store
    return (
        _networked(scenario)
        and not getattr(store, "url", None)
        and getattr(store, "provider", "private") == "private"
    )


def _true_s() -> float:
    return time_ns() / 1e9


class ClockFault(FaultKind):
    """Base of the clock fault kinds (see the module docstring).

    A kind says how its clock moves: :meth:`first` (the offset it proves at
    apply), :meth:`setting` (the offset at a true time while it holds,
    given when it started; None if it never changes, so no ticker runs),
    and the ``offset_s``/``rate`` it records."""

    heal_f: ClassVar[str] = "clock-reset"
    effect: ClassVar[Effect] = "degraded"
    grace: ClassVar[float] = 0.5
    tick: ClassVar[float] = 0.01
    """Seconds between two settings of a ticking fault."""

    def __init__(self) -> None:
        self._moved: dict[tuple[int, int], Moved] = {}

    # -- what a kind says ---------------------------------------------------------

    @abstractmethod
    def first(self, action: Action) -> float:
        """The offset the apply sets and proves."""

    def setting(self, action: Action, since: float, now: float) -> float | None:
        """The offset at true time ``now`` of a fault applied at ``since``
        (None: it keeps :meth:`first` for the whole window)."""
        return None

    def wanted(self, action: Action, since: float, now: float) -> float:
        """The offset a target should show at true time ``now``."""
        offset = self.setting(action, since, now)
        return self.first(action) if offset is None else offset

    def tick_of(self, action: Action) -> float:
        """Seconds between two settings while ``action`` holds."""
        return self.tick

    def tolerance(self, action: Action) -> float:
        """How far a proof may be off (a ticking fault lags one tick)."""
        return TOLERANCE

    def recorded(self, action: Action, since: float, now: float) -> dict[str, Any]:
        """What the apply event, written at true time ``now`` for a fault
        set at ``since``, says besides targets: ``offset_s`` and ``rate``,
        from which the offset at any later true time follows."""
        return {"offset_s": float(self.first(action)), "rate": 1.0}

    # -- planning -----------------------------------------------------------------

    def hold(self, spec: FaultSpec) -> float:
        assert isinstance(spec, ClockSpec)
        return spec.duration

    def targets(self, spec: FaultSpec, scenario: FaultTargets) -> list[str]:
        if spec.target in (HOST, STORE):
            return [spec.target]
        return scenario.targets(spec.target)

    def known_targets(self, scenario: FaultTargets) -> set[str]:
        return super().known_targets(scenario) | {HOST, STORE}

    def occupies(self, target: str, scenario: FaultTargets) -> set[str]:
        """A clock: its own name under ``clock:``, so a clock fault may hold
        while a process is killed or paused (a restarted process reads the
        same control file; a proof skips a process that cannot run), but
        two clock faults never move one clock at once; ``host`` holds every
        clock, and a fault on the store server's clock holds the store."""
        held = {f"clock:{target}"}
        if target == HOST:
            held = {f"clock:{n}" for n in (HOST, STORE, *scenario.instances())}
        if target in (HOST, STORE) and _server_store(scenario):
            held.add(STORE)  # no store fault meanwhile: a server down cannot show its clock
        return held

    def refusal(self, spec: FaultSpec, scenario: FaultTargets) -> str | None:
        """Why ``spec`` cannot run on this scenario's store, or None."""
        server = _server_store(scenario)
        networked = _networked(scenario)
        if spec.target == STORE and not server:
            return (
                "'store' moves the clock of a private store server (a network store "
                f"knell starts itself), and this scenario's store is {scenario.store.kind!r}"
                + (" on a server knell does not start" if networked else "; target 'host'")
            )
        if spec.target == HOST and networked and not server:
            return (
                "'host' must move the store's clock too, and knell cannot fake the clock "
                "of a server it does not start (url or compose)"
            )
        if spec.target not in (HOST, STORE) and not networked:
            return (
                f"a {scenario.store.kind} store has no clock of its own: every process "
                f"shares the host's, "
                f"so a clock fault must target 'host', not {spec.target!r} (a per-process "
                f"skew models a client on another machine of a network store)"
            )
        return None

    def covered(self, target: str, scenario: FaultTargets) -> tuple[list[str], bool]:
        """The instances and whether the store server a clock target moves."""
        if target == HOST:
            return list(scenario.instances()), _server_store(scenario)
        if target == STORE:
            return [], True
        return scenario.targets(target), False

    def start_env(
        self, spec: FaultSpec, scenario: FaultTargets, run_dir: Path
    ) -> dict[str, dict[str, str]]:
        """The preload for every process ``spec`` can target (``store``: the
        store server); raises :class:`~knell.faketime.ClockUnavailable`."""
        library = find_library()
        processes, store = self.covered(spec.target, scenario)
        env = {
            name: preload_env(library, control_path(run_dir, name), report_path(run_dir, name))
            for name in processes
        }
        if store:
            env[STORE] = preload_env(library, control_path(run_dir, STORE))
        return env

    # -- acting -------------------------------------------------------------------

    def radius(self, action: Action, ctx: NemesisContext) -> Radius:
        processes, store = self.covered(action.target, ctx.scenario)
        if store:  # every client sees the store's clock
            return Radius(
                processes=frozenset(processes) | frozenset(ctx.scenario.instances()),
                stores=frozenset({"store"}),
            )
        return Radius(processes=frozenset(processes))

    def _key(self, action: Action, ctx: NemesisContext) -> tuple[int, int]:
        return id(ctx.supervisor), action.fault

    def _readers(
        self, ctx: NemesisContext, processes: list[str], store: bool
    ) -> dict[str, Callable[[], tuple[float, float] | None]]:
        """Who must show the offset: each live, running target (a frozen or
        dead one cannot report; it reads the control file when it runs
        again), and the store server."""
        run_dir = ctx.supervisor.run_dir
        readers: dict[str, Callable[[], tuple[float, float] | None]] = {}
        for name in processes:
            worker = ctx.supervisor.workers.get(name)
            if worker is None or not worker.alive() or worker.paused:
                continue
            readers[name] = partial(read_report, report_path(run_dir, name))
        if store:
            server = ctx.stores["store"]
            readers[STORE] = partial(store_offset, server)
        return readers

    def _store_control(self, ctx: NemesisContext) -> Path:
        """The store server's control file: where its environment says (a
        server running as another user reads one outside the run directory)."""
        env = getattr(ctx.stores.get(STORE), "server_env", None) or {}
        named = env.get(CONTROL_ENV)
        return Path(named) if named else control_path(ctx.supervisor.run_dir, STORE)

    def _set(self, moved: Moved, offset: float) -> None:
        for control in moved.controls:
            write_setting(control, offset)

    def apply(self, action: Action, ctx: NemesisContext) -> bool:
        processes, store = self.covered(action.target, ctx.scenario)
        run_dir = ctx.supervisor.run_dir
        controls = [control_path(run_dir, n) for n in processes]
        if store:
            controls.append(self._store_control(ctx))
        moved = Moved(action.target, processes, store, controls)
        since = _true_s()
        self._set(moved, self.first(action))
        if self.setting(action, since, since) is not None:
            moved.ticker = threading.Thread(
                target=self._tick, args=(action, moved, since), daemon=True
            )
            moved.ticker.start()
        failed = prove(
            self._readers(ctx, processes, store),
            lambda at: self.wanted(action, since, at),
            since,
            tolerance=self.tolerance(action),
        )
        if failed:
            moved.halt()
            self._set(moved, 0.0)
            ctx.record(
                "fault-failed",
                action.target,
                action=action,
                error=f"the clock did not move within {PROOF_TIMEOUT:g} s: "
                + "; ".join(f"{n}: {why}" for n, why in sorted(failed.items())),
            )
            return False
        self._moved[self._key(action, ctx)] = moved
        ctx.record(
            self.apply_f,
            action.target,
            action=action,
            processes=processes,
            store=store,
            **self.recorded(action, since, _true_s()),
        )
        return True

    def _tick(self, action: Action, moved: Moved, since: float) -> None:
        while not moved.stop.wait(self.tick_of(action)):
            offset = self.setting(action, since, _true_s())
            if offset is not None:
                self._set(moved, offset)

    def heal(self, action: Action, ctx: NemesisContext) -> bool:
        moved = self._moved.pop(self._key(action, ctx), None)
        if moved is None:
            return False
        return self._reset(action.target, action, moved, ctx)

    def _reset(self, target: str, action: Action | None, moved: Moved, ctx: NemesisContext) -> bool:
        moved.halt()
        since = _true_s()
        self._set(moved, 0.0)
        failed = prove(self._readers(ctx, moved.processes, moved.store), lambda _: 0.0, since)
        ctx.record(
            self.heal_f,
            target,
            action=action,
            processes=moved.processes,
            store=moved.store,
            offset_s=0.0,
            rate=1.0,
        )
        if failed:
            ctx.record(
                "fault-failed",
                target,
                action=action,
                error=f"the clock did not return to true time within {PROOF_TIMEOUT:g} s: "
                + "; ".join(f"{n}: {why}" for n, why in sorted(failed.items())),
            )
            return False
        return True

    def heal_all(self, ctx: NemesisContext) -> None:
        """Heal what is still moved (the runner heals faults in force by
        their own heal first), then set every control file of the run back
        to true time, whichever kind wrote it."""
        for key in [k for k in self._moved if k[0] == id(ctx.supervisor)]:
            moved = self._moved.pop(key)
            self._reset(moved.target, None, moved, ctx)
        clock_dir = ctx.supervisor.run_dir / CLOCK_DIR
        controls = list(clock_dir.glob("*.faketime")) if clock_dir.is_dir() else []
        if STORE in ctx.stores:
            controls.append(self._store_control(ctx))
        for control in controls:
            if control.is_file() and control.read_text(encoding="ascii").strip() != setting(0):
                write_setting(control, 0.0)
