"""The Redis bus: the reference delivery contracts on a Redis server.

Redis runs one command (or one Lua script) at a time, and a script runs to
its end before any other client's command: that is the whole concurrency
story. Every read-modify-write of the contract is therefore one Lua
script, sent in one round trip, and no client ever reads a value to write
a value computed from it:

* **post**: look the idempotency key up, ``HINCRBY`` the channel's head,
  ``XADD`` the message to the channel's stream with the explicit id
  ``<seq>-0``, remember the key. A stream refuses an id at or below its
  last one, so even a broken head could not append a duplicate seq.
* **ack**: compare with the head, read the cursor, write ``max(old,
  up_to)``, all inside the script (a GET-then-SET from the client lets a
  stale ack land last and win).
* **subscribe**: fix the channel's kind as broadcast (or refuse), read or
  create the cursor, in the script.

Why Lua scripts and not ``MULTI``/``WATCH``: a ``WATCH`` transaction reads
on the client and aborts when the key changed meanwhile, so a hot channel
would retry over and over; a script never conflicts. Scripts are written
to the AOF as one ``MULTI``/``EXEC`` of their effects, so a crash never
leaves half a post on disk.

Keys, all under the URL's ``prefix`` (default ``knell:``), so several runs
share one server: ``heads`` (hash channel -> head), ``log:<channel>``
(stream), ``idem:<channel>`` (hash key -> seq), ``cursors:<handle>``
(hash channel -> acked), ``kinds`` (hash channel -> broadcast, queue or
role); for queue channels ``queue:<channel>`` (hash: max_deliveries, the
highest claimed seq, per-seq deliveries and consumer), ``leases:<channel>``
(zset seq by expiry), ``ready:<channel>`` and ``dead:<channel>`` (zsets of
seqs); for role inboxes ``hold:<role>`` (hash: run, until),
``runroles:<run>`` (set of roles), ``deliv:<role>`` (hash seq -> run, and
the highest delivered seq) and ``unread:<role>`` (zset by delivery time);
for stream channels ``ring:<channel>`` (hash: the ring's bound) and
``stamps:<channel>`` (zset: each held seq by its post time).

**The other three contracts** live on the same streams: queue channels with
leases (:mod:`knell.stores.redis.queue`), at-most-once role inboxes with
stranded listing (:mod:`knell.stores.redis.roles`) and stream rings
(:mod:`knell.stores.redis.stream`), each a mixin of Lua scripts in this
module's style, judging leases, holds and ages on the server's clock.
A channel's kind (:mod:`knell.stores.redis.kinds`) is fixed by its first
kind-specific use inside that use's script, so ``subscribe``, ``fetch``,
``ack`` and ``cursor`` here refuse queue, role and stream channels (the
check is one ``HGET`` inside the script each already runs); ``post``
refuses no kind, and on a stream trims the ring in its own script.

**Errors.** A call that could not connect, or whose command was not
wholly written to the socket (Redis runs a command only once it has all of
it), never ran: :class:`~knell.buses.contract.DefiniteError`. An error
reply (``LOADING`` after a restart, ``NOSCRIPT``, ``OOM``, ``READONLY``,
a script error) means the server refused it: definite too. Every script
does all its checks before its first write, so a script error cannot
leave a half-applied post. A lost connection or no reply within
``op_timeout`` after a write was sent: :class:`IndeterminateError`. Failed
reads are definite. A connection the server closed while idle (a restart)
is replaced before anything is sent. redis-py's automatic retries are off:
a silently retried post without an idempotency key could append twice.

**Durability** is the server's: with ``appendonly yes`` and ``appendfsync
always`` an acknowledged write is on disk; with ``everysec`` up to a
second of acknowledged writes can be lost in a crash; without persistence
a crash loses everything. knell's store faults show which.

**The doorbell.** ``wait`` arms with one read-only script (the backlog by
others and the heads, in one atomic view), then blocks in ``XREAD BLOCK``
on the armed channels' streams from their armed heads, for at most
``poll_interval`` at a time: a post wakes it at once, and each round is
also the bounded poll of the store.

URL: ``redis://[:password@]host:port/db?prefix=knell:&poll_interval=0.1&op_timeout=5``
(and ``max_deliveries=5``, for queues claimed without being declared).

**Through Sentinel**: ``redis+sentinel://[:password@]h1:p1,h2:p2,h3:p3/service/db?...``
names the Sentinels instead of the server (:mod:`.sentinel_url`): each
connect asks them where the primary is, so after a failover the bus
reconnects to the new one. The classification above does not change: a
post whose reply was lost as the primary died or froze may have applied
(on the old primary, perhaps lost with it): ``IndeterminateError``; a
demoted primary's ``READONLY``, a primary left without replicas
refusing with ``NOREPLICAS`` (``min-replicas-to-write``) and "no primary
known" while the Sentinels agree: definite, nothing was applied, and the
first two drop the connection so that the next call asks the Sentinels
again.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from typing import Any, TypeVar

from redis.backoff import NoBackoff
from redis.connection import Connection, parse_url
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.retry import Retry

from knell.buses._netopts import redact, split_url
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
    Wake,
)
from knell.buses.leases import DEFAULT_MAX_DELIVERIES
from knell.stores.redis import sentinel_url
from knell.stores.redis.expiry import EXPIRY_LUA, expires_field, expires_us
from knell.stores.redis.kinds import Script, kind_script, raise_wrong_kind
from knell.stores.redis.queue import RedisQueue
from knell.stores.redis.roles import RedisRoles
from knell.stores.redis.stream import RING_LUA, RedisStream

__all__ = ["PREFIX", "RedisBus", "Script", "open_redis"]

_R = TypeVar("_R", bound="RedisBus")

PREFIX = re.compile(r"[A-Za-z0-9_.:{}\-]{1,64}")
"""A key prefix knell accepts (no spaces or glob characters, so a run's keys
can be listed and dropped with one ``SCAN MATCH <prefix>*``)."""


POST = Script(
    """#!lua
"""
    + RING_LUA
    + """
local heads, log, idem = KEYS[1], KEYS[2], KEYS[3]
local channel, body, sender, has_key, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if has_key == '1' then
  local seq = redis.call('HGET', idem, key)
  if seq then
    local entry = redis.call('XRANGE', log, seq .. '-0', seq .. '-0')[1]
    if entry then
      local f, fields = entry[2], {}
      for i = 1, #f, 2 do fields[f[i]] = f[i + 1] end
      return {0, tonumber(seq), fields['b'], fields['s']}
    end
  end
end
-- ARGV[7]: expires_at in microseconds, or '' (ARGV[6] is left to a mutant)
local extra = {}
if ARGV[7] and ARGV[7] ~= '' then extra = {'x', ARGV[7]} end
local seq = redis.call('HINCRBY', heads, channel, 1)
if has_key == '1' then
  redis.call('XADD', log, seq .. '-0', 'b', body, 's', sender, 'k', key, unpack(extra))
  redis.call('HSET', idem, key, seq)
else
  redis.call('XADD', log, seq .. '-0', 'b', body, 's', sender, unpack(extra))
end
-- KEYS 4-6 (kinds, ring, stamps): a stream's ring is trimmed in this script.
if KEYS[4] and redis.call('HGET', KEYS[4], channel) == 'stream' then
  trim_ring(KEYS[5], KEYS[6], log, idem, seq)
end
return {1, seq}
"""
)
"""The append on every kind: a repeated key returns the original (while the
log still holds it), else the next seq; on a stream, the ring's trim."""

SUBSCRIBE = kind_script(
    """
local other, known = other_kind(KEYS[3], ARGV[1], 'broadcast')
if other then return {'wrong-kind', other} end
if not known then redis.call('HSET', KEYS[3], ARGV[1], 'broadcast') end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then return {0, tonumber(cur)} end
local start = 0
if ARGV[2] == '1' then start = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') end
redis.call('HSET', KEYS[2], ARGV[1], start)
return {0, start}
"""
)
"""Fix the channel's kind as broadcast (refusing another), read or create the cursor."""

ACK = kind_script(
    """
local other = other_kind(KEYS[3], ARGV[1], 'broadcast')
if other then return {'wrong-kind', other} end
local head = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local up_to = tonumber(ARGV[2])
if up_to > head then return {2, head} end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then return {1, 0} end
cur = tonumber(cur)
if up_to > cur then
  redis.call('HSET', KEYS[2], ARGV[1], up_to)
  return {0, up_to}
end
return {0, cur}
"""
)

PAGE_LUA = (
    EXPIRY_LUA
    + """
-- A page of at most `limit` entries of `log` from seq `start` on: the live
-- ones (by TIME), or every one when `forensic` is '1'. Expired entries are
-- skipped while reading, so a page is still full of live messages.
local function page(log, start, limit, forensic)
  if forensic == '1' then
    return redis.call('XRANGE', log, start .. '-0', '+', 'COUNT', limit)
  end
  local now, out = server_us(), {}
  while #out < limit do
    local es = redis.call('XRANGE', log, start .. '-0', '+', 'COUNT', limit - #out)
    if #es == 0 then break end
    for _, e in ipairs(es) do
      if not expired_at(e[2], now) then table.insert(out, e) end
    end
    start = tonumber(string.match(es[#es][1], '^(%d+)')) + 1
  end
  return out
end
"""
)
"""The fetch scripts' page, expiry judged inside the script."""

FETCH_FROM_CURSOR = kind_script(
    PAGE_LUA
    + """
local other = other_kind(KEYS[3], ARGV[1], 'broadcast')
if other then return {'wrong-kind', other} end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {-1} end
return {tonumber(cur), page(KEYS[2], tonumber(cur) + 1, tonumber(ARGV[2]), ARGV[3])}
""",
    writes=False,
)

FETCH_AFTER = kind_script(
    PAGE_LUA
    + """
local other = other_kind(KEYS[2], ARGV[1], 'broadcast')
if other then return {'wrong-kind', other} end
return {0, page(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4])}
""",
    writes=False,
)
"""A peek after a seq, refused on a queue or role channel."""

CURSOR = kind_script(
    """
local other = other_kind(KEYS[2], ARGV[1], 'broadcast')
if other then return {'wrong-kind', other} end
return {0, redis.call('HGET', KEYS[1], ARGV[1])}
""",
    writes=False,
)

ARM = Script(
    """#!lua flags=no-writes
"""
    + EXPIRY_LUA
    + """
local now = server_us()
local cur = redis.call('HGETALL', KEYS[1])
local channels, acked = {}, {}
for i = 1, #cur, 2 do
  table.insert(channels, cur[i])
  acked[cur[i]] = tonumber(cur[i + 1])
end
table.sort(channels)
local out = {0}
for _, ch in ipairs(channels) do
  local head = tonumber(redis.call('HGET', KEYS[2], ch) or '0')
  local start = acked[ch] + 1
  while start <= head do
    local es = redis.call('XRANGE', ARGV[2] .. ch, start .. '-0', '+', 'COUNT', 200)
    if #es == 0 then break end
    for _, e in ipairs(es) do
      local f, snd = e[2], nil
      for i = 1, #f, 2 do if f[i] == 's' then snd = f[i + 1] end end
      if snd ~= ARGV[1] and not expired_at(f, now) then
        return {1, ch, tonumber(string.match(e[1], '^(%d+)')), snd}
      end
    end
    start = tonumber(string.match(es[#es][1], '^(%d+)')) + 1
  end
  table.insert(out, ch)
  table.insert(out, head)
end
return out
"""
)
"""Arming as one atomic read: the first unacked post by someone else (in
channel order), or else every subscribed channel with its head."""


def _seq(entry_id: str) -> int:
    return int(entry_id.split("-", 1)[0])


def _fields(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class RedisBus(RedisQueue, RedisRoles, RedisStream):
    """A :class:`knell.buses.contract.Bus` on a Redis server (and a
    :class:`~knell.buses.contract.QueueBus`,
    :class:`~knell.buses.contract.RoleBus` and
    :class:`~knell.buses.contract.StreamBus` on the same streams)."""

    contracts = frozenset({BROADCAST, QUEUE, ROLES, STREAM})
    features = frozenset({EXPIRY})

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "knell:",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        display: str | None = None,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        if not PREFIX.fullmatch(prefix):
            raise ValueError(f"prefix {prefix!r} is not valid ({PREFIX.pattern})")
        if poll_interval <= 0 or op_timeout <= 0:
            raise ValueError("poll_interval and op_timeout must be > 0")
        if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int):
            raise ValueError(f"max_deliveries must be an int, got {max_deliveries!r}")
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries}")
        target = None
        try:
            if url.startswith(f"{sentinel_url.SCHEME}://"):
                target = sentinel_url.parse(url)
                url_kwargs: dict[str, Any] = parse_url(target.client_url)
            else:
                url_kwargs = parse_url(url)
        except ValueError as exc:
            raise ValueError(f"bad redis URL {redact(url)}: {exc}") from None
        kwargs = dict(url_kwargs)
        connection_class = kwargs.pop("connection_class", Connection)
        kwargs.update(
            socket_timeout=op_timeout,
            socket_connect_timeout=op_timeout,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
            health_check_interval=0,
            protocol=2,  # plain arrays for every reply (RESP3 turns some into maps)
        )
        try:
            if target is not None:
                self._conn: Connection = sentinel_url.primary_connection(target, **kwargs)
            else:
                self._conn = connection_class(**kwargs)
        except TypeError as exc:
            raise ValueError(f"bad redis URL option in {redact(url)}: {exc}") from None
        self._live = False
        self.client_url = url
        self.display = display or redact(url)
        self.prefix = prefix
        self.poll_interval = poll_interval
        self.op_timeout = op_timeout
        self.max_deliveries = max_deliveries
        self.heads_key = prefix + "heads"
        self.kinds_key = prefix + "kinds"
        self._lock = threading.RLock()

    # -- keys ---------------------------------------------------------------

    def log_key(self, channel: str) -> str:
        return f"{self.prefix}log:{channel}"

    def idem_key(self, channel: str) -> str:
        return f"{self.prefix}idem:{channel}"

    def cursors_key(self, handle: str) -> str:
        return f"{self.prefix}cursors:{handle}"

    # -- calls --------------------------------------------------------------

    def _connection(self) -> Connection:
        """The live connection; anything that fails here failed before the
        caller's command was sent."""
        conn = self._conn
        if self._live:
            try:
                stale = conn.can_read(timeout=0)  # idle and readable: closed by the server
            except (RedisError, OSError):
                stale = True
            if stale:
                self._disconnect()
        if not self._live:
            try:
                conn.connect()
            except (RedisError, OSError) as exc:
                self._disconnect()
                kind = "refused the credentials" if isinstance(exc, AuthenticationError) else ""
                raise DefiniteError(
                    f"redis: cannot connect to {self.display}: {kind or _one_line(exc)}"
                    + (f" ({_one_line(exc)})" if kind else "")
                ) from exc
            self._live = True
        return conn

    def _disconnect(self) -> None:
        self._live = False
        with contextlib.suppress(Exception):
            self._conn.disconnect()

    def call(self, what: str, write: bool, *args: Any, timeout: float | None = None) -> Any:
        """Send one command and read its reply, classifying any failure
        (see the module docstring). ``NoScriptError`` passes through."""
        with self._lock:
            conn = self._connection()
            try:
                conn.send_command(*args)
            except (RedisError, OSError) as exc:
                self._disconnect()
                raise DefiniteError(f"redis {what}: not sent: {_one_line(exc)}") from exc
            try:
                if timeout is None:
                    return conn.read_response()
                return conn.read_response(timeout=timeout)
            except NoScriptError:
                raise
            except (BusyLoadingError, ReadOnlyError) as exc:
                # Loading after a restart; a replica, or a primary demoted
                # by a failover: not applied. Reconnect (to the primary the
                # Sentinels name now, on a redis+sentinel:// URL).
                self._disconnect()
                raise DefiniteError(f"redis {what}: {_one_line(exc)}") from exc
            except ResponseError as exc:
                if str(exc).startswith("NOREPLICAS"):
                    # A primary cut off from its replicas (min-replicas-to-write):
                    # perhaps one a failover replaced; ask again on the next call.
                    self._disconnect()
                raise DefiniteError(f"redis {what}: refused: {_one_line(exc)}") from exc
            except (RedisError, OSError) as exc:
                self._disconnect()
                if write:
                    raise IndeterminateError(
                        f"redis {what}: outcome unknown: {_one_line(exc)}"
                    ) from exc
                raise DefiniteError(f"redis {what}: {_one_line(exc)}") from exc

    def script(
        self, what: str, write: bool, script: Script, keys: list[str], args: list[Any]
    ) -> Any:
        """Run a script by SHA1, sending its source when the server lacks it."""
        try:
            return self.call(what, write, "EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            try:
                return self.call(what, write, "EVAL", script.source, len(keys), *keys, *args)
            except NoScriptError as exc:  # pragma: no cover - EVAL never answers NOSCRIPT
                raise DefiniteError(f"redis {what}: {exc}") from exc

    # -- the contract -------------------------------------------------------

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        has_key = "0" if idempotency_key is None else "1"
        reply = self.script(
            "post",
            True,
            POST,
            [
                self.heads_key,
                self.log_key(channel),
                self.idem_key(channel),
                self.kinds_key,
                *self.ring_keys(channel),
            ],
            [channel, body, sender, has_key, idempotency_key or "", "", expires_us(expires_at)],
        )
        if int(reply[0]) == 0:
            return Message(channel, int(reply[1]), reply[2], reply[3], idempotency_key)
        return Message(channel, int(reply[1]), body, sender, idempotency_key)

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        if at not in ("head", "start"):
            raise DefiniteError(f"subscribe at must be 'head' or 'start', got {at!r}")
        reply = self.script(
            "subscribe",
            True,
            SUBSCRIBE,
            [self.heads_key, self.cursors_key(handle), self.kinds_key],
            [channel, "1" if at == "head" else "0"],
        )
        raise_wrong_kind(reply, channel, "broadcast", "subscribe")
        return int(reply[1])

    def fetch(
        self,
        handle: str,
        channel: str,
        after: int | None = None,
        limit: int = 100,
        include_expired: bool = False,
    ) -> list[Message]:
        """A page of live messages (expired ones skipped inside the script,
        by ``TIME``); the forensic read (``include_expired``) returns them
        too: expiry hides a message, it never deletes it."""
        forensic = "1" if include_expired else "0"
        if limit <= 0:
            raise DefiniteError(f"fetch limit must be > 0, got {limit}")
        if after is None:
            reply = self.script(
                "fetch",
                False,
                FETCH_FROM_CURSOR,
                [self.cursors_key(handle), self.log_key(channel), self.kinds_key],
                [channel, limit, forensic],
            )
            raise_wrong_kind(reply, channel, "broadcast", "fetch")
            if int(reply[0]) < 0:
                raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        else:
            reply = self.script(
                "fetch",
                False,
                FETCH_AFTER,
                [self.log_key(channel), self.kinds_key],
                [channel, max(after, 0) + 1, limit, forensic],
            )
            raise_wrong_kind(reply, channel, "broadcast", "fetch")
        entries = reply[1]
        return [self._message(channel, entry) for entry in entries or []]

    @staticmethod
    def _message(channel: str, entry: list[Any]) -> Message:
        fields = _fields(entry[1])
        return Message(channel, _seq(entry[0]), fields["b"], fields["s"], fields.get("k"))

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        reply = self.script(
            "ack",
            True,
            ACK,
            [self.heads_key, self.cursors_key(handle), self.kinds_key],
            [channel, int(up_to)],
        )
        raise_wrong_kind(reply, channel, "broadcast", "ack")
        status, value = int(reply[0]), int(reply[1])
        if status == 2:
            raise AckBeyondHead(f"ack {up_to} is beyond head {value} of {channel!r}")
        if status == 1:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return value

    def cursor(self, handle: str, channel: str) -> int:
        reply = self.script(
            "cursor", False, CURSOR, [self.cursors_key(handle), self.kinds_key], [channel]
        )
        raise_wrong_kind(reply, channel, "broadcast", "cursor")
        value = reply[1]
        if value is None:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return int(value)

    def head(self, channel: str) -> int:
        value = self.call("head", False, "HGET", self.heads_key, channel)
        return int(value or 0)

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.monotonic() + timeout
        reply = self.script(
            "wait",
            False,
            ARM,
            [self.cursors_key(handle), self.heads_key],
            [handle, f"{self.prefix}log:"],
        )
        if int(reply[0]) == 1:
            return Wake(reply[1], int(reply[2]), reply[3], "backlog")
        armed = {reply[i]: f"{int(reply[i + 1])}-0" for i in range(1, len(reply), 2)}
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            block = min(self.poll_interval, remaining, self.op_timeout / 2)
            if not armed:
                time.sleep(block)
                continue
            keys = [self.log_key(ch) for ch in armed]
            streams = self.call(
                "wait",
                False,
                "XREAD",
                "COUNT",
                100,
                "BLOCK",
                max(1, int(block * 1000)),
                "STREAMS",
                *keys,
                *armed.values(),
            )
            found: dict[str, tuple[int, str]] = {}
            now: float | None = None
            for key, entries in streams or []:
                channel = key[len(self.prefix) + len("log:") :]
                for entry in entries:
                    fields = _fields(entry[1])
                    sender = fields.get("s", "")
                    expires = expires_field(fields)
                    if expires is not None and now is None:
                        now = self._server_time()
                    if sender != handle and (expires is None or now is None or expires > now):
                        found.setdefault(channel, (_seq(entry[0]), sender))
                        break
                    armed[channel] = entry[0]  # own or expired post: never rings; look past it
            for channel in armed:
                if channel in found:
                    seq, sender = found[channel]
                    return Wake(channel, seq, sender, "post")

    def _server_time(self) -> float:
        """The Redis server's clock (``TIME``) in Unix seconds: the clock a
        post's expiry is judged by, read after the post woke the reader."""
        secs, micros = self.call("wait", False, "TIME")
        return int(secs) + int(micros) / 1_000_000

    def close(self) -> None:
        with self._lock:
            self._disconnect()

    @classmethod
    def from_url(cls: type[_R], url: str) -> _R:
        """Open from a ``redis://`` driver URL (see the module docstring)."""
        return _from_url(cls, url)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def open_redis(url: str) -> RedisBus:
    """Build a :class:`RedisBus` from a ``redis://`` driver URL."""
    return RedisBus.from_url(url)


def _from_url(cls: type[_R], url: str) -> _R:
    client, options = split_url(
        url,
        namespace_key="prefix",
        namespace_check=PREFIX,
        schemes=("redis", "rediss", "unix", sentinel_url.SCHEME),
    )
    return cls(
        client,
        prefix=options.namespace or "knell:",
        poll_interval=options.poll_interval,
        op_timeout=options.op_timeout,
        display=redact(url),
        max_deliveries=options.max_deliveries,
    )
