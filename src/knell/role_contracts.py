"""Which delivery contract each worker role exercises.

knell tests four contracts (:mod:`knell.buses.contract`): broadcast
channels (consumers, waiters, joiners, tailers), queue channels (claimers),
at-most-once role delivery (holders) and stream rings (streamers). A scenario tests the contracts of
its worker roles (producers post, which every contract shares), so the
runner can refuse a bus that does not implement one (exit 3, before
anything starts), and ``knell list`` and the report can say what was
tested.

The table names roles by their scenario spelling and knows nothing of a
parsed scenario, so both the scenario model and the report (which reads a
stored ``scenario.json``) ask it, and it sits below both.
"""

from __future__ import annotations

from collections.abc import Iterable

from knell.buses.contract import BROADCAST, CONTRACTS, QUEUE, ROLES, STREAM

__all__ = ["ROLE_CONTRACT", "contracts_of_roles"]

ROLE_CONTRACT: dict[str, str | None] = {
    "producer": None,
    "consumer": BROADCAST,
    "waiter": BROADCAST,
    "joiner": BROADCAST,
    "tailer": BROADCAST,
    "claimer": QUEUE,
    "holder": ROLES,
    "streamer": STREAM,
}
"""The contract each scenario role exercises (producers post, which every
contract shares)."""


def contracts_of_roles(roles: Iterable[str]) -> tuple[str, ...]:
    """The contracts a scenario with these roles tests, in the order of
    :data:`~knell.buses.contract.CONTRACTS` (broadcast when none says)."""
    found = {ROLE_CONTRACT.get(role) for role in roles} - {None}
    return tuple(c for c in CONTRACTS if c in (found or {BROADCAST}))
