"""The claimer: work from a queue channel under a lease (the queue contract).

Each claimer incarnation is its own consumer (``claimer-2.3``): a process
that is SIGKILLed while it holds leases leaves them to lapse, and its next
incarnation must not be able to finish them (it holds nothing). Pauses do
the subtler damage: a claimer frozen past its lease comes back believing
it still holds the message, finishes its work and calls ``done``, which
the bus must refuse, because by then the lease lapsed and another claimer
may have taken the message (the duplicate work the checks count).

What a claimer does with a message, besides the plain claim, work, done:

* renew the lease while working (``renew``), or deliberately not, so work
  longer than the lease lets it lapse under the worker (a slow claimer);
  ``finish = "rotate"`` then tries done, renew-then-done and release in
  turn, every verb a lapsed holder must be refused;
* abandon *poison* messages (one in ``poison_every`` by a hash of the id,
  the same in every process): their leases lapse until, after
  ``max_deliveries`` deliveries, they are dead;
* release every ``release_every``-th claim (a voluntary requeue);
* now and then read the queue as if it were a broadcast channel (must be
  refused: ``WrongChannelKind``);
* every ``dead_every`` seconds, list the dead letters (:class:`_DeadLister`),
  so a message that died is known dead during the run: the checker can
  then judge a claim of it at once (``claimed-after-dead``), and forget
  it in a soak, instead of keeping every poison message's leases until
  the final phase.

The queue's final phase (:func:`run_queue_drain`) claims until the queue
has stayed empty for ``settle`` seconds (every lease the stopped claimers
held has lapsed by then), finishing or releasing what it gets, and then
lists the dead letters: after it, every message must be done or dead. It
stops early if the bus hands it one message more often than any message
may be delivered (a done that is not final would keep it busy forever).
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from contextlib import suppress
from typing import Any

from knell.buses import Claim, DeadLetter, QueueBus
from knell.workload.params import ClaimerParams, QueueDrainParams
from knell.workload.worker import OpFailed, Worker

__all__ = ["is_poison", "run_claimer", "run_queue_drain"]

ROTATION = ("done", "renew", "release")
DEAD_PAGE = 100
DEAD_TRAIL = 6.0
"""Seconds a listing during the run looks back: it starts above the
highest seq listed this long ago, not above the last one listed, because
messages die out of seq order (a message posted later may run out of
deliveries sooner). One that died later than that is still listed by the
final phase, which lists from the start; it is only kept by the checker
until then."""
DRAIN_RETRIES = 50
"""Failed claims the final phase tolerates (a locked store, say) before it
gives up and the runner records the drain as unknown."""


def is_poison(body: str, every: int) -> bool:
    """Whether a message is poison: the same answer in every process."""
    return every > 0 and zlib.crc32(body.encode()) % every == 0


def _queue(worker: Worker) -> QueueBus:
    return worker.bus  # type: ignore[return-value]  # the runner checked the contract


def _held(claim: Claim, consumer: str) -> dict[str, Any]:
    # the seq lets the checker know a done message it has since forgotten
    # (knell.checker.queue.settle) by its bit, without keeping its id
    return {"consumer": consumer, "id": claim.body, "msg": claim.id, "seq": claim.seq}


def declare(worker: Worker, channel: str, max_deliveries: int, *, retry: bool = True) -> int:
    """Declare the queue (idempotent); the bus answers with its real settings."""
    while True:
        try:
            info = worker.op(
                "declare",
                {"max_deliveries": max_deliveries},
                lambda: _queue(worker).declare_queue(channel, max_deliveries),
                lambda i: {"max_deliveries": i.max_deliveries, "sweep_interval": i.sweep_interval},
                channel=channel,
            )
            return int(info.max_deliveries)
        except OpFailed:
            if not retry or worker.stopping():
                raise
            worker.sleep(0.05)


def claim(worker: Worker, channel: str, consumer: str, lease: float) -> Claim | None:
    value = {"consumer": consumer, "lease_s": lease}

    def seen(c: Claim | None) -> dict[str, Any]:
        if c is None:
            return {**value, "id": None}
        return {**value, "id": c.body, "msg": c.id, "seq": c.seq, "deliveries": c.deliveries}

    return worker.op(
        "claim",
        value,
        lambda: _queue(worker).claim(channel, consumer, lease),
        seen,
        channel=channel,
    )


def renew(worker: Worker, held: Claim, consumer: str, lease: float) -> None:
    value = {**_held(held, consumer), "lease_s": lease}
    worker.op(
        "renew",
        value,
        lambda: _queue(worker).renew(held.id, consumer, lease),
        lambda _: value,
        channel=held.channel,
    )


def finish(worker: Worker, verb: str, held: Claim, consumer: str) -> None:
    """``done`` or ``release`` a claimed message."""
    value = _held(held, consumer)
    call = _queue(worker).done if verb == "done" else _queue(worker).release
    worker.op(verb, value, lambda: call(held.id, consumer), lambda _: value, channel=held.channel)


def worked(worker: Worker, held: Claim, consumer: str) -> None:
    """The work on a message is finished (logged before the done, like a
    consumer's ``handle`` before its ack)."""
    worker.history.write("ok", "work", _held(held, consumer), channel=held.channel)


def _work(worker: Worker, held: Claim, consumer: str, params: ClaimerParams) -> bool:
    """Work on ``held`` for ``work_time``, renewing the lease every third of
    it when ``renew`` is on. False when stopped (or the renewal was refused:
    the message is no longer ours) before the work was done."""
    left = params.work_time
    step = params.lease / 3 if params.renew else left
    while left > 0:
        chunk = min(left, step)
        worker.sleep(chunk)
        if worker.stopping():
            return False
        left -= chunk
        if left > 0 and params.renew:
            try:
                renew(worker, held, consumer, params.lease)
            except OpFailed:
                return False
    worked(worker, held, consumer)
    return True


def _finish(worker: Worker, verb: str, held: Claim, consumer: str, lease: float) -> None:
    with suppress(OpFailed):  # a refusal is the contract; the checker judges it
        if verb == "renew":
            renew(worker, held, consumer, lease)
            verb = "done"
        finish(worker, verb, held, consumer)


def probe_kind(worker: Worker, channel: str, consumer: str) -> None:
    """Read the queue as a broadcast channel: the bus must refuse it."""
    with suppress(OpFailed):
        worker.op(
            "fetch",
            {"after": 0, "probe": "wrong-kind"},
            lambda: worker.bus.fetch(consumer, channel, 0, 1),
            lambda ms: {"messages": [{"seq": m.seq, "id": m.body} for m in ms]},
            handle=consumer,
            channel=channel,
        )


class _DeadLister:
    """Lists a channel's dead letters every ``every`` seconds during the
    run, each listing from a trailing cursor (:data:`DEAD_TRAIL`), so a
    listing costs what died lately, not every dead letter so far."""

    def __init__(self, every: float, trail: float = DEAD_TRAIL) -> None:
        self.every = every
        self.trail = trail
        self.due = time.monotonic() + every
        self.marks: deque[tuple[float, int]] = deque([(float("-inf"), 0)])
        """(when, highest seq listed by then), oldest first"""

    def after(self, now: float) -> int:
        """Where a listing at ``now`` starts: the highest seq listed
        ``trail`` seconds ago."""
        marks = self.marks
        while len(marks) > 1 and marks[1][0] <= now - self.trail:
            marks.popleft()
        return marks[0][1]

    def listed(self, now: float, high: int) -> None:
        self.marks.append((now, max(high, self.marks[-1][1])))
        self.due = now + self.every

    def run(self, worker: Worker, channel: str) -> None:
        now = time.monotonic()
        after = high = self.after(now)
        with suppress(OpFailed):  # a failed listing is in the history; the next one retries
            while not worker.stopping():
                page = dead_page(worker, channel, after)
                if page:
                    after = high = page[-1].seq
                if len(page) < DEAD_PAGE:
                    break
        self.listed(now, high)


def run_claimer(worker: Worker, params: ClaimerParams) -> None:
    consumer = f"{worker.name}.{worker.incarnation}"
    channel = params.channel
    declare(worker, channel, params.max_deliveries)
    lister = _DeadLister(params.dead_every) if params.dead_every > 0 else None
    rounds = claims = finished = 0
    while not worker.stopping():
        rounds += 1
        if lister is not None and time.monotonic() >= lister.due:
            lister.run(worker, channel)
        if params.kind_probe_every and rounds % params.kind_probe_every == 0:
            probe_kind(worker, channel, consumer)
        try:
            held = claim(worker, channel, consumer, params.lease)
        except OpFailed:
            held = None
        if held is None:
            worker.sleep(params.idle)
            continue
        claims += 1
        if is_poison(held.body, params.poison_every):
            continue  # abandoned: its lease lapses, and it comes back until it is dead
        if params.release_every and claims % params.release_every == 0:
            _finish(worker, "release", held, consumer, params.lease)
            continue
        if not _work(worker, held, consumer, params):
            continue
        finished += 1
        verb = "done" if params.finish == "done" else ROTATION[finished % len(ROTATION)]
        _finish(worker, verb, held, consumer, params.lease)


def run_queue_drain(worker: Worker, params: QueueDrainParams) -> None:
    """The final phase: claim until the queue has been empty for ``settle``
    seconds and every earlier lease has lapsed (``lapse``), doing (or, for
    poison, releasing until dead) what comes, then list every dead letter.
    A failure the retries cannot absorb is fatal: the runner records the
    drain as unknown."""
    consumer = f"{worker.name}.{worker.incarnation}"
    channel = params.channel
    declare(worker, channel, params.max_deliveries, retry=False)
    mine: dict[str, int] = {}
    failures = 0
    empty_since: float | None = None
    started = time.monotonic()
    while True:
        try:
            held = claim(worker, channel, consumer, params.lease)
        except OpFailed:
            failures += 1
            if failures > DRAIN_RETRIES:
                raise
            time.sleep(0.05)
            continue
        if held is None:
            now = time.monotonic()
            if empty_since is None:
                empty_since = now
            elif now - empty_since >= params.settle and now - started >= params.lapse:
                break
            time.sleep(0.05)
            continue
        empty_since = None
        mine[held.body] = mine.get(held.body, 0) + 1
        if mine[held.body] > params.max_deliveries + 1:
            break  # handed the same message over and over (done is not final): the history shows it
        if is_poison(held.body, params.poison_every) and mine[held.body] <= params.max_deliveries:
            # Requeued until its deliveries are used up and it is dead. (More
            # claims of one message than that: the bus never lets it die; the
            # claims are in the history, and it is done so the drain ends.)
            _finish(worker, "release", held, consumer, params.lease)
            continue
        worked(worker, held, consumer)
        _finish(worker, "done", held, consumer, params.lease)
    after = 0
    while True:
        page = dead_page(worker, channel, after)
        if not page:
            return
        after = page[-1].seq


def dead_page(worker: Worker, channel: str, after: int) -> list[DeadLetter]:
    """One page of the channel's dead letters, above seq ``after``."""
    return worker.op(
        "dead",
        {"after": after},
        lambda: _queue(worker).dead(channel, after, DEAD_PAGE),
        lambda ds: {
            "after": after,
            "messages": [
                {
                    "id": d.body,
                    "seq": d.seq,
                    "msg": d.id,
                    "deliveries": d.deliveries,
                    "died_at": float(d.died_at),
                }
                for d in ds
            ],
        },
        channel=channel,
    )
