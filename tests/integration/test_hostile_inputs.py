"""Tried as a new user would: hostile input and broken buses get the exit
code they deserve, a message naming what is wrong and where, and never a
traceback. (Issue: "Honest verdicts", the list of what was found.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_server
from tests.histories import old_layout
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

VALID, INVALID, UNKNOWN, USAGE = 0, 1, 2, 3


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real short run to damage in different ways."""
    reports = tmp_path_factory.mktemp("reports")
    proc = knell("run", "quickstart", "--duration", "2s", "--reports", str(reports), timeout=120)
    assert proc.returncode == VALID, proc.stdout + proc.stderr
    return next((reports / "quickstart").glob("2*"))


def _copy(run: Path, tmp_path: Path, *, parts: bool = True) -> Path:
    """A copy of ``run`` in the plain layout (parts and ``history.jsonl``)
    whose lines the tests damage; without ``parts``: ``history.jsonl`` alone."""
    target = tmp_path / "run"
    shutil.copytree(run, target, symlinks=True)
    shutil.rmtree(target / "history")
    old_layout(target, parts=parts)
    return target


# -- histories that prove nothing -------------------------------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "no post completed"),
        (b"\n\n   \n\n", "no post completed"),
        (b"x" * 5_000_000, "truncated"),
    ],
    ids=["empty", "blank-lines", "one-5MB-unterminated-line"],
)
def test_histories_that_prove_nothing_are_unknown(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "history.jsonl").write_bytes(content)
    proc = knell("check", str(tmp_path), timeout=60)
    _no_traceback(proc)
    assert proc.returncode == UNKNOWN, proc.stdout + proc.stderr
    assert "UNKNOWN" in proc.stdout and why in proc.stdout


@pytest.mark.parametrize("field", ["process", "f", "time", "type"])
@pytest.mark.parametrize("how", ["missing", "null"])
def test_events_missing_a_required_field_name_file_and_line(
    tmp_path: Path, finished_run: Path, field: str, how: str
) -> None:
    run = _copy(finished_run, tmp_path)
    part = sorted((run / "history").glob("producer-1.*.jsonl"))[0]
    lines = part.read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[1])
    if how == "missing":
        del event[field]
    else:
        event[field] = None
    lines[1] = json.dumps(event)
    part.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = knell("check", str(run), timeout=60)
    _no_traceback(proc)
    assert proc.returncode == USAGE
    assert f"{part}:2" in proc.stderr and field in proc.stderr


def test_a_half_written_run_directory_is_unknown(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path)
    (run / "history.jsonl").unlink()
    (run / "history" / "nemesis.1.jsonl").write_text(
        "\n".join(
            line
            for line in (run / "history" / "nemesis.1.jsonl").read_text().splitlines()
            if '"drain"' not in line
        )
        + "\n"
    )  # the runner died before the final drain
    proc = knell("check", str(run), timeout=60)
    _no_traceback(proc)
    assert proc.returncode == UNKNOWN and "no final drain completed" in proc.stdout


def test_a_truncated_merged_history_says_so(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path, parts=False)
    merged = run / "history.jsonl"
    data = merged.read_bytes()
    merged.write_bytes(data[: len(data) - 40])  # cut into the last event
    proc = knell("check", str(run), timeout=60)
    _no_traceback(proc)
    assert proc.returncode == UNKNOWN
    assert "truncated" in proc.stdout
    results = json.loads((run / "results.json").read_text())
    assert results["torn"] and "history.jsonl" in results["torn"][0]


# -- broken buses ------------------------------------------------------------------


def test_a_post_that_never_returns_is_a_finding(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--duration", "2s", "--bus", "hostile_buses:hanging_post",
        "--reports", str(tmp_path), timeout=180,
    )  # fmt: skip
    _no_traceback(proc)
    assert proc.returncode == INVALID, proc.stdout + proc.stderr
    assert "liveness" in proc.stdout and "stuck-at-shutdown" in proc.stdout


def test_errors_outside_faults_are_a_finding(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--duration", "3s", "--bus", "hostile_buses:flaky_fetch",
        "--reports", str(tmp_path), timeout=180,
    )  # fmt: skip
    _no_traceback(proc)
    assert proc.returncode == INVALID, proc.stdout + proc.stderr
    assert "availability: errors-outside-faults" in proc.stdout
    assert "connection reset by peer" in proc.stdout


def test_a_crash_looping_worker_shows_its_cause(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--duration", "2s", "--bus", "hostile_buses:crashes_workers",
        "--reports", str(tmp_path), timeout=180,
    )  # fmt: skip
    _no_traceback(proc)
    assert proc.returncode == UNKNOWN, proc.stdout + proc.stderr
    assert "'str' object has no attribute 'seq'" in proc.stdout  # in the terminal summary
    report = next((tmp_path / "quickstart").glob("2*/report.md")).read_text()
    assert "Workers that exited on their own" in report and "has no attribute 'seq'" in report


def test_a_bus_that_floods_stdout_has_capped_logs(tmp_path: Path) -> None:
    proc = knell(
        "run", "quickstart", "--duration", "2s", "--bus", "hostile_buses:loud",
        "--reports", str(tmp_path), timeout=180,
    )  # fmt: skip
    _no_traceback(proc)
    logs = list((tmp_path / "quickstart").glob("2*/logs/consumer-1.1.log"))
    assert logs and logs[0].stat().st_size < 1_100_000
    assert b"[knell: log capped at" in logs[0].read_bytes()


# -- bad input: exit 3, one line, no traceback ---------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", str(2**64)], "--seed"),
        (["--bus", "os:getcwd"], "raised TypeError"),
        (["--bus", "hostile_buses:factory_raises"], "the bus's own server is not running"),
        (["--bus", "hostile_buses:not_a_bus"], "not a bus: it has no subscribe"),
        (["--bus", "no_such_module_xyz:make"], "cannot import"),
    ],
    ids=["seed-beyond-64-bits", "os-getcwd", "factory-raises", "missing-methods", "no-module"],
)
def test_bad_run_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    proc = knell("run", "quickstart", "--duration", "1s", *args, "--reports", str(tmp_path))
    _no_traceback(proc)
    assert proc.returncode == USAGE, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not list(tmp_path.glob("quickstart/2*/history.jsonl*"))  # nothing half-written


def test_a_binary_scenario_file(tmp_path: Path) -> None:
    binary = tmp_path / "scenario.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    proc = knell("run", str(binary))
    _no_traceback(proc)
    assert proc.returncode == USAGE and str(binary) in proc.stderr and "UTF-8" in proc.stderr


def test_garbage_scenario_json_in_a_run_directory(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path)
    (run / "scenario.json").write_text("garbage{")
    proc = knell("check", str(run))
    _no_traceback(proc)
    assert proc.returncode == USAGE and "scenario.json: not a knell scenario.json" in proc.stderr


def test_a_non_numeric_time_in_a_process_history(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path)
    part = run / "history" / "producer-1.1.jsonl"
    lines = part.read_text().splitlines()
    event = json.loads(lines[2])
    event["time"] = "abc"
    lines[2] = json.dumps(event)
    part.write_text("\n".join(lines) + "\n")
    proc = knell("check", str(run))
    _no_traceback(proc)
    assert proc.returncode == USAGE and f"{part}:3" in proc.stderr and "'time'" in proc.stderr


def test_check_on_a_read_only_file_system(tmp_path: Path, finished_run: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    run = _copy(finished_run, tmp_path)
    ok = _mount(["-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)])
    require_server("a mountable tmpfs (root)", ok, "run the tests as root")
    try:
        shutil.copytree(run, mount / "run", symlinks=True)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        proc = knell("check", str(mount / "run"))
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    _no_traceback(proc)
    assert proc.returncode == USAGE, proc.stdout + proc.stderr
    assert "not writable" in proc.stderr or "Read-only file system" in proc.stderr


def _mount(args: list[str]) -> bool:
    if sys.platform != "linux":
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def test_a_full_disk_mid_run(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    ok = _mount(["-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)])
    require_server("a mountable tmpfs (root)", ok, "run the tests as root")
    try:
        proc = knell(
            "run", "kill-consumers", "--duration", "8s", "--reports", str(disk), timeout=180,
        )  # fmt: skip
        _no_traceback(proc)
        assert proc.returncode == USAGE, proc.stdout + proc.stderr
        assert "no space left on the device" in proc.stderr.lower().replace("\n", " ")
        run = next((disk / "kill-consumers").glob("2*"))
        check = knell("check", str(run))  # later, on the half-written run: still not the bus's
        _no_traceback(check)
        assert check.returncode in (UNKNOWN, USAGE), check.stdout + check.stderr
        assert "(writer killed)" not in check.stdout + check.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


# -- from anywhere -------------------------------------------------------------------


def test_shipped_scenarios_work_outside_the_repository(tmp_path: Path) -> None:
    listed = knell("list", cwd=tmp_path)
    _no_traceback(listed)
    assert listed.returncode == VALID and "quickstart" in listed.stdout
    proc = knell(
        "run", "quickstart", "--duration", "1s", "--reports", str(tmp_path / "r"),
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == VALID, proc.stdout + proc.stderr
    missing = knell("run", "no-such-scenario", cwd=tmp_path)
    assert missing.returncode == USAGE and "--scenarios-dir" in missing.stderr


def test_the_wheel_carries_the_scenarios_unchanged(tmp_path: Path) -> None:
    import zipfile

    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next(tmp_path.glob("knell-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(n).name: archive.read(n)
            for n in archive.namelist()
            if n.startswith("knell/scenarios/") and n.endswith(".toml")
        }
    source = {p.name: p.read_bytes() for p in (REPO / "scenarios").glob("*.toml")}
    assert shipped == source
