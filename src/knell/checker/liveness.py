"""liveness: an operation that never returns is a finding, not a pass.

A bus call that hangs stalls the agent session that made it, silently:
no error, no crash, just a turn that never ends. Judging only the
operations that completed would call such a bus VALID. So every operation
a worker invokes must complete within its bound, unless a fault touched its process, its
store or its link while it ran (a frozen process cannot answer; a crashed
store cannot reply): those windows, with their grace periods, come from
:mod:`knell.checker.windows`. A clock fault's window excuses nothing: a
bound is a duration (``docs/contracts.md``, "Which clock each promise
depends on"), so a call that hangs because its wall clock jumped back is
the bus's finding.

The bound is ``op_timeout`` plus as much again (at least one second): a
bus hands ``op_timeout`` to its server (a statement timeout), and the
answer, a reconnect and a loaded machine's scheduling come on top of it.
A wait is bounded by its own timeout plus that. A call that hangs for
good crosses any such bound; one that is merely slow does not.

Anomalies:

* ``hung``: an operation completed, or was still outstanding when the
  history ended, later than its bound, with no fault window touching it;
* ``stuck-at-shutdown``: a worker that had to be killed when the run
  stopped because it was inside a bus call that would not return: one
  outstanding through the whole stop grace, or longer than its bound
  (the runner records that kill with the reason "did not stop in time"
  and the grace it waited; a call begun during the grace and younger
  than the bound is counted as ``slow-to-stop``, not judged).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import OPERATIONS, Event

__all__ = ["LivenessCheck"]

_NS = 1_000_000_000


class LivenessCheck(Check):
    name: ClassVar[str] = "liveness"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("hung", "stuck-at-shutdown")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._bound_ns = int((self.config.op_timeout + max(1.0, self.config.op_timeout)) * _NS)
        self._open: dict[str, Event] = {}  # process -> its outstanding invoke
        self._killed: set[str] = set()  # processes killed and not yet restarted
        self._last = 0
        self._ops = 0
        self._slow_in_faults = 0
        self._slow_to_stop = 0
        self._longest = 0

    def _allowed(self, invoke: Event) -> int:
        timeout = (invoke.get("value") or {}).get("timeout") if invoke["f"] == "arm" else None
        extra = timeout if isinstance(timeout, (int, float)) and timeout >= 0 else 0
        return self._bound_ns + int(extra * _NS)

    @on(OPERATIONS, "invoke")
    def _invoked(self, event: Event) -> None:
        if event["process"] != "nemesis":
            self._open[event["process"]] = event
            self._last = max(self._last, event["time"])

    @on_op(OPERATIONS, "ok", "fail", "info", "lost")
    def _done(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is None:
            return
        if self._open.get(invoke["process"]) is invoke:
            del self._open[invoke["process"]]
        end = done["time"] if done is not None else self._last
        if done is not None:
            self._ops += 1
            self._last = max(self._last, end)
            if (done.get("value") or {}).get("knell_side"):
                return  # the driver failed, not the bus (see availability)
        elapsed = end - invoke["time"]
        self._longest = max(self._longest, elapsed)
        if elapsed <= self._allowed(invoke):
            return
        if done is None and invoke["process"] in self._killed:
            return  # its process was killed: judged as stuck-at-shutdown or excused there
        if self.windows.touching(invoke["process"], invoke["time"], end, clocks=False) is not None:
            self._slow_in_faults += 1
            return
        moved = self.windows.touching(invoke["process"], invoke["time"], end) is not None
        how = (
            f"completed {done['type']} after {elapsed / _NS:.2f} s"
            if done is not None
            else f"was still outstanding {elapsed / _NS:.2f} s later, when the history ended"
        )
        self._report(
            "hung",
            None
            if self.log.full("hung")
            else f"{invoke['f']} by {invoke['process']} (handle {invoke.get('handle')}, channel "
            f"{invoke.get('channel')}) {how}; the bound is {self._allowed(invoke) / _NS:.2f} s "
            + (
                "and only a clock fault touched it (a moved clock excuses nothing: the bound "
                "is a duration)"
                if moved
                else "and no fault touched it"
            ),
            witness(invoke, done),
        )

    @on("kill", "info")
    def _kill(self, event: Event) -> None:
        if event["process"] != "nemesis":
            return
        self._last = max(self._last, event["time"])
        value = event.get("value") or {}
        target = value.get("target")
        if not isinstance(target, str):
            return
        self._killed.add(target)
        invoke = self._open.pop(target, None)
        if invoke is None or "reason" not in value:
            return  # a nemesis kill: the fault window excuses what it interrupted
        waited = value.get("waited_s")
        age = event["time"] - invoke["time"]
        if isinstance(waited, (int, float)) and age < waited * _NS and age <= self._allowed(invoke):
            # The call began after the worker was asked to stop and is younger
            # than the bound: progress, not a hang (a worker slow to stop).
            self._slow_to_stop += 1
            return
        self._report(
            "stuck-at-shutdown",
            None
            if self.log.full("stuck-at-shutdown")
            else f"{target} had to be killed when the run stopped ({value['reason']}): it was "
            f"inside {invoke['f']} (handle {invoke.get('handle')}, channel "
            f"{invoke.get('channel')}) for {(event['time'] - invoke['time']) / _NS:.2f} s",
            witness(invoke, event),
        )

    @on("restart", "info")
    @on("start", "ok")
    def _restarted(self, event: Event) -> None:
        target = (event.get("value") or {}).get("target") if event["process"] == "nemesis" else None
        self._killed.discard(target if isinstance(target, str) else event["process"])

    @on("drain")
    def _drain(self, event: Event) -> None:
        self._last = max(self._last, event["time"])

    def result(self) -> CheckResult:
        return self._result(
            {
                "operations": self._ops,
                "slow-inside-faults": self._slow_in_faults,
                "slow-to-stop": self._slow_to_stop,
            },
            {"longest-op-s": round(self._longest / _NS, 3), "bound-s": self._bound_ns / _NS},
        )
