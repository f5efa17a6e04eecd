"""Buses that implement only some contracts, for the contract-refusal tests.

``broadcast_only`` is the reference bus declaring the broadcast contract
alone (as every bus written before the queue contract does, by not
declaring any); ``queue_only`` has the queue's methods and nothing else."""

from __future__ import annotations

from typing import Any

from knell.buses.sqlite import SqliteBus, open_sqlite


class BroadcastOnly(SqliteBus):
    contracts = frozenset({"broadcast"})


def broadcast_only(url: str) -> BroadcastOnly:
    ref = open_sqlite(url)
    ref.close()
    return BroadcastOnly(ref.path, poll_interval=ref.poll_interval)


class QueueOnly:
    """The reference bus's queue behind a queue-only surface."""

    contracts = ("queue",)

    def __init__(self, url: str) -> None:
        self._bus = open_sqlite(url)

    def __getattr__(self, name: str) -> Any:
        if name in ("declare_queue", "post", "claim", "renew", "done", "release", "dead", "close"):
            return getattr(self._bus, name)
        raise AttributeError(name)


def queue_only(url: str) -> QueueOnly:
    return QueueOnly(url)


class WithoutExpiry(SqliteBus):
    """Every contract, but no optional feature: a bus written before expiry."""

    features = frozenset()


def without_expiry(url: str) -> WithoutExpiry:
    ref = open_sqlite(url)
    ref.close()
    return WithoutExpiry(ref.path, poll_interval=ref.poll_interval)
