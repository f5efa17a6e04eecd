"""The soak's cost from its samples: memory judged after warm-up only, disk
as a rate over the run directory without the bus's store, and the one line
a soak ends with."""

from __future__ import annotations

import json
from pathlib import Path

from knell.soak_telemetry import (
    DISK_BOUND_PER_HOUR,
    MAX_SAMPLES,
    SOAK_FILE,
    Sample,
    SoakTelemetry,
    dir_bytes,
    summarize,
    summary_line,
    warm_up,
)

MB = 10**6


def _series(rss: list[int], *, every: float = 2.0, disk_step: int = 0) -> list[Sample]:
    return [
        Sample(t=i * every, rss=r, disk=10 * MB + i * disk_step, store=4 * MB, events=100 * i,
               lag=0.5)
        for i, r in enumerate(rss)
    ]  # fmt: skip


def test_warm_up_is_a_fifth_of_the_soak_within_its_bounds() -> None:
    assert warm_up(20) == 10  # at least 10 s
    assert warm_up(60) == 12
    assert warm_up(600) == 120
    assert warm_up(24 * 3600) == 600  # at most 10 min


def test_memory_growth_during_warm_up_does_not_count() -> None:
    # 60 s: warm-up 12 s; RSS doubles in the first 10 s, then stays within 10 %
    rss = [50 * MB, 70 * MB, 90 * MB, 100 * MB, 100 * MB, 100 * MB] + [100 * MB] * 10 + [110 * MB]
    rss += [108 * MB] * (31 - len(rss))
    summary = summarize(_series(rss))
    assert summary["warm_up"] == 12
    assert summary["rss_min"] == 100 * MB and summary["rss_max"] == 110 * MB
    assert summary["rss_growth"] == 0.1 and summary["rss_flat"] is True


def test_memory_that_keeps_growing_is_not_flat() -> None:
    summary = summarize(_series([100 * MB + i * 2 * MB for i in range(31)]))
    assert summary["rss_flat"] is False
    assert summary["rss_growth"] > 0.2
    assert "NOT flat" in summary_line(summary)


def test_disk_is_a_rate_of_knells_files_held_against_the_bound() -> None:
    # 1 MB every 2 s after warm-up is 1.8 GB an hour: over the bound
    summary = summarize(_series([100 * MB] * 31, disk_step=MB))
    assert summary["disk_per_hour"] == 1800 * MB
    assert summary["disk_kept"] is False
    assert "OVER its bound" in summary_line(summary)
    # the store's bytes are the bus's: they never count
    grown = [
        Sample(t=i * 2.0, rss=MB, disk=10 * MB + i * MB, store=4 * MB + i * MB, events=0, lag=None)
        for i in range(31)
    ]
    summary = summarize(grown)
    assert summary["disk_per_hour"] == 0 and summary["disk_kept"] is True
    assert summary["disk_bytes"] == 6 * MB and summary["store_bytes"] == 34 * MB
    assert summary["disk_bound_per_hour"] == DISK_BOUND_PER_HOUR


def test_a_soak_shorter_than_its_warm_up_is_not_judged_on_memory() -> None:
    summary = summarize(_series([MB, 2 * MB, 3 * MB]))  # 4 s
    assert summary["rss_flat"] is None and summary["rss_growth"] is None
    assert summary["disk_kept"] is True  # the rate over what there is
    assert "RSS not judged" in summary_line(summary)
    empty = summarize([])
    assert empty["rss_flat"] is None and empty["disk_kept"] is None and empty["events"] == 0


def test_dir_bytes_counts_allocated_bytes_under_a_folder(tmp_path: Path) -> None:
    assert dir_bytes(tmp_path / "absent") == 0
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_bytes(b"x" * 100_000)
    (tmp_path / "g").write_bytes(b"y" * 10)
    counted = dir_bytes(tmp_path)
    assert 100_010 <= counted <= 100_010 + 3 * 8192


def test_telemetry_samples_the_checker_process_and_writes_soak_json(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "bus.db").write_bytes(b"z" * 50_000)
    checked = iter(range(0, 10_000, 100))
    telemetry = SoakTelemetry(tmp_path, lambda: (next(checked), 0.25), every=0.01)
    telemetry.start()
    (tmp_path / "history.part").write_bytes(b"h" * 20_000)
    summary = telemetry.stop()
    written = json.loads((tmp_path / SOAK_FILE).read_text())
    assert written["summary"] == summary
    samples = written["samples"]
    assert len(samples) >= 2 and samples[-1]["lag"] is None  # the run is over: no lag
    assert all(s["rss"] > 1 * MB for s in samples)  # this very process
    assert samples[-1]["store"] >= 50_000 and samples[-1]["disk"] >= 70_000
    assert summary["events"] == samples[-1]["events"] > 0
    assert summary["lag_max"] == 0.25


def test_a_long_soak_keeps_a_bounded_series_over_its_whole_span(tmp_path: Path) -> None:
    """The series lives in the process whose memory it measures: past
    MAX_SAMPLES it is thinned (every other sample) and the interval doubles."""
    telemetry = SoakTelemetry(tmp_path, lambda: (0, None), every=2.0)
    for _ in range(MAX_SAMPLES):
        telemetry.sample()
    assert len(telemetry.samples) == MAX_SAMPLES and telemetry.every == 2.0
    telemetry.sample()
    assert len(telemetry.samples) == MAX_SAMPLES // 2 + 1 and telemetry.every == 4.0
    assert telemetry.samples[0].t <= telemetry.samples[1].t  # the first is kept


def test_the_final_phase_is_a_fixed_cost_reported_apart_not_growth() -> None:
    # flat while the scenario ran (60 s), then the final phase's one peak
    rss = [100 * MB] * 31 + [160 * MB, 120 * MB]
    samples = _series(rss)
    judged = summarize(samples, final=60.0)
    assert judged["rss_flat"] is True and judged["rss_max"] == 100 * MB
    assert judged["rss_final"] == 160 * MB and judged["final_phase"] == 60.0
    # without the mark the same series is not flat: the mark is what sets it apart
    assert summarize(samples)["rss_flat"] is False
    # growth while the scenario ran still counts, whatever the final phase did
    growing = _series([100 * MB + i * 2 * MB for i in range(31)] + [100 * MB])
    assert summarize(growing, final=60.0)["rss_flat"] is False


def test_a_check_that_forgets_is_judged_after_its_live_state_settled() -> None:
    # a 10 s horizon: the live state fills for one, the arenas for a few more
    assert warm_up(60, 10.0) == 40
    assert warm_up(600, 10.0) == 120  # a fifth of the soak is longer
    assert warm_up(24 * 3600, 10.0) == 600
    assert warm_up(60, None) == 12
