"""Verdicts unchanged, as a test: re-check every stored history of the
corpus with today's checks and compare with the golden results."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from knell.checker import CheckConfig, check_events
from knell.history import HistoryReader
from knell.report import RunStats
from knell.report.describe import forget_after

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
RUNS = sorted(p for p in CORPUS.iterdir() if (p / "history.jsonl.xz").exists())


def _as_recorded(result: dict[str, Any], golden: dict[str, Any]) -> dict[str, Any]:
    """A check's result, without what was added since the golden file was
    recorded: counts of anomaly kinds it did not have then, provided they are
    zero (a new kind that fires on an old history is a changed verdict)."""
    counts = dict(result["counts"])
    for key in set(counts) - set(golden["counts"]):
        if counts[key] == 0:
            del counts[key]
    return {**result, "counts": counts}


def test_corpus_is_there() -> None:
    assert len(RUNS) >= 17


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_stored_history_checks_as_recorded(run: Path, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    golden = json.loads(lzma.decompress((run / "golden.json.xz").read_bytes()))
    scenario = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    stats = RunStats()
    verdict = check_events(
        HistoryReader(history), CheckConfig(wake_bound=scenario["wake_bound"]), extra=[stats]
    )
    got = json.loads(json.dumps({n: c.to_json() for n, c in verdict.checks.items()}, default=str))
    for name, expected in golden["checks"].items():
        assert _as_recorded(got[name], expected) == expected, f"{run.name}: check {name} changed"
    assert verdict.valid == golden["valid"]
    stats.close(verdict.events, verdict.first_time, verdict.last_time)
    recorded = json.loads(json.dumps(stats.to_json(), default=str))
    added = {k: v for k, v in recorded.items() if k not in golden["stats"]}
    assert not any(added.values()), added  # new figures may only be empty on old histories
    assert {k: v for k, v in recorded.items() if k in golden["stats"]} == golden["stats"]


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_stored_history_is_judged_the_same_when_settled_messages_are_forgotten(
    run: Path, tmp_path: Path
) -> None:
    """Forgetting (knell.checker.settle) with a horizon of half a second, far
    shorter than a run's (so most messages are forgotten on these short
    histories), changes no check's verdict and no anomaly it reports."""
    history = tmp_path / "history.jsonl"
    history.write_bytes(lzma.decompress((run / "history.jsonl.xz").read_bytes()))
    golden = json.loads(lzma.decompress((run / "golden.json.xz").read_bytes()))
    scenario = json.loads((run / "scenario.json").read_text(encoding="utf-8"))
    after = None if forget_after(scenario) is None else 0.5
    config = CheckConfig(wake_bound=scenario["wake_bound"], forget_after=after)
    verdict = check_events(HistoryReader(history), config)
    assert verdict.valid == golden["valid"]
    for name, expected in golden["checks"].items():
        got = verdict.checks[name]
        assert got.valid == expected["valid"], f"{run.name}: check {name} changed"
        kinds = sorted(a.kind for a in got.anomalies)
        assert kinds == sorted(a["kind"] for a in expected["anomalies"]), name
    if after is None:  # a join at the start: nothing may be forgotten
        assert verdict.forgetting is None
    elif golden["valid"] is True:  # every VALID stored run settles most of its messages
        assert verdict.forgetting["messages"] > 0, run.name
