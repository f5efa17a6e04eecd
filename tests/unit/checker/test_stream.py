"""The stream contract's checks on handcrafted histories: one that passes,
and one per anomaly, with its witness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knell.checker.stream import RingBoundCheck, RingContentCheck, RingTailCheck, StreamKindCheck
from knell.history import Event

from .builder import History, indices, only, run

S = "streamer-1"
P = "producer-1"
CH = "ticks"


def declare(h: History, max_len: int | None = 3, max_age_s: float | None = None) -> Event:
    bound: dict[str, Any] = {}
    if max_len is not None:
        bound["max_len"] = max_len
    if max_age_s is not None:
        bound["max_age_s"] = max_age_s
    h.invoke(P, "declare_stream", bound, channel=CH)
    return h.ok(P, "declare_stream", bound, channel=CH)


def posts(h: History, seqs: Sequence[int]) -> dict[int, Event]:
    return {s: h.post(P, CH, f"m{s}", s)[1] for s in seqs}


def page(
    h: History,
    after: int,
    first: int,
    head: int,
    shown: Sequence[int | tuple[int, str]],
    *,
    limit: int = 10,
    channel: str = CH,
    process: str = S,
) -> tuple[Event, Event]:
    asked = {"after": after, "limit": limit}
    inv = h.invoke(process, "stream_tail", asked, channel=channel)
    messages = [
        {"seq": m, "id": f"m{m}"} if isinstance(m, int) else {"seq": m[0], "id": m[1]}
        for m in shown
    ]
    done = h.ok(
        process,
        "stream_tail",
        {**asked, "first": first, "head": head, "messages": messages},
        channel=channel,
    )
    return inv, done


def valid_history() -> History:
    """A ring of 3: a reader that kept up, fell behind and was told."""
    h = History()
    declare(h)
    posts(h, [1, 2])
    page(h, 0, 1, 2, [1, 2])
    posts(h, [3, 4, 5, 6])
    page(h, 2, 4, 6, [4, 5, 6])  # 3 dropped, and first says so
    page(h, 6, 4, 6, [])
    return h


def test_a_reader_that_falls_behind_and_is_told_is_valid() -> None:
    h = valid_history()
    for check in (RingTailCheck, RingContentCheck, RingBoundCheck, StreamKindCheck):
        result = run(h, check)
        assert result.valid is True, (check.name, result.anomalies)
    tail = run(h, RingTailCheck)
    assert tail.counts["pages"] == 3 and tail.counts["fell-behind"] == 1


# -- ring-tail -------------------------------------------------------------------------


def test_a_page_that_repeats_after_is_a_duplicate() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3])
    _, bad = page(h, 2, 1, 3, [2, 3])  # after=2, inclusive: seq 2 again
    assert only(run(h, RingTailCheck), "duplicate") == [bad["index"]]


def test_a_page_that_skips_what_the_ring_holds_is_a_silent_gap() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3, 4])
    _, bad = page(h, 0, 1, 4, [3, 4])  # first 1 says 1 and 2 are held
    assert only(run(h, RingTailCheck), "silent-gap") == [bad["index"]]


def test_a_page_that_stops_short_of_the_head_is_a_silent_gap() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3])
    _, bad = page(h, 0, 1, 3, [1])
    assert only(run(h, RingTailCheck), "silent-gap") == [bad["index"]]


def test_a_page_that_jumps_is_a_silent_gap_and_one_that_goes_down_out_of_order() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3])
    _, jump = page(h, 0, 1, 3, [1, 3])
    assert only(run(h, RingTailCheck), "silent-gap") == [jump["index"]]
    h = History()
    declare(h)
    posts(h, [1, 2, 3])
    _, down = page(h, 0, 1, 3, [2, 1])
    assert only(run(h, RingTailCheck), "out-of-order") == [down["index"]]


def test_a_page_showing_below_its_first_is_below_first() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3])
    _, bad = page(h, 0, 2, 3, [1, 2, 3])
    assert only(run(h, RingTailCheck), "below-first") == [bad["index"]]


def test_a_first_that_goes_back_is_first_regressed() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3, 4, 5])
    _, earlier = page(h, 0, 3, 5, [3, 4, 5])
    inv, later = page(h, 0, 2, 5, [2, 3, 4, 5], process="streamer-2")
    witness = only(run(h, RingTailCheck), "first-regressed")
    assert witness == indices([earlier, inv, later])


def test_overlapping_pages_may_disagree_on_first() -> None:
    h = History()
    declare(h)
    posts(h, [1, 2, 3, 4, 5])
    inv = h.invoke("streamer-2", "stream_tail", {"after": 0, "limit": 10}, channel=CH)
    page(h, 0, 3, 5, [3, 4, 5])  # completes while streamer-2's read is under way
    h.ok(
        "streamer-2",
        "stream_tail",
        {
            **inv["value"],
            "first": 2,
            "head": 5,
            "messages": [{"seq": s, "id": f"m{s}"} for s in (2, 3, 4, 5)],
        },
        channel=CH,
    )
    assert run(h, RingTailCheck).valid is True


# -- ring-content --------------------------------------------------------------------


def test_a_page_with_another_body_at_a_seq_is_wrong_body() -> None:
    h = History()
    declare(h)
    oks = posts(h, [1, 2])
    _, bad = page(h, 0, 1, 2, [1, (2, "m1")])
    witness = only(run(h, RingContentCheck), "wrong-body")
    assert witness[-1] == bad["index"] and witness[0] in (oks[1]["index"], oks[2]["index"])


def test_a_page_with_a_body_nobody_posted_is_a_phantom() -> None:
    h = History()
    declare(h)
    posts(h, [1])
    _, bad = page(h, 0, 1, 2, [1, (2, "ghost")])
    assert only(run(h, RingContentCheck), "phantom") == [bad["index"]]


def test_an_indeterminate_post_may_show_anywhere_once() -> None:
    h = History()
    declare(h)
    h.post_info(h.post_invoke(P, CH, "m1"))
    page(h, 0, 1, 1, [1])
    assert run(h, RingContentCheck).valid is True


# -- ring-bound ----------------------------------------------------------------------


def test_a_ring_over_its_count_after_a_post_is_over_count() -> None:
    h = History()
    declare(h, max_len=3)
    oks = posts(h, [1, 2, 3, 4, 5])
    inv, bad = page(h, 0, 1, 5, [1, 2, 3, 4, 5])
    assert only(run(h, RingBoundCheck), "over-count") == indices([oks[5], inv, bad])


def test_a_page_read_during_a_post_is_not_held_to_it() -> None:
    h = History()
    declare(h, max_len=3)
    posts(h, [1, 2, 3])
    inv = h.post_invoke(P, CH, "m4")
    page(h, 0, 1, 3, [1, 2, 3])
    h.post_ok(inv, 4)
    assert run(h, RingBoundCheck).valid is True


def test_a_message_older_than_the_age_bound_is_over_age() -> None:
    h = History()
    declare(h, max_len=None, max_age_s=1.0)
    oks = posts(h, [1])
    h.sleep(1.0)
    page(h, 0, 1, 1, [1])  # within the tolerance
    assert run(h, RingBoundCheck).valid is True
    h.sleep(1.0)
    inv, bad = page(h, 0, 1, 1, [1])
    assert only(run(h, RingBoundCheck), "over-age") == indices([oks[1], inv, bad])


# -- stream-kind ---------------------------------------------------------------------


def test_a_stream_that_accepts_a_broadcast_read_is_wrong_kind_accepted() -> None:
    h = History()
    ok = declare(h)
    h.invoke(S, "fetch", {"after": 0, "probe": "wrong-kind"}, handle=S, channel=CH)
    bad = h.ok(S, "fetch", {"messages": []}, handle=S, channel=CH)
    assert only(run(h, StreamKindCheck), "wrong-kind-accepted") == indices([ok, bad])


def test_a_tail_served_on_a_channel_never_declared_is_wrong_kind_accepted() -> None:
    h = History()
    declare(h)
    _, bad = page(h, 0, 1, 0, [], channel="ticks.probe")
    assert only(run(h, StreamKindCheck), "wrong-kind-accepted") == [bad["index"]]


def test_refused_probes_are_counted_and_a_refused_declared_stream_is_wrong_refusal() -> None:
    h = History()
    ok = declare(h)
    asked = {"after": 0, "limit": 1, "probe": "wrong-kind"}
    h.invoke(S, "stream_tail", asked, channel="ticks.probe")
    h.fail(
        S, "stream_tail", {**asked, "error": "no", "refused": "wrong-kind"}, channel="ticks.probe"
    )
    result = run(h, StreamKindCheck)
    assert result.valid is True and result.counts["refused-wrong-kind"] == 1
    inv = h.invoke(S, "stream_tail", {"after": 0, "limit": 5}, channel=CH)
    bad = h.fail(
        S,
        "stream_tail",
        {"after": 0, "limit": 5, "error": "no", "refused": "wrong-kind"},
        channel=CH,
    )
    assert only(run(h, StreamKindCheck), "wrong-refusal") == indices([ok, inv, bad])


def test_a_declare_of_unknown_outcome_may_have_made_a_stream() -> None:
    h = History()
    h.invoke(P, "declare_stream", {"max_len": 3}, channel=CH)
    h.info(P, "declare_stream", {"max_len": 3, "error": "timeout"}, channel=CH)
    page(h, 0, 1, 0, [])
    assert run(h, StreamKindCheck).valid is True
