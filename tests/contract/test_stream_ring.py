"""Every reference bus's stream channels against the rows of the stream
contract: the ring's bound after each post (by count, and by age on the
store's clock), ``first`` telling a reader what it missed, paging, the
wrong-kind refusals both ways, and several OS processes posting to one
ring at once. A bus that does not declare the stream contract (yet) skips,
saying so; the store tests at the end look at what each store keeps."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import pytest

from knell.buses import DefiniteError, WrongChannelKind, contracts_of, open_bus
from knell.buses.contract import STREAM, StreamBus, StreamPage
from tests.contract.conftest import OpenBus

S = Any
"""A reference bus, used through its stream half."""


@pytest.fixture
def one(bus: OpenBus) -> S:
    b = bus()
    if STREAM not in contracts_of(b):
        pytest.skip(f"{type(b).__name__} does not declare the stream contract")
    return b


def _seqs(page: StreamPage) -> list[int]:
    return [m.seq for m in page.messages]


def test_the_bus_is_a_stream_bus(one: S) -> None:
    assert isinstance(one, StreamBus)


def test_declare_is_idempotent_and_the_first_wins(one: S) -> None:
    info = one.declare_stream("ticks", max_len=3)
    assert (info.channel, info.max_len, info.max_age_s) == ("ticks", 3, None)
    again = one.declare_stream("ticks", max_len=9, max_age_s=1.0)
    assert (again.max_len, again.max_age_s) == (3, None)
    aged = one.declare_stream("aged", max_age_s=2.5)
    assert (aged.max_len, aged.max_age_s) == (None, 2.5)
    both = one.declare_stream("both", max_len=4, max_age_s=60)
    assert (both.max_len, both.max_age_s) == (4, 60.0)


def test_declare_refuses_a_bound_that_is_no_bound(one: S) -> None:
    for max_len, max_age_s in (
        (None, None),
        (0, None),
        (True, None),
        (2.5, None),
        (None, 0),
        (None, -1.0),
        (None, float("inf")),
        (None, float("nan")),
    ):
        with pytest.raises(DefiniteError):
            one.declare_stream("ticks", max_len=max_len, max_age_s=max_age_s)
    with pytest.raises(WrongChannelKind):
        one.tail("ticks")  # nothing above was declared
    assert one.declare_stream("ticks", max_len=2).max_len == 2


def test_the_count_bound_holds_after_each_post(one: S) -> None:
    one.declare_stream("ticks", max_len=3)
    empty = one.tail("ticks")
    assert (empty.messages, empty.first, empty.head) == ((), 1, 0)
    for k in range(1, 11):
        posted = one.post("ticks", f"m{k}", "p")
        assert posted.seq == k  # dense, trimming or not
        page = one.tail("ticks")
        assert _seqs(page) == list(range(max(1, k - 2), k + 1))
        assert [m.body for m in page.messages] == [f"m{s}" for s in _seqs(page)]
        assert (page.first, page.head) == (max(1, k - 2), k)


def test_the_age_bound_drops_what_is_older_on_the_stores_clock(one: S) -> None:
    one.declare_stream("aged", max_age_s=0.8)
    one.post("aged", "a", "p")
    one.post("aged", "b", "p")
    assert _seqs(one.tail("aged")) == [1, 2]
    time.sleep(1.0)
    one.post("aged", "c", "p")  # trims a and b in the same write
    page = one.tail("aged")
    assert (_seqs(page), page.first, page.head) == ([3], 3, 3)
    time.sleep(1.0)  # nobody posts: the ring ages at read time all the same
    page = one.tail("aged")
    assert (page.messages, page.first, page.head) == ((), 4, 3)
    assert one.post("aged", "d", "p").seq == 4
    assert _seqs(one.tail("aged", after=3)) == [4]


def test_both_bounds_at_once(one: S) -> None:
    one.declare_stream("both", max_len=2, max_age_s=0.8)
    for body in "abc":
        one.post("both", body, "p")
    assert _seqs(one.tail("both")) == [2, 3]  # the count bound
    time.sleep(1.0)
    one.post("both", "d", "p")
    assert _seqs(one.tail("both")) == [4]  # the age bound, tighter now


def test_first_moves_forward_and_tells_a_reader_that_fell_behind(one: S) -> None:
    one.declare_stream("ticks", max_len=2)
    one.post("ticks", "m1", "p")
    kept_up = one.tail("ticks")
    assert (_seqs(kept_up), kept_up.first) == ([1], 1)
    for k in range(2, 6):
        one.post("ticks", f"m{k}", "p")
    behind = one.tail("ticks", after=1)
    assert behind.first == 4 > 1 + 1  # 2 and 3 were dropped before it asked: it is told
    assert _seqs(behind) == [4, 5]
    assert one.tail("ticks", after=4).first == 4  # not behind: nothing it asked for is gone


def test_tail_pages_with_limit_and_after_beyond_head_is_empty(one: S) -> None:
    one.declare_stream("ticks", max_len=10)
    for k in range(1, 8):
        one.post("ticks", f"m{k}", "p", idempotency_key=f"k{k}")
    pages = [one.tail("ticks", after=a, limit=3) for a in (0, 3, 6)]
    assert [_seqs(p) for p in pages] == [[1, 2, 3], [4, 5, 6], [7]]
    assert all((p.first, p.head) == (1, 7) for p in pages)
    assert pages[0].messages[0].idempotency_key == "k1"
    for after in (7, 100):
        page = one.tail("ticks", after=after)
        assert (page.messages, page.first, page.head) == ((), 1, 7)
    assert one.post("ticks", "again", "p", idempotency_key="k7").seq == 7  # the key holds
    for bad in (0, -1):
        with pytest.raises(DefiniteError):
            one.tail("ticks", limit=bad)


def test_wrong_channel_kind_is_refused_both_ways(one: S) -> None:
    with pytest.raises(WrongChannelKind):
        one.tail("nothing-yet")  # a tail never fixes a kind
    one.subscribe("w", "feed")
    one.declare_queue("jobs", 3)
    one.claim_role("inbox", "run", 10.0)
    for channel in ("feed", "jobs", "inbox"):
        with pytest.raises(WrongChannelKind):
            one.declare_stream(channel, max_len=5)
        with pytest.raises(WrongChannelKind):
            one.tail(channel)
    one.declare_stream("ticks", max_len=5)
    assert one.post("ticks", "m", "p").seq == 1  # post is shared by every kind
    for call in (
        lambda: one.subscribe("w", "ticks"),
        lambda: one.fetch("w", "ticks", after=0),
        lambda: one.fetch("w", "ticks"),
        lambda: one.ack("w", "ticks", 1),
        lambda: one.cursor("w", "ticks"),
        lambda: one.declare_queue("ticks", 3),
        lambda: one.claim("ticks", "a", 1.0),
        lambda: one.dead("ticks"),
        lambda: one.claim_role("ticks", "run", 1.0),
        lambda: one.release_role("ticks", "run"),
        lambda: one.stranded("ticks"),
        lambda: one.read("ticks/1", "run"),
        lambda: one.done("ticks/1", "a"),
        lambda: one.renew("ticks/1", "a", 1.0),
    ):
        with pytest.raises(WrongChannelKind):
            call()
    assert one.head("ticks") == 1  # head stays kind-neutral


def test_a_second_bus_sees_the_first_ones_ring(bus: OpenBus, one: S) -> None:
    other = bus()
    one.declare_stream("ticks", max_len=2)
    for k in range(5):
        other.post("ticks", f"m{k}", "p")  # a bus that never declared it still trims
    page = one.tail("ticks")
    assert (_seqs(page), page.first) == ([4, 5], 4)
    assert other.declare_stream("ticks", max_len=50).max_len == 2


def post_many(url: str, name: str, n: int, out: mp.Queue[list[int]]) -> None:
    """One posting process: ``n`` posts to the ring, then the seqs it got."""
    b = open_bus(url)
    got = [b.post("ring", f"{name}:{i}", name).seq for i in range(n)]
    b.close()
    out.put(got)


@pytest.mark.integration  # starts four posting processes
def test_concurrent_posters_keep_seqs_dense_and_the_bound_held(url: str) -> None:
    b = open_bus(url)
    if STREAM not in contracts_of(b):
        b.close()
        pytest.skip(f"{type(b).__name__} does not declare the stream contract")
    bound, procs_n, each = 2, 4, 150
    b.declare_stream("ring", max_len=bound)
    ctx = mp.get_context("spawn")
    results: mp.Queue[list[int]] = ctx.Queue()
    procs = [
        ctx.Process(target=post_many, args=(url, f"p{i}", each, results)) for i in range(procs_n)
    ]
    for p in procs:
        p.start()
    pages = 0
    seen: dict[int, str] = {}
    try:
        while any(p.is_alive() for p in procs) or pages == 0:
            page = b.tail("ring")
            pages += 1
            held = _seqs(page)
            assert page.head - page.first + 1 <= bound, page  # never over the bound
            assert held == list(range(page.first, page.head + 1)), page  # a suffix, no hole
            for m in page.messages:
                assert seen.setdefault(m.seq, m.body) == m.body  # a seq never changes message
        got = [results.get(timeout=60) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    seqs = sorted(s for g in got for s in g)
    assert seqs == list(range(1, procs_n * each + 1))  # dense: no seq twice, none skipped
    assert all(g == sorted(g) for g in got)  # each poster's seqs rise
    last = b.tail("ring")
    assert (_seqs(last), last.head) == (
        list(range(procs_n * each - bound + 1, procs_n * each + 1)),
        procs_n * each,
    )
    assert pages > 1
    b.close()


# -- what each store keeps: the ring is trimmed in storage, not only hidden ------------


def test_post_trims_the_ring_in_storage(kind: str, url: str) -> None:
    if kind not in ("postgres", "redis"):
        pytest.skip("asks the store itself: Postgres and Redis here")
    b = open_bus(url)
    poster = open_bus(url)  # a bus that never declared the streams, nor saw their kind
    try:
        b.declare_stream("ticks", max_len=3)
        b.declare_stream("aged", max_age_s=0.3)
        for k in range(20):
            poster.post("ticks", f"m{k}", "p")
            poster.post("aged", f"m{k}", "p")
            assert store_count(kind, url, "ticks") == min(k + 1, 3)
        time.sleep(0.5)
        poster.post("aged", "last", "p")
        assert store_count(kind, url, "ticks") == 3
        assert store_count(kind, url, "aged") == 1
        # A key is remembered while its message is in the ring, and forgotten with it.
        b.declare_stream("keyed", max_len=1)
        assert b.post("keyed", "a", "p", idempotency_key="k").seq == 1
        assert b.post("keyed", "a", "p", idempotency_key="k").seq == 1
        b.post("keyed", "b", "p")  # trims seq 1 and its key
        assert b.post("keyed", "a", "p", idempotency_key="k").seq == 3
        assert store_count(kind, url, "keyed") == 1
    finally:
        b.close()
        poster.close()


def store_count(kind: str, url: str, channel: str) -> int:
    """How many entries of ``channel`` the store itself holds."""
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qs(parts.query)
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    if kind == "postgres":
        import psycopg

        schema = query["schema"][0]
        with psycopg.connect(bare) as conn:
            row = conn.execute(
                f'SELECT count(*) FROM "{schema}".messages WHERE channel = %s', (channel,)
            ).fetchone()
        return int(row[0]) if row is not None else 0
    import redis

    prefix = query["prefix"][0]
    client = redis.Redis.from_url(bare)
    try:
        return int(client.xlen(f"{prefix}log:{channel}"))
    finally:
        client.close()


def test_the_schema_created_again_beside_running_posts_never_deadlocks(kind: str, url: str) -> None:
    """A bus whose schema probe raced the first creation runs the DDL again
    (every statement ``IF NOT EXISTS``) while others post. An ``ALTER
    TABLE channels`` in it (its ``AccessExclusiveLock`` taken even when the
    column exists) once deadlocked with the ring's post, which locks the
    channel's row before it writes ``messages``."""
    if kind != "postgres":
        pytest.skip("the Postgres schema's DDL")
    import threading
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    import psycopg

    from knell.buses import BusError
    from knell.stores.postgres.bus import schema_sql

    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    b = open_bus(url)
    b.declare_stream("ring", max_len=3)
    errors: list[BusError] = []
    stop = threading.Event()

    def post() -> None:
        while not stop.is_set():
            try:
                b.post("ring", "m", "p")
            except BusError as exc:
                errors.append(exc)

    poster = threading.Thread(target=post)
    poster.start()
    try:
        with psycopg.connect(bare, autocommit=True) as conn:
            for _ in range(40):
                with conn.transaction():
                    conn.execute(schema_sql(schema))
    finally:
        stop.set()
        poster.join(30)
        b.close()
    assert errors == []


def test_a_message_stamped_older_than_an_earlier_one_cuts_the_ring_there(
    kind: str, url: str
) -> None:
    """The ring is a suffix: when the store's clock stepped back, a message
    can carry an older stamp than the ones before it; once that stamp is
    past the age bound, it and every earlier seq are out of the ring (the
    cut is the highest old seq, not the first young one from the start)."""
    if kind not in ("postgres", "redis"):
        pytest.skip("backdates a stamp in the store itself: Postgres and Redis here")
    b = open_bus(url)
    try:
        b.declare_stream("aged", max_age_s=60)
        for k in range(1, 5):
            b.post("aged", f"m{k}", "p")
        backdate(kind, url, "aged", 3, 120.0)  # seq 3 as if posted two minutes ago
        page = b.tail("aged")
        assert (_seqs(page), page.first, page.head) == ([4], 4, 4)
        assert _seqs(b.tail("aged", after=1)) == [4]
        b.post("aged", "m5", "p")  # and the post's own trim cuts there too
        assert store_count(kind, url, "aged") == 2
        assert _seqs(b.tail("aged")) == [4, 5]
    finally:
        b.close()


def backdate(kind: str, url: str, channel: str, seq: int, seconds: float) -> None:
    """Move one message's stamp ``seconds`` into the past, in the store."""
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qs(parts.query)
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    if kind == "postgres":
        import psycopg

        schema = query["schema"][0]
        with psycopg.connect(bare, autocommit=True) as conn:
            done = conn.execute(
                f'UPDATE "{schema}".messages SET posted_at = posted_at - %s'
                " WHERE channel = %s AND seq = %s",
                (seconds, channel, seq),
            ).rowcount
        assert done == 1
        return
    import redis

    prefix = query["prefix"][0]
    client = redis.Redis.from_url(bare)
    try:
        key = f"{prefix}stamps:{channel}"
        score = client.zscore(key, str(seq))
        assert score is not None
        client.zadd(key, {str(seq): score - seconds * 1_000_000})
    finally:
        client.close()
