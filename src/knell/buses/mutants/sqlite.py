"""SQLite mutants: the reference SQLite bus with one seeded bug each.

Each mutant is a small subclass of :class:`~knell.buses.sqlite.SqliteBus`
that overrides the one step of the reference that keeps the promise it
breaks (the reference writes each operation as a few small steps, each
saying what it guarantees: ``_advance`` moves a cursor forward only,
``_join_at`` places a new handle, ``_doze`` bounds the doorbell's sleep by
the poll...), or wraps a public method when the bug is around the whole
operation (an error after the commit, a cached answer). Everything else is
the reference's, so the reference may be optimised without the mutants
drifting, and each mutant differs from it in exactly the lines that carry
its bug. The failure modes are the doorbell design's taxonomy: the naive
designs an agent-session bus must not have. Each is declared once, with
:func:`~.registry.mutant`.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

from knell.buses.contract import DefiniteError, JoinAt, Message, Wake
from knell.buses.mutants.registry import mutant
from knell.buses.sqlite import _ORIGINAL, SqliteBus, open_sqlite
from knell.buses.sqlite_open import OPEN_TIMEOUT

__all__ = [
    "AckBeyondHeadAcceptedBus",
    "BatchEndAsHeadBus",
    "CachedCursorBus",
    "ClampInClientBus",
    "ConsumingWaiterBus",
    "CrossChannelCursorBus",
    "DuplicateKeyErrorBus",
    "ErrorAfterCommitBus",
    "FetchConsumesBus",
    "FloodOnJoinBus",
    "NoBusyTimeoutBus",
    "NoCrossProcessPollBus",
    "NoIdempotencyBus",
    "OffByOneReadBus",
    "OwnPostRingBus",
    "ResubscribeResetsCursorBus",
    "RetryBlocksBus",
    "RingIgnoresCursorBus",
    "SeqOutsideLockBus",
    "StaleAckRegressesBus",
    "StaleHeadBus",
    "StartAsHeadBus",
]

_B = TypeVar("_B", bound=SqliteBus)


def _open(cls: type[_B], url: str, path: str | None = None) -> _B:
    """Open ``cls`` on the store named by a ``sqlite:///`` URL, parsing it
    exactly as the reference driver does (:func:`open_sqlite` validates the
    URL and creates the reference schema), then reopening as the mutant."""
    base = open_sqlite(url)
    base.close()
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
    return cls(
        path or base.path,
        poll_interval=base.poll_interval,
        synchronous=query.get("synchronous", "normal"),
        busy_timeout=float(query.get("busy_timeout", 10.0)),
        open_timeout=float(query.get("open_timeout", OPEN_TIMEOUT)),
    )


class _Mutant(SqliteBus):
    """A SQLite mutant opens from the same URL as the reference bus."""

    @classmethod
    def from_url(cls, url: str) -> SqliteBus:
        return _open(cls, url)


RECYCLE_AGE = 4.0
"""Seconds after a message ended (done, or read) that a recycling
retention sweep may hand it out again."""


class _Recycling(_Mutant):
    """The shape of the recycling mutants: a retention sweep that runs at
    most once a second per bus connection, at a hand-out (a claim, a
    receive), and brings finished work back :data:`RECYCLE_AGE` seconds or
    more after it ended: in a soak, after the checker forgot it."""

    _recycled_at = 0.0

    def _recycle_due(self, now: float) -> bool:
        """Whether the sweep runs at ``now`` (and it is noted that it did)."""
        if now - self._recycled_at < 1.0:
            return False
        self._recycled_at = now
        return True


def _set_cursor(db: sqlite3.Connection, handle: str, channel: str, value: int) -> int:
    """Write ``value`` as the cursor, whatever it was (no forward-only
    clamp); the rows updated."""
    return db.execute(
        "UPDATE cursors SET acked = ? WHERE handle = ? AND channel = ?", (value, handle, channel)
    ).rowcount


# -- cursors -----------------------------------------------------------------


@mutant(
    "stale-ack-regresses",
    failure_mode="Stale/replayed ack regresses the cursor",
    killed_by=("no-cursor-regression",),
    scenarios=("kill-consumers", "quickstart"),
    rule="Cursors are forward-only: MAX(acked, up_to) inside the write transaction",
)
class StaleAckRegressesBus(_Mutant):
    """Failure mode: a stale or replayed ack regresses the cursor.

    ``ack`` writes ``acked = up_to`` instead of ``MAX(acked, up_to)``: the
    forward-only clamp is missing. Twin processes of one handle ack out of
    order (the slower twin acks a page the faster one already passed), so
    the durable cursor goes back and the handle re-reads what it handled;
    with a later jump ahead it can skip. Proven by ``no-cursor-regression``.
    """

    def _advance(self, db: sqlite3.Connection, handle: str, channel: str, up_to: int) -> int:
        return _set_cursor(db, handle, channel, up_to)  # the bug: no MAX(acked, up_to)


@mutant(
    "ack-beyond-head-accepted",
    failure_mode="Ack beyond head marks unseen messages handled",
    killed_by=("ack-beyond-head",),
    scenarios=("kill-consumers", "quickstart"),
    rule="An ack above the head is refused with an error",
)
class AckBeyondHeadAcceptedBus(_Mutant):
    """Failure mode: an ack beyond the head marks unseen messages handled.

    ``ack`` keeps the forward-only clamp but never compares ``up_to`` with
    the head, so an ack far in the future is accepted and every message
    later posted below it is skipped by that handle. Proven by
    ``ack-beyond-head`` (the consumers' ack probe), usually with ``no-loss``
    as the consequence.
    """

    def _within_head(self, channel: str, up_to: int) -> None:
        pass  # the bug: the head is never compared


@mutant(
    "flood-on-join",
    failure_mode="New consumer floods itself with channel history",
    killed_by=("no-flood-on-join",),
    scenarios=("churn-joiners",),
    rule='A new handle joins at head unless it asks for at="start"',
)
class FloodOnJoinBus(_Mutant):
    """Failure mode: a new subscriber floods itself with the channel's history.

    A *new* handle joins at seq 0 whatever ``at`` says, so an agent that
    subscribes mid-run is handed everything ever posted (re-subscribing
    still keeps an existing cursor). Proven by ``no-flood-on-join``.
    """

    def _join_at(self, channel: str, at: JoinAt) -> int:
        return 0  # the bug: whatever ``at`` says


@mutant(
    "resubscribe-resets-cursor",
    failure_mode="Reconnect resets the cursor (silent loss of unacked messages)",
    killed_by=("no-loss",),
    scenarios=("quickstart", "contract-tour"),
    rule="Re-subscribing never moves an existing cursor",
)
class ResubscribeResetsCursorBus(_Mutant):
    """Failure mode: reconnecting resets the cursor to the head (silent loss).

    ``subscribe`` of an existing handle moves its cursor to the current
    head instead of leaving it alone, as a "reconnect = fresh subscription"
    bus does. Everything the handle's dead predecessor left unhandled is
    skipped by its successor, without an error anywhere. Proven by
    ``no-loss``.
    """

    def _resubscribed(
        self, db: sqlite3.Connection, handle: str, channel: str, existing: int, at: JoinAt
    ) -> int:
        start = self._join_at(channel, at)
        _set_cursor(db, handle, channel, start)  # the bug: the cursor moves to the join point
        return start


# -- posting -----------------------------------------------------------------


@mutant(
    "no-idempotency",
    failure_mode="Producer retry double-posts",
    killed_by=("idempotency",),
    scenarios=("kill-producers-idempotent",),
    rule="Idempotency-key dedup at the store: a repeated key returns the original",
)
class NoIdempotencyBus(_Mutant):
    """Failure mode: a producer's retry double-posts.

    ``post`` ignores the idempotency key (it is neither stored nor looked
    up), so a retry of a post whose reply was lost appends a second copy at
    a new seq and every handle handles the "same" message twice. Proven by
    ``idempotency`` (and ``no-duplicate-seq`` sees the id at two seqs).
    """

    def _append(
        self,
        channel: str,
        body: str,
        sender: str,
        key: str | None,
        expires_at: float | None = None,
    ) -> int | None:
        return super()._append(channel, body, sender, None, expires_at)  # the bug: no key


_LOOSE_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    sender TEXT NOT NULL,
    idem_key TEXT,
    posted_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_seq ON messages (channel, seq);
"""


@mutant(
    "seq-outside-lock",
    failure_mode="Two processes post concurrently and collide on seq",
    killed_by=("no-duplicate-seq",),
    scenarios=("kill-producers-idempotent", "kill-consumers"),
    rule="Seq assignment happens under the store's write lock, in the appending transaction",
)
class SeqOutsideLockBus(_Mutant):
    """Failure mode: two processes post concurrently and collide on a seq.

    ``post`` reads the head (``MAX(seq) + 1``) *before* taking the write
    lock, so two producers in different processes can both compute the
    same seq and both append it. (The per-process lock still serialises
    threads, which is why the bug never shows in a single-process test.)
    The reference schema's ``PRIMARY KEY (channel, seq)`` would turn the
    collision into an error, so this mutant keeps its log in its own file
    (``<store>.seq-outside-lock.db``) with a schema that lets duplicates
    through, as a store without that constraint would. Proven by
    ``no-duplicate-seq``.
    """

    @classmethod
    def from_url(cls, url: str) -> SqliteBus:
        return _open(cls, url, path=_loose_store(url))

    def _append(
        self,
        channel: str,
        body: str,
        sender: str,
        key: str | None,
        expires_at: float | None = None,
    ) -> int | None:
        seq = self._head(channel) + 1  # the bug: read outside the write transaction
        with self._write() as db:
            if key is not None and db.execute(_ORIGINAL, (channel, key)).fetchone():
                return None
            db.execute(
                "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (channel, seq, body, sender, key, time.time(), expires_at),
            )
        return seq


def _loose_store(url: str) -> str:
    """The mutant's own store file beside the run's, with the loose schema
    created before the reference schema's ``IF NOT EXISTS`` can claim it."""
    reference = open_sqlite(url)
    reference.close()
    base = Path(reference.path)
    path = base.with_name(base.stem + ".seq-outside-lock.db")
    db = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("BEGIN IMMEDIATE")
        for statement in _LOOSE_SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("COMMIT")
    finally:
        db.close()
    return str(path)


# -- reading -----------------------------------------------------------------


@mutant(
    "batch-end-as-head",
    failure_mode="Batch-end treated as channel head strands the tail",
    killed_by=("no-loss",),
    scenarios=("kill-consumers",),
    rule="Catch-up pages until an empty page; pages are served to the true head",
)
class BatchEndAsHeadBus(_Mutant):
    """Failure mode: batch-end treated as the channel head strands the tail.

    Only the first page of a catch-up (``fetch`` from the durable cursor)
    returns messages; every later page (``fetch(after=n)``) comes back
    empty, as if the end of the first batch were the head. A reader that
    rightly stops at an empty page stops one batch short, and whatever lies
    beyond it waits for a next catch-up that, for a session that is ending
    (the final drain), never comes. Proven by ``no-loss``.
    """

    def _page_after(self, handle: str, channel: str, after: int, limit: int) -> list[Message]:
        self._subscribed(handle, channel)
        return []  # the bug: the end of the first page is taken for the head


@mutant(
    "off-by-one-read",
    failure_mode="Off-by-one read skips a message",
    killed_by=("no-loss",),
    scenarios=("quickstart",),
    rule="A read from the cursor starts at cursor + 1",
)
class OffByOneReadBus(_Mutant):
    """Failure mode: an off-by-one read skips a message.

    A read from the durable cursor starts at ``cursor + 2`` (``seq >
    cursor + 1``) instead of ``cursor + 1``: the first unacked message is
    never returned, the reader acks past it, and it is gone for that
    handle. Proven by ``no-loss``.
    """

    def _catch_up(self, handle: str, channel: str, limit: int) -> list[Message]:
        return self._page(channel, self._subscribed(handle, channel) + 1, limit)  # the bug


@mutant(
    "fetch-consumes",
    failure_mode="Crash between fetch and handling loses the message",
    killed_by=("no-loss",),
    scenarios=("kill-consumers",),
    rule="Fetch is a peek; the ack is separate and comes after handling",
)
class FetchConsumesBus(_Mutant):
    """Failure mode: a crash between fetch and handling loses the message.

    ``fetch`` from the durable cursor *consumes*: it moves the cursor to the
    last message it returns, in the same transaction, which is "ack before
    handling" built into the bus. A consumer killed while handling that
    page leaves its successor a cursor past messages nobody handled. (Twin
    consumers of one handle now split the stream instead of both seeing
    it.) Proven by ``no-loss`` under consumer kills.
    """

    def _catch_up(self, handle: str, channel: str, limit: int) -> list[Message]:
        with self._write() as db:
            messages = super()._catch_up(handle, channel, limit)
            if messages:  # the bug: the read moves the cursor
                self._advance(db, handle, channel, messages[-1].seq)
            return messages


# -- the doorbell --------------------------------------------------------------


@mutant(
    "consuming-waiter",
    failure_mode="Orphaned poller consumes messages delivered to nobody",
    killed_by=("no-loss",),
    scenarios=("pause-waiters", "quickstart"),
    rule="Waiters are peek-only: waking is not consuming",
)
class ConsumingWaiterBus(_Mutant):
    """Failure mode: an orphaned poller consumes messages delivered to nobody.

    ``wait`` acks the message it rings for: the doorbell consumes. A ring
    carries no body, so the message was "delivered" to the waiter and to
    nobody else; the session's catch-up starts past it, and if the waiter
    is killed (or its session is already gone) the message has vanished.
    Waking must never be consuming. Proven by ``no-loss``.
    """

    def wait(self, handle: str, timeout: float) -> Wake | None:
        wake = super().wait(handle, timeout)
        if wake is not None:
            with self._lock, self._write() as db:
                self._advance(db, handle, wake.channel, wake.seq)  # the bug: waking consumes
        return wake


@mutant(
    "own-post-ring",
    failure_mode="Consumer wakes on its own posts and ping-pongs",
    killed_by=("wake:own-post-ring",),
    scenarios=("pause-waiters",),
    rule="Own posts never ring, neither as backlog nor while armed",
)
class OwnPostRingBus(_Mutant):
    """Failure mode: a consumer wakes on its own posts and ping-pongs.

    ``wait`` forgets to exclude the handle's own posts, both from the
    backlog that rings at once on arming and from the posts that ring
    while armed. An agent that replies and re-arms is woken by its own
    reply. Proven by ``wake`` (``own-post-ring``).
    """

    def _skipped_sender(self, handle: str) -> str | None:
        return None  # the bug: own posts ring too


@mutant(
    "no-cross-process-poll",
    failure_mode="Doorbell never hears posts from other processes",
    killed_by=("wake:missed-post", "wake:missed-backlog"),
    scenarios=("pause-waiters", "quickstart"),
    rule="The doorbell bottoms out in a bounded poll of the store (poll_interval)",
)
class NoCrossProcessPollBus(_Mutant):
    """Failure mode: the doorbell never hears posts from other processes.

    ``wait`` rings on backlog at arming, but while armed it only sleeps on
    the in-process condition variable, with no bounded poll of the store:
    a post by another process never notifies it, so an idle agent sleeps
    through work until its timeout. (In a single-process test it looks
    perfect.) Proven by ``wake`` (``missed-post``).
    """

    def _doze(self, remaining: float) -> bool:
        with self._bell:
            return self._bell.wait(remaining)  # the bug: no poll_interval bound


# -- what an error, a hang or a spurious wake-up hides ----------------------------


@mutant(
    "retry-blocks",
    failure_mode="A retried post waits forever for an original that already landed",
    killed_by=("liveness",),
    scenarios=("kill-producers-idempotent", "quickstart"),
    rule="A repeated key returns the original at once; nothing waits on a finished post",
)
class RetryBlocksBus(_Mutant):
    """Failure mode: a retried post hangs instead of returning the original.

    ``post`` with a key that already landed "waits for the in-flight
    original to be acknowledged", polling for a state that a committed post
    never reaches: the producer's turn never ends. No error, no crash, no
    wrong answer, just silence. Proven by ``liveness`` (the retry is still
    outstanding when the run stops and its producer must be killed).
    """

    def _original(self, channel: str, key: str | None) -> Message:
        while True:  # the bug: waits for a state a committed post never reaches
            time.sleep(0.05)


@mutant(
    "no-busy-timeout",
    failure_mode="Writers give up at once on a busy store (no busy timeout)",
    killed_by=("availability",),
    scenarios=("kill-consumers",),
    rule="Writers wait for the write lock (busy_timeout) instead of failing on contention",
)
class NoBusyTimeoutBus(_Mutant):
    """Failure mode: every write that meets another writer fails.

    The store is opened with a busy timeout of zero, SQLite's default: a
    write that finds the write lock held fails at once with "database is
    locked" instead of waiting its turn. Nothing inconsistent is ever
    returned, so checks that judge only successful operations pass; the
    agents see a steady stream of failed turns. Proven by ``availability``
    (errors outside any fault window).
    """

    @classmethod
    def from_url(cls, url: str) -> SqliteBus:
        bus = _open(cls, url)
        bus._db.execute("PRAGMA busy_timeout = 0")
        return bus


@mutant(
    "error-after-commit",
    failure_mode="A post reports failure after it committed",
    killed_by=("post-outcome:failed-but-applied",),
    scenarios=("quickstart", "kill-consumers"),
    rule="An error is definite only when the write provably did not happen",
)
class ErrorAfterCommitBus(_Mutant):
    """Failure mode: a definite error for a post that landed.

    Every tenth post commits and then a follow-up statement (bookkeeping
    after the append) hits a busy lock, and the bus reports the whole post
    as definitely failed. The producer gives up on a message every
    subscriber then handles. Proven by ``post-outcome``
    (``failed-but-applied``).
    """

    _posts = 0

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        message = super().post(channel, body, sender, idempotency_key, expires_at)
        self._posts += 1
        if self._posts % 10 == 0:
            raise DefiniteError("sqlite write lock: database is locked (post bookkeeping)")
        return message


@mutant(
    "duplicate-key-error",
    failure_mode="A retried post is refused as a duplicate instead of answered",
    killed_by=("post-outcome:retry-refused",),
    scenarios=("kill-producers-idempotent", "quickstart"),
    rule="A repeated idempotency key returns the original message, never an error",
)
class DuplicateKeyErrorBus(_Mutant):
    """Failure mode: the unique constraint on the key surfaces as an error.

    A repeated key does append nothing (the unique index holds), but the
    bus reports the violation instead of looking up and returning the
    original message. A producer whose reply was lost retries and is told
    "no", with no seq: it cannot tell whether its message exists. Proven by
    ``post-outcome`` (``retry-refused``).
    """

    def _original(self, channel: str, key: str | None) -> Message:
        raise DefiniteError("UNIQUE constraint failed: messages.channel, messages.idem_key")


@mutant(
    "ring-ignores-cursor",
    failure_mode="The doorbell rings for backlog the handle already acked",
    killed_by=("wake:spurious-ring",),
    scenarios=("pause-waiters", "quickstart"),
    rule="Backlog is what lies above the handle's durable cursor",
)
class RingIgnoresCursorBus(_Mutant):
    """Failure mode: a resident poller in disguise.

    ``wait`` looks for backlog by others from the start of the channel
    instead of above the handle's cursor, so once anything has been posted
    every arm rings at once, for a message the agent handled long ago. The
    session spins, waking again and again with nothing to do. Proven by
    ``wake`` (``spurious-ring``).
    """

    def _backlog(self, handle: str) -> Wake | None:
        row = self._db.execute(
            "SELECT m.channel, m.seq, m.sender FROM cursors c JOIN messages m"
            " ON m.channel = c.channel AND m.seq > 0"  # the bug: not c.acked
            " WHERE c.handle = ? AND m.sender != ? ORDER BY m.channel, m.seq LIMIT 1",
            (handle, handle),
        ).fetchone()
        return None if row is None else Wake(row[0], int(row[1]), row[2], "backlog")


# -- promises only some scenarios exercise ----------------------------------------


@mutant(
    "cross-channel-cursor",
    failure_mode="One cursor per handle instead of per (handle, channel)",
    killed_by=("no-loss",),
    scenarios=("contract-tour",),
    rule="Cursors are keyed by handle and channel",
)
class CrossChannelCursorBus(_Mutant):
    """Failure mode: an ack on one channel moves the handle on every channel.

    ``ack`` updates every cursor of the handle, not just the one of the
    channel acked, as a bus that keeps "the agent's position" rather than a
    position per channel would. A role that reads two channels skips, on
    the quieter one, everything below the busier one's seq. Proven by
    ``no-loss``.
    """

    def _advance(self, db: sqlite3.Connection, handle: str, channel: str, up_to: int) -> int:
        return db.execute(
            "UPDATE cursors SET acked = MAX(acked, ?) WHERE handle = ?",  # the bug: every channel
            (up_to, handle),
        ).rowcount


@mutant(
    "start-as-head",
    failure_mode='A join that asks for the history (at="start") starts at the head',
    killed_by=("no-loss",),
    scenarios=("contract-tour",),
    rule='at="start" joins before seq 1; only a join at head skips the history',
)
class StartAsHeadBus(_Mutant):
    """Failure mode: the history a new subscriber asked for is never delivered.

    ``subscribe`` ignores ``at="start"``: every new handle joins at the
    head. An agent that joins to review everything so far sees only what
    comes next. Proven by ``no-loss`` (a start join is owed the whole
    history).
    """

    def _join_at(self, channel: str, at: JoinAt) -> int:
        return self._head(channel)  # the bug: ``at="start"`` is ignored


@mutant(
    "cached-cursor",
    failure_mode="Cursor reads answer from a per-connection cache",
    killed_by=("no-cursor-regression",),
    scenarios=("contract-tour", "kill-consumers"),
    rule="cursor() reads the durable cursor from the store, every time",
)
class CachedCursorBus(_Mutant):
    """Failure mode: a cursor read that shows what this process last knew.

    ``cursor`` answers from a cache of the last value this connection read
    or wrote, so a process whose twin has since acked further is shown an
    older position, and a session resuming from it re-reads (or, with a
    stale value written back, regresses). Proven by
    ``no-cursor-regression`` (a read invoked after an ack completed shows
    less).
    """

    def _remember(self, handle: str, channel: str, cursor: int) -> int:
        cache: dict[tuple[str, str], int] = self.__dict__.setdefault("_cache", {})
        cache[(handle, channel)] = cursor
        return cursor

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        return self._remember(handle, channel, super().subscribe(handle, channel, at))

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        return self._remember(handle, channel, super().ack(handle, channel, up_to))

    def cursor(self, handle: str, channel: str) -> int:
        cache: dict[tuple[str, str], int] = self.__dict__.setdefault("_cache", {})
        if (handle, channel) in cache:
            return cache[(handle, channel)]  # the bug
        return self._remember(handle, channel, super().cursor(handle, channel))


@mutant(
    "clamp-in-client",
    failure_mode="The forward-only clamp is computed by the client, between two transactions",
    killed_by=("no-cursor-regression",),
    scenarios=("contract-tour",),
    rule="MAX(acked, up_to) is computed inside the write transaction, under the lock",
)
class ClampInClientBus(_Mutant):
    """Failure mode: two acks race and the slower one moves the cursor back.

    ``ack`` reads the cursor, computes ``max(cursor, up_to)`` in the client
    (a round trip of a couple of milliseconds), then writes the result in a
    second transaction. Two processes of one handle acking different seqs
    at once both read the old value and the one that writes last wins, even
    when it is the lower. The window is small: only racing acks from
    several processes find it. Proven by ``no-cursor-regression``.
    """

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        with self._lock:
            self._within_head(channel, up_to)
            current = self._subscribed(handle, channel)
        time.sleep(0.002)  # the client's round trip between the read and the write
        return super().ack(handle, channel, max(current, up_to))  # the bug: a second transaction

    def _advance(self, db: sqlite3.Connection, handle: str, channel: str, up_to: int) -> int:
        return _set_cursor(db, handle, channel, up_to)  # the value the client computed


@mutant(
    "stale-head",
    failure_mode="The head is served from a cache that lags the log",
    killed_by=("head",),
    scenarios=("contract-tour",),
    rule="head() reads the highest seq from the store",
)
class StaleHeadBus(_Mutant):
    """Failure mode: a head that is behind what has been posted.

    ``head`` answers from a per-connection cache refreshed once a second,
    a common "optimisation". A reader that pages to "the head" stops
    short, and a drain that trusted it would stop short too. Proven by
    ``head`` (``stale-head``).
    """

    def head(self, channel: str) -> int:
        cache: dict[str, tuple[float, int]] = self.__dict__.setdefault("_heads_cache", {})
        now = time.monotonic()
        cached = cache.get(channel)
        if cached is not None and now - cached[0] < 1.0:
            return cached[1]  # the bug
        value = super().head(channel)
        cache[channel] = (now, value)
        return value


# -- clocks (only a clock fault shows these) ----------------------------------------


@mutant(
    "wall-clock-wait",
    failure_mode="A waiter's timeout is a wall-clock deadline: after a backward clock step "
    "the wait hangs past its timeout",
    killed_by=("liveness",),
    scenarios=("waiters-clock-step-back",),
    rule="Timeouts are durations, measured on a monotonic clock",
)
class WallClockWaitBus(_Mutant):
    """Failure mode: a waiter's timeout computed on the wall clock.

    ``wait`` sets its deadline as ``time.time() + timeout`` and sleeps
    until the wall clock passes it. Nothing differs while the clock runs
    true; when it is stepped back (an NTP correction, a laptop resumed, a
    VM restored), the wait sleeps that much longer past its timeout, and an
    agent session stalls in a call that should have returned; stepped
    forward, it gives up at once. The reference measures the timeout on a
    monotonic clock, which no one steps. Proven by ``liveness`` (``hung``)
    after a backward host jump that stays, on an idle channel
    (``waiters-clock-step-back``: on a busy one the next post rings the
    wait long before the hang shows).
    """

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.time() + timeout  # the bug: a wall-clock deadline
        with self._lock:
            backlog = self._backlog(handle)
            if backlog is not None:
                return backlog
            armed = self._armed(handle)
        while True:
            ring = self._first_post_by_other(handle, armed)
            if ring is not None:
                return ring
            remaining = deadline - time.time()
            if remaining <= 0:
                return None
            if not self._doze(remaining):
                return None
