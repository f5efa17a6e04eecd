"""Bridge mutants: an HTTP bridge with one seeded bug each.

A bridge sits between agents and the store, and the naive ways to build
one break promises the store itself keeps: it answers before the store
has the write, it caches what only the store knows, it loses a field on
the way through. Each mutant here is one such bridge. It is written as a
*bus wrapper*: a :class:`~knell.buses.contract.Bus` around the reference
bus of the store URL, holding exactly the state (a write-behind queue, a
head cache, a cursor cache) a buggy bridge process would hold in its
memory. A normal bridge serves it, so the bug lives in the bridge
process and dies, or survives, with it::

    knell bridge --bus sqlite:///run/store/bus.db --mutant bridge-ack-before-commit
    # the same thing, through the ordinary driver path:
    knell bridge --bus sqlite:///run/store/bus.db \\
        --driver knell.buses.mutants:bridge_ack_before_commit

Clients reach it at the bridge's ``http://`` URL exactly as they reach a
sound bridge; nothing in a scenario or a check knows which one it is.
The mutants are declared with ``store="bridge"``: the runner serves them
through a bridge instead of handing them to workers (see
:func:`knell.buses.mutants.registry.mutant`).

Every mutant's background work runs on daemon threads and stops on
``close`` (a graceful bridge shutdown flushes what it holds: the bugs
show only when the bridge dies hard, which is what the chaos does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from knell.buses.contract import (
    AckBeyondHead,
    Bus,
    Claim,
    DeadLetter,
    JoinAt,
    Message,
    QueueInfo,
    Wake,
)
from knell.buses.mutants.registry import mutant
from knell.redact import redact_url

__all__ = [
    "BridgeAckBeforeCommitBus",
    "BridgeClaimRetrySecondLeaseBus",
    "BridgeCursorWriteBehindBus",
    "BridgeDropsIdempotencyKeyBus",
    "BridgeStaleHeadBus",
    "state_file",
]

FLUSH_INTERVAL = 1.0
"""Seconds between two flushes of a write-behind queue (posts, acks) and
between two checkpoints of the head cache: the window a hard kill of the
bridge falls into."""

_W = TypeVar("_W", bound="_Wrapper")


class _Wrapper:
    """Delegates the whole contract to the reference bus of the URL."""

    def __init__(self, inner: Bus) -> None:
        self.inner = inner

    @classmethod
    def from_url(cls: type[_W], url: str) -> _W:
        from knell.buses import open_bus

        return cls(open_bus(url))

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        return self.inner.post(channel, body, sender, idempotency_key)

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        return self.inner.subscribe(handle, channel, at)

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]:
        return self.inner.fetch(handle, channel, after, limit)

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        return self.inner.ack(handle, channel, up_to)

    def cursor(self, handle: str, channel: str) -> int:
        return self.inner.cursor(handle, channel)

    def head(self, channel: str) -> int:
        return self.inner.head(channel)

    def wait(self, handle: str, timeout: float) -> Wake | None:
        return self.inner.wait(handle, timeout)

    def close(self) -> None:
        self.inner.close()


class _Background:
    """A daemon thread calling ``work`` every :data:`FLUSH_INTERVAL`
    seconds, and once more when stopped."""

    def __init__(self, work: Any, name: str) -> None:
        self._work = work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            with contextlib.suppress(Exception):  # the store may be down: next round
                self._work()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):  # closing anyway: what is not written is lost
            self._work()


# -- posting -----------------------------------------------------------------------


@mutant(
    "bridge-ack-before-commit",
    failure_mode="Bridge answers a post before the store has committed it",
    killed_by=("no-loss",),
    scenarios=("sqlite-bridge-kill",),
    rule="A bridge answers a post only after the bus's post returned, i.e. the store committed",
    store="bridge",
)
class BridgeAckBeforeCommitBus(_Wrapper):
    """Failure mode: the bridge answers a post before the store has it.

    A write-behind bridge: ``post`` predicts the seq (the store's head the
    first time a channel is seen, then one more per post), queues the
    message and answers ``200`` at once; a background thread writes the
    queue to the store every :data:`FLUSH_INTERVAL` seconds. Fast, and
    correct while the bridge lives; a SIGKILL loses every post it already
    confirmed but had not flushed. Proven by ``no-loss`` (and, since the
    restarted bridge hands the lost seqs out again, ``no-duplicate-seq``).
    """

    def __init__(self, inner: Bus) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._queue: list[Message] = []
        self._keys: dict[tuple[str, str], Message] = {}
        self._heads: dict[str, int] = {}
        self._flusher = _Background(self._flush, "bridge-write-behind")

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        with self._lock:
            if idempotency_key is not None and (channel, idempotency_key) in self._keys:
                return self._keys[(channel, idempotency_key)]
            head = self._heads.get(channel)
            if head is None:
                head = self.inner.head(channel)
            message = Message(channel, head + 1, body, sender, idempotency_key)
            self._heads[channel] = message.seq
            self._queue.append(message)
            if idempotency_key is not None:
                self._keys[(channel, idempotency_key)] = message
        return message

    def _flush(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        for i, m in enumerate(batch):
            try:
                self.inner.post(m.channel, m.body, m.sender, m.idempotency_key)
            except Exception:
                with self._lock:  # keep the rest, in order, for the next round
                    self._queue[:0] = batch[i:]
                raise
            if m.idempotency_key is not None:
                with self._lock:
                    self._keys.pop((m.channel, m.idempotency_key), None)

    def close(self) -> None:
        self._flusher.stop()
        super().close()


@mutant(
    "bridge-drops-idempotency-key",
    failure_mode="Bridge drops the idempotency key, so a client's retry double-posts",
    killed_by=("idempotency",),
    scenarios=("postgres-bridge-pause", "sqlite-bridge-kill"),  # store-guard: ok
    rule="The bridge passes the idempotency key through to the bus with every post",
    store="bridge",
)
class BridgeDropsIdempotencyKeyBus(_Wrapper):
    """Failure mode: the bridge loses the idempotency key on the way through.

    The store deduplicates retries by key, but this bridge never hands the
    key on (it reads it from a header the client does not send), while
    still echoing it back. A post whose answer was lost (the bridge was
    paused past the client's timeout, or killed after the commit) is
    retried by the producer with the same key, and appended a second time.
    Proven by ``idempotency``.
    """

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        m = self.inner.post(channel, body, sender, None)
        return Message(m.channel, m.seq, m.body, m.sender, idempotency_key)


# -- reading -----------------------------------------------------------------------


def state_file(url: str, name: str) -> Path:
    """Where a bridge mutant keeps state across its own restarts: the
    place every process serving *the same store* finds it again.

    Beside a SQLite store's file. Else, in a run (``KNELL_RUN_DIR``, so
    nothing outlives the run), one file per mutant in the run's control
    folder, whatever address the URL gives: a run has one store, and its
    processes reach it at different addresses (the bridges through their
    link to the store, the runner's drain directly), so a key made of the
    URL would hand the drain a cold cache of its own, and a restarted
    bridge's stale state would go unseen there. Outside a run (a bridge
    started by hand), the temp folder, keyed by the URL without its
    secrets (a digest of a password is a way to guess it)."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite" and parts.path:
        return Path(parts.path).with_name(Path(parts.path).name + f".{name}.json")
    run_dir = os.environ.get("KNELL_RUN_DIR")
    if run_dir:
        return Path(run_dir) / "control" / f"knell-{name}.json"
    digest = hashlib.sha1(redact_url(url).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"knell-{name}-{digest}.json"


@mutant(
    "bridge-stale-head",
    failure_mode="Bridge keeps the head in memory and serves stale pages after a restart",
    killed_by=("no-loss",),
    scenarios=("sqlite-bridge-kill",),
    rule="A bridge keeps no state of its own: every read asks the bus, so a restarted "
    "bridge serves the true head",
    store="bridge",
)
class BridgeStaleHeadBus(_Wrapper):
    """Failure mode: the bridge keeps the head in memory and serves stale
    pages after a restart.

    A caching bridge that believes it is the only door to the store: it
    counts each channel's head itself (one more per new message it
    appends), clips every fetched page to that count (nothing above the
    head "exists", so pages can be cached), and checkpoints the counts
    every :data:`FLUSH_INTERVAL` seconds so that a restart is warm. After a
    hard kill it restarts from the last checkpoint: the messages appended
    since are in the store, but above the remembered head, so no page ever
    shows them, and the final drain ends short. (Any other writer to the
    store, a second bridge or a direct client, has the same effect.) Its
    ``head`` route still asks the store, so the drain knows the true head
    and the gap is provable. Proven by ``no-loss``.
    """

    def __init__(self, inner: Bus, state: Path) -> None:
        super().__init__(inner)
        self.state = state
        self._lock = threading.Lock()
        self._heads: dict[str, int] = {}
        try:
            loaded = json.loads(state.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self._heads = {str(k): int(v) for k, v in loaded.items()}
        except (OSError, ValueError, TypeError):
            pass
        self._checkpoints = _Background(self._checkpoint, "bridge-head-checkpoint")

    @classmethod
    def from_url(cls, url: str) -> BridgeStaleHeadBus:
        from knell.buses import open_bus

        return cls(open_bus(url), state_file(url, "bridge-heads"))

    def _checkpoint(self) -> None:
        with self._lock:
            if not self._heads:
                # Nothing cached, nothing to keep: a process that only asked
                # for the head (the runner's own, at the drain) leaves no
                # file behind, and never blanks the bridges' checkpoint.
                return
            text = json.dumps(self._heads)
        tmp = self.state.with_name(self.state.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.state)

    def _head(self, channel: str) -> int:
        with self._lock:
            head = self._heads.get(channel)
            if head is None:
                head = self._heads[channel] = self.inner.head(channel)
            return head

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        with self._lock:
            head = self._heads.get(channel)
            if head is None:
                head = self._heads[channel] = self.inner.head(channel)
            message = self.inner.post(channel, body, sender, idempotency_key)
            if message.seq > head:  # a new message, not a replayed key: count it
                self._heads[channel] = head + 1
        return message

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]:
        head = self._head(channel)
        return [m for m in self.inner.fetch(handle, channel, after, limit) if m.seq <= head]

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.monotonic() + timeout
        wake = self.inner.wait(handle, timeout)
        if wake is not None and wake.seq > self._head(wake.channel):
            # Above the cached head nothing "exists": no ring.
            time.sleep(max(0.0, deadline - time.monotonic()))
            return None
        return wake

    def close(self) -> None:
        self._checkpoints.stop()
        super().close()


# -- cursors -----------------------------------------------------------------------


@mutant(
    "bridge-cursor-write-behind",
    failure_mode="Bridge caches cursors and writes acks behind: a crash regresses them",
    killed_by=("no-cursor-regression",),
    scenarios=("sqlite-bridge-kill",),
    rule="A bridge answers an ack only after the store's forward-only update committed",
    store="bridge",
)
class BridgeCursorWriteBehindBus(_Wrapper):
    """Failure mode: the bridge keeps cursors in memory and writes acks behind.

    ``ack`` checks the head, moves a cursor held in the bridge's memory and
    answers at once; ``cursor``, ``subscribe`` and fetches from the cursor
    read that memory; a background thread writes the cursors to the store
    every :data:`FLUSH_INTERVAL` seconds. After a SIGKILL the restarted
    bridge reads the store's older cursors: a handle's cursor goes back
    below an ack that was answered ``ok``, and it is handed messages it
    already acked. Proven by ``no-cursor-regression``.
    """

    def __init__(self, inner: Bus) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._cursors: dict[tuple[str, str], int] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._flusher = _Background(self._flush, "bridge-ack-write-behind")

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        head = self.inner.head(channel)
        if up_to > head:
            raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")
        durable = None
        if (handle, channel) not in self._cursors:
            durable = self.inner.cursor(handle, channel)  # NotSubscribed if none
        with self._lock:
            current = self._cursors.get((handle, channel), durable or 0)
            self._cursors[(handle, channel)] = value = max(current, up_to)
            self._dirty.add((handle, channel))
        return value

    def cursor(self, handle: str, channel: str) -> int:
        with self._lock:
            cached = self._cursors.get((handle, channel))
        return cached if cached is not None else self.inner.cursor(handle, channel)

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        durable = self.inner.subscribe(handle, channel, at)
        with self._lock:
            return max(durable, self._cursors.get((handle, channel), durable))

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]:
        if after is None:
            after = self.cursor(handle, channel)
        return self.inner.fetch(handle, channel, after, limit)

    def _flush(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            values = {key: self._cursors[key] for key in dirty}
        for (handle, channel), value in values.items():
            try:
                self.inner.ack(handle, channel, value)
            except Exception:
                with self._lock:
                    self._dirty.add((handle, channel))
                raise

    def close(self) -> None:
        self._flusher.stop()
        super().close()


# -- claiming ----------------------------------------------------------------------

CLAIM_REPLAY_WINDOW = 0.5
"""Seconds a claim answer is kept for a client's retry of it."""


@mutant(
    "bridge-claim-retry-second-lease",
    failure_mode="Bridge answers a retried claim from a cache: a second lease on one message",
    killed_by=("lease-exclusive",),
    scenarios=("bridge-queue-kill",),
    rule="A bridge answers every claim from the bus's own claim, never from an answer it kept",
    store="bridge",
)
class BridgeClaimRetrySecondLeaseBus(_Wrapper):
    """Failure mode: a retried claim is answered with a lease already handed out.

    A client whose claim timed out (its bridge paused, the answer lost)
    retries it, and the first claim's lease then sits in the store
    unused until it lapses. This bridge makes the retry "safe": it keeps
    every claim answer for :data:`CLAIM_REPLAY_WINDOW` seconds and answers
    the next claim on that channel from it, in the retrying consumer's
    name, instead of claiming again. But the client sends no request id,
    so the bridge takes any claim on the channel within the window for the
    retry: a second consumer gets the message the first one holds, and
    both work it believing they own it. Proven by ``lease-exclusive``
    (``two-live-leases``).
    """

    contracts = ("broadcast", "queue")

    def __init__(self, inner: Bus) -> None:
        super().__init__(inner)
        self._q: Any = inner
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[float, Claim]] = {}

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        with self._lock:
            kept = self._kept.pop(channel, None)
        if kept is not None and time.monotonic() - kept[0] < CLAIM_REPLAY_WINDOW:
            return dataclasses.replace(kept[1], consumer=consumer)
        claim: Claim | None = self._q.claim(channel, consumer, lease_s)
        if claim is not None:
            with self._lock:
                self._kept[channel] = (time.monotonic(), claim)
        return claim

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        info: QueueInfo = self._q.declare_queue(channel, max_deliveries)
        return info

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        claim: Claim = self._q.renew(id, consumer, lease_s)
        return claim

    def done(self, id: str, consumer: str) -> None:
        self._q.done(id, consumer)

    def release(self, id: str, consumer: str) -> None:
        self._q.release(id, consumer)

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        letters: list[DeadLetter] = self._q.dead(channel, after, limit)
        return letters
