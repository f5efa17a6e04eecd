"""Verdicts unchanged, as a test: re-check every stored history of the
corpus with today's checks and compare with the golden results."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from knell.checker import CheckConfig, check_events
from knell.history import HistoryReader
from knell.report import RunStats

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
RUNS = sorted(p for p in CORPUS.iterdir() if (p / "history.jsonl.xz").exists())


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
        assert got[name] == expected, f"{run.name}: check {name} changed"
    assert verdict.valid == golden["valid"]
    stats.close(verdict.events, verdict.first_time, verdict.last_time)
    assert json.loads(json.dumps(stats.to_json(), default=str)) == golden["stats"]
