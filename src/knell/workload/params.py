"""Typed worker parameters: the runner-to-worker contract, one class per role.

The runner reads a scenario (pydantic models, with validation and error
messages for people), and every worker process needs a few of those
values (a rate, a batch size, a handle). They cross the process boundary
as JSON, and these frozen dataclasses are both ends of it: the scenario's
process specs convert into them, the runner writes them, each worker reads
back exactly its role's class, and mypy checks both sides against it.
They are also the one place a default lives: the scenario models take
their defaults from here.

Plain dataclasses, not pydantic: a worker imports this module at start-up,
and a worker's start-up time is part of the restart latency knell measures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

__all__ = [
    "ROLE_PARAMS",
    "ConsumerParams",
    "DrainParams",
    "JoinerParams",
    "ProducerParams",
    "ReaderParams",
    "WaiterParams",
    "WorkerParams",
    "params_from_json",
    "params_to_json",
]

Paging = Literal["after", "cursor"]
JoinAt = Literal["head", "start"]


@dataclass(frozen=True)
class ProducerParams:
    """Posts unique ids at a steady rate."""

    channel: str = "events"
    rate: float = 50.0
    """posts per second"""
    idempotency: bool = False
    """send idempotency keys; retry indeterminate posts with them"""
    retry_every: int = 0
    """with idempotency: resend every Nth post with its key (0 = never)"""
    hostile: bool = False
    """message ids carry hostile text (script tags, ANSI escapes, lines that
    imitate a report, very long strings) after their unique prefix"""


@dataclass(frozen=True)
class ReaderParams:
    """What every reading role shares."""

    channel: str = "events"
    batch: int = 50
    """fetch page size"""
    handle_time: float = 0.0
    """seconds of simulated work per message, between fetch and ack"""
    ack_probe_every: int = 0
    """every N pages, try an ack beyond head (must be refused)"""
    idle: float = 0.05
    """seconds to sleep when caught up"""
    paging: Paging = "after"
    """later pages of a catch-up: after the last seq seen, or from the cursor"""
    ack_each: bool = False
    """ack after every message instead of after every page (more, smaller,
    racing acks: the forward-only clamp under contention)"""
    read_head_every: int = 0
    """every N rounds, read the channel's head (0 = never)"""


@dataclass(frozen=True)
class ConsumerParams(ReaderParams):
    """Catches up to the true head, handles, then acks."""

    handle: str = "worker"
    at: JoinAt = "head"
    resubscribe_every: int = 0
    """every N rounds, subscribe again (it must not move the cursor; 0 = never)"""


@dataclass(frozen=True)
class WaiterParams(ReaderParams):
    """The doorbell loop."""

    handle: str | None = None
    """default: the instance name"""
    wait_timeout: float = 2.0
    reply_every: int = 3
    """post an own message after every N rings (0 = never)"""


@dataclass(frozen=True)
class JoinerParams(ReaderParams):
    """A fresh handle per incarnation, joining at head mid-run."""

    handle: str = "joiner"
    """prefix of the fresh handles"""
    join_after: float = 1.0
    at: JoinAt = "head"
    """where a fresh handle joins: the head, or (asking for history) the start"""


@dataclass(frozen=True)
class DrainParams:
    """The final phase: one handle read to the true head."""

    handle: str
    channel: str
    batch: int = 200


WorkerParams = ProducerParams | ConsumerParams | WaiterParams | JoinerParams | DrainParams

ROLE_PARAMS: dict[str, type[WorkerParams]] = {
    "producer": ProducerParams,
    "consumer": ConsumerParams,
    "waiter": WaiterParams,
    "joiner": JoinerParams,
    "drain": DrainParams,
}


def params_to_json(params: WorkerParams) -> dict[str, Any]:
    return asdict(params)


def params_from_json(role: str, data: dict[str, Any]) -> WorkerParams:
    """The role's parameters from the runner's JSON; unknown keys are an
    error (runner and worker disagree about the contract)."""
    cls = ROLE_PARAMS[role]
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown {role} parameter(s): {sorted(unknown)}")
    return cls(**data)
