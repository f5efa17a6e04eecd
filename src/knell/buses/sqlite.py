"""The reference bus: broadcast channels on one shared WAL SQLite file.

Many OS processes open the same file. Correctness comes from where the
invariants live, not from any in-process lock:

* Every read-modify-write runs under SQLite's single write lock: subscribe
  and ack inside ``BEGIN IMMEDIATE``, which takes the lock up front, and
  post as one autocommit ``INSERT`` (a write statement takes the lock
  before it reads anything). Seq assignment (``MAX(seq) + 1``, or a
  guessed seq that the primary key accepts only if it is exactly that),
  the idempotency-key check and the ack clamp are therefore serialized
  across processes, not just threads.
* The forward-only clamp is ``MAX(acked, ?)`` in SQL, so a stale ack from
  any process, arriving in any order, is a no-op.
* WAL lets readers (fetch, wait's poll) run beside the writer; a SIGKILLed
  process releases its locks with its file descriptors, and an interrupted
  transaction is rolled back by the next opener. ``synchronous=NORMAL`` in
  WAL mode is durable across process crashes (the fault model here); pass
  ``?synchronous=full`` for durability across power loss.

The doorbell (``wait``) holds no durable state: it remembers each channel's
head in memory when armed and polls every ``poll_interval`` seconds for a
post by someone else, with an in-process condition variable as a latency
fast path. Killing a waiter at any moment therefore loses nothing.

URL: ``sqlite:///path/to/file.db?poll_interval=0.05&synchronous=normal``
(``sqlite:///C:/path/to/file.db`` on Windows, see :mod:`knell.buses.sqlite_url`).
Opening retries for ``open_timeout`` seconds (default 10) while a killed
process's locks are still being released (:mod:`knell.buses.sqlite_open`).

The same file serves the other three contracts through the same log: queue
channels (:mod:`knell.buses.sqlite_queue`), at-most-once role inboxes
(:mod:`knell.buses.sqlite_roles`) and stream rings
(:mod:`knell.buses.sqlite_stream`, whose trim is a trigger, so ``post``
stays kind-neutral); a channel's kind
(:mod:`knell.buses.sqlite_kinds`) is fixed by its first kind-specific use,
so the broadcast operations here refuse queue, role and stream channels.

The URL also takes ``max_deliveries=5``, for queues claimed without being declared.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from knell.buses.contract import (
    BROADCAST,
    EXPIRY,
    QUEUE,
    ROLES,
    STREAM,
    AckBeyondHead,
    DefiniteError,
    IndeterminateError,
    JoinAt,
    Message,
    NotSubscribed,
    Wake,
)
from knell.buses.leases import DEFAULT_MAX_DELIVERIES
from knell.buses.sqlite_kinds import KINDS_SCHEMA, ChannelKinds
from knell.buses.sqlite_open import OPEN_TIMEOUT, open_with_retry
from knell.buses.sqlite_queue import QUEUE_SCHEMA, SqliteQueue
from knell.buses.sqlite_roles import ROLES_SCHEMA, SqliteRoles
from knell.buses.sqlite_stream import STREAM_SCHEMA, SqliteStream
from knell.buses.sqlite_url import MEMORY, parse_sqlite_url

__all__ = ["SqliteBus", "open_sqlite"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    sender TEXT NOT NULL,
    idem_key TEXT,
    posted_at REAL NOT NULL,
    expires_at REAL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS messages_idem
    ON messages (channel, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS cursors (
    handle TEXT NOT NULL,
    channel TEXT NOT NULL,
    acked INTEGER NOT NULL,
    PRIMARY KEY (handle, channel)
) WITHOUT ROWID;
"""

_SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL", "extra": "EXTRA"}


class _Bell(threading.Condition):
    """One condition per database file: a post in this process wakes this
    process's waiters at once. Purely an optimisation; the poll is the
    truth. It counts its waiters so that a post with nobody waiting here
    (the common case: waiters live in other processes) skips the notify."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1  # the caller holds the condition's lock
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1


_BELLS: dict[str, _Bell] = {}
_BELLS_LOCK = threading.Lock()


def _bell(path: str) -> _Bell:
    with _BELLS_LOCK:
        return _BELLS.setdefault(path, _Bell())


_APPEND_AT_HEAD = (
    "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at, expires_at)"
    " VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE channel = ?1),"
    " ?2, ?3, ?4, ?5, ?6)"
    " ON CONFLICT (channel, idem_key) WHERE idem_key IS NOT NULL DO NOTHING"
    " RETURNING seq"
)
"""The whole append as one autocommit statement, hence one transaction: a
write statement takes SQLite's write lock before it reads anything, so the
idempotency-key check (the unique index), ``MAX(seq) + 1`` and the insert
all happen under the lock, exactly as inside ``BEGIN IMMEDIATE`` ...
``COMMIT``, in one statement instead of five. A repeated key inserts
nothing and returns no row."""

_APPEND_AT = (
    "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    " ON CONFLICT (channel, idem_key) WHERE idem_key IS NOT NULL DO NOTHING"
)
"""The fast path: append at a *guessed* seq, the head this connection last
saw committed plus one. The primary key ``(channel, seq)`` is the guard,
a compare-and-set: seqs are dense and rows are never deleted, so a guess
at or below the true head names a row that exists and the insert fails
with nothing written (someone else posted; fall back to
:data:`_APPEND_AT_HEAD`), while a guess of exactly head + 1 is the seq
``MAX(seq) + 1`` would have chosen. A guess can never be above head + 1
(it comes from a committed append), so no gap can open. On a stream
channel, whose trimmed rows are gone, a trigger refuses a guess below the
ring in their place (:mod:`knell.buses.sqlite_stream`). It saves
``RETURNING``, which costs SQLite a fifth of a bare insert."""

GUESS_BACKOFF = 64
"""After a wrong guess (another writer on the channel), the fast path
rests for 1, 2, 4 ... up to this many posts, so contended channels pay
for a failed guess rarely."""

_ORIGINAL = "SELECT seq, body, sender FROM messages WHERE channel = ? AND idem_key = ?"

_NOT_WRITTEN = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED: the write lock was never taken


def _write_error(exc: sqlite3.OperationalError) -> Exception:
    """Classify a failed autocommit write. Busy or locked means the
    statement never took the write lock, so nothing was written
    (definite); anything else may have failed at or after the commit
    (indeterminate)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        busy = code & 0xFF in _NOT_WRITTEN
    else:
        busy = "locked" in str(exc) or "busy" in str(exc)
    if busy:
        return DefiniteError(f"sqlite write lock: {exc}")
    return IndeterminateError(f"sqlite write: {exc}")


class _Head:
    """What this connection last saw of one channel's head (for the guess)."""

    __slots__ = ("backoff", "rest", "seq")

    def __init__(self, seq: int) -> None:
        self.seq = seq  # the highest seq this connection saw committed
        self.rest = 0  # posts to go before guessing again
        self.backoff = 1  # the next rest after a wrong guess


class SqliteBus(SqliteQueue, SqliteRoles, SqliteStream):
    """A :class:`knell.buses.contract.Bus` on one WAL SQLite file (and a
    :class:`~knell.buses.contract.QueueBus`, a
    :class:`~knell.buses.contract.RoleBus` and a
    :class:`~knell.buses.contract.StreamBus` on the same log)."""

    contracts = frozenset({BROADCAST, QUEUE, ROLES, STREAM})
    features = frozenset({EXPIRY})

    def __init__(
        self,
        path: str | Path,
        *,
        poll_interval: float = 0.1,
        synchronous: str = "normal",
        busy_timeout: float = 10.0,
        open_timeout: float = OPEN_TIMEOUT,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval}")
        if synchronous.lower() not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {sorted(_SYNCHRONOUS)}, got {synchronous!r}"
            )
        self.path = MEMORY if str(path) == MEMORY else str(Path(path).resolve())
        self.poll_interval = poll_interval
        self._busy_timeout = busy_timeout
        self._synchronous = _SYNCHRONOUS[synchronous.lower()]
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries}")
        self.max_deliveries = max_deliveries
        self._db = open_with_retry(self._open_file, path=self.path, timeout=open_timeout)
        self._kinds = ChannelKinds()
        self._swept: dict[str, float] = {}
        self._lock = threading.RLock()
        self._bell: threading.Condition = _bell(self.path)
        self._heads: dict[str, _Head] = {}

    def _open_file(self) -> sqlite3.Connection:
        """One attempt at opening the file: connect, WAL, the schema. Leaves
        nothing open when it fails (:func:`open_with_retry` tries again)."""
        db = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            db.execute("BEGIN IMMEDIATE")
            try:
                schema = SCHEMA + KINDS_SCHEMA + QUEUE_SCHEMA + ROLES_SCHEMA + STREAM_SCHEMA
                for statement in schema.split(";"):
                    if statement.strip():
                        db.execute(statement)
                for trigger in self.stream_triggers:  # one statement each (';' inside)
                    db.execute(trigger)
                _add_expiry_column(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except BaseException:
            db.close()
            raise
        return db

    # -- transactions -------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: the cross-process write lock is held
        from the first statement, so read-then-write cannot race."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            # Could not take the write lock: nothing was written.
            raise DefiniteError(f"sqlite write lock: {exc}") from exc
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise IndeterminateError(f"sqlite commit: {exc}") from exc

    def _head(self, channel: str) -> int:
        row = self._db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?", (channel,)
        ).fetchone()
        return int(row[0])

    def _cursor(self, handle: str, channel: str) -> int | None:
        row = self._db.execute(
            "SELECT acked FROM cursors WHERE handle = ? AND channel = ?", (handle, channel)
        ).fetchone()
        return None if row is None else int(row[0])

    def _subscribed(self, handle: str, channel: str) -> int:
        """The handle's durable cursor on ``channel``, read from the store;
        :class:`NotSubscribed` when it has none."""
        cursor = self._cursor(handle, channel)
        if cursor is None:
            raise NotSubscribed(f"{handle!r} is not subscribed to {channel!r}")
        return cursor

    # -- the contract -------------------------------------------------------
    #
    # Each operation is written as a few small steps, each keeping one
    # promise of the contract (its docstring says which). A step runs with
    # ``_lock`` held and, where it writes, inside the operation's write
    # transaction (``db``).

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        with self._lock:
            if expires_at is None:  # the hook's older form: a subclass may override it so
                seq = self._append(channel, body, sender, idempotency_key)
            else:
                seq = self._append(channel, body, sender, idempotency_key, expires_at)
        if seq is None:
            return self._original(channel, idempotency_key)
        self._ring()
        return Message(channel, seq, body, sender, idempotency_key)

    def _append(
        self,
        channel: str,
        body: str,
        sender: str,
        key: str | None,
        expires_at: float | None = None,
    ) -> int | None:
        """Append in one autocommit statement (one transaction, under the
        write lock, so the seq is ``MAX(seq) + 1`` of a log no one else is
        writing); the new seq, or ``None`` when ``key`` was already used
        (nothing is appended: the key is stored with the message and
        unique per channel). ``expires_at`` is stored as given: the bus's
        clock is the judge of it at every read."""
        now = time.time()
        head = self._heads.get(channel)
        try:
            if head is not None:
                if head.rest:
                    head.rest -= 1
                else:
                    seq = head.seq + 1
                    try:
                        inserted = self._db.execute(
                            _APPEND_AT, (channel, seq, body, sender, key, now, expires_at)
                        ).rowcount
                    except sqlite3.IntegrityError:  # seq taken: nothing was written
                        head.rest = head.backoff
                        head.backoff = min(2 * head.backoff, GUESS_BACKOFF)
                    else:
                        if not inserted:
                            return None
                        head.seq = seq
                        head.backoff = 1
                        return seq
            rows = self._db.execute(
                _APPEND_AT_HEAD, (channel, body, sender, key, now, expires_at)
            ).fetchall()
        except sqlite3.OperationalError as exc:
            raise _write_error(exc) from exc
        if not rows:
            return None
        seq = int(rows[0][0])
        if head is None:
            self._heads[channel] = _Head(seq)
        else:
            head.seq = seq
        return seq

    def _original(self, channel: str, key: str | None) -> Message:
        """A repeated key: the message its first post appended, returned at
        once (that post committed and can no longer change, so there is
        nothing to wait for and nothing to refuse)."""
        with self._lock:
            row = self._db.execute(_ORIGINAL, (channel, key)).fetchone()
        if row is None:  # pragma: no cover - rows are never deleted
            raise IndeterminateError(f"idempotency key {key!r} vanished")
        return Message(channel, row[0], row[1], row[2], key)

    def _ring(self) -> None:
        """Wake this process's waiters at once: a fast path only (posts by
        other processes are found by the waiters' poll)."""
        bell = self._bell
        if getattr(bell, "waiting", 1):
            with bell:
                bell.notify_all()

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        if at not in ("head", "start"):
            raise DefiniteError(f"subscribe at must be 'head' or 'start', got {at!r}")
        with self._lock, self._write() as db:
            self._kinds.fix(db, channel, "broadcast", "subscribe")
            existing = self._cursor(handle, channel)
            if existing is not None:
                return self._resubscribed(db, handle, channel, existing, at)
            start = self._join_at(channel, at)
            db.execute(
                "INSERT INTO cursors (handle, channel, acked) VALUES (?, ?, ?)",
                (handle, channel, start),
            )
            return start

    def _join_at(self, channel: str, at: JoinAt) -> int:
        """Where a new handle's cursor starts: at the head (the history is
        skipped), or before seq 1 when it asks for ``at="start"``."""
        return self._head(channel) if at == "head" else 0

    def _resubscribed(
        self, db: sqlite3.Connection, handle: str, channel: str, existing: int, at: JoinAt
    ) -> int:
        """A handle that is already subscribed keeps its cursor as it is:
        re-subscribing (a successor of a dead session) never moves it."""
        return existing

    def fetch(
        self,
        handle: str,
        channel: str,
        after: int | None = None,
        limit: int = 100,
        include_expired: bool = False,
    ) -> list[Message]:
        if limit <= 0:
            raise DefiniteError(f"fetch limit must be > 0, got {limit}")
        with self._lock:
            self._kinds.expect(self._db, channel, "broadcast", "fetch")
            if include_expired:
                return self._forensic(handle, channel, after, limit)
            if after is None:
                return self._catch_up(handle, channel, limit)
            return self._page_after(handle, channel, after, limit)

    def _catch_up(self, handle: str, channel: str, limit: int) -> list[Message]:
        """The first page of a catch-up: the messages just above the durable
        cursor, from ``cursor + 1``. A peek: the cursor moves only on ack,
        so a reader that dies before handling them loses nothing."""
        return self._page(channel, self._subscribed(handle, channel), limit)

    def _page_after(self, handle: str, channel: str, after: int, limit: int) -> list[Message]:
        """A later page of a catch-up, after the last seq the reader saw:
        served to the true head, so paging until an empty page reaches it."""
        return self._page(channel, after, limit)

    def _forensic(self, handle: str, channel: str, after: int | None, limit: int) -> list[Message]:
        """The forensic read (``include_expired``): the same page, expired
        messages included, from the cursor or from ``after``."""
        start = self._subscribed(handle, channel) if after is None else after
        return self._page(channel, start, limit, include_expired=True)

    def _page(
        self, channel: str, after: int, limit: int, include_expired: bool = False
    ) -> list[Message]:
        """At most ``limit`` messages above ``after``, in seq order. Expired
        ones are skipped *in the query*, so a page is still full of live
        messages (a short page keeps meaning "end of batch"); the forensic
        read (``include_expired``) returns them too: expiry hides a
        message from readers, it never deletes it."""
        live = "" if include_expired else f" AND {self._unexpired('fetch')}"
        rows = self._db.execute(
            "SELECT seq, body, sender, idem_key FROM messages"
            f" WHERE channel = :channel AND seq > :after{live} ORDER BY seq LIMIT :limit",
            {"channel": channel, "after": after, "limit": limit, "now": time.time()},
        ).fetchall()
        return [Message(channel, int(s), b, snd, k) for s, b, snd, k in rows]

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        with self._lock, self._write() as db:
            self._kinds.expect(db, channel, "broadcast", "ack")
            self._within_head(channel, up_to)
            if self._advance(db, handle, channel, up_to) == 0:
                raise NotSubscribed(f"{handle!r} is not subscribed to {channel!r}")
            return self._subscribed(handle, channel)

    def _within_head(self, channel: str, up_to: int) -> None:
        """Refuse an ack above the channel's head: it would mark messages
        not yet posted as handled."""
        head = self._head(channel)
        if up_to > head:
            raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")

    def _advance(self, db: sqlite3.Connection, handle: str, channel: str, up_to: int) -> int:
        """Move the cursor of this handle on this channel (and no other)
        forward only: ``MAX(acked, up_to)``, computed in SQL inside the
        write transaction, so a stale or replayed ack from any process,
        arriving in any order, is a no-op. The rows updated (0: the handle
        is not subscribed)."""
        return db.execute(
            "UPDATE cursors SET acked = MAX(acked, ?) WHERE handle = ? AND channel = ?",
            (up_to, handle, channel),
        ).rowcount

    def cursor(self, handle: str, channel: str) -> int:
        with self._lock:
            self._kinds.expect(self._db, channel, "broadcast", "cursor")
            return self._subscribed(handle, channel)

    def head(self, channel: str) -> int:
        with self._lock:
            return self._head(channel)

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.monotonic() + timeout
        with self._lock:
            backlog = self._backlog(handle)
            if backlog is not None:
                return backlog
            armed = self._armed(handle)
        while True:
            ring = self._first_post_by_other(handle, armed)
            if ring is not None:
                return ring
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self._doze(remaining):
                return None

    def _backlog(self, handle: str) -> Wake | None:
        """What rings at once on arming: the first message above one of the
        handle's durable cursors, posted by someone else (see
        :meth:`_skipped_sender`)."""
        row = self._db.execute(
            "SELECT m.channel, m.seq, m.sender FROM cursors c JOIN messages m"
            " ON m.channel = c.channel AND m.seq > c.acked"
            " WHERE c.handle = :handle AND m.sender IS NOT :skipped"
            f" AND {self._unexpired('wait', 'm.')}"
            " ORDER BY m.channel, m.seq LIMIT 1",
            {"handle": handle, "skipped": self._skipped_sender(handle), "now": time.time()},
        ).fetchone()
        return None if row is None else Wake(row[0], int(row[1]), row[2], "backlog")

    def _armed(self, handle: str) -> dict[str, int]:
        """The head of every channel the handle is subscribed to, as it is
        when the doorbell is armed: a post above it rings."""
        return {
            ch: self._head(ch)
            for (ch,) in self._db.execute(
                "SELECT channel FROM cursors WHERE handle = ?", (handle,)
            ).fetchall()
        }

    def _skipped_sender(self, handle: str) -> str | None:
        """Whose posts never ring for ``handle``: its own, neither as backlog
        nor while armed (an agent is not woken by its own reply)."""
        return handle

    def _first_post_by_other(self, handle: str, armed: dict[str, int]) -> Wake | None:
        skipped = self._skipped_sender(handle)
        with self._lock:
            for channel, head in armed.items():
                row = self._db.execute(
                    "SELECT seq, sender FROM messages WHERE channel = :channel AND seq > :head"
                    f" AND sender IS NOT :skipped AND {self._unexpired('wait')}"
                    " ORDER BY seq LIMIT 1",
                    {"channel": channel, "head": head, "skipped": skipped, "now": time.time()},
                ).fetchone()
                if row is not None:
                    return Wake(channel, int(row[0]), row[1], "post")
        return None

    def _doze(self, remaining: float) -> bool:
        """Sleep until a post in this process rings the bell or
        ``poll_interval`` passes, whichever comes first: posts by other
        processes ring no bell, so the poll bounds every sleep. True: look
        at the store again."""
        with self._bell:
            self._bell.wait(min(self.poll_interval, remaining))
        return True

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_sqlite(url: str) -> SqliteBus:
    """Build a :class:`SqliteBus` from ``sqlite:///path?poll_interval=..``
    (the URL form is :mod:`knell.buses.sqlite_url`'s, on POSIX and Windows)."""
    parsed = parse_sqlite_url(url)
    query = parsed.options
    unknown = set(query) - {
        "poll_interval",
        "synchronous",
        "busy_timeout",
        "open_timeout",
        "max_deliveries",
    }
    if unknown:
        raise ValueError(f"sqlite URL has unknown option(s) {sorted(unknown)}: {url!r}")
    return SqliteBus(
        parsed.path,
        poll_interval=float(query.get("poll_interval", 0.1)),
        synchronous=query.get("synchronous", "normal"),
        busy_timeout=float(query.get("busy_timeout", 10.0)),
        open_timeout=float(query.get("open_timeout", OPEN_TIMEOUT)),
        max_deliveries=int(query.get("max_deliveries", DEFAULT_MAX_DELIVERIES)),
    )


def _add_expiry_column(db: sqlite3.Connection) -> None:
    """Give a file written before expiry existed its ``expires_at`` column
    (NULL: never expires), inside the opening transaction."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)").fetchall()}
    if "expires_at" not in columns:
        db.execute("ALTER TABLE messages ADD COLUMN expires_at REAL")
