"""Every reference bus's stream channels against every row of the stream
contract: tails that say where the ring starts, kinds refused
both ways (declaring it: test_stream_ring.py). A bus that does not declare
the stream contract is skipped,
saying so (a reference bus whose store has no ring yet)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from knell.buses import STREAM, WrongChannelKind, contracts_of
from tests.contract.conftest import OpenBus

S = Any
"""A reference bus, used through its stream half."""


@pytest.fixture
def one(bus: OpenBus) -> S:
    opened = bus()
    if STREAM not in contracts_of(opened):
        pytest.skip("this bus does not declare the stream contract")
    return opened


def _seqs(page: Any) -> list[int]:
    return [m.seq for m in page.messages]


def test_a_tail_reads_consecutive_seqs_after_after(one: S) -> None:
    one.declare_stream("ticks", max_len=100)
    posted = [one.post("ticks", f"m{i}", "p") for i in range(5)]
    assert [m.seq for m in posted] == [1, 2, 3, 4, 5]
    page = one.tail("ticks", after=0, limit=2)
    assert _seqs(page) == [1, 2] and (page.first, page.head) == (1, 5)
    page = one.tail("ticks", after=2)
    assert _seqs(page) == [3, 4, 5] and [m.body for m in page.messages] == ["m2", "m3", "m4"]
    assert _seqs(one.tail("ticks", after=5)) == []


def test_the_ring_keeps_the_newest_by_count_and_says_where_it_starts(one: S) -> None:
    one.declare_stream("ticks", max_len=3)
    for i in range(7):
        one.post("ticks", f"m{i}", "p")
    page = one.tail("ticks", after=0)
    assert (page.first, page.head) == (5, 7)
    assert _seqs(page) == [5, 6, 7]  # 1..4 dropped: first > after + 1 says so
    assert one.post("ticks", "m7", "p").seq == 8  # seqs stay dense across the trim
    assert one.tail("ticks", after=6).first == 6


def test_the_ring_drops_what_is_older_than_its_age(one: S) -> None:
    one.declare_stream("ticks", max_age_s=0.2)
    for i in range(3):
        one.post("ticks", f"m{i}", "p")
    time.sleep(0.3)
    quiet = one.tail("ticks", after=0)  # no post since: aged out all the same
    assert _seqs(quiet) == [] and (quiet.first, quiet.head) == (4, 3)
    one.post("ticks", "m3", "p")
    page = one.tail("ticks", after=0)
    assert _seqs(page) == [4] and page.first == 4


def test_posters_on_several_buses_keep_seqs_dense_over_the_trim(bus: OpenBus) -> None:
    a, b = bus(), bus()
    if STREAM not in contracts_of(a):
        pytest.skip("this bus does not declare the stream contract")
    a.declare_stream("ticks", max_len=2)
    seqs = []
    for i in range(6):
        seqs.append(a.post("ticks", f"a{i}", "p").seq)
        seqs.append(b.post("ticks", f"b{i}", "q").seq)
    assert sorted(seqs) == list(range(1, 13))
    assert _seqs(b.tail("ticks")) == [11, 12]


def test_a_poster_that_fell_behind_the_trim_still_appends_at_the_head(bus: OpenBus) -> None:
    """A bus that remembers the head it last saw and guesses the next seq
    must not land in the trimmed range (a seq below first, deleted)."""
    a, b = bus(), bus()
    if STREAM not in contracts_of(a):
        pytest.skip("this bus does not declare the stream contract")
    a.declare_stream("ticks", max_len=2)
    assert a.post("ticks", "a1", "p").seq == 1
    for i in range(5):
        b.post("ticks", f"b{i}", "q")  # seqs 2..6: the ring now starts at 5
    assert a.post("ticks", "a2", "p").seq == 7
    page = b.tail("ticks")
    assert _seqs(page) == [6, 7] and page.first == 6


def test_a_declaration_over_earlier_posts_trims_at_once(one: S) -> None:
    for i in range(5):
        one.post("ticks", f"m{i}", "p")  # post is kind-neutral: no ring yet
    one.declare_stream("ticks", max_len=2)
    page = one.tail("ticks")
    assert _seqs(page) == [4, 5] and (page.first, page.head) == (4, 5)
    assert one.post("ticks", "m5", "p").seq == 6


def test_wrong_channel_kind_is_refused_both_ways(one: S) -> None:
    with pytest.raises(WrongChannelKind):
        one.tail("nothing-yet")  # a tail never fixes a kind
    one.subscribe("w", "feed")
    one.declare_queue("jobs", 3)
    for channel in ("feed", "jobs"):
        with pytest.raises(WrongChannelKind):
            one.declare_stream(channel, max_len=3)
        with pytest.raises(WrongChannelKind):
            one.tail(channel)
    one.declare_stream("ticks", max_len=3)
    one.post("ticks", "m", "p")  # post is shared by every kind
    for call in (
        lambda: one.subscribe("w", "ticks"),
        lambda: one.fetch("w", "ticks", after=0),
        lambda: one.ack("w", "ticks", 1),
        lambda: one.claim("ticks", "c", 1.0),
        lambda: one.declare_queue("ticks", 3),
        lambda: one.claim_role("ticks", "run", 1.0),
    ):
        with pytest.raises(WrongChannelKind):
            call()
