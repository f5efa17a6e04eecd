"""The reports index, the replay line, live progress and the matrix and bench pages."""

from __future__ import annotations

import io
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console

from knell.bench.html import write_bench_html
from knell.cli.progress import RunProgress
from knell.matrix.html import write_matrix_html
from knell.matrix.model import Cell, Matrix, MutantRow
from knell.report.index import write_index
from knell.report.replay import replay_command
from knell.tail import HistoryTail


def test_the_index_lists_runs_newest_first(lossy_run: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    shutil.copytree(lossy_run, reports / "lossy" / lossy_run.name)
    older = reports / "lossy" / "20250101T000000.000000Z"
    shutil.copytree(lossy_run, older)
    (older / "summary.json").unlink()  # an old run: read from results.json
    (reports / "lossy" / "latest").symlink_to(lossy_run.name)
    page = write_index(reports).read_text(encoding="utf-8")
    assert page.count('class="pill INVALID"') == 2
    assert page.index(lossy_run.name) < page.index(older.name)
    assert f'href="./lossy/{lossy_run.name}/index.html"' in page
    assert "no-loss (1)" in page


def test_replay_quotes_every_word() -> None:
    line = replay_command(
        {"name": "q", "seed": -3, "duration": 2.5, "bus": "exec:node a b.js"}, "/r/x y", "q.toml"
    )
    assert line == (
        "knell run q.toml --seed -3 --duration 2.5s --bus 'exec:node a b.js' "
        "--schedule '/r/x y/schedule.json'"
    )


def test_history_tail_returns_whole_lines_only(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    part = folder / "producer-1.1.jsonl"
    part.write_bytes(b'{"f":"post","type":"ok"}\n{"f":"po')
    tail = HistoryTail(folder)
    assert [e["f"] for e in tail.poll()] == ["post"]
    with open(part, "ab") as fh:
        fh.write(b'st","type":"fail"}\n')
    assert [e["type"] for e in tail.poll()] == ["fail"]
    assert tail.poll() == []


def test_progress_says_faults_as_they_fire_and_heal() -> None:
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=200), plain=True)
    progress.role_of = {"consumer-1": "consumer"}
    progress._apply_fs, progress._heal_fs = {"kill": "kill"}, {"restart": "kill"}
    t = 10**18
    progress.observe({"process": "nemesis", "f": "ready", "time": t, "type": "info"})
    # A fault's invoke says nothing: the line is for the fault once applied (its info).
    assert progress.observe(
        {"process": "nemesis", "f": "kill", "time": t + 10**9, "type": "invoke",
         "value": {"target": "consumer-1", "fault": 3, "kind": "kill", "effect": "down"}}
    ) is None and progress.fired == 0  # fmt: skip
    fired = progress.observe(
        {"process": "nemesis", "f": "kill", "time": t + 10**9, "type": "info",
         "value": {"target": "consumer-1\x1b[2J", "fault": 3, "kind": "kill", "effect": "down"}}
    )  # fmt: skip
    assert fired == "[  1.00 s] fault 3: kill consumer-1\\x1b[2J (down)"
    assert progress.open
    progress.observe(
        {"process": "nemesis", "f": "restart", "time": t + 2 * 10**9, "type": "info",
         "value": {"target": "consumer-1\x1b[2J", "fault": 3, "kind": "kill"}}
    )  # fmt: skip
    assert not progress.open and progress.healed == 1
    for type_ in ("ok", "ok", "info"):
        progress.observe({"process": "consumer-1", "f": "fetch", "type": type_})
    role = progress.roles["consumer"]
    assert (role.ok, role.info) == (2, 1)


def test_a_step_within_a_fault_in_force_is_said_but_not_fired_again() -> None:
    """A replica-lag that ends in a failover records the failover under the
    failover kind's own f, with its own fault number: one fault, not two."""
    progress = RunProgress(Console(file=io.StringIO(), width=200), plain=True)
    progress._apply_fs = {"replica-lag": "replica-lag", "failover": "failover"}
    progress._heal_fs = {"replica-lag-done": "replica-lag", "failover-done": "failover"}
    t = 10**18
    progress.observe({"process": "nemesis", "f": "ready", "time": t, "type": "info"})
    value = {"target": "store", "fault": 0, "kind": "replica-lag", "effect": "degraded"}
    progress.observe({"process": "nemesis", "f": "replica-lag", "time": t + 10**9,
                      "type": "info", "value": value})  # fmt: skip
    step = progress.observe({"process": "nemesis", "f": "failover", "time": t + 2 * 10**9,
                             "type": "info", "value": {**value, "new": "pg-1"}})  # fmt: skip
    assert step == "[  2.00 s] fault 0: failover store (in replica-lag store)"
    assert progress.fired == 1 and progress.open
    progress.observe({"process": "nemesis", "f": "replica-lag-done", "time": t + 3 * 10**9,
                      "type": "info", "value": value})  # fmt: skip
    assert progress.healed == 1 and not progress.open


def test_matrix_page_links_every_run(tmp_path: Path, lossy_run: Path) -> None:
    out = tmp_path / "matrix"
    run = out / "runs" / "reference" / "lossy" / lossy_run.name
    shutil.copytree(lossy_run, run)
    cell = Cell("reference", "lossy", seed=1, valid=False, run_dir=run, fired={"no-loss": ["lost"]})
    matrix = Matrix(
        rows=[MutantRow("reference", None, [cell])],
        scenarios=["lossy"],
        started=datetime(2026, 11, 30, tzinfo=timezone.utc),
        wall=12.0,
        duration=5.0,
        jobs=2,
        command="knell matrix <script>",
    )
    assert write_matrix_html(matrix, out) == []
    page = (out / "matrix.html").read_text(encoding="utf-8")
    assert f'href="./runs/reference/lossy/{lossy_run.name}/index.html"' in page
    assert "knell matrix &lt;script&gt;" in page and "FAIL" in page


def test_bench_page(tmp_path: Path) -> None:
    data = {
        "started": "2026-11-30T00:00:00+00:00", "short": True, "seconds": 3.0,
        "host": {"python": "3.11", "sqlite": "3.40", "cpus": 2, "loadavg": [1, 1, 1]},
        "rows": [
            {"section": "report", "name": "draw", "value": 2.5, "unit": "s", "baseline": 1.0,
             "baseline_name": "parse", "ratio": 2.5, "goal": "< 30 s", "met": True, "note": "",
             "extra": {}}
        ],
        "errors": {},
    }  # fmt: skip
    assert write_bench_html(tmp_path, data) == []
    page = (tmp_path / "bench.html").read_text(encoding="utf-8")
    assert "2.5 s" in page and 'class="pill VALID">yes' in page
    json.dumps(data)
