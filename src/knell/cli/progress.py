"""Live progress while ``knell run`` goes: time, rates by role, faults as they fire and heal.

On a terminal it is a rich ``Live`` panel redrawn twice a second: elapsed
and remaining time of the fault schedule, the phase, operations and errors
per second by role (over the last two seconds) with totals, the faults
open now, and the last few fault events. In a pipe, or when ``CI`` is set,
it is plain lines instead (a line per fault event, a progress line every
few seconds), so a CI log stays readable and greppable.

Everything it shows is read from the run's growing history files
(:mod:`knell.tail`); the runner only says when the run begins, changes
phase and ends (:class:`knell.watch.RunWatch`). Names and texts from the
history are cleaned before they are shown (:mod:`knell.text`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from knell.history import OPERATIONS
from knell.tail import HistoryTail
from knell.text import clean

if TYPE_CHECKING:
    from rich.live import Live

    from knell.scenario import Scenario
    from knell.schedule import Schedule

__all__ = ["RunProgress", "plain_wanted"]

POLL = 0.5
RATE_WINDOW = 2.0
PLAIN_EVERY = 5.0
MAX_FAULT_LINES = 6
_NS = 1_000_000_000
_OPS = frozenset(OPERATIONS)
_ROLE_ORDER = ("producer", "consumer", "waiter", "joiner", "drain")


def plain_wanted(console: Console) -> bool:
    """Plain lines when stdout is not a terminal or a CI system runs us."""
    ci = os.environ.get("CI", "").strip().lower()
    return not console.is_terminal or ci not in ("", "0", "false", "no")


@dataclass
class _Role:
    ok: int = 0
    fail: int = 0
    info: int = 0
    samples: deque[tuple[float, int, int]] = field(default_factory=deque)

    def rates(self, now: float) -> tuple[float, float]:
        self.samples.append((now, self.ok, self.fail + self.info))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW:
            self.samples.popleft()
        t0, ok0, err0 = self.samples[0]
        span = now - t0
        if span <= 0:
            return 0.0, 0.0
        return (self.ok - ok0) / span, (self.fail + self.info - err0) / span


class RunProgress:
    """A :class:`~knell.watch.RunWatch` that shows the run live."""

    def __init__(self, console: Console, *, plain: bool | None = None) -> None:
        self.console = console
        self.plain = plain_wanted(console) if plain is None else plain
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._live: Live | None = None
        self.roles: dict[str, _Role] = {}
        self.role_of: dict[str, str] = {}
        self.faults: deque[str] = deque(maxlen=MAX_FAULT_LINES)
        self.open: dict[Any, str] = {}
        self.fired = 0
        self.healed = 0
        self.name = ""
        self.duration = 0.0
        self.phase_name = "starting"
        self.ready_ns: int | None = None
        self.begin_ns: int | None = None
        self._apply_fs: dict[str, str] = {}
        self._heal_fs: dict[str, str] = {}
        self._last_plain = 0.0
        self.online: Callable[[], str] | None = None
        """The online check's status line (events checked, lag, anomalies)."""

    # -- RunWatch --------------------------------------------------------------

    def begin(self, run_dir: Path, scenario: Scenario, schedule: Schedule) -> None:
        from knell.nemesis.registry import events

        self.name = scenario.name
        self.duration = float(scenario.duration)
        self.role_of = {name: spec.role for name, spec in scenario.instances().items()}
        for kind in events().values():
            self._apply_fs[kind.apply_f] = kind.name
            self._heal_fs[kind.heal_f] = kind.name
        self.begin_ns = time.time_ns()
        tail = HistoryTail(run_dir / "history")
        if not self.plain:
            from rich.live import Live

            self._live = Live(
                self._render(), console=self.console, auto_refresh=False, transient=True
            )
            self._live.start()
        self._thread = threading.Thread(
            target=self._loop, args=(tail,), name="progress", daemon=True
        )
        self._thread.start()

    def phase(self, name: str) -> None:
        with self._lock:
            self.phase_name = {"final": "final phase: heal, stop, drain", "check": "checking"}.get(
                name, name
            )

    def end(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.plain and self.online is not None:
            self.console.print(f"  {self.online()}", markup=False, highlight=False, soft_wrap=True)
        if not self.plain and self.name:
            with self._lock:
                self.phase_name = "done"
            self.console.print(self._render(final=True))

    # -- reading ---------------------------------------------------------------

    def _loop(self, tail: HistoryTail) -> None:
        while not self._stop.wait(POLL):
            self._step(tail)
        self._step(tail)

    def _step(self, tail: HistoryTail) -> None:
        try:
            events = tail.poll()
            lines = []
            with self._lock:
                for event in events:
                    line = self.observe(event)
                    if line:
                        lines.append(line)
            now = time.monotonic()
            with self._lock:
                for role in self.roles.values():
                    role.rates(now)
            if self.plain:
                for line in lines:
                    self.console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
                due = now - self._last_plain >= PLAIN_EVERY
                if due and self.ready_ns is not None and self.phase_name == "faults":
                    self._last_plain = now
                    self.console.print(
                        f"  {self._plain_line(now)}", markup=False, highlight=False, soft_wrap=True
                    )
            elif self._live is not None:
                self._live.update(self._render(), refresh=True)
        except Exception:  # a display must never take the run down
            pass

    def _role(self, process: str) -> str:
        role = self.role_of.get(process)
        if role is None:
            role = "drain" if process.startswith("drain-") else process.rsplit("-", 1)[0]
            self.role_of[process] = role
        return role

    def observe(self, event: dict[str, Any]) -> str | None:
        """Count one event; return a line to print for a fault event."""
        process = event.get("process")
        f = event.get("f")
        type_ = event.get("type")
        if process != "nemesis":
            if f in _OPS and type_ in ("ok", "fail", "info"):
                role = self.roles.setdefault(self._role(str(process)), _Role())
                setattr(role, str(type_), getattr(role, str(type_)) + 1)
            return None
        raw = event.get("value")
        value: dict[str, Any] = raw if isinstance(raw, dict) else {}
        t = event.get("time")
        if f == "ready" and isinstance(t, int):
            self.ready_ns = t
            self.phase_name = "faults"
            self._last_plain = time.monotonic()
            return f"[{self._at(t)}] all processes ready; the fault schedule starts"
        target = clean(value.get("target", ""), 60)
        fault = value.get("fault")
        label = f"fault {clean(fault, 12)}: " if fault is not None else ""
        if f in self._apply_fs and type_ == "invoke":
            # The nemesis writes a fault's invoke, then its info once applied:
            # the line and the count are for the fault in force, said once.
            return None
        if f in self._apply_fs and fault is not None and fault in self.open:
            # A step within a fault in force, under another kind's name (a
            # replica-lag that ends in a failover): said, not counted again.
            line = f"[{self._at(t)}] {label}{clean(f, 20)} {target} (in {self.open[fault]})"
        elif f in self._apply_fs:
            self.fired += 1
            kind = clean(value.get("kind") or self._apply_fs[str(f)], 30)
            self.open[fault if fault is not None else (kind, target)] = f"{kind} {target}"
            line = f"[{self._at(t)}] {label}{kind} {target} ({clean(value.get('effect', ''), 20)})"
        elif f in self._heal_fs:
            self.healed += 1
            kind = clean(value.get("kind") or self._heal_fs[str(f)], 30)
            self.open.pop(fault if fault is not None else (kind, target), None)
            if fault is None:  # healed by the final phase: close whatever it held
                for key, text in list(self.open.items()):
                    if text.endswith(f" {target}"):
                        del self.open[key]
            line = f"[{self._at(t)}] {label}healed: {clean(f, 20)} {target}"
        elif f in ("crash", "give-up"):
            error = clean(value.get("error") or "", 160)
            line = f"[{self._at(t)}] {clean(f, 20)}: {target} exited on its own" + (
                f" ({error})" if error else ""
            )
        else:
            return None
        self.faults.append(line)
        return line

    # -- showing ---------------------------------------------------------------

    def _at(self, t: Any) -> str:
        base = self.ready_ns or self.begin_ns
        if not isinstance(t, int) or base is None:
            return "     ?"
        return f"{(t - base) / _NS:6.2f} s"

    def _elapsed(self) -> float:
        base = self.ready_ns or self.begin_ns
        return 0.0 if base is None else (time.time_ns() - base) / _NS

    def _ordered_roles(self) -> list[str]:
        return sorted(
            self.roles,
            key=lambda r: (_ROLE_ORDER.index(r) if r in _ROLE_ORDER else len(_ROLE_ORDER), r),
        )

    def _plain_line(self, now: float) -> str:
        parts = []
        for name in self._ordered_roles():
            ok, err = self.roles[name].rates(now)
            parts.append(f"{name} {ok:.0f} ok/s {err:.1f} err/s")
        left = max(0.0, self.duration - self._elapsed())
        return (
            f"[{self._elapsed():6.1f} s / {self.duration:g} s, {left:.0f} s left] "
            + ("; ".join(parts) or "no operation yet")
            + f"; faults fired {self.fired}, healed {self.healed}, open {len(self.open)}"
            + (f"; {self.online()}" if self.online is not None else "")
        )

    def _render(self, final: bool = False) -> Group:
        with self._lock:
            elapsed = min(self._elapsed(), self.duration) if self.ready_ns else 0.0
            left = max(0.0, self.duration - elapsed)
            width = 30
            done = int(width * (elapsed / self.duration)) if self.duration else 0
            head = Text()
            head.append(f"{clean(self.name, 60)} ", style="bold")
            head.append("█" * done + "░" * (width - done), style="cyan")
            head.append(f" {elapsed:5.1f} s / {self.duration:g} s, {left:4.1f} s left · ")
            head.append(self.phase_name, style="yellow" if not final else "green")
            table = Table(box=None, padding=(0, 2), header_style="bold")
            for column in ("role", "ok/s", "err/s", "ok", "fail", "info"):
                table.add_column(column, justify="left" if column == "role" else "right")
            now = time.monotonic()
            span = max(1e-9, self._elapsed())
            for name in self._ordered_roles():
                role = self.roles[name]
                if final:  # the run is over: its averages, not the last two seconds
                    ok, err = role.ok / span, (role.fail + role.info) / span
                else:
                    ok, err = role.rates(now)
                table.add_row(
                    clean(name, 30),
                    f"{ok:.0f}",
                    Text(f"{err:.1f}", style="red" if err else ""),
                    str(role.ok),
                    str(role.fail),
                    str(role.info),
                )
            summary = Text(
                f"faults: {self.fired} fired, {self.healed} healed"
                + (f", open now: {', '.join(list(self.open.values())[:4])}" if self.open else "")
            )
            lines = [Text(line, style="dim") for line in self.faults]
            if self.online is not None:
                lines.insert(0, Text(self.online()))
            return Group(head, table, summary, *lines)
