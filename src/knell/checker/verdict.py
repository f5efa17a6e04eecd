"""One verdict from one pass: every check, merged by Jepsen's priority.

``check_events`` runs the registered checks (and any extra consumers the
caller adds, such as the run statistics) over a history in a single pass
(:mod:`knell.checker.dispatch`), with the fault windows of the run read in
that same pass, and merges the per-check results into a :class:`Verdict`:
``False`` beats ``"unknown"`` beats ``True``.

A check that could not read some events (they lack a field the history
format promises) cannot vouch for the history: its result is at best
"unknown", with the first unreadable event's index and the error as the
reason, rather than a crash or a silent pass.

Not every check applies to every scenario. Most checks judge one delivery
contract (:data:`CHECK_CONTRACT`): a broadcast run has no claims for the
queue checks to judge and no role inboxes for the at-most-once ones, and
"VALID, zero counts" there would read as a pass of something never
tested. Once the verdict knows the contracts its scenario tests
(:attr:`Verdict.contracts`, from the scenario's roles), a check of an
untested contract that found nothing is *not applicable*: listed apart
(``not_applicable`` in ``results.json``), never counted as passed. The
decision is by contract, never by empty counts: a check of a tested
contract that saw nothing stays what it is, and a check that found an
anomaly or could not decide is always shown, whatever its contract.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.buses.contract import BROADCAST, QUEUE, ROLES, STREAM
from knell.checker.atmostonce.settle import RoleSettling
from knell.checker.base import Check, CheckConfig, CheckResult, Validity, merge_validity
from knell.checker.clocks import clock_events, scan
from knell.checker.consumer import Consumer
from knell.checker.dispatch import PassResult, run_pass
from knell.checker.dormant import dormant, watch, woken
from knell.checker.queue.book import QueueCheck
from knell.checker.queue.settle import QueueSettling
from knell.checker.registry import CHECKS
from knell.checker.settle import Forgetter, Settling
from knell.checker.stream.settle import StreamSettling
from knell.checker.windows import FaultWindows
from knell.history import Event, HistoryReader

__all__ = [
    "CHECK_CONTRACT",
    "CHECK_ROLE",
    "CheckFactory",
    "Verdict",
    "check_events",
    "check_history",
    "fired_checks",
    "not_applicable",
]

CheckFactory = Callable[[CheckConfig, FaultWindows], Check]

CHECK_CONTRACT: dict[str, str | None] = {
    # broadcast channels: subscribing handles, cursors, pages, doorbells
    "no-loss": BROADCAST,
    "unexpected": BROADCAST,
    "no-cursor-regression": BROADCAST,
    "no-flood-on-join": BROADCAST,
    "ack-beyond-head": BROADCAST,
    "head": BROADCAST,
    "ordering": BROADCAST,
    "wake": BROADCAST,
    "tail-continuity": BROADCAST,  # SSE tails of broadcast channels, through a bridge
    "redelivery": BROADCAST,
    # queue channels: claims and leases
    "lease-exclusive": QUEUE,
    "lease-holder": QUEUE,
    "done-terminal": QUEUE,
    "queue-no-loss": QUEUE,
    "lease-expiry": QUEUE,
    "dead-letter": QUEUE,
    "duplicate-work": QUEUE,
    # at-most-once role delivery
    "at-most-once": ROLES,
    "read-refusal": ROLES,
    "stranded-listed": ROLES,
    "role-exclusive": ROLES,
    "nothing-vanishes": ROLES,
    # stream rings
    "ring-tail": STREAM,
    "ring-content": STREAM,
    "ring-bound": STREAM,
    "stream-kind": STREAM,
    # every scenario: posts (which every contract shares), and the run itself
    "no-duplicate-seq": None,
    "idempotency": None,
    "post-outcome": None,
    "liveness": None,
    "availability": None,
    "store-integrity": None,
    "evidence": None,
    "expiry": None,  # a feature every contract's reads share
}
"""The contract each built-in check judges (``None``: every scenario's).
A check missing here (a new one, or a caller's own) always applies."""


CHECK_ROLE: dict[str, str] = {
    "tail-continuity": "tailer",  # SSE tails: only tailers open them
}
"""Checks that judge what one worker role does, not a whole contract: a
broadcast run without SSE tailers tests the broadcast contract, but gives
``tail-continuity`` nothing to judge, so there it is not applicable
either."""


def not_applicable(
    valid: Mapping[str, object],
    contracts: Iterable[str],
    roles: Iterable[str] | None = None,
) -> list[str]:
    """The checks (of ``valid``: check name -> its verdict) that judge a
    contract outside ``contracts``, or a role (:data:`CHECK_ROLE`) outside
    ``roles`` when the roles are known, and found nothing: only a VALID
    result is ever set apart, so no finding and no "unknown" is hidden."""
    tested = set(contracts)
    present = None if roles is None else set(roles)
    return [
        name
        for name, verdict in valid.items()
        if verdict is True
        and (
            CHECK_CONTRACT.get(name) not in (None, *tested)
            or (present is not None and CHECK_ROLE.get(name, "") not in ("", *present))
        )
    ]


@dataclass
class Verdict:
    """The merged outcome of every check over one history."""

    valid: Validity
    checks: dict[str, CheckResult] = field(default_factory=dict)
    events: int = 0
    seconds: float = 0.0
    config: CheckConfig = field(default_factory=CheckConfig)
    windows: list[dict[str, Any]] = field(default_factory=list)
    first_time: int | None = None
    last_time: int | None = None
    problems: list[str] = field(default_factory=list)
    """Why the run as a whole cannot vouch for its history (a truncated
    merged file, an adapter that could not serve): each makes the verdict
    at best "unknown"."""
    contracts: tuple[str, ...] | None = None
    """The contracts the scenario tests (its roles'); ``None`` when not
    known (a bare history): then every check applies."""
    roles: tuple[str, ...] | None = None
    """The scenario's worker roles; ``None`` when not known."""
    forgetting: dict[str, Any] | None = None
    """What the pass forgot (:mod:`knell.checker.settle`): ``after``
    (seconds), ``messages`` forgotten, sightings ``passed_over``;
    ``None`` when it forgot nothing by configuration."""

    @property
    def not_applicable(self) -> list[str]:
        """The checks set apart as not applicable (see the module docstring)."""
        if self.contracts is None:
            return []
        valid = {n: r.valid for n, r in self.checks.items()}
        return not_applicable(valid, self.contracts, self.roles)

    def undecided(self, reason: str) -> None:
        """Record a run-level reason the history cannot prove validity."""
        self.problems.append(reason)
        if self.valid is True:
            self.valid = "unknown"

    def cannot_judge(self, reason: str) -> None:
        """Record why the history itself cannot be judged (its clock went
        back: :mod:`knell.checker.wellformed`). Unlike :meth:`undecided`
        this overrides a finding too: the checks' witnesses rest on the
        event order the reason puts in doubt, so they prove nothing."""
        self.problems.append(reason)
        self.valid = "unknown"

    def fired(self) -> dict[str, list[str]]:
        """Check name -> the anomaly kinds it found, for the checks that
        failed: what a scenario's ``expect`` is matched against."""
        return fired_checks(self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "events": self.events,
            "seconds": self.seconds,
            "config": self.config.to_json(),
            "problems": list(self.problems),
            "contracts": None if self.contracts is None else list(self.contracts),
            "not_applicable": self.not_applicable,
            "checks": {name: result.to_json() for name, result in self.checks.items()},
        }


def fired_checks(results: dict[str, CheckResult]) -> dict[str, list[str]]:
    """Check -> the anomaly kinds it reported, for the checks that found one.
    Every kind has a stored anomaly (the log keeps the first of each past
    its cap), and the declared kinds are read from the counts as well."""
    declared = {check.name: check.anomaly_kinds for check in CHECKS}
    out: dict[str, list[str]] = {}
    for name, result in results.items():
        if result.valid is False:
            found = {a.kind for a in result.anomalies}
            found |= {k for k in declared.get(name, ()) if result.counts.get(k, 0) > 0}
            out[name] = sorted(found or {"anomaly"})
    return out


def check_events(
    events: Iterable[Event],
    config: CheckConfig | None = None,
    *,
    checks: Sequence[CheckFactory] | None = None,
    extra: Sequence[Consumer] = (),
    clocks: Sequence[Event] | None = None,
    pause_gc: bool = True,
) -> Verdict:
    """Run every check (``checks``, default :data:`CHECKS`) and the
    ``extra`` consumers over ``events`` in a single pass; merge the checks.
    ``clocks``: the history's clock events, read ahead of the pass
    (:func:`knell.checker.clocks.scan`); taken from ``events`` itself when
    it is a sequence. ``pause_gc``: as for
    :func:`~knell.checker.dispatch.run_pass`."""
    if config is None:
        config = CheckConfig()
    elif not isinstance(config, CheckConfig):
        raise TypeError(f"config must be a CheckConfig, got {type(config).__name__}")
    started = time.perf_counter()
    windows = FaultWindows()
    if clocks is None and isinstance(events, Sequence):
        clocks = clock_events(events)
    if clocks is not None:
        windows.clocks.preload(clocks)
    instances = [factory(config, windows) for factory in (CHECKS if checks is None else checks)]
    names = [c.name for c in instances]
    if len(set(names)) != len(names):
        raise ValueError(f"check names must be unique, got {names}")
    asleep = dormant(names, CHECK_CONTRACT, CHECK_ROLE, config.contracts, config.roles)
    watcher = watch(asleep.values())
    fed = [c for c in instances if c.name not in asleep]
    settling = _settling(config, fed)
    queue = None
    settlers: list[Consumer] = []
    if settling is not None:
        tested = config.contracts or (QUEUE, ROLES, STREAM)
        queue = _queue_settling(settling, windows, fed) if QUEUE in tested else None
        settlers = [settling, *([queue] if queue is not None else [])]
        settlers += [StreamSettling(settling)] if STREAM in tested else []
        settlers += [RoleSettling(settling)] if ROLES in tested else []
    passed = run_pass(
        events,
        [windows, *fed, *extra, *([watcher] if asleep else []), *settlers],
        pause_gc=pause_gc,
    )
    for check in instances:
        if check.name in asleep:
            check.finish()  # over nothing, as the pass would have ended it
    results = {
        c.name: woken(_result(c, passed), asleep[c.name], watcher)
        if c.name in asleep
        else _result(c, passed)
        for c in instances
    }
    return Verdict(
        valid=merge_validity(r.valid for r in results.values()),
        checks=results,
        events=passed.events,
        seconds=time.perf_counter() - started,
        config=config,
        windows=windows.to_json(),
        first_time=_time(passed.first),
        last_time=_time(passed.last),
        forgetting=None
        if settling is None
        else {
            "after": config.forget_after,
            "messages": settling.forgotten.count,
            "dead": 0 if queue is None else queue.dead.count,
            "passed_over": settling.forgotten.passed_over,
        },
    )


def _settling(config: CheckConfig, fed: Sequence[Check]) -> Settling | None:
    """The forgetting of settled messages (:mod:`knell.checker.settle`),
    when the configuration asks for it: every fed check that can forget is
    told what it may drop, and reads the forgotten seqs to pass over a
    sighting of one."""
    if config.forget_after is None:
        return None
    forgetters: list[Forgetter] = [c for c in fed if isinstance(c, Forgetter)]
    settling = Settling(config.forget_after, forgetters)
    for check in fed:
        check.forgotten = settling.forgotten
    return settling


def _queue_settling(
    settling: Settling, windows: FaultWindows, fed: Sequence[Check]
) -> QueueSettling:
    """The forgetting of a queue's done and dead messages
    (:mod:`knell.checker.queue.settle`), through ``settling``; the queue
    checks read which forgotten messages ended dead."""
    queue = QueueSettling(settling, windows)
    for check in fed:
        if isinstance(check, QueueCheck):
            check.dead_forgotten = queue.dead
    return queue


def _time(event: Event | None) -> int | None:
    value = event.get("time") if isinstance(event, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _result(check: Check, passed: PassResult) -> CheckResult:
    """The check's result; unreadable events make it at best "unknown"."""
    try:
        result = check.result()
    except (LookupError, TypeError, AttributeError, ValueError) as exc:
        result = CheckResult(name=check.name, valid="unknown")
        bad_reason = f"its result could not be computed ({type(exc).__name__}: {exc})"
        result.unknown_reason = bad_reason
    bad = passed.for_consumer(check)
    if bad is None:
        return result
    reason = bad.reason()
    result.counts["malformed-events"] = bad.count
    if result.valid is True:
        result.valid = "unknown"
    result.unknown_reason = (
        f"{result.unknown_reason}; {reason}" if result.unknown_reason else reason
    )
    return result


def check_history(path: Path, config: CheckConfig | None = None) -> Verdict:
    """Check a merged ``history.jsonl``."""
    return check_events(HistoryReader(Path(path)), config, clocks=scan(Path(path)))
