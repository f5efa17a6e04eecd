"""A report is bounded by bins and anomalies, never by events.

The acceptance figure (a million events drawn in under 30 s, a page under
10 MB) is measured by ``knell bench --section report`` (docs/reports.md);
this test checks the property behind it on smaller histories: four times
the events make a page that is hardly bigger, and the page of a history
with anomalies holds their timelines.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from knell.bench.synth import write_history
from knell.report.html import render_run
from knell.runner import check_run

pytestmark = pytest.mark.integration

MB = 1024 * 1024


def _draw(folder: Path, events: int) -> tuple[int, float, str]:
    folder.mkdir()
    write_history(folder / "history.jsonl", events, anomalies=10)
    outcome = check_run(folder)
    assert outcome.verdict.valid is False and outcome.report_problems == []
    started = time.perf_counter()
    result = render_run(folder)
    assert result.problems == []
    return result.bytes, time.perf_counter() - started, result.path.read_text(encoding="utf-8")


def test_the_page_grows_with_anomalies_not_events(tmp_path: Path) -> None:
    small, small_s, _ = _draw(tmp_path / "small", 10_000)
    large, large_s, page = _draw(tmp_path / "large", 40_000)
    assert large < 10 * MB
    assert large < 1.5 * small, (small, large)
    assert 'id="timeline-' in page and page.count('<img src="data:image/svg+xml') == 4
    print(
        f"\n10k events: {small / MB:.2f} MB in {small_s:.1f} s;"
        f" 40k: {large / MB:.2f} MB in {large_s:.1f} s"
    )
