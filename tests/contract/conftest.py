"""Every contract test runs on every reference bus: sqlite, postgres, redis,
and on SQLite through each wire: a bridge (``http://``) and the stdio
protocol (``exec:`` with the example Python adapter).

``bus`` opens buses on one fresh store namespace per test (a new SQLite
file, a new Postgres schema, a new Redis key prefix); every bus opened is
closed at the end. Postgres and Redis runs are marked ``integration``:
they need a server (started once per session by :mod:`tests.servers`).
The wire runs (``bridge``, ``stdio``) are ``integration`` too (a bridge
process per test, an adapter process per bus); a test that takes the
store ``url`` itself (store options, racing processes) is a test of the
store, and skips them.

Drivers of real systems (:mod:`knell.targets`) run the suites of the
contracts they declare (a test module adds them with :data:`TARGETS` to
its ``kind`` params), on the session's server of their store kind. A row
of the contract the system cannot keep is an expected failure there
(``xfail``, strict: a target that starts keeping it fails the suite until
the limit is struck off), with the reason, from :data:`TARGET_LIMITS`.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knell.buses import Bus, open_bus
from tests.integration.bridges import Bridges
from tests.servers import namespaced

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
    pytest.param("redis", id="redis", marks=pytest.mark.integration),
    pytest.param("nats", id="nats", marks=pytest.mark.integration),
    pytest.param("bridge", id="bridge", marks=pytest.mark.integration),
    pytest.param("stdio", id="stdio", marks=pytest.mark.integration),
]
WIRES = ("bridge", "stdio")
ADAPTER = Path(__file__).resolve().parents[2] / "examples" / "python-adapter" / "adapter.py"


WIRE_LIMITS: dict[tuple[str, str], str] = {
    ("test_post_returns_the_message_as_stored", "bridge"): (
        "names with ':' and spaces: the HTTP protocol refuses them by design (NAME_RULE in "
        "knell.buses.http_protocol), before anything is sent"
    ),
}
"""Contract tests a wire cannot pass for a reason of the wire, not the
contract; each is skipped on that wire alone, with the reason."""


TARGET_DRIVERS: dict[str, tuple[str, str]] = {
    "redis-streams": ("redis", "knell.targets.redis_streams:connect"),
    "redis-streams-fenced": ("redis", "knell.targets.redis_streams_fenced:connect"),
    "pgqueuer": ("postgres", "knell.targets.postgres_pgqueuer:connect"),
    "nats-jetstream-queue": ("nats", "knell.targets.nats_jetstream.queue:connect"),
}
"""A target under test -> (the store kind it runs on, its driver)."""

TARGETS = [pytest.param(name, id=name, marks=pytest.mark.integration) for name in TARGET_DRIVERS]
"""The ``kind`` params of the targets, for the suites of the contracts they declare."""

_STREAMS_XACK = (
    "XACK names no consumer: a consumer that holds no lease (another's, or its own "
    "lapsed one) still acknowledges a pending entry"
)
_STREAMS_LAPSE = (
    "a lapse is not a state in a consumer group: the entry stays its owner's (renew, "
    "release and XACK accepted) until another consumer's XAUTOCLAIM moves it"
)
_STREAMS_SWEEP = (
    "an entry that lapsed on its last delivery stays pending until a claim's XAUTOCLAIM "
    "reaches it: dead lists it only from then"
)
_STREAMS_RECLAIMER = (
    "the lease is the reclaimer's min-idle-time: a claimer with a longer lease does not "
    "take an entry whose holder's shorter lease lapsed"
)
_STREAMS_BOTH: dict[str, tuple[str, str]] = {
    "test_the_reference_bus_declares_every_contract": (
        "skip",
        "a target declares what its system can keep: the queue contract only",
    ),
    "test_wrong_channel_kind_is_refused_both_ways": (
        "skip",
        "queue contract only: a stream has no channel kinds to refuse with",
    ),
    "test_dead_on_a_channel_of_no_kind_is_empty_and_on_a_feed_refused": (
        "skip",
        "queue contract only: no broadcast channel to refuse",
    ),
    "test_a_queue_refuses_every_broadcast_read_even_unsubscribed": (
        "skip",
        "queue contract only: no broadcast reads",
    ),
    "test_release_requeues_now_and_dead_after_max_deliveries": ("xfail", _STREAMS_SWEEP),
    "test_one_claim_sweeps_many_lapsed_leases_oldest_first": ("xfail", _STREAMS_SWEEP),
    "test_dead_pages_by_seq_over_swept_and_unswept_letters": ("xfail", _STREAMS_SWEEP),
    "test_the_oldest_claimable_wins_whatever_made_it_claimable": ("xfail", _STREAMS_RECLAIMER),
}
_PGQ_UNCOUNTED = (
    "a lapsed lease is not a delivery in PgQueuer: attempts rises on retry_job only, so a "
    "job re-picked after its holder's heartbeat went stale keeps its count and never dies"
)
_PGQ_LAPSE = (
    "a lapse is not a state in PgQueuer: the job stays picked by its holder (heartbeat, "
    "log_jobs accepted) until another dequeue re-picks it"
)
_PGQ_RECLAIMER = (
    "heartbeat_timeout is the dequeuer's: a claimer with a longer lease does not re-pick "
    "a job whose holder's shorter lease lapsed, and a lapse is not a delivery"
)
_PGQ: dict[str, tuple[str, str]] = {
    **{test: limit for test, limit in _STREAMS_BOTH.items() if limit[0] == "skip"},
    "test_a_lapsed_lease_requeues_with_its_count_kept": ("xfail", _PGQ_LAPSE),
    "test_release_requeues_now_and_dead_after_max_deliveries": ("xfail", _PGQ_UNCOUNTED),
    "test_one_claim_sweeps_many_lapsed_leases_oldest_first": ("xfail", _PGQ_UNCOUNTED),
    "test_dead_pages_by_seq_over_swept_and_unswept_letters": ("xfail", _PGQ_UNCOUNTED),
    "test_the_oldest_claimable_wins_whatever_made_it_claimable": ("xfail", _PGQ_RECLAIMER),
}
_NATS_STALE = (
    "no fencing: the server takes a +ACK, +WPI or -NAK on any earlier delivery's ack subject "
    "of a pending message, so a holder whose lease lapsed still ends it"
)
_NATS_LEASE = (
    "the lease is the consumer's AckWait: a claim with another lease_s changes it for every "
    "pending delivery, and renew (+WPI) cannot choose its length"
)
_NATS_ADVISORY = (
    "a dead letter is the MAX_DELIVERIES advisory, published when the server would have "
    "redelivered the message: not at its lapse, nor at the -NAK of its last delivery"
)
_NATS_SWEEP = (
    "a lapsed delivery comes back on the server's own timer, up to one AckWait late: "
    "declared as the queue's sweep_interval, not 0"
)
_NATS_QUEUE: dict[str, tuple[str, str]] = {
    "test_declare_is_idempotent_and_the_first_wins": ("xfail", _NATS_SWEEP),
    **{test: limit for test, limit in _STREAMS_BOTH.items() if limit[0] == "skip"},
    "test_a_lapsed_lease_requeues_with_its_count_kept": ("xfail", _NATS_STALE),
    "test_release_requeues_now_and_dead_after_max_deliveries": ("xfail", _NATS_ADVISORY),
    "test_release_of_the_last_delivery_is_dead_at_once": ("xfail", _NATS_ADVISORY),
    "test_dead_pages_by_seq_over_swept_and_unswept_letters": ("xfail", _NATS_ADVISORY),
    "test_one_claim_sweeps_many_lapsed_leases_oldest_first": ("xfail", _NATS_LEASE),
    "test_the_oldest_claimable_wins_whatever_made_it_claimable": ("xfail", _NATS_LEASE),
    "test_renew_extends_past_the_first_expiry_and_only_for_the_holder": ("xfail", _NATS_LEASE),
}
TARGET_LIMITS: dict[tuple[str, str], tuple[str, str]] = {
    **{(test, "redis-streams"): limit for test, limit in _STREAMS_BOTH.items()},
    ("test_done_is_terminal_and_only_for_the_holder", "redis-streams"): ("xfail", _STREAMS_XACK),
    ("test_a_lapsed_lease_requeues_with_its_count_kept", "redis-streams"): (
        "xfail",
        _STREAMS_LAPSE,
    ),
    **{(test, "redis-streams-fenced"): limit for test, limit in _STREAMS_BOTH.items()},
    ("test_a_lapsed_lease_requeues_with_its_count_kept", "redis-streams-fenced"): (
        "xfail",
        _STREAMS_RECLAIMER,
    ),
    **{(test, "pgqueuer"): limit for test, limit in _PGQ.items()},
    **{(test, "nats-jetstream-queue"): limit for test, limit in _NATS_QUEUE.items()},
}
"""Rows of a contract a target's system cannot keep: (test, target) ->
(``skip`` for a contract it does not declare, or ``xfail``; the reason).
Each is documented in the driver's docstring and in docs/findings.md."""

PARTIAL_BACKENDS: dict[str, frozenset[str]] = {"nats": frozenset({"broadcast"})}
"""Backends that are drivers of a real system (:mod:`knell.targets`), with
the contracts each implements: the tests of any other contract are skipped
on it, saying so (a reference bus implements all four)."""

MODULE_CONTRACT = {"test_queue": "queue", "test_roles": "at-most-once", "test_stream": "stream"}
"""The contract each test module pins down (the rest: broadcast)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("kind") if callspec is not None else None
        name = getattr(item, "originalname", item.name)
        contract = MODULE_CONTRACT.get(item.path.stem, "broadcast")
        if kind in PARTIAL_BACKENDS and contract not in PARTIAL_BACKENDS[kind]:
            item.add_marker(
                pytest.mark.skip(reason=f"the {kind} driver does not implement {contract}")
            )
            continue
        reason = WIRE_LIMITS.get((name, str(kind)))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"over the {kind}: {reason}"))
        limit = TARGET_LIMITS.get((name, str(kind)))
        if limit is not None:
            how, why = limit
            if how == "skip":
                item.add_marker(pytest.mark.skip(reason=f"{kind}: {why}"))
            else:
                item.add_marker(pytest.mark.xfail(reason=f"{kind}: {why}", strict=True))


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind in WIRES or kind in TARGET_DRIVERS:
        pytest.skip(f"a test of the store URL itself; the {kind} run serves bus() only")
    store = None if kind == "sqlite" else request.getfixturevalue(f"{kind}_store")
    return namespaced(kind, store, tmp_path)


OpenBus = Callable[[], Bus]


@pytest.fixture
def bus(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenBus]:
    """``bus()`` opens one more bus (a separate connection) on the test's store:
    for ``bridge`` another client of one bridge process in front of a fresh
    SQLite store, for ``stdio`` another adapter process on it."""
    opened: list[Bus] = []
    keeper: Bridges | None = None
    driver: str | None = None
    if kind in WIRES:
        target = namespaced("sqlite", None, tmp_path)
        if kind == "bridge":
            keeper = Bridges(tmp_path)
            target = keeper.start("--bus", target).url
        else:
            driver = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(ADAPTER))}"
    elif kind in TARGET_DRIVERS:
        store_kind, driver = TARGET_DRIVERS[kind]
        target = namespaced(store_kind, request.getfixturevalue(f"{store_kind}_store"), tmp_path)
    else:
        target = request.getfixturevalue("url")

    def make() -> Bus:
        b = open_bus(target, driver)
        opened.append(b)
        return b

    try:
        yield make
    finally:
        for b in opened:
            b.close()
        if keeper is not None:
            keeper.close()


@pytest.fixture
def pg_url(postgres_store: object, tmp_path: Path) -> str:
    """A fresh schema on the session's Postgres (for tests of one store)."""
    return namespaced("postgres", postgres_store, tmp_path)


@pytest.fixture
def redis_url(redis_store: object, tmp_path: Path) -> str:
    """A fresh key prefix on the session's Redis."""
    return namespaced("redis", redis_store, tmp_path)


@pytest.fixture
def opened() -> Iterator[list[Bus]]:
    """Buses a test opens itself, closed at its end."""
    buses: list[Bus] = []
    yield buses
    for b in buses:
        b.close()
