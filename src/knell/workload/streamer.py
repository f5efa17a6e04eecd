"""The streamer: a reader that tails a stream channel's ring directly.

raven's stream channels are observe-only: no acks, no cursors, nothing a
reader leaves behind. A dashboard or a log shipper reads the ring from
where its last page ended, and when it fell behind (it was paused, killed,
or simply slower than the producers) the ring has moved on without it and
must say so: ``first`` above ``after + 1`` is the bus's word that the
messages in between were dropped before it asked.

The streamer is that reader, through the bus itself (the ``tailer`` role
follows a channel's SSE tail through a bridge: another client of another
interface, with its own position, ``Last-Event-ID``, and its own checks).
It declares the ring (the first declaration wins, so every streamer and
producer of the channel may declare it), then pages: ``after`` starts at 0
in every incarnation (a killed streamer keeps no position, so it starts
over and learns from ``first`` where the ring is) and moves to the last
seq of each page, or to ``first - 1`` when the ring starts past it.

What it records, for the stream checks (:mod:`knell.checker.stream`):
every ``declare_stream`` and every page as a ``stream_tail`` whose ``ok``
carries ``after``, ``limit``, ``first``, ``head`` and the page's messages
(seq and id), and ``expired``: the seqs the page hid because their
message expired (a bus with the expiry feature accounts for them, so they
are no gap; ``after`` moves past them too). With ``forensic_every``,
every N pages it also tails the same stretch with ``include_expired``
(recorded with ``"include_expired": true``: a look at what the ring
keeps, judged by the expiry check as a forensic read). With
``kind_probe_every``, every N pages it reads the stream as a broadcast
channel and tails ``CHANNEL.probe``, a channel no process gives a kind
(a tail never fixes one): both must be refused as
``wrong-kind``, each recorded with ``"probe": "wrong-kind"``.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, cast

from knell.buses import StreamBus, StreamInfo, StreamPage
from knell.workload.params import StreamDrainParams, StreamerParams
from knell.workload.worker import OpFailed, Worker

__all__ = ["declare_stream", "run_stream_drain", "run_streamer"]

DRAIN_RETRIES = 20


def _streams(worker: Worker) -> StreamBus:
    """The worker's bus as a stream bus (the runner refused a bus that does
    not declare the stream contract before starting anyone)."""
    return cast(StreamBus, worker.bus)


def _bound(max_len: int | None, max_age_s: float | None) -> dict[str, Any]:
    """The ring bound as the history holds it (an absent bound is left out)."""
    value: dict[str, Any] = {}
    if max_len is not None:
        value["max_len"] = max_len
    if max_age_s is not None:
        value["max_age_s"] = float(max_age_s)
    return value


def declare_stream(
    worker: Worker, channel: str, max_len: int | None, max_age_s: float | None
) -> StreamInfo | None:
    """Declare the ring, retrying (each attempt recorded) until the bus
    answers or the worker is told to stop."""
    while not worker.stopping():
        try:
            return worker.op(
                "declare_stream",
                _bound(max_len, max_age_s),
                lambda: _streams(worker).declare_stream(channel, max_len, max_age_s),
                lambda info: _bound(info.max_len, info.max_age_s),
                channel=channel,
            )
        except OpFailed:
            worker.sleep(0.05)
    return None


def tail(
    worker: Worker,
    channel: str,
    after: int,
    limit: int,
    include_expired: bool = False,
    **extra: Any,
) -> StreamPage:
    """One page, recorded as a ``stream_tail``: the seqs it hid because
    they expired as ``expired`` (left out when none), and a forensic page
    (``include_expired``) marked so in its invoke and ok. The flag reaches
    the bus only when set, so a bus without the expiry feature is called
    as before it existed."""
    value: dict[str, Any] = {"after": after, "limit": limit, **extra}
    if include_expired:
        value["include_expired"] = True

    flag = {"include_expired": True} if include_expired else {}
    bus: Any = _streams(worker)  # the flag is the expiry feature's, not the Protocol's

    def recorded(page: StreamPage) -> dict[str, Any]:
        done: dict[str, Any] = {
            **value,
            "first": page.first,
            "head": page.head,
            "messages": [{"seq": m.seq, "id": m.body} for m in page.messages],
        }
        if page.expired:
            done["expired"] = list(page.expired)
        return done

    page: StreamPage = worker.op(
        "stream_tail",
        value,
        lambda: bus.tail(channel, after, limit, **flag),
        recorded,
        channel=channel,
    )
    return page


def _probe_kinds(worker: Worker, channel: str, unkinded: str) -> None:
    """A broadcast read of the stream, and a tail of a channel that is no
    stream (no process gives it a kind): both must be refused."""
    with suppress(OpFailed):
        worker.op(
            "fetch",
            {"after": 0, "probe": "wrong-kind"},
            lambda: worker.bus.fetch(worker.name, channel, 0, 1),
            lambda ms: {"messages": [{"seq": m.seq, "id": m.body} for m in ms]},
            handle=worker.name,
            channel=channel,
        )
    with suppress(OpFailed):
        tail(worker, unkinded, 0, 1, probe="wrong-kind")


def run_streamer(worker: Worker, params: StreamerParams) -> None:
    channel = params.channel
    if declare_stream(worker, channel, params.max_len, params.max_age_s) is None:
        return
    unkinded = f"{channel}.probe"
    after = 0
    pages = 0
    while not worker.stopping():
        pages += 1
        if params.kind_probe_every and pages % params.kind_probe_every == 0:
            _probe_kinds(worker, channel, unkinded)
        if params.forensic_every and pages % params.forensic_every == 0:
            with suppress(OpFailed):  # a look at what the ring keeps, not a read to follow
                tail(worker, channel, after, params.batch, include_expired=True)
        try:
            page = tail(worker, channel, after, params.batch)
        except OpFailed:
            worker.sleep(params.idle)
            continue
        last = page.last
        if last is not None:
            after = last
        elif page.first > after + 1:
            after = page.first - 1  # the ring moved on: read from where it starts now
        if params.read_time > 0:
            worker.sleep(params.read_time)
        elif not page.messages:
            worker.sleep(params.idle)


def run_stream_drain(worker: Worker, params: StreamDrainParams) -> None:
    """The final phase: page through the whole ring from its start, once
    every post has completed. A failure the retries cannot absorb is fatal:
    the runner records the drain as unknown."""
    after = 0
    failures = 0
    while True:
        try:
            page = tail(worker, params.channel, after, params.batch)
        except OpFailed:
            failures += 1
            if failures > DRAIN_RETRIES:
                raise
            worker.sleep(0.05)
            continue
        last = page.last
        if last is None:
            return
        after = last
