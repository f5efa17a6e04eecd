"""The stream contract end to end: the reference SQLite bus is VALID on the
stream scenarios, and each stream mutant is caught on its scenario by the
check (and anomaly kind) that names its failure mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knell.buses.mutants import all_mutants
from tests.integration.conftest import knell

pytestmark = pytest.mark.integration

STREAM_MUTANTS = {
    name: m for name, m in all_mutants().items() if m.cls.__module__.endswith("mutants.stream")
}


def _checks(latest: Path) -> dict[str, dict[str, object]]:
    results = json.loads((latest / "results.json").read_text(encoding="utf-8"))
    checks: dict[str, dict[str, object]] = results["checks"]["checks"]
    return checks


@pytest.mark.parametrize("scenario", ["stream-kill-tailers", "stream-ring-overrun"])
def test_the_reference_bus_is_valid_on_the_stream_scenarios(scenario: str, tmp_path: Path) -> None:
    proc = knell("run", scenario, "--duration", "4s", "--reports", str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    latest = tmp_path / scenario / "latest"
    assert "- contract tested: stream" in (latest / "report.md").read_text(encoding="utf-8")
    checks = _checks(latest)
    for name in ("ring-tail", "ring-content", "ring-bound", "stream-kind"):
        assert checks[name]["valid"] is True, checks[name]
    counts = checks["ring-tail"]["counts"]
    assert isinstance(counts, dict) and counts["pages"] > 0 and counts["messages-shown"] > 0
    if scenario == "stream-ring-overrun":
        assert counts["fell-behind"] > 0  # the scenario does what it says: readers fall behind


def test_there_are_stream_mutants() -> None:
    expected = {
        "ring-skips-silently",
        "tail-after-inclusive",
        "ring-never-trims",
        "tail-reads-archive",
    }
    assert set(STREAM_MUTANTS) == expected


@pytest.mark.parametrize("name", sorted(STREAM_MUTANTS))
def test_each_stream_mutant_is_caught_by_its_check(name: str, tmp_path: Path) -> None:
    m = STREAM_MUTANTS[name]
    (scenario,) = m.scenarios
    proc = knell(
        "run", scenario, "--duration", "3s", "--bus", m.factory, "--reports", str(tmp_path),
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = _checks(tmp_path / scenario / "latest")
    for entry in m.killed_by:
        check, _, kind = entry.partition(":")
        assert checks[check]["valid"] is False, checks[check]
        counts = checks[check]["counts"]
        assert isinstance(counts, dict) and counts[kind] > 0, counts


def test_messages_the_ring_dropped_are_forgotten_and_their_return_still_caught(
    tmp_path: Path,
) -> None:
    """Long enough that the checker forgets what the ring dropped
    (knell.checker.stream.settle): the reference stays VALID with most of
    its messages forgotten, and a bus that hands a reader starting over the
    messages it dropped long ago (forgotten by then) is still caught."""
    valid = knell(
        "run", "stream-kill-tailers", "--duration", "20s", "--no-page",
        "--reports", str(tmp_path / "valid"), timeout=180,
    )  # fmt: skip
    assert valid.returncode == 0, valid.stdout + valid.stderr
    results = json.loads(
        (tmp_path / "valid" / "stream-kill-tailers" / "latest" / "results.json").read_text()
    )
    posted = results["checks"]["checks"]["ring-content"]["counts"]["compared"]
    assert results["forgetting"]["messages"] > 1000, (results["forgetting"], posted)
    broken = knell(
        "run", "stream-kill-tailers", "--duration", "20s", "--no-page",
        "--bus", STREAM_MUTANTS["tail-reads-archive"].factory,
        "--reports", str(tmp_path / "broken"), timeout=180,
    )  # fmt: skip
    assert broken.returncode == 1, broken.stdout + broken.stderr
    checks = _checks(tmp_path / "broken" / "stream-kill-tailers" / "latest")
    tail = checks["ring-tail"]
    assert tail["valid"] is False and tail["counts"]["first-regressed"] > 0, tail["counts"]
