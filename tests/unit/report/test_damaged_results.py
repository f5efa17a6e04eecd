"""A ``results.json`` that knell could not have written is bad input (exit 3).

The page builder catches whatever fails while drawing and says so with
exit 4 (a defect of knell's page). A hand-edited or damaged results.json,
``"checks": "x"`` or ``"seconds": null``, made every such page "a bug in
knell" (found by ``tests/slow/test_cli_fuzz.py``); it is the file's fault,
refused before drawing, naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knell.cli import main
from knell.report.rundata import ReportError, load_run


def _results() -> dict[str, Any]:
    return {
        "scenario": "s",
        "valid": True,
        "verdict": "valid",
        "checks": {
            "valid": True,
            "events": 10,
            "seconds": 0.5,
            "config": {},
            "problems": [],
            "contracts": ["broadcast"],
            "not_applicable": [],
            "checks": {
                "no-loss": {
                    "name": "no-loss",
                    "valid": True,
                    "counts": {},
                    "anomalies": [],
                    "metrics": {},
                    "unknown_reason": None,
                }
            },
        },
        "stats": {"events": 10, "seconds": 1.5, "crashes": []},
        "windows": [],
        "torn": [],
        "expect": None,
        "time": {"first": 1, "last": 2},
    }


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data[key]
    data[last] = value


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("checks", "x", "checks: is str, expected an object"),
        ("checks.seconds", None, "checks.seconds: is NoneType, expected a number"),
        ("checks.seconds", True, "checks.seconds: is bool"),
        ("checks.problems", 7, "checks.problems: is int, expected a list"),
        ("checks.checks", [], "checks.checks: is list, expected an object"),
        ("checks.checks.no-loss", "x", "checks.checks.no-loss: is str"),
        ("checks.checks.no-loss.anomalies", [1], "checks.checks.no-loss.anomalies[0]"),
        ("stats.seconds", "1s", "stats.seconds: is str, expected a number"),
        ("checks.checks.no-loss.counts", {"lost": "[/x]"}, "no-loss.counts.lost: expected an"),
        ("windows", {}, "windows: is dict, expected a list"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(
    path: str, value: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results()
    _set(results, path, value)
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    with pytest.raises(ReportError) as caught:
        load_run(tmp_path, write_series=False)
    assert named in str(caught.value) and "results.json" in str(caught.value)
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path), "--no-index"])
    assert done.value.code == 3
    assert named in capsys.readouterr().err


def test_the_shape_knell_writes_is_read(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps(_results()), encoding="utf-8")
    assert load_run(tmp_path, write_series=False).results["checks"]["events"] == 10


CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "reference--quickstart"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lzma

    run = tmp_path_factory.mktemp("checked")
    lines = lzma.decompress((CORPUS / "history.jsonl.xz").read_bytes()).splitlines(True)
    (run / "history.jsonl").write_bytes(b"".join(lines[:2000]))
    (run / "scenario.json").write_bytes((CORPUS / "scenario.json").read_bytes())
    with pytest.raises(SystemExit):
        main(["check", str(run)])
    return run


@pytest.mark.parametrize(
    ("key", "value"), [("bins", -1), ("bins", "x"), ("bin_s", None), ("t0", [])]
)
def test_a_damaged_series_json_is_rebuilt_from_the_history(
    key: str, value: Any, checked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """series.json is the page's cache of the history's figures: a damaged
    one failed the plots (exit 4); it is rebuilt like a missing one."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(checked, run)
    series = json.loads((run / "series.json").read_text(encoding="utf-8"))
    series[key] = value
    (run / "series.json").write_text(json.dumps(series), encoding="utf-8")
    with pytest.raises(SystemExit) as done:
        main(["report", str(run), "--no-index"])
    assert done.value.code == 0, capsys.readouterr()
    assert f"not a series.json knell wrote ({key}" in (run / "index.html").read_text("utf-8")
    assert json.loads((run / "series.json").read_text(encoding="utf-8"))[key] != value


@pytest.mark.parametrize("damage", ["short", "nested"])
def test_a_series_json_the_plots_cannot_draw_is_drawn_from_the_history(
    damage: str, checked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fields of the right type, figures that cannot be drawn (a list cut
    short, a number that became a list): the plots failed, exit 4."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(checked, run)
    series = json.loads((run / "series.json").read_text(encoding="utf-8"))
    if damage == "short":
        series["handled"] = series["handled"][:-1]
    else:
        series["handled"] = [[n] for n in series["handled"]]
    (run / "series.json").write_text(json.dumps(series), encoding="utf-8")
    with pytest.raises(SystemExit) as done:
        main(["report", str(run), "--no-index"])
    assert done.value.code == 0, capsys.readouterr()
    assert "drawn from history.jsonl instead" in (run / "index.html").read_text("utf-8")
