"""availability: errors outside faults are findings, not noise.

Judging only operations that succeeded is half a check: a bus that answers
a third of all posts with "database is locked" would pass, because what
did succeed was consistent. Agent sessions do not retry forever, so an
error is a turn that failed. Every operation a worker invoked is counted
by its ``f`` (post, fetch, ack...), inside and outside fault windows (from
:mod:`knell.checker.windows`: what a fault touched directly or not, plus
its grace period), and its errors (``fail`` and ``info`` completions) the
same way. Errors inside a fault window are expected and only reported as
rates; outside them, the share of errors of any kind must not exceed the
scenario's ``max_error_rate`` (0 for the embedded store: nothing should
fail when nothing is being broken).

Failures of the driver between knell and the bus (an adapter that broke
its protocol: ``info`` marked ``knell_side``) are not the bus's errors and
are not counted as such; they make the answer "unknown" instead, since the
bus was never really asked.

Refusals the contract requires are not errors: an ack above anything ever
posted must be refused (the consumers' ack probe), and that refusal is
its success. The history bounds the head without trusting the bus (seqs
are dense: the head cannot exceed the number of posts invoked so far), as
the ``ack-beyond-head`` check does.

The same holds for the refusals the queue and at-most-once contracts
require (a lapsed holder's ``done``, a ``read`` by a run the message was
not delivered to, a claim of a role another run holds, an operation of the
wrong channel kind): workers record them as ``fail`` with ``"refused":
kind``, counted here as refusals, not errors. Whether each refusal was
right is the contract's checks' business (``lease-holder`` and
``read-refusal`` report a refusal the history shows was wrong).

Anomaly: ``errors-outside-faults``, one per operation (``f``) over the limit,
with the first few failed operations (invoke and completion) as witness.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import OPERATIONS, Event

__all__ = ["AvailabilityCheck"]

WITNESSES = 3
"""Failed operations shown per operation (``f``) over the limit."""


class _Tally:
    __slots__ = ("errors_in", "errors_out", "first_out", "ops_in", "ops_out")

    def __init__(self) -> None:
        self.ops_in = 0
        self.ops_out = 0
        self.errors_in = 0
        self.errors_out = 0
        self.first_out: list[tuple[Event | None, Event]] = []


class AvailabilityCheck(Check):
    name: ClassVar[str] = "availability"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("errors-outside-faults",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._tallies: dict[str, _Tally] = {}
        self._posts: dict[Any, int] = {}
        self._required_refusals = 0
        self._contract_refusals: dict[str, int] = {}
        self._driver_faults: dict[str, int] = {}
        self._first_fault: Event | None = None

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        channel = event.get("channel")
        self._posts[channel] = self._posts.get(channel, 0) + 1

    def _required(self, invoke: Event | None, done: Event) -> bool:
        """An ack refused because it named a seq no post could have reached."""
        if done["f"] != "ack" or done["type"] != "fail" or invoke is None:
            return False
        up_to = (invoke.get("value") or {}).get("up_to")
        bound = self._posts.get(done.get("channel"), 0)
        return isinstance(up_to, int) and not isinstance(up_to, bool) and up_to > bound

    @on_op(OPERATIONS)
    def _completed(self, invoke: Event | None, done: Event) -> None:
        if done["process"] == "nemesis":
            return
        tally = self._tallies.get(done["f"])
        if tally is None:
            tally = self._tallies[done["f"]] = _Tally()
        error = done["type"] != "ok"
        if error and (done.get("value") or {}).get("knell_side"):
            self._driver_faults[done["f"]] = self._driver_faults.get(done["f"], 0) + 1
            self._first_fault = self._first_fault or done
            return
        if error and self._required(invoke, done):
            self._required_refusals += 1
            error = False
        elif error and done["type"] == "fail" and (done.get("value") or {}).get("refused"):
            f = done["f"]
            self._contract_refusals[f] = self._contract_refusals.get(f, 0) + 1
            error = False
        start = invoke["time"] if invoke is not None else done["time"]
        inside = self.windows.touching(done["process"], start, done["time"]) is not None
        if inside:
            tally.ops_in += 1
            tally.errors_in += error
            return
        tally.ops_out += 1
        if error:
            tally.errors_out += 1
            if len(tally.first_out) < WITNESSES:
                tally.first_out.append((invoke, done))

    def result(self) -> CheckResult:
        limit = self.config.max_error_rate
        counts: dict[str, int] = {
            "required-refusals": self._required_refusals,
            "contract-refusals": sum(self._contract_refusals.values()),
        }
        for f, n in sorted(self._contract_refusals.items()):
            counts[f"contract-refusals[{f}]"] = n
        metrics: dict[str, float | int | None] = {"max-error-rate": limit}
        for name in ("ops-outside", "errors-outside", "ops-inside", "errors-inside"):
            counts[name] = 0
        for f in sorted(self._tallies):
            tally = self._tallies[f]
            for name, n in (
                ("ops-outside", tally.ops_out),
                ("errors-outside", tally.errors_out),
                ("ops-inside", tally.ops_in),
                ("errors-inside", tally.errors_in),
            ):
                counts[name] += n
                counts[f"{name}[{f}]"] = n
            rate_out = tally.errors_out / tally.ops_out if tally.ops_out else 0.0
            rate_in = tally.errors_in / tally.ops_in if tally.ops_in else None
            metrics[f"error-rate-outside[{f}]"] = round(rate_out, 6)
            metrics[f"error-rate-inside[{f}]"] = None if rate_in is None else round(rate_in, 6)
            if tally.errors_out and rate_out > limit:
                first = tally.first_out[0][1]
                error = (first.get("value") or {}).get("error", "no error text")
                self._report(
                    "errors-outside-faults",
                    f"{tally.errors_out} of {tally.ops_out} {f} operations outside any fault "
                    f"window failed ({rate_out:.2%}, above the allowed {limit:.2%}); the first, "
                    f"by {first['process']}: {first['type']}: {error}",
                    witness(*(e for pair in tally.first_out for e in pair)),
                )
        reason = None
        if self._driver_faults:
            total = sum(self._driver_faults.values())
            first = self._first_fault or {}
            counts["driver-faults"] = total
            reason = (
                f"the driver could not serve {total} operation(s) "
                f"({', '.join(f'{f}: {n}' for f, n in sorted(self._driver_faults.items()))}); "
                f"the first: {(first.get('value') or {}).get('error', '?')}"
            )
        return self._result(counts, metrics, unknown_reason=reason)
