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
    "ClaimerParams",
    "ConsumerParams",
    "DrainParams",
    "HolderParams",
    "JoinerParams",
    "ProducerParams",
    "QueueDrainParams",
    "ReaderParams",
    "RoleDrainParams",
    "StreamDrainParams",
    "StreamerParams",
    "TailerParams",
    "WaiterParams",
    "WorkerParams",
    "params_from_json",
    "params_to_json",
]

Paging = Literal["after", "cursor"]
JoinAt = Literal["head", "start"]
Finish = Literal["done", "rotate"]


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
    retry_after: float = 0.0
    """seconds after the original that the deliberate resend comes (0: at
    once), as a client that retries late would"""
    hostile: bool = False
    """message ids carry hostile text (script tags, ANSI escapes, lines that
    imitate a report, very long strings) after their unique prefix"""
    stream: bool = False
    """the channel is a stream the scenario declares (``[streams.NAME]``):
    declare its ring before the first post"""
    max_len: int | None = None
    """the stream's count bound (with ``stream``)"""
    max_age_s: float | None = None
    """the stream's age bound in seconds (with ``stream``)"""
    ttl: float = 0.0
    """seconds each post lives (``expires_at`` = the producer's clock + ttl;
    0 = posts never expire); needs a bus with the expiry feature"""
    ttl_every: int = 1
    """with ttl: only every Nth post expires (the rest never do)"""


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
    forensic_every: int = 0
    """every N pages, also read the page's stretch of the log (and four
    page-lengths before it) with ``include_expired`` (a forensic look, not
    a delivery; 0 = never)"""


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


@dataclass(frozen=True)
class TailerParams:
    """Follows a channel's SSE tail through a bridge, reconnecting with
    ``Last-Event-ID``."""

    channel: str = "events"
    ping: float = 0.25
    """seconds between the bridge's pings while idle; four of them without
    a byte and the tailer takes the connection for dead and reconnects"""


@dataclass(frozen=True)
class StreamerParams:
    """Tails a stream channel directly through the bus (the stream contract),
    page after page, from where its last page ended."""

    channel: str = "ticks"
    max_len: int | None = None
    """the ring's count bound, declared for the channel (the first declaration wins)"""
    max_age_s: float | None = None
    """the ring's age bound in seconds, declared likewise"""
    batch: int = 20
    """tail page size (``limit``)"""
    read_time: float = 0.0
    """seconds of simulated work per page: a slow reader falls behind the ring"""
    idle: float = 0.02
    """seconds to sleep after an empty page"""
    kind_probe_every: int = 0
    """every N pages, read the stream as a broadcast channel and tail a
    queue channel (both must be refused; 0 = never)"""
    forensic_every: int = 0
    """every N pages, also tail the same stretch with ``include_expired``
    (a forensic look; needs a bus with the expiry feature; 0 = never)"""


@dataclass(frozen=True)
class StreamDrainParams:
    """The stream's final phase: tail the whole ring once every post completed."""

    channel: str
    batch: int = 200


@dataclass(frozen=True)
class ClaimerParams:
    """Claims work from a queue channel under a lease (the queue contract)."""

    channel: str = "jobs"
    lease: float = 1.0
    """seconds of lease asked for on every claim and renew"""
    max_deliveries: int = 3
    """declared for the channel (the first declaration wins)"""
    work_time: float = 0.02
    """seconds of simulated work per message"""
    renew: bool = True
    """renew the lease while working (every third of it); without it, work
    longer than the lease lets the lease lapse under the worker"""
    finish: Finish = "done"
    """after the work: "done"; or "rotate" through done, renew-then-done and
    release, so a lapsed holder tries every verb it must be refused"""
    poison_every: int = 0
    """one message in N (by a hash of its id, the same in every process) is
    poison: claimed and abandoned, so its lease lapses until it is dead (0 = none)"""
    release_every: int = 0
    """every Nth claim is released (voluntary requeue) instead of worked (0 = never)"""
    kind_probe_every: int = 0
    """every N rounds, read the queue as a broadcast channel (must be refused; 0 = never)"""
    idle: float = 0.02
    """seconds to sleep when nothing is claimable"""
    dead_every: float = 0.0
    """seconds between listings of the dead letters during the run (0 = only
    the final phase lists them)"""


@dataclass(frozen=True)
class QueueDrainParams:
    """The queue's final phase: claim until the queue stays empty, then list
    the dead letters."""

    channel: str
    lease: float = 1.0
    max_deliveries: int = 3
    poison_every: int = 0
    settle: float = 1.5
    """seconds of empty claims that prove the queue empty (a lease the
    stopped claimers held lapses within it)"""
    lapse: float = 0.0
    """seconds from the drain's start by which every lease granted before
    it has lapsed in true time: more than ``settle`` when a healed clock
    fault left the store's clock's leases longer (see
    :func:`knell.final_phase.store_clock_lead`); the drain runs at least
    this long, and its last empty claim comes after it"""


@dataclass(frozen=True)
class HolderParams:
    """Takes its turn holding a role, receives, reads (the at-most-once contract)."""

    channel: str = "reviewer"
    """the role (its inbox is the channel producers post to)"""
    hold: float = 1.0
    """seconds of lease on the role, renewed while holding"""
    tenure: float = 1.5
    """seconds a run holds the role before it releases it"""
    batch: int = 2
    """messages per receive"""
    read_after: float = 0.1
    """seconds between receiving a message and reading it (a kill lands between)"""
    leave_unread_every: int = 3
    """every Nth run releases the role without reading its last receive (0 = never)"""
    probe: bool = True
    """on taking the role, list the stranded messages and try to read one (must be refused)"""
    idle: float = 0.05
    """seconds to sleep when nothing was received, or the role is held by another"""
    together: str | None = None
    """the run the whole process group holds the role as, receiving at once
    (competing receivers of one inbox); None: each process takes turns"""


@dataclass(frozen=True)
class RoleDrainParams:
    """The role's final phase: one last run takes the role, reads everything
    pending, and lists what is stranded."""

    channel: str
    hold: float = 1.0
    batch: int = 50


WorkerParams = (
    ProducerParams
    | ConsumerParams
    | WaiterParams
    | JoinerParams
    | TailerParams
    | StreamerParams
    | StreamDrainParams
    | DrainParams
    | ClaimerParams
    | QueueDrainParams
    | HolderParams
    | RoleDrainParams
)

ROLE_PARAMS: dict[str, type[WorkerParams]] = {
    "producer": ProducerParams,
    "consumer": ConsumerParams,
    "waiter": WaiterParams,
    "joiner": JoinerParams,
    "tailer": TailerParams,
    "streamer": StreamerParams,
    "stream-drain": StreamDrainParams,
    "drain": DrainParams,
    "claimer": ClaimerParams,
    "queue-drain": QueueDrainParams,
    "holder": HolderParams,
    "role-drain": RoleDrainParams,
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
