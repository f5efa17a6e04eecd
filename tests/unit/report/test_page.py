"""The run page: what it shows, that bus text stays text, and that drawing never decides."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from knell.report import html as report_html
from knell.report import plots
from knell.report.html import render_run
from knell.runner import check_run
from tests.unit.checker.builder import History
from tests.unit.report.conftest import CHANNEL, HOSTILE, lossy_history, write_run


def _page(run: Path) -> str:
    return (run / "index.html").read_text(encoding="utf-8")


def test_the_page_leads_with_the_verdict_and_the_failed_check(lossy_run: Path) -> None:
    page = _page(lossy_run)
    assert "<title>knell: lossy is INVALID</title>" in page
    assert re.search(r'<span class="word" id="verdict">INVALID</span>', page)
    assert "no-loss found 1 anomaly" in page
    assert 'id="anomaly-1" data-check="no-loss" data-kind="lost"' in page


def test_no_script_no_fetch_and_a_policy_that_forbids_both(lossy_run: Path) -> None:
    page = _page(lossy_run)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script" not in page.lower()
    # nothing is loaded from anywhere: images are data URIs, styles inline
    assert not re.search(r'\b(?:src|href)="(?:https?:)?//', page)
    assert "<link" not in page
    for src in re.findall(r'<img src="([^"]*)"', page):
        assert src.startswith("data:image/svg+xml;base64,")


def test_hostile_ids_are_text_everywhere(lossy_run: Path) -> None:
    page = _page(lossy_run)
    assert "<script>document" not in page and "<h1 id=verdict>" not in page
    escaped = str(escape("producer-1.1:3<script>document.title='pwned'"))
    assert escaped in page  # shown, escaped
    assert "\x1b" not in page  # ANSI escapes are shown as \x1b, never sent
    md = (lossy_run / "report.md").read_text(encoding="utf-8")
    assert "\x1b" not in md
    lines = md.splitlines()
    assert not [line for line in lines if line.startswith("# knell: quickstart")]
    assert not [line for line in lines if line.startswith("verdict: VALID")]
    import xml.etree.ElementTree as ET

    ET.parse(lossy_run / "junit.xml")  # a control character would make it unreadable


def test_the_anomaly_names_its_message_and_draws_its_life(lossy_run: Path) -> None:
    page = _page(lossy_run)
    results = json.loads((lossy_run / "results.json").read_text())
    (anomaly,) = results["checks"]["checks"]["no-loss"]["anomalies"]
    t0 = results["time"]["first"]
    svg = page[page.index('id="timeline-1"') :]
    svg = svg[: svg.index("</svg>")]
    for event in anomaly["witness"]:
        t = round((event["time"] - t0) / 1e9, 6)
        assert f'data-index="{event["index"]}" data-t="{t}"' in svg
    assert "posted by producer-1#1" in page
    assert str(escape(HOSTILE[:40])) in page


def test_windows_open_at_and_just_before_onset_are_named(tmp_path: Path) -> None:
    run = write_run(tmp_path, lossy_history(early_faults=True))
    check_run(run)
    results = json.loads((run / "results.json").read_text())
    (anomaly,) = results["checks"]["checks"]["no-loss"]["anomalies"]
    onset = min(e["time"] for e in anomaly["witness"])

    def until(w: dict) -> float:
        return float("inf") if w["end"] is None else w["end"] + w["grace_s"] * 1e9

    in_force = {w["fault"] for w in results["windows"] if w["start"] <= onset <= until(w)}
    before = {w["fault"] for w in results["windows"] if until(w) < onset}
    assert in_force == {7} and before == {5}
    page = _page(run)
    section = page[page.index('id="anomaly-1"') :]
    section = section[: section.index("</section>")]
    opened = section[section.index("open-at-onset") : section.index('class="recent"')]
    recent = section[section.index('class="recent"') :]
    assert re.findall(r'data-fault="(\d+)"', opened) == ["7"]
    assert "kill consumer-2 (fault 7, down," in opened and "never healed" not in opened
    assert "kill consumer-2 (fault 5, down," in recent


def test_a_plot_that_fails_is_shown_and_changes_nothing(
    lossy_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(lossy_run, run)
    before = (run / "results.json").read_bytes()

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("the plot broke <b>here</b>")

    monkeypatch.setattr(plots, "_latency", broken)
    result = render_run(run)
    assert result.problems == ["Operation latency plot: RuntimeError: the plot broke <b>here</b>"]
    page = _page(run)
    assert 'id="render-problems"' in page
    assert "the plot broke &lt;b&gt;here&lt;/b&gt;" in page
    assert page.count("<img src=") == 2  # throughput and lag still drawn (no doorbell here)
    assert (run / "results.json").read_bytes() == before


def test_a_page_that_cannot_be_built_falls_back_and_keeps_the_verdict(
    lossy_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(lossy_run, run)

    def broken(*_a: object, **_k: object) -> int:
        raise TypeError("template exploded")

    monkeypatch.setattr(report_html, "write_page", broken)
    result = render_run(run)
    assert any("template exploded" in p for p in result.problems)
    page = _page(run)
    assert "<span id=verdict>INVALID</span>" in page and "template exploded" in page
    assert (run / "render-error.txt").read_text().startswith("Traceback")


def test_a_page_error_quoting_a_store_url_is_kept_without_its_password(
    lossy_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(lossy_run, run)
    secret = "Sekr1t-of-the-store"

    def broken(*_a: object, **_k: object) -> int:
        raise TypeError(f"cannot draw postgresql://knell:{secret}@127.0.0.1:5432/postgres")

    monkeypatch.setattr(report_html, "write_page", broken)
    result = render_run(run)
    assert [p for p in result.problems if secret in p] == []
    for name in ("render-error.txt", "index.html"):
        text = (run / name).read_text(encoding="utf-8")
        assert secret not in text and "knell:***@127.0.0.1" in text, name


def test_check_run_reports_render_problems_without_changing_the_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_run(tmp_path, lossy_history())

    def broken(*_a: object, **_k: object) -> None:
        raise ValueError("no page today")

    monkeypatch.setattr("knell.report.page.build_page", broken)
    outcome = check_run(run)
    assert outcome.exit_code == 1 and outcome.verdict.valid is False
    assert any("no page today" in p for p in outcome.report_problems)


def test_an_old_run_without_series_is_drawn_from_its_history(
    lossy_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(lossy_run, run)
    (run / "series.json").unlink()
    result = render_run(run)
    assert result.problems == []
    assert (run / "series.json").exists()
    assert "rebuilt from history.jsonl" in _page(run)


def test_the_header_names_the_bus_and_store_in_words_without_a_password(
    tmp_path: Path,
) -> None:
    """The header once showed the store table as a dict repr cut mid-way
    (and the bus line repeated it); it shows the kind, where it lived, and
    an existing server's URL with its password dropped."""
    store = {
        "kind": "redis",
        "provider": "private",
        "url": "redis://knell:s3cret-pw@db.example:6379/0?password=other-pw",
        "settings": {"appendfsync": "always"},
    }
    run = write_run(tmp_path, lossy_history(), {"store": store, "bus": None})
    check_run(run)
    page = _page(run)
    meta = dict(re.findall(r"<span>([^<:]*): <b>([^<]*)</b></span>", page))
    assert meta.get("bus") == "reference redis bus", meta
    assert meta.get("store") == "redis at redis://knell:***@db.example:6379/0?password=***"
    assert "{" not in meta["store"] and "{" not in meta["bus"]
    for text in (page, (run / "report.md").read_text(encoding="utf-8")):
        assert "s3cret-pw" not in text and "other-pw" not in text
    assert "store: redis at redis://knell:" in (run / "report.md").read_text(encoding="utf-8")


def test_a_private_store_and_a_named_bus_read_as_words() -> None:
    from knell.report.describe import describe_bus, describe_store

    assert describe_store("sqlite") == "sqlite (private to the run)"
    assert describe_store({"kind": "postgres", "provider": "compose"}) == (
        "postgres (containers, compose)"
    )
    assert describe_bus({"bus": "knell.buses.mutants:stale_ack_regresses"}) == (
        "knell.buses.mutants:stale_ack_regresses"
    )
    assert describe_store({"kind": "redis", "url": "redis://:pw@h:1"}) == (
        "redis at redis://:***@h:1"
    )


def test_checks_with_nothing_to_judge_here_are_counted_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broadcast run once showed the queue and at-most-once checks as
    VALID with zero counts and counted them as passed; they are listed as
    not applicable in results.json, report.md, the page and the terminal."""
    from knell.cli import main

    roles = {"process": [{"role": "producer"}, {"role": "consumer"}]}
    run = write_run(tmp_path, lossy_history(), roles)
    with pytest.raises(SystemExit):
        main(["check", str(run)])
    said = capsys.readouterr().out
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    apart = results["checks"]["not_applicable"]
    assert "lease-exclusive" in apart and "at-most-once" in apart and "no-loss" not in apart
    assert results["checks"]["contracts"] == ["broadcast"]
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "| lease-exclusive |" not in report and "| no-loss |" in report
    assert (
        f"{len(apart)} not applicable (they judge the at-most-once and queue and stream" in report
    )
    # a broadcast run without SSE tailers: tail-continuity has nothing to judge
    assert "tail-continuity" in apart
    assert "tail-continuity judges tailer processes, and it has none" in report
    page = _page(run)
    assert page.count('<span class="pill NA">not applicable</span>') == len(apart)
    assert f"{len(apart)} check(s) not applicable" in page
    judged = len(results["checks"]["checks"]) - len(apart)
    assert f"checks: {judged} judged; {len(apart)} not applicable" in said
    junit = (run / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("not applicable: its contract is not tested") == len(apart) - 1
    assert junit.count("not applicable: its role is not tested") == 1


def test_a_valid_run_counts_only_the_checks_that_apply(tmp_path: Path) -> None:
    from knell.report.page import CheckRow, _summary

    rows = [
        CheckRow("no-loss", "VALID", 0, 0, "", ""),
        CheckRow("lease-exclusive", "VALID", 0, 0, "", "", applicable=False),
    ]
    summary = _summary("VALID", rows, [])
    assert summary[0] == "all 1 checks that apply passed on a history that proves something"
    assert "1 check(s) not applicable" in summary[1]


def test_a_failover_run_shows_the_primary_lane_and_column(tmp_path: Path) -> None:
    """Which node served each witness event, and the primary lane at a glance."""
    from tests.unit.report.conftest import lossy_history

    h = lossy_history()
    h.events.insert(
        len(h.events) // 2,
        {**h.events[len(h.events) // 2], "process": "nemesis", "incarnation": 1,
         "type": "info", "f": "failover",
         "value": {"old": "pg-0", "new": "pg-1", "how": "kill", "old_state": "dead"}},
    )  # fmt: skip
    for number, event in enumerate(h.events):
        event["index"] = number
    run = write_run(tmp_path, h)
    check_run(run)
    page = _page(run)
    assert "<th>primary</th>" in page
    assert "<td>pg-0</td>" in page or "<td>pg-1</td>" in page
    assert 'class="lane primary"' in page and ">pg-1</text>" in page
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "## Primaries (replicated store)" in md and "| primary |" in md


def test_a_run_without_failover_has_no_primary_column(lossy_run: Path) -> None:
    page = _page(lossy_run)
    assert "<th>primary</th>" not in page and 'class="lane primary"' not in page


def test_a_kind_found_after_a_flood_is_shown_in_both_reports(tmp_path: Path) -> None:
    """60 out-of-order pages fill the ordering check's log (50) before its
    one page below ``after``: that kind still gets a section in report.md
    and on the page, beside the flood's early, midway and late ones."""
    h = History(step_ms=5)
    h.info("nemesis", "begin", {"seed": 1})
    h.ok("consumer-1", "start", {"role": "consumer"})
    h.info("nemesis", "ready", {"pending": []})
    for i in range(60):
        h.fetch("consumer-1", "w", CHANNEL, None, [(2, f"b{i}"), (1, f"a{i}")])
    h.fetch("consumer-1", "w", CHANNEL, 5, [(3, "late")])
    h.info("nemesis", "heal", {})
    run = write_run(tmp_path, h)
    outcome = check_run(run)
    ordering = outcome.verdict.checks["ordering"]
    assert ordering.counts["fetch-out-of-order"] == 60
    assert [a.kind for a in ordering.anomalies].count("fetch-below-after") == 1
    md = (run / "report.md").read_text(encoding="utf-8")
    assert md.count("### ordering: fetch-below-after") == 1
    assert md.count("### ordering: fetch-out-of-order") == 9
    page = _page(run)
    assert page.count('data-check="ordering" data-kind="fetch-below-after"') == 1
    assert page.count('data-check="ordering" data-kind="fetch-out-of-order"') == 9
