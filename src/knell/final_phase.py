"""How the queue, at-most-once and stream contracts end a run: their final workers.

Each contract needs its own final phase before loss is decidable. The
broadcast one (drain every handle to the true head) is the runner's own;
the other two are here, as *final workers* the runner starts after it has
stopped every role, recording each as a ``drain`` of the nemesis process
(``contract`` says which), exactly like a broadcast drain:

* queue: one ``queue-drain`` worker per queue channel claims until the
  queue has stayed empty longer than any claimer's lease (every lease the
  stopped claimers held has lapsed), then lists the dead letters;
* at-most-once: one ``role-drain`` worker per role waits for the role,
  reads everything pending and lists what is stranded;
* stream: one ``stream-drain`` worker per stream channel tails the whole
  ring once every post has completed, so the checks see what the ring
  holds at the end (its bound, its contents) in at least one page.

Which contracts a scenario tests at all is :mod:`knell.role_contracts`.

Both wait out leases, and a lease is judged by the store's clock. A clock
fault that set the store's clock ahead (a forward jump or skew, a fast
rate) and was healed before the final phase stepped it back: every lease
granted meanwhile runs that much longer in true time, as the contract says
it must. So the queue's drain runs at least that much longer (its
``lapse``), and what the role's last run may wait for grows by
:func:`store_clock_lead`; without it, the drain would stop while those
leases still live and call their messages lost. The queue need not stay
empty for all of it: once those leases have lapsed, a quiet of one lease
proves it empty."""

from __future__ import annotations

from dataclasses import dataclass

from knell.buses.contract import QUEUE, ROLES, STREAM
from knell.scenario import ClaimerSpec, HolderSpec, Scenario
from knell.workload.params import (
    QueueDrainParams,
    RoleDrainParams,
    StreamDrainParams,
    WorkerParams,
)

__all__ = ["FINAL_ROLES", "SETTLE_MARGIN", "Final", "finals", "store_clock_lead"]

FINAL_ROLES = ("claimer", "holder", "streamer")
"""Roles the runner stops (after producers and readers) before the final workers."""

SETTLE_MARGIN = 0.5
"""Seconds of empty claims beyond the longest lease before a queue counts as empty."""


@dataclass(frozen=True)
class Final:
    """One final worker: what the runner starts to end a contract's run."""

    name: str
    role: str
    params: WorkerParams
    channel: str
    contract: str


def store_clock_lead(scenario: Scenario) -> float:
    """The most seconds the scenario's clock faults may set the store's
    clock ahead of true time: a fault targeting the store or the whole
    host (on SQLite, any: its store's clock is the host's), by its positive
    ``offset``, or what a ``rate`` above 1 gains over its ``duration``."""
    lead = 0.0
    embedded = scenario.store.kind == "sqlite"
    for spec in scenario.nemesis:
        if not str(spec.fault).startswith("clock-"):
            continue
        if not embedded and getattr(spec, "target", None) not in ("store", "host"):
            continue
        gain = _seconds(getattr(spec, "offset", 0.0))
        rate = _seconds(getattr(spec, "rate", 1.0))
        if rate > 1:
            gain = max(gain, (rate - 1) * _seconds(getattr(spec, "duration", 0.0)))
        lead = max(lead, gain)
    return lead


def _seconds(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def finals(scenario: Scenario) -> list[Final]:
    """The final workers of a scenario, one per queue channel, per role and
    per stream channel."""
    queues: dict[str, list[ClaimerSpec]] = {}
    roles: dict[str, list[HolderSpec]] = {}
    for spec in scenario.process:
        if isinstance(spec, ClaimerSpec):
            queues.setdefault(spec.channel, []).append(spec)
        elif isinstance(spec, HolderSpec):
            roles.setdefault(spec.channel, []).append(spec)
    out: list[Final] = []
    lead = store_clock_lead(scenario)
    for index, (channel, claimers) in enumerate(queues.items(), start=1):
        lease = max(c.lease for c in claimers)
        params = QueueDrainParams(
            channel=channel,
            lease=lease,
            max_deliveries=claimers[0].max_deliveries,
            poison_every=max(c.poison_every for c in claimers),
            settle=lease + SETTLE_MARGIN,
            lapse=lease + SETTLE_MARGIN + lead,
        )
        out.append(Final(f"queue-drain-{index}", "queue-drain", params, channel, QUEUE))
    for index, (channel, holders) in enumerate(roles.items(), start=1):
        params_r = RoleDrainParams(channel=channel, hold=max(h.hold for h in holders))
        out.append(Final(f"role-drain-{index}", "role-drain", params_r, channel, ROLES))
    for index, channel in enumerate(scenario.streams, start=1):
        params_s = StreamDrainParams(channel=channel)
        out.append(Final(f"stream-drain-{index}", "stream-drain", params_s, channel, STREAM))
    return out
