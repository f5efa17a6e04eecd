"""The plots' figures: histogram quantiles, bounded bins, lag and wake latency."""

from __future__ import annotations

import random

import pytest

from knell.checker.dispatch import run_pass
from knell.report.histogram import LogHistogram
from knell.report.series import RunSeries
from knell.stats import percentile
from tests.unit.checker.builder import History


@pytest.mark.parametrize("seed", range(5))
def test_quantiles_are_within_a_bucket_of_the_exact_percentile(seed: int) -> None:
    rng = random.Random(seed)
    values = [int(rng.lognormvariate(14, 1.5)) for _ in range(5000)]
    hist = LogHistogram()
    for v in values:
        hist.add(v)
    for q, got in zip((0.5, 0.95, 0.99, 1.0), hist.quantiles((0.5, 0.95, 0.99, 1.0)), strict=True):
        exact = percentile(values, q)
        assert exact is not None and got is not None
        assert abs(got - exact) <= 0.07 * exact, (q, got, exact)
    assert hist.quantiles([1.0]) == [float(max(values))]


def test_merged_histograms_equal_one_histogram() -> None:
    a, b, both = LogHistogram(), LogHistogram(), LogHistogram()
    for v in range(0, 100_000, 7):
        (a if v % 2 else b).add(v)
        both.add(v)
    a.merge(b)
    assert a.buckets == both.buckets and a.count == both.count and a.max == both.max
    assert LogHistogram().quantiles([0.5]) == [None]


def _busy(h: History, seconds: float) -> None:
    for step in range(int(seconds * 100)):
        seq = step + 1
        h.post("producer-1", "events", f"p:{seq}", seq)
        if step % 5 == 0:
            h.ack("consumer-1", "worker", "events", max(0, seq - 3))
        h.sleep(0.01)


def test_bins_stay_bounded_and_counts_survive_coarsening() -> None:
    h = History(step_ms=1)
    _busy(h, 30)
    series = RunSeries(max_bins=50)
    run_pass(h.events, [series])
    data = series.to_json()
    assert data["bins"] <= 50
    assert sum(data["ops"]["post"]["ok"]) == 3000
    assert data["latency_total"]["post"]["count"] == 3000
    assert data["latency_total"]["post"]["p50"] == pytest.approx(1.0, rel=0.07)  # 1 ms apart
    (lag,) = data["lag"]
    assert lag["handle"] == "worker" and lag["max"] == 3


def test_post_to_wake_latency_and_processes() -> None:
    h = History(step_ms=1)
    h.ok("waiter-1", "start", {"role": "waiter"})
    h.post("producer-1", "events", "p:1", 1)
    h.sleep(0.05)
    h.wake("waiter-1", "waiter-1", "events", 1, "producer-1")
    h.wake("waiter-1", "waiter-1", "events", 99, "producer-1")  # no such post
    inv = h.post_invoke("producer-1", "events", "p:2")
    h.post_info(inv, "\x1b[31mboom")
    series = RunSeries()
    run_pass(h.events, [series])
    data = series.to_json()
    assert data["wake_latency_total"]["count"] == 1
    assert data["wake_latency_total"]["max"] == pytest.approx(51.0, rel=0.01)
    assert data["wake_unmatched"] == 1
    procs = {p["name"]: p for p in data["processes"]}
    assert procs["producer-1"]["outcomes"] == {"ok": 1, "info": 1}
    assert procs["producer-1"]["errors"] == ["\\x1b[31mboom"]
    assert procs["waiter-1"]["role"] == "waiter"


def test_absurd_seqs_do_not_allocate() -> None:
    h = History()
    h.post("producer-1", "events", "p:1", 10**12)
    series = RunSeries()
    run_pass(h.events, [series])
    assert len(series._post_times.get("events", [])) < 10
