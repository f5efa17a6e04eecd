"""The broadcast contract of ``buses/contract.py``, promise by promise, on
every reference bus. Each test names the promise it pins down; the same
test runs on sqlite, postgres and redis."""

from __future__ import annotations

import time

import pytest

from knell.buses import AckBeyondHead, DefiniteError, Wake
from tests.contract.conftest import OpenBus

# -- post ------------------------------------------------------------------------


def test_post_assigns_dense_seqs_from_one_per_channel(bus: OpenBus) -> None:
    b = bus()
    assert [b.post("a", f"a{i}", "p").seq for i in range(5)] == [1, 2, 3, 4, 5]
    assert [b.post("b", f"b{i}", "p").seq for i in range(3)] == [1, 2, 3]
    assert (b.head("a"), b.head("b"), b.head("never-posted")) == (5, 3, 0)


def test_post_returns_the_message_as_stored(bus: OpenBus) -> None:
    b = bus()
    body = "héllo ✓ \"quoted\" 'single' \\ ; -- {braces} [x] *?"
    m = b.post("ch:with:colons", body, "sender one", idempotency_key="key 1")
    assert (m.channel, m.seq, m.body, m.sender, m.idempotency_key) == (
        "ch:with:colons",
        1,
        body,
        "sender one",
        "key 1",
    )
    b.subscribe("h", "ch:with:colons", at="start")
    assert bus().fetch("h", "ch:with:colons") == [m]


def test_repeated_idempotency_key_returns_the_original_and_appends_nothing(bus: OpenBus) -> None:
    b, other = bus(), bus()
    first = b.post("a", "original", "p1", idempotency_key="k")
    b.post("a", "between", "p1")
    again = other.post("a", "retry body", "p2", idempotency_key="k")
    assert again == first  # the original body and sender, at the original seq
    assert b.head("a") == 2
    assert b.post("b", "same key elsewhere", "p1", idempotency_key="k").seq == 1


def test_posts_without_keys_are_never_deduplicated(bus: OpenBus) -> None:
    b = bus()
    assert [b.post("a", "same", "p").seq for _ in range(3)] == [1, 2, 3]


# -- subscribe -------------------------------------------------------------------


def test_a_new_handle_joins_at_head_unless_it_asks_for_start(bus: OpenBus) -> None:
    b = bus()
    for i in range(3):
        b.post("a", f"m{i}", "p")
    assert b.subscribe("late", "a") == 3
    assert b.fetch("late", "a") == []
    assert b.subscribe("historian", "a", at="start") == 0
    assert [m.seq for m in b.fetch("historian", "a")] == [1, 2, 3]
    assert b.subscribe("first", "empty-channel") == 0


def test_resubscribing_never_moves_a_cursor(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    for i in range(4):
        b.post("a", f"m{i}", "p")
    b.ack("w", "a", 2)
    assert bus().subscribe("w", "a", at="start") == 2
    assert bus().subscribe("w", "a", at="head") == 2
    assert b.cursor("w", "a") == 2


def test_subscribe_refuses_an_unknown_join_position(bus: OpenBus) -> None:
    with pytest.raises(DefiniteError):
        bus().subscribe("w", "a", at="middle")  # type: ignore[arg-type]


# -- fetch -----------------------------------------------------------------------


def test_fetch_is_a_peek(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    for i in range(3):
        b.post("a", f"m{i}", "p")
    first = b.fetch("w", "a")
    assert [m.seq for m in first] == [1, 2, 3]
    assert b.fetch("w", "a") == first
    assert b.cursor("w", "a") == 0


def test_fetch_reads_from_the_durable_cursor_or_after_a_given_seq(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    for i in range(10):
        b.post("a", f"m{i}", "p")
    b.ack("w", "a", 4)
    assert [m.seq for m in b.fetch("w", "a", limit=3)] == [5, 6, 7]
    assert [m.seq for m in b.fetch("w", "a", after=7)] == [8, 9, 10]
    assert [m.seq for m in b.fetch("w", "a", after=0, limit=2)] == [1, 2]
    assert b.fetch("w", "a", after=10) == []


def test_paging_to_an_empty_page_reaches_the_head(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    for i in range(23):
        b.post("a", f"m{i}", "p")
    seen: list[int] = []
    page = b.fetch("w", "a", limit=5)
    while page:
        seen += [m.seq for m in page]
        page = b.fetch("w", "a", after=page[-1].seq, limit=5)
    assert seen == list(range(1, 24))


def test_fetch_from_the_cursor_refuses_a_handle_that_is_not_subscribed(bus: OpenBus) -> None:
    b = bus()
    b.post("a", "m", "p")
    with pytest.raises(DefiniteError, match="not subscribed"):
        b.fetch("stranger", "a")


def test_fetch_refuses_a_limit_below_one(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    with pytest.raises(DefiniteError):
        b.fetch("w", "a", limit=0)


# -- ack -------------------------------------------------------------------------


def test_ack_is_forward_only(bus: OpenBus) -> None:
    b, stale = bus(), bus()
    b.subscribe("w", "a")
    for i in range(5):
        b.post("a", f"m{i}", "p")
    assert b.ack("w", "a", 3) == 3
    assert stale.ack("w", "a", 1) == 3  # a stale ack from another connection is a no-op
    assert b.ack("w", "a", 3) == 3
    assert b.ack("w", "a", 5) == 5
    assert b.cursor("w", "a") == 5
    assert [m.seq for m in b.fetch("w", "a")] == []


def test_ack_beyond_head_is_refused_and_moves_nothing(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    b.post("a", "m", "p")
    b.ack("w", "a", 1)
    with pytest.raises(AckBeyondHead, match="beyond head"):
        b.ack("w", "a", 2)
    assert issubclass(AckBeyondHead, DefiniteError)
    assert b.cursor("w", "a") == 1


def test_ack_refuses_a_handle_that_is_not_subscribed(bus: OpenBus) -> None:
    b = bus()
    b.post("a", "m", "p")
    with pytest.raises(DefiniteError, match="not subscribed") as caught:
        b.ack("stranger", "a", 1)
    assert not isinstance(caught.value, AckBeyondHead)
    with pytest.raises(DefiniteError, match="not subscribed"):
        b.cursor("stranger", "a")


def test_acks_of_one_handle_are_per_channel(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    b.subscribe("w", "b")
    b.post("a", "m", "p")
    b.post("b", "m", "p")
    b.ack("w", "a", 1)
    assert (b.cursor("w", "a"), b.cursor("w", "b")) == (1, 0)


# -- wait: the doorbell ------------------------------------------------------------


def test_wait_rings_at_once_on_unacked_backlog_by_others(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    b.subscribe("w", "b")
    b.post("b", "mine", "w")
    b.post("b", "theirs", "p")
    started = time.monotonic()
    wake = b.wait("w", 5.0)
    assert time.monotonic() - started < 1.0
    assert wake == Wake("b", 2, "p", "backlog")  # own post at seq 1 skipped
    assert not hasattr(wake, "body")
    assert b.cursor("w", "b") == 0  # peek-only: no durable state moved


def test_wait_never_rings_on_own_posts(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    b.post("a", "mine", "w")
    started = time.monotonic()
    assert b.wait("w", 0.3) is None
    assert 0.25 <= time.monotonic() - started < 2.0


def test_wait_rings_on_a_post_by_another_connection(bus: OpenBus) -> None:
    import threading

    waiter, poster = bus(), bus()
    waiter.subscribe("w", "a")
    waiter.post("a", "before arming, acked", "p")
    waiter.ack("w", "a", 1)

    def post_later() -> None:
        time.sleep(0.2)
        poster.post("a", "own post while armed", "w")
        poster.post("a", "theirs", "p")

    thread = threading.Thread(target=post_later)
    thread.start()
    try:
        wake = waiter.wait("w", 5.0)
    finally:
        thread.join()
    assert wake == Wake("a", 3, "p", "post")


def test_wait_times_out_without_subscriptions(bus: OpenBus) -> None:
    started = time.monotonic()
    assert bus().wait("nobody", 0.2) is None
    assert time.monotonic() - started >= 0.15


# -- durability across connections ---------------------------------------------------


def test_state_outlives_the_bus_that_wrote_it(bus: OpenBus) -> None:
    b = bus()
    b.subscribe("w", "a")
    b.post("a", "m1", "p", idempotency_key="k1")
    b.post("a", "m2", "p")
    b.ack("w", "a", 1)
    b.close()
    fresh = bus()
    assert fresh.head("a") == 2
    assert fresh.cursor("w", "a") == 1
    assert fresh.post("a", "again", "p", idempotency_key="k1").seq == 1
    assert [m.body for m in fresh.fetch("w", "a")] == ["m2"]
