"""The consumer: catch up to the true head, handle, and only then ack.

This is the discipline that makes at-least-once delivery survive crashes:
fetch is a peek, so a consumer killed between fetch and ack leaves its
handle's durable cursor where it was, and the next incarnation of the same
handle re-reads (duplicates are counted, never lost). A short page is the
end of a batch, not the head: catch-up pages until an *empty* page.

Two paging styles, both within the contract: ``after`` (the default) reads
the first page from the durable cursor and later pages after the last seq
seen; ``cursor`` re-reads every page from the durable cursor, relying on the
ack it just made. The second is what a stateless client does, and it puts
the durable cursor on the path of every page, so every page of every
catch-up is judged against the acks before it (and a bus whose reads move
the cursor shows it on every page, not only on the first).

Several consumer processes may share one handle (twins): fetch does not
consume, so both see everything, and the forward-only ack makes the overlap
duplicate-at-worst. The optional ack probe tries an ack far beyond head
after every Nth page this process acks (pages, not rounds: a consumer that
never catches up runs one endless round); the contract says the bus must
refuse it.
"""

from __future__ import annotations

import itertools
from contextlib import suppress
from functools import partial

from knell.workload.params import ConsumerParams, DrainParams, ReaderParams
from knell.workload.worker import OpFailed, Worker

__all__ = ["catch_up", "run_consumer", "run_drain"]

PROBE_DISTANCE = 1_000_000

_pages = itertools.count(1)  # pages this process has handled and acked
_looks = itertools.count(1)  # pages after which a forensic look may come

FORENSIC_PAGES = 4
"""How many page-lengths before the page a forensic look starts."""


def catch_up(
    worker: Worker,
    handle: str,
    channel: str,
    params: ReaderParams | DrainParams,
    *,
    probe_every: int = 0,
) -> int:
    """Page from the durable cursor to an empty page, handling then acking
    each page (and after every ``probe_every``-th page of this process,
    probing an ack beyond head). Returns how many messages were handled."""
    batch = params.batch
    reader = params if isinstance(params, ReaderParams) else None
    handle_time = reader.handle_time if reader is not None else 0.0
    from_cursor = reader is not None and reader.paging == "cursor"
    ack_each = reader is not None and reader.ack_each
    after: int | None = None
    handled = 0
    while True:
        messages = worker.op(
            "fetch",
            {"after": after},
            partial(worker.bus.fetch, handle, channel, after, batch),
            lambda ms: {"messages": [{"seq": m.seq, "id": m.body} for m in ms]},
            handle=handle,
            channel=channel,
        )
        if not messages:
            return handled
        for message in messages:
            if handle_time:
                worker.sleep(handle_time)
            worker.history.write(
                "ok",
                "handle",
                {"seq": message.seq, "id": message.body},
                handle=handle,
                channel=channel,
            )
            handled += 1
            if ack_each:
                worker.ack(handle, channel, message.seq)
        last = messages[-1].seq
        if (
            reader is not None
            and reader.forensic_every
            and next(_looks) % reader.forensic_every == 0
        ):
            # the page and the four page-lengths before it: old enough to hold expired ones
            start = max(0, messages[0].seq - FORENSIC_PAGES * batch)
            forensic_look(worker, handle, channel, start, (FORENSIC_PAGES + 1) * batch)
        if not ack_each:
            worker.ack(handle, channel, last)
        if probe_every and next(_pages) % probe_every == 0:
            with suppress(OpFailed):  # refusal is the contract; the checker judges
                worker.ack(handle, channel, last + PROBE_DISTANCE)
        after = None if from_cursor else last


def forensic_look(worker: Worker, handle: str, channel: str, after: int, limit: int) -> None:
    """Read a stretch of the log with ``include_expired`` (recorded as
    ``forensic``, which no delivery check reads: it is a look at what the
    bus keeps, not a delivery); the expiry check wants every message the
    bus hid to still be there. A failed look is recorded and skipped."""
    with suppress(OpFailed):
        worker.op(
            "forensic",
            {"after": after},
            partial(worker.bus.fetch, handle, channel, after, limit, include_expired=True),  # type: ignore[call-arg]
            lambda ms: {"after": after, "messages": [{"seq": m.seq, "id": m.body} for m in ms]},
            handle=handle,
            channel=channel,
        )


def read_cursor(worker: Worker, handle: str, channel: str) -> int:
    return worker.op(
        "cursor",
        {},
        lambda: worker.bus.cursor(handle, channel),
        lambda c: {"cursor": worker.saw_cursor(handle, channel, c)},
        handle=handle,
        channel=channel,
    )


def read_head(worker: Worker, channel: str) -> int:
    return worker.op(
        "head",
        {},
        lambda: worker.bus.head(channel),
        lambda h: {"head": int(h)},
        channel=channel,
    )


def consume_forever(
    worker: Worker,
    handle: str,
    params: ReaderParams,
    *,
    resubscribe_every: int = 0,
    at: str = "head",
) -> None:
    """Rounds of cursor read + catch-up until asked to stop (now and then
    also a head read, and a re-subscription that must not move the cursor).
    Failed operations (locked store, refused ack) are recorded and retried
    next round: a consumer never gives up its handle."""
    channel = params.channel
    rounds = 0
    while not worker.stopping():
        rounds += 1
        try:
            if resubscribe_every and rounds % resubscribe_every == 0:
                worker.subscribe(handle, channel, at, retry=False)
            if params.read_head_every and rounds % params.read_head_every == 0:
                read_head(worker, channel)
            read_cursor(worker, handle, channel)
            handled = catch_up(worker, handle, channel, params, probe_every=params.ack_probe_every)
        except OpFailed:
            handled = 0
        if handled == 0:
            worker.sleep(params.idle)


def run_consumer(worker: Worker, params: ConsumerParams) -> None:
    worker.subscribe(params.handle, params.channel, params.at)
    consume_forever(
        worker, params.handle, params, resubscribe_every=params.resubscribe_every, at=params.at
    )


def run_drain(worker: Worker, params: DrainParams) -> None:
    """The final phase: one more incarnation of a handle reads to the true
    head (producers have stopped) exactly once, then exits. Any failure is
    fatal here: the runner records the drain as unknown."""
    worker.subscribe(params.handle, params.channel, "head", retry=False)
    catch_up(worker, params.handle, params.channel, params)
