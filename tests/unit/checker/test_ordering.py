"""ordering: a fetch page is strictly increasing and above ``after``."""

from __future__ import annotations

from knell.checker.ordering import OrderingCheck

from .builder import History, only, run


def test_strictly_increasing_pages_are_valid() -> None:
    h = History()
    h.fetch("c1", "w", "events", None, [(1, "a"), (2, "b"), (5, "e")])
    h.fetch("c1", "w", "events", 5, [(6, "f")])
    h.fetch("c1", "w", "events", 6, [])
    r = run(h, OrderingCheck)
    assert r.valid is True
    assert r.counts["fetches"] == 3
    assert r.counts["messages"] == 4


def test_out_of_order_page() -> None:
    h = History()
    inv, ok = h.fetch("c1", "w", "events", None, [(1, "a"), (3, "c"), (2, "b")])
    r = run(h, OrderingCheck)
    assert only(r, "fetch-out-of-order") == [inv["index"], ok["index"]]


def test_repeated_seq_in_page_is_out_of_order() -> None:
    h = History()
    inv, ok = h.fetch("c1", "w", "events", None, [(1, "a"), (1, "a")])
    assert only(run(h, OrderingCheck), "fetch-out-of-order") == [inv["index"], ok["index"]]


def test_page_reaching_below_after() -> None:
    h = History()
    inv, ok = h.fetch("c1", "w", "events", 4, [(4, "d"), (5, "e")])
    r = run(h, OrderingCheck)
    assert only(r, "fetch-below-after") == [inv["index"], ok["index"]]
