"""The time axis of the timelines: monotonic, gaps cut, ticks in range."""

from __future__ import annotations

from knell.report.scene import TimeAxis, seconds_label

S = 1_000_000_000


def test_long_empty_stretches_are_cut_and_the_map_stays_monotonic() -> None:
    t0 = 100 * S
    times = [t0 + int(0.001 * S * i) for i in range(10)] + [t0 + 14 * S, t0 + 14 * S + 5_000_000]
    axis = TimeAxis(times, 100.0, 900.0, t0)
    assert len(axis.segments) == 2 and axis.breaks()
    xs = [axis.x(t) for t in sorted({*times, t0 + 5 * S, t0 + 10 * S})]
    assert xs == sorted(xs) and xs[0] >= 100.0 and xs[-1] <= 900.0
    # the 9 ms burst keeps a legible width beside the 14 s gap
    assert axis.x(times[9]) - axis.x(times[0]) > 100
    for x, _ in axis.ticks():
        assert 100.0 <= x <= 900.0


def test_labels() -> None:
    assert seconds_label(3.41234, 0.001) == "3.412 s"
    assert seconds_label(12.0, 5) == "12 s"
