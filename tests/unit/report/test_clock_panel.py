"""The clock panel: each clock's offset over the run, drawn from clock-fault events alone.

The histories are handcrafted with the nemesis events the clock fault
kinds write (an apply's invoke, its completion naming the clocks moved
and the setting, a ``clock-reset`` per heal), and checked with the real
``check_run``, which writes every file of a run directory.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from knell.checker.wellformed import WellFormed
from knell.history import HistoryError
from knell.report.clocks import ClockSetting, clock_faults, clock_tracks, setting_of
from knell.runner import check_run
from tests.unit.checker.builder import NS, History
from tests.unit.report.conftest import CHANNEL, write_run

WORKERS = ["producer-1", "consumer-1", "consumer-2"]


def clock_event(
    h: History,
    f: str,
    target: str,
    fault: int,
    *,
    processes: list[str],
    store: bool = False,
    offset_s: float = 0.0,
    rate: float = 1.0,
    period_s: float | None = None,
    kind: str | None = None,
) -> None:
    """One clock setting as the nemesis records it: an apply is an
    operation of the nemesis (invoke, then its completion); a reset
    stands alone."""
    base: dict[str, Any] = {"target": target, "fault": fault, "kind": kind or f}
    if f != "clock-reset":
        # The runner writes what the fault is and touches with the apply's
        # invoke and again with its completion.
        base.update(
            effect="degraded",
            grace_s=0.0,
            radius={"processes": processes, "indirect": [], "stores": [], "links": []},
        )
        h.invoke("nemesis", f, base)
    value = {**base, "processes": processes, "store": store, "offset_s": offset_s, "rate": rate}
    if period_s is not None:
        value["period_s"] = period_s
    h.info("nemesis", f, value)


def clocked_history() -> History:
    """A valid run under every clock fault kind: consumer-1 skewed +30 s,
    the host (every worker and the store) jumped back 60 s, consumer-2's
    clock strobing by 0.5 s, and the store's clock running 3x (never reset
    before the history ends)."""
    h = History(step_ms=5)
    h.info("nemesis", "begin", {"seed": 1})
    for p in WORKERS:
        h.ok(p, "start", {"role": p.rsplit("-", 1)[0]})
    h.info("nemesis", "ready", {"pending": []})
    h.subscribe("consumer-1", "worker", CHANNEL, 0)
    clock_event(h, "clock-skew", "consumer-1", 0, processes=["consumer-1"], offset_s=30.0)
    h.post("producer-1", CHANNEL, "producer-1.1:1", 1)
    h.sleep(0.5)
    clock_event(h, "clock-jump", "host", 1, processes=WORKERS, store=True, offset_s=-60.0)
    h.consume("consumer-1", "worker", CHANNEL, [(1, "producer-1.1:1")])
    h.sleep(0.5)
    clock_event(h, "clock-reset", "consumer-1", 0, processes=["consumer-1"], kind="clock-skew")
    clock_event(h, "clock-reset", "host", 1, processes=WORKERS, store=True, kind="clock-jump")
    clock_event(
        h, "clock-strobe", "consumer-2", 2, processes=["consumer-2"], offset_s=0.5, period_s=0.01
    )
    clock_event(h, "clock-rate", "store", 3, processes=[], store=True, rate=3.0)
    h.sleep(0.5)
    clock_event(h, "clock-reset", "consumer-2", 2, processes=["consumer-2"], kind="clock-strobe")
    h.post("producer-1", CHANNEL, "producer-1.1:2", 2)
    h.consume("consumer-1", "worker", CHANNEL, [(2, "producer-1.1:2")])
    h.info("nemesis", "heal", {})
    h.drain("worker", {CHANNEL: 2})
    return h


@pytest.fixture(scope="module")
def clocked_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run(tmp_path_factory.mktemp("run"), clocked_history())
    outcome = check_run(run)
    assert outcome.report_problems == []
    assert outcome.verdict.problems == []
    return run


# -- the history is well formed ----------------------------------------------------------------


def _validate(h: History) -> None:
    list(WellFormed(Path("history.jsonl")).events(h.events))


def test_clock_fault_events_are_well_formed() -> None:
    _validate(clocked_history())  # raises on a refusal


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("offset_s", None, "value.offset_s is missing"),
        ("offset_s", "30s", "value.offset_s must be a number, got '30s'"),
        ("processes", "consumer-1", "value.processes must be a list"),
        ("store", 1, "value.store must be true or false, got 1"),
        ("rate", None, "value.rate is missing"),
    ],
)
def test_a_clock_setting_without_its_fields_is_refused(field: str, value: Any, said: str) -> None:
    h = clocked_history()
    event = next(e for e in h.events if e["f"] == "clock-skew" and e["type"] == "info")
    if value is None:
        del event["value"][field]
    else:
        event["value"][field] = value
    with pytest.raises(HistoryError) as caught:
        _validate(h)
    assert said in str(caught.value)
    assert f":{event['index'] + 1}: " in str(caught.value)  # the line


def test_an_apply_invoke_carries_no_setting_yet() -> None:
    h = History()
    clock_event(h, "clock-skew", "consumer-1", 0, processes=["consumer-1"], offset_s=1.0)
    assert "offset_s" not in h.events[0]["value"]
    _validate(h)


# -- the offsets over time -----------------------------------------------------------------------


def _settings(h: History) -> list[ClockSetting]:
    return [s for e in h.events if (s := setting_of(e)) is not None]


def test_processes_always_moved_together_share_a_track() -> None:
    tracks = clock_tracks(_settings(clocked_history()))
    labels = [t.label for t in tracks]
    # consumer-1 alone (skew, then the host jump), producer-1 only with the
    # host, consumer-2 with the host then its strobe, the store with the
    # host then its rate
    assert labels == ["consumer-1", "consumer-2", "producer-1", "store"]
    host = next(t for t in tracks if t.clocks == ("producer-1",))
    jump = host.settings[0].time
    assert host.offset_at(jump - 1) == 0.0
    assert host.offset_at(jump) == -60.0
    assert host.offset_at(host.settings[1].time) == 0.0


def test_a_host_wide_jump_alone_is_one_track() -> None:
    h = History()
    clock_event(h, "clock-jump", "host", 0, processes=WORKERS, store=True, offset_s=-5.0)
    (track,) = clock_tracks(_settings(h))
    assert track.clocks == ("consumer-1", "consumer-2", "producer-1", "store")


def test_a_rate_is_a_slope_from_the_moment_it_is_set() -> None:
    h = History()
    clock_event(h, "clock-rate", "store", 0, processes=[], store=True, rate=3.0)
    (track,) = clock_tracks(_settings(h))
    start = track.settings[0].time
    assert track.offset_at(start + 2 * NS) == pytest.approx(4.0)  # 2 s true, 6 s on the clock


def test_each_fault_is_paired_with_its_reset() -> None:
    faults = clock_faults(_settings(clocked_history()))
    assert [(f.kind, f.end is not None) for f in faults] == [
        ("clock-skew", True),
        ("clock-jump", True),
        ("clock-strobe", True),
        ("clock-rate", False),
    ]
    assert faults[1].whom == "host (producer-1, consumer-1, consumer-2, store)"
    assert faults[0].setting == "offset +30 s"
    assert faults[1].setting == "offset -60 s"
    assert faults[2].setting == "offset +0.5 s flipping with 0 every 10 ms"
    assert faults[3].setting == "rate x3"


# -- the report --------------------------------------------------------------------------------


def test_the_page_draws_the_clock_panel_beside_the_fault_bands(clocked_run: Path) -> None:
    page = (clocked_run / "index.html").read_text(encoding="utf-8")
    figure = page[page.index('<figure id="plot-clock">') :]
    figure = figure[: figure.index("</figure>")]
    (uri,) = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)"', figure)
    svg = base64.b64decode(uri).decode("utf-8")
    for label in ("consumer-1", "producer-1", "consumer-2", "store", "offset (s)"):
        assert label in svg
    table = page[page.index('<h2 id="clock">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr data-fault=") == 4
    assert "never reset" in table  # the store's rate outlived the history


def test_series_keeps_every_clock_setting(clocked_run: Path) -> None:
    series = json.loads((clocked_run / "series.json").read_text())
    assert [s["f"] for s in series["clock"]] == [
        "clock-skew",
        "clock-jump",
        "clock-reset",
        "clock-reset",
        "clock-strobe",
        "clock-rate",
        "clock-reset",
    ]


def test_report_md_has_one_line_per_clock_fault(clocked_run: Path) -> None:
    md = (clocked_run / "report.md").read_text(encoding="utf-8")
    lines = [line for line in md.splitlines() if line.startswith("- fault ")]
    assert len(lines) == 4
    assert re.fullmatch(
        r"- fault 0: clock-skew consumer-1: offset \+30 s, [\d.]+ s to [\d.]+ s \(1\.0\d\d s\)",
        lines[0],
    )
    assert lines[1].startswith("- fault 1: clock-jump host (producer-1, consumer-1, consumer-2")
    assert lines[3].endswith("s to never reset")
    assert "rate x3" in lines[3]
    # The run's fault count names every kind applied, not only process faults.
    faults = next(line for line in md.splitlines() if line.startswith("- faults: "))
    assert faults == "- faults: clock-jump 1, clock-rate 1, clock-skew 1, clock-strobe 1"


def test_a_run_without_clock_events_has_no_clock_panel(lossy_run: Path) -> None:
    page = (lossy_run / "index.html").read_text(encoding="utf-8")
    assert 'id="plot-clock"' not in page
    assert 'id="clock"' not in page
    assert "Clock faults" not in (lossy_run / "report.md").read_text(encoding="utf-8")
