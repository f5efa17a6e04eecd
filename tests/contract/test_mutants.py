"""Each Postgres and Redis mutant really has its seeded bug (and the
reference does not), shown against a real server: racing processes for the
concurrency bugs, a choreography of connections for the commit-order bug,
a real crash for the durability bug."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from knell.buses import AckBeyondHead, Bus, DefiniteError, DriverError, open_bus
from knell.buses.mutants import all_mutants
from knell.stores import StoreSpec, create_store
from tests.contract.test_races import race
from tests.servers import namespaced, require_postgres

pytestmark = pytest.mark.integration

NETWORK = {**all_mutants("postgres"), **all_mutants("redis")}


def _runs_on(store: str) -> set[str]:
    """The shipped scenarios a store's mutant can run on: the store's own,
    and the portable ones the matrix's store axis re-targets to it."""
    from knell.matrix import portable
    from knell.scenario import load_scenario

    folder = Path(__file__).resolve().parents[2] / "scenarios"
    out = set()
    for path in folder.glob("*.toml"):
        scenario = load_scenario(path)
        if scenario.store.kind == store or portable(scenario, store):
            out.add(scenario.name)
    return out


def mutant(name: str, url: str, opened: list[Bus]) -> Any:
    bus = open_bus(url, NETWORK[name].factory)
    opened.append(bus)
    return bus


def reference(url: str, opened: list[Bus]) -> Any:
    bus = open_bus(url)
    opened.append(bus)
    return bus


# -- the registry --------------------------------------------------------------------


def test_each_network_store_has_at_least_three_mutants() -> None:
    for store in ("postgres", "redis"):
        found = all_mutants(store)
        assert len(found) >= 3, store
        for name, m in found.items():
            assert name.startswith(f"{store}-")
            assert (m.cls.__doc__ or "").startswith("Failure mode:"), name
            assert set(m.scenarios) <= _runs_on(store), name
    assert set(all_mutants("sqlite")).isdisjoint(NETWORK)


def test_a_network_mutant_refuses_another_store_url(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{(tmp_path / 'x.db').as_posix().lstrip('/')}"
    for m in NETWORK.values():
        with pytest.raises(DriverError, match=f"needs a {m.store}"):
            open_bus(sqlite, m.factory)


@pytest.mark.parametrize("name", sorted(NETWORK))
def test_every_network_mutant_opens_through_the_driver_path(
    name: str, request: pytest.FixtureRequest, opened: list[Bus]
) -> None:
    url = request.getfixturevalue("pg_url" if NETWORK[name].store == "postgres" else "redis_url")
    bus = mutant(name, url, opened)
    assert bus.subscribe("w", "a") == 0
    assert bus.post("a", "m1", "p", idempotency_key="k").seq == 1
    assert bus.post("a", "m1 again", "p", idempotency_key="k").seq == 1
    assert [m.seq for m in bus.fetch("w", "a", after=0)] == [1]
    assert bus.ack("w", "a", 1) == 1
    with pytest.raises(AckBeyondHead):
        bus.ack("w", "a", 2)


# -- seq assignment ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fixture"),
    [("postgres-seq-outside-lock", "pg_url"), ("redis-seq-get-then-set", "redis_url")],
)
def test_racing_producers_collide_on_a_seq(name: str, fixture: str, request: Any) -> None:
    url = request.getfixturevalue(fixture)
    outputs = race(
        url, ("post", "p1", 300, 0), ("post", "p2", 300, 0), driver=NETWORK[name].factory
    )
    seqs = [s for o in outputs for s in o["seqs"]]
    assert len(set(seqs)) < len(seqs), "no two posts shared a seq"


def test_a_seq_from_a_sequence_commits_out_of_order(pg_url: str, opened: list[Bus]) -> None:
    """Choreography: post A takes its number, then waits on a row lock; post
    B takes the next number and commits; a reader acks B's seq; A commits
    below the reader's cursor, and the reader never sees it."""
    bus_a = mutant("postgres-seq-from-sequence", pg_url, opened)
    bus_b = mutant("postgres-seq-from-sequence", pg_url, opened)
    reader = mutant("postgres-seq-from-sequence", pg_url, opened)
    reader.subscribe("r", "a")
    seen = _out_of_order(bus_a, bus_b, reader)
    assert seen["acked"] == 2 and seen["a_seq"] == 1
    assert reader.fetch("r", "a") == []  # seq 1 sits below the cursor: lost for "r"
    assert reader.head("a") == 2


def test_the_reference_commits_in_seq_order(pg_url: str, opened: list[Bus]) -> None:
    bus_a, bus_b, reader = (reference(pg_url, opened) for _ in range(3))
    reader.subscribe("r", "a")
    seen = _out_of_order(bus_a, bus_b, reader)
    # B may commit first, but then it took seq 1 and A retries at 2: what
    # the reader saw early plus what it reads now is every message.
    later = [m.seq for m in reader.fetch("r", "a")]
    assert sorted(seen["page"] + later) == [1, 2]
    assert {seen["a_seq"], seen["b_seq"]} == {1, 2}


def _out_of_order(bus_a: Any, bus_b: Any, reader: Any) -> dict[str, Any]:
    schema = bus_a.schema
    blocker = psycopg.connect(bus_a._conninfo, autocommit=False)
    seen: dict[str, Any] = {"acked": None}
    try:
        bus_a.head("a")  # schema created before the blocker touches it
        # An uncommitted row holding idempotency key "kA": A's insert of the
        # same key waits on it, after A has taken its seq.
        blocker.execute(
            f'INSERT INTO "{schema}".messages VALUES (%s, 1000000, %s, %s, %s, 0)',
            ("a", "blocker", "x", "kA"),
        )
        a = threading.Thread(
            target=lambda: seen.update(a_seq=bus_a.post("a", "A", "pa", idempotency_key="kA").seq)
        )
        a.start()
        time.sleep(0.3)  # A holds its number and waits
        b = threading.Thread(target=lambda: seen.update(b_seq=bus_b.post("a", "B", "pb").seq))
        b.start()
        b.join(0.5)
        page = reader.fetch("r", "a")
        seen["page"] = [m.seq for m in page]
        if page:
            seen["acked"] = reader.ack("r", "a", page[-1].seq)
        blocker.rollback()  # A goes on
        a.join(10)
        b.join(10)
    finally:
        blocker.close()
    return seen


# -- cursors ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["postgres-ack-read-then-write", "redis-ack-get-then-set"])
def test_racing_acks_move_the_cursor_back(name: str, request: Any, tmp_path: Path) -> None:
    kind = NETWORK[name].store
    store = request.getfixturevalue(f"{kind}_store")
    n = 1000
    for _attempt in range(5):  # a race: each attempt on a fresh namespace
        url = namespaced(kind, store, tmp_path)
        setup = open_bus(url, NETWORK[name].factory)
        try:
            setup.subscribe("w", "race")
            for i in range(n):
                setup.post("race", f"m{i}", "p")
            # Two ackers in shuffled orders (so most acks are stale) and a reader.
            first, second, watcher = race(
                url,
                ("ack", "first", n, 7),
                ("ack", "second", n, 11),
                ("watch", "reader", 2 * n, 0),
                driver=NETWORK[name].factory,
            )
            seen = [watcher["cursors"]] + [[c for _, c in o["acks"]] for o in (first, second)]
            if any(c != sorted(c) for c in seen) or setup.cursor("w", "race") < n:
                return
        finally:
            setup.close()
    pytest.fail("no ack ever moved the cursor back")


def test_consumer_group_fetch_moves_the_cursor_on_delivery(
    redis_url: str, opened: list[Bus]
) -> None:
    bus = mutant("redis-consumer-group-fetch", redis_url, opened)
    bus.subscribe("w", "a")
    for i in range(3):
        bus.post("a", f"m{i}", "p")
    assert [m.seq for m in bus.fetch("w", "a")] == [1, 2, 3]
    # The consumer dies here, before handling anything; its successor:
    assert bus.cursor("w", "a") == 3
    assert bus.fetch("w", "a") == []
    ref = reference(redis_url, opened)
    ref.subscribe("r", "a", at="start")
    ref.fetch("r", "a")
    assert ref.cursor("r", "a") == 0


def test_a_capped_stream_trims_a_lagging_backlog(redis_url: str, opened: list[Bus]) -> None:
    bus = mutant("redis-capped-stream", redis_url, opened)
    bus.subscribe("slow", "a")
    for i in range(500):
        bus.post("a", f"m{i}", "p")
    page = bus.fetch("slow", "a", limit=10)
    assert page[0].seq > 1, "nothing was trimmed"
    assert bus.head("a") == 500
    ref = reference(redis_url.replace("prefix=", "prefix=ref"), opened)
    ref.subscribe("slow", "a")
    for i in range(500):
        ref.post("a", f"m{i}", "p")
    assert ref.fetch("slow", "a", limit=1)[0].seq == 1


# -- durability ------------------------------------------------------------------------


def test_unlogged_tables_are_emptied_by_a_crash(tmp_path: Path) -> None:
    require_postgres()
    store = create_store(StoreSpec(kind="postgres"), tmp_path)
    store.start()
    try:
        bus = open_bus(store.url, NETWORK["postgres-unlogged-tables"].factory)
        ref = open_bus(store.url)
        try:
            for b in (bus, ref):
                b.subscribe("w", "a")
                for i in range(5):
                    b.post("a", f"m{i}", "p")
                b.ack("w", "a", 3)
            store.crash()
            store.restart()
            store.wait_ready(60)
            assert bus.head("a") == 0  # five acknowledged posts: gone
            with pytest.raises(DefiniteError, match="not subscribed"):
                bus.cursor("w", "a")
            assert (ref.head("a"), ref.cursor("w", "a")) == (5, 3)
        finally:
            bus.close()
            ref.close()
    finally:
        store.stop()


# -- queues and role inboxes -----------------------------------------------------------


def _racing_claims(url: str, driver: str | None, opened: list[Bus]) -> list[str]:
    setup = reference(url, opened)
    setup.declare_queue("jobs", 3)
    for i in range(400):
        setup.post("jobs", f"m{i}", "p")
    outputs = race(url, ("claim", "c1", 150, 0), ("claim", "c2", 150, 0), driver=driver)
    return [body for o in outputs for body in o["claimed"]]


@pytest.mark.parametrize(("name", "fixture"), [("postgres-claim-read-then-upsert", "pg_url")])
def test_racing_claimers_both_win_one_message(
    name: str, fixture: str, request: Any, opened: list[Bus]
) -> None:
    claimed = _racing_claims(request.getfixturevalue(fixture), NETWORK[name].factory, opened)
    assert len(set(claimed)) < len(claimed), "no message was won twice"


@pytest.mark.parametrize("fixture", ["pg_url", "redis_url"])
def test_racing_claimers_of_the_reference_never_share_a_message(
    fixture: str, request: Any, opened: list[Bus]
) -> None:
    claimed = _racing_claims(request.getfixturevalue(fixture), None, opened)
    assert len(claimed) == 300 and len(set(claimed)) == 300


def test_a_popped_delivery_is_never_listed_as_stranded(pg_url: str, opened: list[Bus]) -> None:
    for bus, listed in (
        (reference(pg_url, opened), ["m"]),
        (mutant("postgres-receive-pops-inbox", pg_url, opened), []),
    ):
        role = f"reviewer-{len(listed)}"
        bus.post(role, "m", "s")
        bus.claim_role(role, "run-1", 5.0)
        assert [d.body for d in bus.receive("run-1")] == ["m"]
        bus.release_role(role, "run-1")  # left without reading it
        assert [s.body for s in bus.stranded(role)] == listed
