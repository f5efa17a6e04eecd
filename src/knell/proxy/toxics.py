"""Toxics: what each Toxiproxy toxic does to the bytes of one link.

A *toxic* is configured once per proxy (``latency`` 200 ms on the
``downstream`` stream, say) and acts on every connection's link in that
direction through a per-link :class:`Stage`, which holds what one connection
needs of its own: whether the toxicity dice let the toxic apply to it, how
many bytes it has let through, the timer it sleeps on. A link passes each
chunk it reads through its stages in order, each stage awaiting what its
toxic asks for (a sleep, a drop, a close) before handing the chunk on, so a
chain of toxics composes the way Toxiproxy's chain of goroutines does, and a
link with no stages skips all of this (see :mod:`.link`).

The semantics are Toxiproxy's (``toxics/*.go`` of Shopify/toxiproxy):

=============  ==============================================================
``latency``    each chunk leaves ``latency`` +/- ``jitter`` ms after it was read
               (measured from the read, so a stream keeps its throughput)
``bandwidth``  at most ``rate`` KB/s (1 KB = 1000 bytes); large chunks are cut
               into 100 ms pieces
``slow_close`` the close (EOF) is passed on ``delay`` ms late
``timeout``    every byte is dropped; after ``timeout`` ms without data the
               connection is closed; ``timeout`` 0 holds it open until the
               toxic is removed, and removing it closes the connection
``reset_peer`` on the next chunk, wait ``timeout`` ms, then reset both sockets
               (TCP RST: linger 0)
``slicer``     chunks are cut into pieces of ``average_size`` +/-
               ``size_variation`` bytes, ``delay`` microseconds apart
``limit_data`` the connection is closed once ``bytes`` bytes went through
``noop``       nothing
=============  ==============================================================

``toxicity`` is the probability that a link gets the toxic: the dice are
rolled when the link meets the toxic (a new connection, or a toxic added to
an open one) and again when the toxic is updated, as Toxiproxy does.

Removing a toxic interrupts whatever its stages are waiting for, and the
chunk they held goes on at once (no data is dropped, nothing waits for a
flush), so an admin call never hangs on traffic. Where knell differs from
Toxiproxy, on purpose:

* attributes are validated: a negative value, a ``size_variation`` not
  below ``average_size``, or an ``average_size`` below 1 (which makes
  Toxiproxy's slicer recurse forever) and a ``toxicity`` outside 0..1 are
  a 400, not accepted;
* ``reset_peer`` resets connections that were open before the toxic was
  added too (Toxiproxy sets linger 0 only on links that start with it, so
  older connections get a FIN);
* removing a ``timeout`` toxic closes only the connections it applied to
  (Toxiproxy closes every connection of the proxy, even those its
  toxicity spared).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol

from knell.proxy.errors import (
    ApiError,
    bad_body,
    invalid_stream,
    invalid_toxic_type,
)

__all__ = [
    "STREAMS",
    "TOXIC_TYPES",
    "Chunk",
    "LinkControl",
    "Stage",
    "Toxic",
    "ToxicHeader",
    "ToxicType",
    "parse_header",
    "parse_update",
]

STREAMS = ("upstream", "downstream")


class Chunk:
    """Bytes read from one socket and the loop time they were read at."""

    __slots__ = ("data", "ts")

    def __init__(self, data: bytes | memoryview, ts: float) -> None:
        self.data = data
        self.ts = ts


Emit = Callable[[Chunk], Awaitable[None]]
EmitEof = Callable[[], Awaitable[None]]


class LinkControl(Protocol):
    """What a toxic may do to the link it sits on."""

    loop: asyncio.AbstractEventLoop

    def close_connection(self, *, reset: bool = False) -> None: ...


class Stage:
    """One toxic on one link: the dice roll and the per-connection state."""

    __slots__ = ("_waiter", "active", "link", "removed", "state", "timer", "toxic")

    def __init__(self, toxic: Toxic, link: LinkControl) -> None:
        self.toxic = toxic
        self.link = link
        self.removed = False
        self.state: Any = None
        self.timer: asyncio.TimerHandle | None = None
        self._waiter: asyncio.Future[bool] | None = None
        self.active = False
        self.roll()

    def roll(self) -> None:
        """Throw the toxicity dice and (re)start the toxic's timers."""
        self.stop_timer()
        self.active = random.random() < self.toxic.toxicity
        if self.active:
            self.toxic.toxic_type.start(self)

    async def sleep(self, seconds: float) -> bool:
        """Sleep, unless interrupted (toxic updated or removed): False then."""
        if self.removed:
            return False
        if seconds <= 0:
            return True
        loop = self.link.loop
        waiter: asyncio.Future[bool] = loop.create_future()
        handle = loop.call_later(seconds, _resolve, waiter, True)
        self._waiter = waiter
        try:
            return await waiter
        finally:
            handle.cancel()
            self._waiter = None

    def interrupt(self) -> None:
        """Wake a sleeping stage: the chunk it holds goes on at once."""
        if self._waiter is not None:
            _resolve(self._waiter, False)

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def remove(self) -> None:
        """The toxic left this link: stop waiting, let the toxic clean up."""
        self.removed = True
        self.interrupt()
        self.stop_timer()
        if self.active:
            self.toxic.toxic_type.cleanup(self)


def _resolve(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)


class ToxicType:
    """A toxic type: its attributes (all integers, default 0) and behaviour."""

    name: ClassVar[str]
    struct: ClassVar[str]
    attributes: ClassVar[tuple[str, ...]] = ()
    go_int: ClassVar[str] = "int64"

    def validate(self, attrs: dict[str, int]) -> None:
        for key in self.attributes:
            if attrs[key] < 0:
                raise bad_body(
                    f"attribute {key} of a {self.name} toxic must be >= 0, got {attrs[key]}"
                )

    def start(self, stage: Stage) -> None:
        """The toxic starts acting on a link (new link, added, updated)."""

    def cleanup(self, stage: Stage) -> None:
        """The toxic was removed from a link it applied to."""

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        await emit(chunk)

    async def eof(self, stage: Stage, emit_eof: EmitEof) -> None:
        await emit_eof()


class Noop(ToxicType):
    name = "noop"
    struct = "NoopToxic"


class Latency(ToxicType):
    name = "latency"
    struct = "LatencyToxic"
    attributes = ("latency", "jitter")

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        attrs = stage.toxic.attributes
        delay = attrs["latency"]
        jitter = attrs["jitter"]
        if jitter > 0:
            delay += random.randrange(-jitter, jitter)
        deadline = chunk.ts + delay / 1000.0
        await stage.sleep(deadline - stage.link.loop.time())
        chunk.ts = deadline
        await emit(chunk)


class Bandwidth(ToxicType):
    name = "bandwidth"
    struct = "BandwidthToxic"
    attributes = ("rate",)

    def start(self, stage: Stage) -> None:
        stage.state = 0.0  # sleep owed, carried over like Toxiproxy's `sleep`

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        rate = stage.toxic.attributes["rate"]  # KB/s == bytes per ms
        if rate <= 0:
            stage.state = 0.0
            await emit(chunk)
            return
        loop = stage.link.loop
        data = memoryview(chunk.data)
        owed = float(stage.state or 0.0) + len(data) / (rate * 1000.0)
        piece = rate * 100  # what 100 ms carries
        while len(data) > piece:
            if not await stage.sleep(0.1):
                stage.state = 0.0
                await emit(Chunk(data, chunk.ts))
                return
            await emit(Chunk(data[:piece], chunk.ts))
            data = data[piece:]
            owed -= 0.1
        started = loop.time()
        interrupted = not await stage.sleep(owed)
        owed -= loop.time() - started
        stage.state = 0.0 if interrupted else owed
        await emit(Chunk(data, chunk.ts))


class SlowClose(ToxicType):
    name = "slow_close"
    struct = "SlowCloseToxic"
    attributes = ("delay",)

    async def eof(self, stage: Stage, emit_eof: EmitEof) -> None:
        await stage.sleep(stage.toxic.attributes["delay"] / 1000.0)
        await emit_eof()


class Timeout(ToxicType):
    name = "timeout"
    struct = "TimeoutToxic"
    attributes = ("timeout",)

    def start(self, stage: Stage) -> None:
        self._arm(stage)

    def _arm(self, stage: Stage) -> None:
        stage.stop_timer()
        ms = stage.toxic.attributes["timeout"]
        if ms > 0:
            stage.timer = stage.link.loop.call_later(ms / 1000.0, stage.link.close_connection)

    def cleanup(self, stage: Stage) -> None:
        stage.link.close_connection()

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        if stage.removed:  # removed while this chunk was on its way in
            await emit(chunk)
            return
        self._arm(stage)  # dropped; Go's select restarts time.After on each chunk

    async def eof(self, stage: Stage, emit_eof: EmitEof) -> None:
        if stage.removed:
            await emit_eof()
            return
        stage.link.close_connection()


class ResetPeer(ToxicType):
    name = "reset_peer"
    struct = "ResetToxic"
    attributes = ("timeout",)

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        if await stage.sleep(stage.toxic.attributes["timeout"] / 1000.0):
            stage.link.close_connection(reset=True)
        else:
            await emit(chunk)

    async def eof(self, stage: Stage, emit_eof: EmitEof) -> None:
        if await stage.sleep(stage.toxic.attributes["timeout"] / 1000.0):
            stage.link.close_connection(reset=True)
        else:
            await emit_eof()


class Slicer(ToxicType):
    name = "slicer"
    struct = "SlicerToxic"
    attributes = ("average_size", "size_variation", "delay")
    go_int = "int"

    def validate(self, attrs: dict[str, int]) -> None:
        super().validate(attrs)
        if attrs["average_size"] < 1:
            raise bad_body(
                "attribute average_size of a slicer toxic must be >= 1, "
                f"got {attrs['average_size']}"
            )
        if attrs["size_variation"] >= attrs["average_size"]:
            raise bad_body(
                "attribute size_variation of a slicer toxic must be smaller than average_size, "
                f"got {attrs['size_variation']} >= {attrs['average_size']}"
            )

    @staticmethod
    def cuts(size: int, average: int, variation: int) -> list[int]:
        """Toxiproxy's ``chunk``: offsets ``[0, a, a, b, b, ..., size]`` of
        evenly varying slices (no bias to a small first or last one)."""
        out: list[int] = []
        todo = [(0, size)]
        while todo:
            start, end = todo.pop()
            if (end - start) - average <= variation:
                out += (start, end)
                continue
            mid = start + (end - start) // 2
            if variation > 0:
                mid += random.randrange(-variation, variation)
            todo += ((mid, end), (start, mid))
        return out

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        attrs = stage.toxic.attributes
        data = memoryview(chunk.data)
        offsets = self.cuts(len(data), attrs["average_size"], attrs["size_variation"])
        delay = attrs["delay"] / 1_000_000.0
        for i in range(1, len(offsets), 2):
            await emit(Chunk(data[offsets[i - 1] : offsets[i]], chunk.ts))
            if not await stage.sleep(delay):
                if offsets[i] < len(data):
                    await emit(Chunk(data[offsets[i] :], chunk.ts))
                return


class LimitData(ToxicType):
    name = "limit_data"
    struct = "LimitDataToxic"
    attributes = ("bytes",)

    async def chunk(self, stage: Stage, chunk: Chunk, emit: Emit) -> None:
        limit = stage.toxic.attributes["bytes"]
        sent = int(stage.state or 0)
        remaining = max(0, limit - sent)
        data = chunk.data
        if remaining < len(data):
            data = memoryview(data)[:remaining]
        if len(data) > 0:
            await emit(Chunk(data, chunk.ts))
            sent += len(data)
        stage.state = sent
        if limit - sent <= 0:
            stage.link.close_connection()


TOXIC_TYPES: dict[str, ToxicType] = {
    toxic_type.name: toxic_type
    for toxic_type in (
        Noop(),
        Latency(),
        Bandwidth(),
        SlowClose(),
        Timeout(),
        ResetPeer(),
        Slicer(),
        LimitData(),
    )
}


class Toxic:
    """A toxic as configured on a proxy (shared by all its links)."""

    __slots__ = ("attributes", "name", "stream", "toxic_type", "toxicity")

    def __init__(
        self,
        name: str,
        toxic_type: ToxicType,
        stream: str,
        toxicity: float,
        attributes: dict[str, int],
    ) -> None:
        self.name = name
        self.toxic_type = toxic_type
        self.stream = stream
        self.toxicity = toxicity
        self.attributes = attributes

    @property
    def type(self) -> str:
        return self.toxic_type.name

    def to_json(self) -> dict[str, Any]:
        """Toxiproxy's ``ToxicWrapper``, fields in its order."""
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.toxic_type.name,
            "stream": self.stream,
            "toxicity": _number(self.toxicity),
        }


def _number(value: float) -> float | int:
    """Go prints a float32 1 as ``1``: keep integral values integral."""
    return int(value) if float(value).is_integer() else value


def _json_value(value: Any) -> str:
    """A JSON value as Go's encoding/json names it in an unmarshal error."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _unmarshal(value: Any, where: str, want: str) -> ApiError:
    got = _json_value(value)
    return bad_body(f"json: cannot unmarshal {got} into Go struct field {where} of type {want}")


def _string(body: dict[str, Any], key: str, where: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _unmarshal(value, f"{where}.{key}", "string")
    return value


def _toxicity(body: dict[str, Any], current: float) -> float:
    value = body.get("toxicity")
    if value is None:
        return current
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _unmarshal(value, "ToxicWrapper.toxicity", "float32")
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise bad_body(f"toxicity must be between 0 and 1, got {value}")
    return float(value)


def _attributes(toxic_type: ToxicType, raw: Any, current: dict[str, int] | None) -> dict[str, int]:
    attrs = dict(current) if current is not None else dict.fromkeys(toxic_type.attributes, 0)
    if raw is None:
        toxic_type.validate(attrs)
        return attrs
    if not isinstance(raw, dict):
        raise _unmarshal(raw, "ToxicWrapper.attributes", f"toxics.{toxic_type.struct}")
    for key in toxic_type.attributes:
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63:
            raise _unmarshal(value, f"{toxic_type.struct}.attributes.{key}", toxic_type.go_int)
        attrs[key] = value
    toxic_type.validate(attrs)
    return attrs


class ToxicHeader:
    """A create request read up to (not including) its attributes, in
    Toxiproxy's order: body, stream, default name, type."""

    __slots__ = ("body", "name", "stream", "toxic_type", "toxicity")

    def __init__(
        self, body: dict[str, Any], name: str, toxic_type: ToxicType, stream: str, toxicity: float
    ):
        self.body = body
        self.name = name
        self.toxic_type = toxic_type
        self.stream = stream
        self.toxicity = toxicity

    def build(self) -> Toxic:
        """Read the attributes (after the caller checked the name is free)."""
        attrs = _attributes(self.toxic_type, self.body.get("attributes"), None)
        return Toxic(self.name, self.toxic_type, self.stream, self.toxicity, attrs)


def parse_header(body: Any) -> ToxicHeader:
    if not isinstance(body, dict):
        got = _json_value(body)
        raise bad_body(f"json: cannot unmarshal {got} into Go value of type toxics.ToxicWrapper")
    name = _string(body, "name", "ToxicWrapper") or ""
    type_name = _string(body, "type", "ToxicWrapper") or ""
    stream = _string(body, "stream", "ToxicWrapper")
    toxicity = _toxicity(body, 1.0)
    raw = body.get("attributes")
    if raw is not None and not isinstance(raw, dict):
        raise _unmarshal(raw, "ToxicWrapper.attributes", "toxics.NoopToxic")
    stream = "downstream" if stream is None else stream
    if stream.lower() not in STREAMS:
        raise invalid_stream()
    if not name:
        name = f"{type_name}_{stream}"
    toxic_type = TOXIC_TYPES.get(type_name)
    if toxic_type is None:
        raise invalid_toxic_type()
    return ToxicHeader(body, name, toxic_type, stream.lower(), toxicity)


def parse_update(toxic: Toxic, body: Any) -> tuple[float, dict[str, int]]:
    """New ``(toxicity, attributes)`` for ``toxic``; absent fields keep
    their values. Nothing is changed here: the caller applies both at once."""
    if not isinstance(body, dict):
        raise bad_body(f"json: cannot unmarshal {_json_value(body)} into Go value of type struct")
    toxicity = _toxicity(body, toxic.toxicity)
    attrs = _attributes(toxic.toxic_type, body.get("attributes"), toxic.attributes)
    return toxicity, attrs
