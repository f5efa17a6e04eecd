"""Dormant checks: a check of a contract the scenario does not test keeps nothing.

Most checks judge one delivery contract (``CHECK_CONTRACT`` in
:mod:`knell.checker.verdict`), and several of them keep something of every
``post`` for the whole pass, because which channels are theirs is known
only late (a queue is declared or claimed after its first posts, a handle
may join at the start and owe everything). In a run whose scenario does
not test that contract, all of that is kept for nothing: on a broadcast
run ``queue-no-loss``, ``nothing-vanishes`` and ``tail-continuity`` held a
fifth of the checker's memory per message, and paid a handler call per
post each.

So when the scenario is known (:attr:`CheckConfig.contracts` and
:attr:`CheckConfig.roles`, from ``scenario.json``), a check of an untested
contract (or of a role no process plays, :data:`ROLE_EVENTS`) is not fed at
all. It only *watches*: the first successful event of its own contract
(:data:`CONTRACT_EVENTS`: a claim that returned ``ok``, a ``receive`` ok,
an SSE ``tail-event``...) wakes it, and a woken check's result is
``"unknown"``, naming the event, because it kept nothing of what came
before. A refused operation (a kind probe that reads a stream as a
broadcast channel and is told ``wrong-kind``) wakes nothing: it exercises
the other contract's refusal, which that contract's checks judge.

Why this hides no finding: a check's anomalies are made of its own
contract's operations (a loss needs handles that subscribed, a double
lease needs claims); if none completed, it has nothing to find, and if one
did, the result says "unknown" rather than "VALID". An untouched dormant
check's result is the check's own over an empty history, which
:func:`~knell.checker.verdict.not_applicable` sets apart as usual. A bare
history (no scenario) wakes every check: nothing is dormant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knell.buses.contract import BROADCAST, QUEUE, ROLES, STREAM
from knell.checker.base import CheckResult
from knell.checker.consumer import Consumer, on
from knell.history import Event

__all__ = ["CONTRACT_EVENTS", "ROLE_EVENTS", "Watch", "dormant", "watch", "woken"]

CONTRACT_EVENTS: dict[str, frozenset[str]] = {
    BROADCAST: frozenset(
        {"subscribe", "fetch", "ack", "cursor", "head", "arm", "wake", "handle", "forensic"}
    ),
    QUEUE: frozenset({"declare", "claim", "renew", "done", "release", "dead", "work"}),
    ROLES: frozenset({"claim_role", "release_role", "receive", "read", "stranded"}),
    STREAM: frozenset({"declare_stream", "stream_tail"}),
}
"""The history ``f`` of each contract's own operations (``post`` is every
contract's, so it is none's)."""

ROLE_EVENTS: dict[str, frozenset[str]] = {
    "tailer": frozenset({"tail", "tail-event", "tail-behind", "tail-drop"}),
}
"""The events only one worker role writes, for the checks of that role
(``CHECK_ROLE`` in :mod:`knell.checker.verdict`)."""


def dormant(
    names: Iterable[str],
    check_contract: Mapping[str, str | None],
    check_role: Mapping[str, str],
    contracts: Iterable[str] | None,
    roles: Iterable[str] | None,
) -> dict[str, frozenset[str]]:
    """The checks (of ``names``) to keep dormant, each with the ``f`` that
    would wake it: those of a contract outside ``contracts`` or a role
    outside ``roles``. ``None`` for either: not known, nothing is dormant
    on that account."""
    tested = None if contracts is None else set(contracts)
    present = None if roles is None else set(roles)
    found: dict[str, frozenset[str]] = {}
    for name in names:
        contract, role = check_contract.get(name), check_role.get(name)
        if tested is not None and contract is not None and contract not in tested:
            found[name] = CONTRACT_EVENTS[contract]
        elif present is not None and role is not None and role not in present:
            found[name] = ROLE_EVENTS[role]
    return found


class Watch(Consumer):
    """Sees the first successful event of each ``f`` that would wake a
    dormant check (:func:`watch`), and nothing else: a broadcast run's
    pages and acks never reach it."""

    name = "dormant-watch"

    def __init__(self) -> None:
        self.first: dict[str, Event] = {}

    def _saw(self, event: Event) -> None:
        f = str(event["f"])
        if f not in self.first:
            self.first[f] = event


def watch(wakes: Iterable[frozenset[str]]) -> Watch:
    """A :class:`Watch` of exactly the ``f`` in ``wakes`` (its handler is
    declared on a subclass made for them: a consumer's interests are its
    class's)."""
    fs = tuple(sorted(set().union(*wakes)))
    if not fs:
        return Watch()

    def saw(self: Watch, event: Event) -> None:  # a function of its own: marks are per function
        Watch._saw(self, event)

    cls = type("Watch", (Watch,), {"_saw": on(fs, "ok")(saw)})
    made: Watch = cls()
    return made


def woken(result: CheckResult, wakes: frozenset[str], watch: Watch) -> CheckResult:
    """A dormant check's result: its own (over nothing) unless an event of
    its contract came, which makes it "unknown" with that event named."""
    seen = [watch.first[f] for f in sorted(wakes) if f in watch.first]
    if not seen:
        return result
    first = min(seen, key=_position)
    where = first.get("index")
    at = f" (event {where})" if where is not None else ""
    result.valid = "unknown"
    result.unknown_reason = (
        f"a {first['f']} ok by {first.get('process')}{at} came in a run whose scenario does "
        "not test what this check judges, so it was kept dormant and kept nothing before it"
    )
    return result


def _position(event: Event) -> Any:
    index = event.get("index")
    return index if isinstance(index, int) else event.get("time", 0)
