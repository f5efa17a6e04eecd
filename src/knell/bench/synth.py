"""A synthetic, realistic, *valid* history of any length, for the checker benchmark.

Why synthetic: a million-event history from real processes takes many
minutes to record on a small machine, and its shape would depend on the
machine's load. This module simulates the quickstart scenario in-process
instead, against an in-memory model of the contract, and writes exactly the
events real workers write (same ``f`` values, value shapes, per-process
incarnations, a merged file with ``index``):

* two producers post unique ids with idempotency keys, resending every 25th
  post with its key (the bus answers with the original seq);
* twin consumers share the handle ``worker``: cursor read, fetch from the
  durable cursor, ``handle`` each message, ack the page, page on with
  ``after`` until an empty page, and now and then probe an ack far beyond
  head (refused: ``fail``);
* a doorbell waiter catches up, replies under its own handle every third
  ring, arms, and rings on backlog or on the next post by someone else;
* a joiner joins at the head mid-run under a fresh handle and consumes;
* the nemesis SIGKILLs consumers and the waiter (a killed process leaves its
  last invoke without a completion) and restarts them as new incarnations,
  which redeliver what the dead one handled but never acked;
* the final phase stops everyone and drains every handle to the head.

The model applies each operation at its completion, so the history is one
a correct bus could have produced: every check should say ``valid``, which
makes the benchmark exercise each check's full bookkeeping rather than its
anomaly path. Deterministic for a given seed and size.

``anomalies=N`` breaks the bus N times each way, spread over the run, for
the report benchmark (drawing anomaly timelines needs anomalies): the
handle ``worker`` is never shown N of the messages (``no-loss`` after the
drain), and N acks answer with a cursor below the one the handle already
had (``no-cursor-regression``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

__all__ = ["SynthStats", "write_history"]

CHANNEL = "events"
T0 = 1_795_000_000_000_000_000  # ns; any epoch works, only differences matter

IDLE_STEPS = 6  # steps a caught-up reader sleeps before its next round


@dataclass
class SynthStats:
    """What the generated history holds."""

    events: int
    messages: int
    kills: int
    bytes: int


class _Model:
    """The bus as the checks expect it: one dense log and durable cursors."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []  # seq - 1 -> (id, sender)
        self.keys: dict[str, int] = {}  # idempotency key -> seq
        self.cursors: dict[str, int] = {}  # handle -> acked

    @property
    def head(self) -> int:
        return len(self.log)

    def post(self, mid: str, sender: str, key: str | None) -> int:
        if key is not None and key in self.keys:
            return self.keys[key]
        self.log.append((mid, sender))
        seq = len(self.log)
        if key is not None:
            self.keys[key] = seq
        return seq

    def subscribe(self, handle: str) -> int:
        return self.cursors.setdefault(handle, self.head)

    def page(self, after: int, limit: int) -> list[dict[str, Any]]:
        return [
            {"seq": seq, "id": self.log[seq - 1][0]}
            for seq in range(after + 1, min(self.head, after + limit) + 1)
        ]

    def ack(self, handle: str, up_to: int) -> int:
        cursor = max(self.cursors[handle], up_to)
        self.cursors[handle] = cursor
        return cursor


class _Sim:
    """Round-robin-ish interleaving of process generators, one event per step."""

    def __init__(self, out: BinaryIO, seed: int) -> None:
        self.out = out
        self.rng = random.Random(seed)
        self.model = _Model()
        self.now = T0
        self.index = 0
        self.bytes = 0
        self.buffer: list[bytes] = []
        self.incarnation: dict[str, int] = {}
        self.pids: dict[str, int] = {}
        self.next_pid = 4000
        self.steps = [self.rng.randrange(20_000, 400_000) for _ in range(997)]
        self.hide_every = 0  # the worker handle never sees seqs divisible by this
        self.regress_every = 0  # every Nth ack by the worker handle answers a stale cursor
        self.acks = 0

    def emit(
        self,
        process: str,
        type_: str,
        f: str,
        value: dict[str, Any],
        handle: str | None = None,
        channel: str | None = None,
    ) -> None:
        self.now += self.steps[self.index % 997]
        event: dict[str, Any] = {
            "time": self.now,
            "process": process,
            "incarnation": self.incarnation.get(process, 1),
            "pid": self.pids.get(process, 1),
            "type": type_,
            "f": f,
        }
        if handle is not None:
            event["handle"] = handle
        if channel is not None:
            event["channel"] = channel
        event["value"] = value
        event["index"] = self.index
        self.index += 1
        line = orjson.dumps(event) + b"\n"
        self.bytes += len(line)
        self.buffer.append(line)
        if len(self.buffer) >= 4096:
            self.flush()

    def flush(self) -> None:
        self.out.write(b"".join(self.buffer))
        self.buffer.clear()

    def spawn(self, process: str) -> int:
        """A new incarnation of ``process`` (its ``start`` event comes first)."""
        incarnation = self.incarnation.get(process, 0) + 1
        self.incarnation[process] = incarnation
        self.next_pid += 1
        self.pids[process] = self.next_pid
        return incarnation


# -- the roles ------------------------------------------------------------------


def _producer(sim: _Sim, name: str) -> Iterator[None]:
    emit, model = sim.emit, sim.model
    incarnation = sim.incarnation[name]
    emit(name, "ok", "start", {"role": "producer"})
    yield
    counter = 0
    while True:
        counter += 1
        mid = f"{name}.{incarnation}:{counter}"
        for _ in range(2 if counter % 25 == 0 else 1):
            value = {"id": mid, "sender": name, "key": mid}
            emit(name, "invoke", "post", value, channel=CHANNEL)
            yield
            seq = model.post(mid, name, mid)
            emit(name, "ok", "post", {**value, "seq": seq}, channel=CHANNEL)
            yield


def _catch_up(
    sim: _Sim, name: str, handle: str, batch: int, probe: bool
) -> Generator[None, None, int]:
    """Page from the durable cursor to an empty page; returns how many
    messages were handled."""
    emit, model = sim.emit, sim.model
    after: int | None = None
    handled = 0
    while True:
        emit(name, "invoke", "fetch", {"after": after}, handle, CHANNEL)
        yield
        start = model.cursors[handle] if after is None else after
        messages = model.page(start, batch)
        shown = messages
        if sim.hide_every and handle == "worker":
            shown = [m for m in messages if m["seq"] % sim.hide_every]
        emit(name, "ok", "fetch", {"messages": shown}, handle, CHANNEL)
        yield
        if not messages:
            return handled
        handled += len(shown)
        for m in shown:
            emit(name, "ok", "handle", {"seq": m["seq"], "id": m["id"]}, handle, CHANNEL)
            yield
        last = messages[-1]["seq"]
        emit(name, "invoke", "ack", {"up_to": last}, handle, CHANNEL)
        yield
        cursor = model.ack(handle, last)
        if sim.regress_every and handle == "worker":
            sim.acks += 1
            if sim.acks % sim.regress_every == 0 and cursor > 3:
                cursor -= 3  # a stale cursor: the model keeps the true one
        emit(name, "ok", "ack", {"cursor": cursor}, handle, CHANNEL)
        yield
        if probe:
            probe = False
            beyond = last + 1_000_000
            emit(name, "invoke", "ack", {"up_to": beyond}, handle, CHANNEL)
            yield
            error = f"ack {beyond} is beyond head {model.head} of '{CHANNEL}'"
            emit(name, "fail", "ack", {"up_to": beyond, "error": error}, handle, CHANNEL)
            yield
        after = last


def _subscribe(sim: _Sim, name: str, handle: str) -> Iterator[None]:
    sim.emit(name, "invoke", "subscribe", {"at": "head"}, handle, CHANNEL)
    yield
    sim.emit(name, "ok", "subscribe", {"cursor": sim.model.subscribe(handle)}, handle, CHANNEL)
    yield


def _consumer(sim: _Sim, name: str, handle: str | None = None) -> Iterator[None]:
    emit, model = sim.emit, sim.model
    role = "joiner" if handle is None else "consumer"
    if handle is None:
        handle = f"joiner-{name.rsplit('-', 1)[-1]}.{sim.incarnation[name]}"
    emit(name, "ok", "start", {"role": role})
    yield
    yield from _subscribe(sim, name, handle)
    rounds = 0
    while True:
        rounds += 1
        emit(name, "invoke", "cursor", {}, handle, CHANNEL)
        yield
        emit(name, "ok", "cursor", {"cursor": model.cursors[handle]}, handle, CHANNEL)
        yield
        probe = role == "consumer" and rounds % 10 == 0
        handled = yield from _catch_up(sim, name, handle, 20, probe)
        if handled == 0:
            for _ in range(IDLE_STEPS):  # caught up: sleep a while
                yield


def _waiter(sim: _Sim, name: str) -> Iterator[None]:
    emit, model = sim.emit, sim.model
    handle = name
    incarnation = sim.incarnation[name]
    emit(name, "ok", "start", {"role": "waiter"})
    yield
    yield from _subscribe(sim, name, handle)
    rings = 0
    reply: str | None = None
    while True:
        yield from _catch_up(sim, name, handle, 20, False)
        if reply is not None:
            value = {"id": reply, "sender": handle}
            emit(name, "invoke", "post", value, channel=CHANNEL)
            yield
            seq = model.post(reply, handle, None)
            emit(name, "ok", "post", {**value, "seq": seq}, None, CHANNEL)
            yield
            reply = None
        emit(name, "invoke", "arm", {"timeout": 1.0}, handle)
        yield
        acked = model.cursors[handle]
        armed = model.head
        reason = "backlog"
        ring: int | None = None
        while ring is None:
            low = acked if reason == "backlog" else armed
            for seq in range(low + 1, model.head + 1):
                if model.log[seq - 1][1] != handle:
                    ring = seq
                    break
            else:
                reason = "post"
                armed = model.head
                yield
        sender = model.log[ring - 1][1]
        emit(name, "ok", "wake", {"seq": ring, "sender": sender, "reason": reason}, handle, CHANNEL)
        yield
        emit(name, "ok", "arm", {"rang": True}, handle)
        yield
        rings += 1
        if rings % 3 == 0:
            reply = f"{name}.{incarnation}:reply-{rings}"


def _drain(sim: _Sim, name: str, handle: str) -> None:
    for _ in _drain_steps(sim, name, handle):
        pass


def _drain_steps(sim: _Sim, name: str, handle: str) -> Iterator[None]:
    sim.emit(name, "ok", "start", {"role": "drain"})
    yield
    yield from _subscribe(sim, name, handle)
    yield from _catch_up(sim, name, handle, 200, False)
    sim.emit(name, "ok", "stop", {})
    yield


# -- the run --------------------------------------------------------------------


def write_history(path: Path, events: int, *, seed: int = 7, anomalies: int = 0) -> SynthStats:
    """Write a merged ``history.jsonl`` of about ``events`` events (the final
    drain adds a few hundred more) and return what it holds; ``anomalies``
    breaks the bus that many times each way (see the module docstring)."""
    if events < 1_000:
        raise ValueError(f"events must be at least 1000, got {events}")
    if anomalies < 0:
        raise ValueError(f"anomalies must be >= 0, got {anomalies}")
    with open(path, "wb") as out:
        sim = _Sim(out, seed)
        if anomalies:
            # about one message per 10.8 events and one worker ack per 36 events
            sim.hide_every = max(2, events // 11 // anomalies)
            sim.regress_every = max(2, events // 36 // anomalies)
        stats = _run(sim, events, seed)
        sim.flush()
    return stats


def _run(sim: _Sim, events: int, seed: int) -> SynthStats:
    rng = sim.rng
    nemesis = "nemesis"
    sim.emit(nemesis, "info", "begin", {"seed": seed})
    makers: dict[str, Callable[[], Iterator[None]]] = {
        "producer-1": lambda: _producer(sim, "producer-1"),
        "producer-2": lambda: _producer(sim, "producer-2"),
        "consumer-1": lambda: _consumer(sim, "consumer-1", "worker"),
        "consumer-2": lambda: _consumer(sim, "consumer-2", "worker"),
        "waiter-1": lambda: _waiter(sim, "waiter-1"),
        "joiner-1": lambda: _consumer(sim, "joiner-1"),
    }
    live: dict[str, Iterator[None]] = {}
    for name in makers:
        if name != "joiner-1":
            sim.spawn(name)
            live[name] = makers[name]()
    sim.emit(nemesis, "info", "ready", {"pending": []})
    names = list(live)
    down: dict[str, int] = {}  # killed process -> index at which it restarts
    kills = 0
    next_kill = 3_000
    join_at = events // 10
    drain_estimate = 0
    # Producers are picked less often than readers, as in a real run where a
    # reader does several operations per message and producers pace themselves.
    weights = {"producer-1": 1, "producer-2": 1}
    while sim.index + drain_estimate < events:
        if sim.index % 512 == 0:
            # stop early enough that the final drain lands near ``events``
            backlog = sum(sim.model.head - c for c in sim.model.cursors.values())
            drain_estimate = int(backlog * 1.1) + 20 * len(sim.model.cursors) + 50
        if join_at and sim.index >= join_at:
            join_at = 0
            sim.spawn("joiner-1")
            live["joiner-1"] = makers["joiner-1"]()
            names.append("joiner-1")
        if sim.index >= next_kill:
            next_kill = sim.index + rng.randrange(2_000, 6_000)
            target = rng.choice(["consumer-1", "consumer-2", "waiter-1"])
            if target in live and target not in down:
                kills += 1
                sim.emit(nemesis, "info", "kill", {"target": target, "pid": sim.pids[target]})
                del live[target]
                names.remove(target)
                down[target] = sim.index + rng.randrange(30, 300)
        for target, at in list(down.items()):
            if sim.index >= at:
                del down[target]
                sim.spawn(target)
                incarnation = sim.incarnation[target]
                sim.emit(
                    nemesis,
                    "info",
                    "restart",
                    {"target": target, "pid": sim.pids[target], "incarnation": incarnation},
                )
                live[target] = makers[target]()
                names.append(target)
        name = names[rng.randrange(len(names))]
        if name in weights and rng.random() < 0.55:
            continue
        next(live[name])
    # the final phase: heal, stop producers, stop readers, drain every handle
    for target in sorted(down):
        sim.spawn(target)
        incarnation = sim.incarnation[target]
        restart = {"target": target, "pid": sim.pids[target], "incarnation": incarnation}
        sim.emit(nemesis, "info", "restart", restart)
        sim.emit(target, "ok", "start", {"role": target.rsplit("-", 1)[0]})
        live[target] = iter(())
    sim.emit(nemesis, "info", "heal", {})
    for name in sorted(live):
        sim.emit(name, "ok", "stop", {})
    sim.emit(nemesis, "info", "stop", {"roles": ["producer", "consumer", "waiter", "joiner"]})
    handles = sorted(sim.model.cursors)
    for number, handle in enumerate(handles, start=1):
        sim.emit(nemesis, "invoke", "drain", {"handle": handle}, handle, CHANNEL)
        drain = f"drain-{number}"
        sim.spawn(drain)
        _drain(sim, drain, handle)
        heads = {CHANNEL: sim.model.head}
        sim.emit(nemesis, "ok", "drain", {"handle": handle, "heads": heads}, handle, CHANNEL)
    return SynthStats(events=sim.index, messages=sim.model.head, kills=kills, bytes=sim.bytes)
