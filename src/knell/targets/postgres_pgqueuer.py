"""The queue contract over PgQueuer's job table and API (a Postgres job queue).

Why PgQueuer and not procrastinate: both are kept (PgQueuer 1.6.0, 2026-10;
procrastinate 3.10.0, 2026-09), but PgQueuer's lease is *per job*: a
dequeue takes jobs that are ``queued`` or ``picked`` with a heartbeat
older than the dequeuer's ``heartbeat_timeout``, and ``update_heartbeat``
renews one job, which is the queue contract's lease and renew as they
stand. procrastinate's liveness is per *worker* (a worker heartbeat, stalled
jobs found and retried by a sweep), so a lease per message would have to be
invented by the driver. PgQueuer's repository API (``Queries``) is also
usable without its worker loop, which is what a driver needs.

A queue channel is an entrypoint; a message is one row of PgQueuer's job
table, and its seq is the row's ``id`` (a sequence shared by every
entrypoint: increasing per channel, not dense). A knell consumer is a
queue manager id (a UUID derived from the consumer's name). The verbs:

======================  ====================================================
contract                PgQueuer (``Queries``, psycopg async driver)
======================  ====================================================
``post``                ``enqueue(channel, body, headers={"sender": ...})``
``claim``               ``dequeue(batch_size=1, {channel: limit 0},
                        queue_manager_id, heartbeat_timeout=lease)``: the
                        oldest ``queued`` job or one whose holder's
                        heartbeat is older than the *claimer's* lease
delivery count          ``attempts + 1`` (``attempts`` rises on
                        ``retry_job`` only)
``renew``               the job read back (``status`` ``picked`` by the
                        caller?), then ``update_heartbeat([id])``
``done``                the same ownership read, then ``log_jobs`` with
                        ``successful`` (the row moves to the log table)
``release``             the ownership read, then ``retry_job(delay=0)``
                        (queued again, ``attempts + 1``); with deliveries
                        used up, ``log_jobs`` with ``failed`` instead
dead letter             a ``failed`` row, kept in the job table
``dead``                ``list_failed_jobs`` of the channel, by id
``declare_queue``       no PgQueuer setting: ``max_deliveries`` is the
                        driver's, per bus
======================  ====================================================

What PgQueuer cannot promise, and this driver therefore does not:

* **A lapsed lease is not a delivery.** ``attempts`` counts retries only: a
  job whose holder died is re-picked by the stale-heartbeat branch of
  ``dequeue`` with its count unchanged. A claimer that crashes on a job
  every time (a poison message that kills its worker) is redelivered for
  ever and never dead-lettered; ``max_deliveries`` bounds releases alone.
* **No fencing of a stale holder.** ``update_heartbeat`` and ``log_jobs``
  name no queue manager: they act on the id whoever holds it. The driver
  reads the row first and refuses (``LeaseLost``) unless it is ``picked``
  by the caller, but the read and the write are two statements: a re-pick
  in between is overwritten. And a lapse is not a state: a holder whose
  heartbeat is stale still owns the row until another dequeue re-picks it.
* **The lease is the reclaimer's.** ``heartbeat_timeout`` is a parameter
  of ``dequeue``: a claimer with a shorter one takes jobs from a holder
  whose longer lease is live. Every claimer must use one lease.
* **Leases are on the server's clock.** The heartbeat is ``NOW()`` of the
  statement that set it (its transaction's start); a claim's ``expires_at``
  is that heartbeat plus the lease.
* **A dequeue can hide a queued job from another.** ``dequeue`` locks one
  ``queued`` and one stale ``picked`` candidate (``FOR UPDATE SKIP
  LOCKED``) and keeps the older; the other stays locked until it commits,
  so a concurrent dequeue skips it and returns nothing, or a newer job,
  while it is claimable (``lease-expiry: not-claimable``; only where stale
  jobs exist to re-pick).
* **No channel settings.** ``max_deliveries`` is not stored: the first
  declaration wins per bus only, and another process's bus uses its own.
* **No idempotent append.** ``dedupe_key`` refuses a second *live* job with
  the key, not a retried post of a job already done: the driver does not use
  it, and a post retried after a lost reply enqueues twice.

Failures: a statement error (``psycopg.errors`` of class ``DatabaseError``
other than connection loss) is definite; a lost connection or no answer
within ``op_timeout`` is indeterminate for a write (everything but
``dead``). The asyncio client runs on one event loop in a thread of its own
per bus (:class:`~knell.targets.nats_jetstream.loop.LoopThread`).

URL: the run's ``postgresql://...?schema=<name>&op_timeout=5`` store URL; the
schema (default ``knell_pgqueuer``) holds PgQueuer's tables, installed once
under PgQueuer's own schema lock.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from pgqueuer.adapters.persistence import qb
from pgqueuer.domain.models import Job
from pgqueuer.domain.settings import DBSettings
from pgqueuer.domain.types import QueueEntrypoint, QueueManagerId
from pgqueuer.queries import EntrypointExecutionParameter, Queries

from knell.buses._netopts import redact, split_url
from knell.buses.contract import (
    QUEUE,
    Claim,
    DeadLetter,
    DefiniteError,
    IndeterminateError,
    LeaseLost,
    Message,
    QueueInfo,
)
from knell.buses.leases import check_lease, check_max_deliveries, message_id, split_id
from knell.targets.nats_jetstream.loop import LoopThread

__all__ = ["PgQueuerQueue", "connect"]

SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
"""A schema name (interpolated unquoted into PgQueuer's SQL)."""

_T = TypeVar("_T")


class PgQueuerQueue:
    """A :class:`~knell.buses.contract.QueueBus` on PgQueuer (see the module
    docstring for the mapping and its limits)."""

    contracts = frozenset({QUEUE})

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        op_timeout: float,
        max_deliveries: int = 5,
        display: str = "postgres",
    ) -> None:
        self.display = display
        self.op_timeout = op_timeout
        self.max_deliveries = max_deliveries
        self._limits: dict[str, int] = {}
        self._loop = LoopThread()
        settings = DBSettings(db_schema=schema)
        try:
            self._conn = self._loop.run(
                psycopg.AsyncConnection.connect(
                    dsn, autocommit=True, connect_timeout=max(1, round(op_timeout))
                ),
                op_timeout + 1,
                "pgqueuer connect",
            )
        except (psycopg.Error, OSError) as exc:
            self._loop.stop()
            raise DefiniteError(f"pgqueuer connect: {_one_line(exc)}") from exc
        self.queries = Queries.from_psycopg_connection(self._conn)
        self.queries.qbe = qb.QueryBuilderEnvironment(settings=settings)
        self.queries.qbq = qb.QueryQueueBuilder(settings=settings)
        self.queries.qbs = qb.QuerySchedulerBuilder(settings=settings)
        self._by_id = self.queries.qbq.build_queue_job_by_id_query()
        self._call("install", True, self._install)

    async def _install(self) -> None:
        async with self.queries.schema_lock():
            if not await self.queries.schema_is_installed():
                await self.queries.install()

    # -- calls --------------------------------------------------------------

    def _call(self, what: str, write: bool, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run one coroutine of the client on the loop, classifying its failure."""

        async def go() -> _T:
            return await call()

        try:
            return self._loop.run(go(), self.op_timeout, f"pgqueuer {what}")
        except IndeterminateError:
            if write:
                raise
            raise DefiniteError(
                f"pgqueuer {what}: no answer within {self.op_timeout:g} s"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError, OSError) as exc:
            if write:
                raise IndeterminateError(
                    f"pgqueuer {what}: outcome unknown: {_one_line(exc)}"
                ) from exc
            raise DefiniteError(f"pgqueuer {what}: {_one_line(exc)}") from exc
        except psycopg.Error as exc:
            raise DefiniteError(f"pgqueuer {what}: refused: {_one_line(exc)}") from exc

    # -- the contract -------------------------------------------------------

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        ids = self._call(
            "post",
            True,
            lambda: self.queries.enqueue(channel, body.encode(), headers={"sender": sender}),
        )
        return Message(channel, int(ids[0]), body, sender, idempotency_key)

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)
        return QueueInfo(channel, self._limits.setdefault(channel, max_deliveries), 0.0)

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        limit = self._limits.setdefault(channel, self.max_deliveries)
        while True:
            jobs = self._call(
                "claim",
                True,
                lambda: self.queries.dequeue(
                    batch_size=1,
                    entrypoints={
                        QueueEntrypoint(channel): EntrypointExecutionParameter(concurrency_limit=0)
                    },
                    queue_manager_id=_manager(consumer),
                    global_concurrency_limit=None,
                    heartbeat_timeout=timedelta(seconds=lease_s),
                ),
            )
            if not jobs:
                return None
            job = jobs[0]
            if job.attempts >= limit:  # released with its deliveries used: dead
                self._bury(job)
                continue
            return _claim(job, consumer, lease_s)

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        job = self._owned(id, consumer, "renew")
        self._call("renew", True, lambda: self.queries.update_heartbeat([job.id]))
        fresh = self._owned(id, consumer, "renew")
        return _claim(fresh, consumer, lease_s)

    def done(self, id: str, consumer: str) -> None:
        job = self._owned(id, consumer, "done")
        self._call("done", True, lambda: self._log(job, "successful"))

    def release(self, id: str, consumer: str) -> None:
        job = self._owned(id, consumer, "release")
        if job.attempts + 1 >= self._limits.setdefault(job.entrypoint, self.max_deliveries):
            self._bury(job)
            return
        self._call("release", True, lambda: self.queries.retry_job(job, timedelta(0), None))

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")
        jobs = self._call("dead", False, lambda: self.queries.list_failed_jobs(1_000_000))
        mine = sorted(
            (j for j in jobs if j.entrypoint == channel and j.id > after), key=lambda j: j.id
        )
        return [
            DeadLetter(
                message_id(channel, j.id),
                channel,
                j.id,
                _body(j),
                _sender(j),
                j.attempts + 1,
                j.updated.timestamp(),
            )
            for j in mine[:limit]
        ]

    def close(self) -> None:
        with contextlib.suppress(IndeterminateError, psycopg.Error, OSError):
            self._loop.run(self._conn.close(), self.op_timeout, "pgqueuer close")
        self._loop.stop()

    # -- helpers ------------------------------------------------------------

    def _bury(self, job: Job) -> None:
        """Dead-letter ``job``: ``log_jobs`` with ``failed`` keeps it in the table."""
        self._call("dead-letter", True, lambda: self._log(job, "failed"))

    async def _log(self, job: Job, status: Any) -> None:
        await self.queries.log_jobs([(job, status, None)])

    def _owned(self, id: str, consumer: str, what: str) -> Job:
        """The job ``consumer`` holds (``picked`` under its queue manager id);
        ``LeaseLost`` if it is done, queued again, dead or another's."""
        channel, seq = split_id(id)

        async def read() -> list[Any]:
            return await self.queries.driver.fetch(self._by_id, seq)

        rows = self._call(what, False, read)
        if not rows:
            raise LeaseLost(f"{what} {id}: no longer in the job table (done)")
        job = Job.model_validate(rows[0])
        if job.entrypoint != channel:
            raise LeaseLost(f"{what} {id}: job {seq} is on {job.entrypoint!r}")
        if job.status != "picked" or job.queue_manager_id != _manager(consumer):
            raise LeaseLost(f"{what} {id}: {job.status}, not held by {consumer!r}")
        return job


def _manager(consumer: str) -> QueueManagerId:
    """The queue manager id of a knell consumer (stable across restarts)."""
    return QueueManagerId(uuid.uuid5(uuid.NAMESPACE_URL, f"knell-consumer:{consumer}"))


def _body(job: Job) -> str:
    return (job.payload or b"").decode()


def _sender(job: Job) -> str:
    return str((job.headers or {}).get("sender", ""))


def _claim(job: Job, consumer: str, lease_s: float) -> Claim:
    return Claim(
        message_id(job.entrypoint, job.id),
        job.entrypoint,
        job.id,
        _body(job),
        _sender(job),
        consumer,
        job.attempts + 1,
        job.heartbeat.timestamp() + lease_s,
    )


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc).strip() or type(exc).__name__).split())


def connect(url: str) -> PgQueuerQueue:
    """The driver's factory: a :class:`PgQueuerQueue` over the run's
    ``postgresql://`` store URL. A bad URL is a ``ValueError`` naming it."""
    dsn, options = split_url(
        url, namespace_key="schema", namespace_check=SCHEMA, schemes=("postgresql", "postgres")
    )
    return PgQueuerQueue(
        dsn,
        schema=options.namespace or "knell_pgqueuer",
        op_timeout=options.op_timeout,
        max_deliveries=options.max_deliveries,
        display=redact(url),
    )
