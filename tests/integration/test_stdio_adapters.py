"""The example adapters under the real CLI: every shipped scenario is VALID
(but one that ``expect``s a finding about a store setting) through the
Python adapter (all three contracts) and every broadcast one
through the Node adapter (broadcast only: a queue scenario is refused),
their traffic matches the published JSON Schema, the seeded bugs behind
both (the Node bus's stale ack, a queue mutant behind the Python adapter)
are caught, and no adapter outlives its run, even when the runner is
SIGKILLed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from knell.scenario import load_scenario
from tests.conftest import require_server
from tests.histories import history_text
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

NODE_DIR = REPO / "examples" / "node-adapter"
NODE = f"exec:node {NODE_DIR.relative_to(REPO)}/adapter.js"
PYTHON = f"exec:{sys.executable} examples/python-adapter/adapter.py"
FLAKY = Path(__file__).parent / "adapters" / "flaky.py"
SCHEMA = REPO / "docs" / "stdio-protocol.schema.json"


def _no_fuse() -> bool:
    if sys.platform == "win32":
        return True
    from knell.fs.mount import fuse_missing

    return fuse_missing() is not None


def _sqlite_direct() -> dict[str, tuple[str, ...]]:
    """The shipped scenarios the example adapters can run, with the
    contracts each tests: they are SQLite buses reached directly, so
    scenarios for another store or with bridges in front are not theirs."""
    found = {}
    for path in sorted((REPO / "scenarios").glob("*.toml")):
        scenario = load_scenario(path)
        if scenario.store.disk == "faulty" and _no_fuse():
            continue  # its store needs knell fs, which this machine cannot mount
        if scenario.expect is not None:
            continue  # it exists to make a finding about a store setting, not to be VALID
        if scenario.store.kind == "sqlite" and not scenario.bridges():
            found[path.stem] = scenario.contracts
    return found


SCENARIOS = _sqlite_direct()
PYTHON_SCENARIOS = sorted(SCENARIOS)
"""The Python adapter serves every contract."""
NODE_SCENARIOS = sorted(name for name, c in SCENARIOS.items() if c == ("broadcast",))
"""The Node adapter declares broadcast only."""


def need_node() -> None:
    require_server(
        "node",
        shutil.which("node") is not None and (NODE_DIR / "node_modules/better-sqlite3").is_dir(),
        "install Node.js 18+, then `make node-adapter` (examples/node-adapter/node_modules)",
    )


@pytest.fixture(params=["python", "node"])
def driver(request: pytest.FixtureRequest) -> str:
    if request.param == "node":
        need_node()
        return NODE
    return PYTHON


def results(stdout: str) -> tuple[Path, dict]:
    line = next(x for x in stdout.splitlines() if x.startswith("report: "))
    report = Path(line.removeprefix("report: ").strip())
    return report.parent, json.loads((report.parent / "results.json").read_text())


def adapters_of(root: int, marker: str) -> list[psutil.Process]:
    """Descendants of ``root`` whose command line mentions ``marker``."""
    try:
        found = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for proc in found:
        try:
            if any(marker in part for part in proc.cmdline()):
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return out


class WatchedRun:
    """``knell run`` in a child process, with every adapter it ever started recorded."""

    def __init__(self, marker: str, *args: str, **env: str) -> None:
        full_env = {**os.environ, **env}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "knell", "run", *args],
            cwd=REPO,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.marker = marker
        self.seen: dict[int, psutil.Process] = {}

    def watch(self, until: float) -> None:
        """Record adapters until the run ends or ``until`` seconds pass."""
        deadline = time.monotonic() + until
        while self.proc.poll() is None and time.monotonic() < deadline:
            for p in adapters_of(self.proc.pid, self.marker):
                self.seen.setdefault(p.pid, p)
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        self.watch(timeout)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def survivors(self, within: float = 5.0) -> list[int]:
        _, alive = psutil.wait_procs(list(self.seen.values()), timeout=within)
        return [p.pid for p in alive]


# -- every shipped scenario, through both adapters -------------------------------------


@pytest.mark.parametrize(
    ("which", "scenario"),
    [("python", s) for s in PYTHON_SCENARIOS] + [("node", s) for s in NODE_SCENARIOS],
)
def test_shipped_scenarios_are_valid_through_the_adapter(
    which: str, scenario: str, tmp_path: Path
) -> None:
    if which == "node":
        need_node()
    driver = NODE if which == "node" else PYTHON
    proc = knell("run", scenario, "--duration", "3s", "--reports", str(tmp_path), "--bus", driver)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: VALID" in proc.stdout
    run_dir, _ = results(proc.stdout)
    history = history_text(run_dir)
    assert "AdapterError" not in history


def test_the_queue_and_role_scenarios_are_valid_through_the_python_adapter() -> None:
    assert {"queue-kill-claimers", "queue-lapsing-leases", "atmostonce-holder-churn"} <= set(
        PYTHON_SCENARIOS
    )
    assert "queue-kill-claimers" not in NODE_SCENARIOS and "quickstart" in NODE_SCENARIOS


@pytest.mark.parametrize("scenario", ["queue-kill-claimers", "atmostonce-holder-churn"])
def test_a_scenario_the_node_adapter_does_not_declare_is_refused(
    scenario: str, tmp_path: Path
) -> None:
    need_node()
    proc = knell("run", scenario, "--reports", str(tmp_path), "--bus", NODE)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    contract = SCENARIOS[scenario][0]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"knell: error: scenario {scenario!r} tests the {contract} contract")
    assert f"but bus {NODE!r} implements broadcast only" in line
    assert f"lists {contract!r} in its hello reply's contracts" in line
    assert not (tmp_path / scenario).exists() or not any((tmp_path / scenario).iterdir())


def test_quickstart_traffic_matches_the_schema_and_leaves_no_adapter(
    driver: str, tmp_path: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    trace = tmp_path / "trace"
    marker = "adapter.js" if "node" in driver else "adapter.py"
    run = WatchedRun(
        marker,
        "quickstart",
        "--duration",
        "4s",
        "--reports",
        str(tmp_path / "r"),
        "--bus",
        driver,
        KNELL_ADAPTER_TRACE=str(trace),
    )
    code, out, err = run.finish()
    assert code == 0, out + err
    assert "verdict: VALID" in out
    assert len(run.seen) >= 6, "expected one adapter per worker at least"
    assert not run.survivors(), "adapters outlived the run"
    _, res = results(out)
    assert res["checks"]["checks"]["no-loss"]["valid"] is True
    checked = validate_traces(jsonschema, trace)
    assert checked["requests"] > 1000 and checked["replies"] > 1000, checked
    assert {"hello", "post", "subscribe", "fetch", "ack", "cursor", "head", "wait", "close"} <= set(
        checked["ops"]
    ), checked


def test_queue_traffic_matches_the_schema_and_leaves_no_adapter(tmp_path: Path) -> None:
    """Every queue operation, the lapsed holders' refusals (lease-lost) and
    the final phase, through the Python adapter, against the schema."""
    jsonschema = pytest.importorskip("jsonschema")
    trace = tmp_path / "trace"
    run = WatchedRun(
        "adapter.py",
        "queue-lapsing-leases",
        "--duration",
        "4s",
        "--reports",
        str(tmp_path / "r"),
        "--bus",
        PYTHON,
        KNELL_ADAPTER_TRACE=str(trace),
    )
    code, out, err = run.finish()
    assert code == 0, out + err
    assert "verdict: VALID" in out
    assert not run.survivors(), "adapters outlived the run"
    run_dir, res = results(out)
    assert res["checks"]["checks"]["lease-exclusive"]["valid"] is True
    checked = validate_traces(jsonschema, trace)
    queue_ops = {"declare_queue", "post", "claim", "renew", "done", "release", "dead"}
    assert {"hello", "close"} | queue_ops <= set(checked["ops"]), checked
    refused = {
        json.loads(line)["value"].get("refused")
        for line in history_text(run_dir).splitlines()
        if '"refused"' in line
    }
    assert "lease-lost" in refused, refused


def validate_traces(jsonschema: object, folder: Path) -> dict:
    """Validate every traced line against the schema: a request against
    ``$defs/request``, its reply against ``$defs/replies/<op>``."""
    schema = json.loads(SCHEMA.read_text())
    validator_cls = jsonschema.Draft202012Validator  # type: ignore[attr-defined]
    validator_cls.check_schema(schema)
    defs = schema["$defs"]

    def validator(ref: str) -> object:
        return validator_cls({"$ref": ref, "$defs": defs})

    request_v = validator("#/$defs/request")
    reply_v = {op: validator(f"#/$defs/replies/{op}") for op in defs["replies"]}
    counts: dict = {"requests": 0, "replies": 0, "ops": {}, "files": 0}
    for path in sorted(folder.glob("adapter-*.log")):
        counts["files"] += 1
        pending: dict[int, str] = {}
        for raw in path.read_bytes().splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                continue  # the last line of a worker killed mid-write
            direction, line = raw[:2], json.loads(raw[2:])
            if direction == b"> ":
                errors = [e.message for e in request_v.iter_errors(line)]  # type: ignore[attr-defined]
                assert not errors, (path.name, line, errors)
                pending[line["id"]] = line["op"]
                counts["requests"] += 1
                counts["ops"][line["op"]] = counts["ops"].get(line["op"], 0) + 1
            else:
                assert direction == b"< ", raw
                op = pending.pop(line["id"])
                errors = [e.message for e in reply_v[op].iter_errors(line)]  # type: ignore[attr-defined]
                assert not errors, (path.name, op, line, errors)
                counts["replies"] += 1
    return counts


# -- the seeded bug ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "bus"),
    [
        ("kill-consumers", f"{NODE} --bug stale-ack"),
        ("quickstart", "knell.buses.mutants:node_stale_ack"),
    ],
)
def test_the_node_bus_with_a_stale_ack_bug_is_caught(
    scenario: str, bus: str, tmp_path: Path
) -> None:
    need_node()
    proc = knell("run", scenario, "--duration", "5s", "--reports", str(tmp_path), "--bus", bus)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: INVALID" in proc.stdout
    _, res = results(proc.stdout)
    assert res["checks"]["checks"]["no-cursor-regression"]["valid"] is False


def test_a_queue_mutant_behind_the_python_adapter_is_caught(tmp_path: Path) -> None:
    """The seeded claim-without-guard bug, served by the Python adapter
    (``--mutant``): the race between two claimers' adapters is caught by the
    same check that catches it in-process."""
    bus = f"{PYTHON} --mutant claim-without-guard"
    proc = knell(
        "run", "queue-kill-claimers", "--duration", "4s", "--reports", str(tmp_path), "--bus", bus
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: INVALID" in proc.stdout
    run_dir, res = results(proc.stdout)
    assert res["checks"]["checks"]["lease-exclusive"]["valid"] is False
    assert "AdapterError" not in history_text(run_dir)


def test_the_python_adapter_names_an_unknown_mutant() -> None:
    proc = subprocess.run(
        [sys.executable, "examples/python-adapter/adapter.py", "--mutant", "no-such-bug"],
        cwd=REPO,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "no SQLite mutant named 'no-such-bug'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_python_adapter_ends_quietly_when_its_reader_is_gone(tmp_path: Path) -> None:
    """knell killed (or the wrapper between them gone): the reply cannot be
    written. The adapter exits without a traceback, which knell would
    otherwise copy into the run's output as the adapter's last words."""
    url = "sqlite:///" + (tmp_path / "bus.db").as_posix().lstrip("/")
    request = {"id": 1, "op": "open", "url": url}
    proc = subprocess.Popen(
        [sys.executable, "examples/python-adapter/adapter.py"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # nobody reads the replies
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.close()
    assert proc.wait(60) == 1
    said = proc.stderr.read()
    assert "Traceback" not in said and "BrokenPipeError" not in said, said


# -- adapter failures in a real run -------------------------------------------------------


def test_adapter_crashes_mid_run_are_recorded_as_adapter_errors(tmp_path: Path) -> None:
    bus = (
        f"exec:{sys.executable} {FLAKY} 150 -- {sys.executable} examples/python-adapter/adapter.py"
    )
    proc = knell("run", "quickstart", "--duration", "3s", "--reports", str(tmp_path), "--bus", bus)
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    run_dir, _ = results(proc.stdout)
    infos = [
        json.loads(line)
        for line in history_text(run_dir).splitlines()
        if '"AdapterError: stdio adapter ' in line
    ]
    assert infos, "no adapter failure was recorded"
    assert all(e["type"] == "info" for e in infos)
    assert any("exited with code 3" in e["value"]["error"] for e in infos)
    assert any("crashing on purpose" in e["value"]["error"] for e in infos)


# -- no adapter outlives its runner -------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="signals to the runner are POSIX-only here")
def test_runner_sigkilled_leaves_no_adapter(tmp_path: Path) -> None:
    need_node()
    run = WatchedRun(
        "adapter.js", "quickstart", "--duration", "30s", "--reports", str(tmp_path), "--bus", NODE
    )
    try:
        deadline = time.monotonic() + 30
        while len(run.seen) < 6 and time.monotonic() < deadline:
            run.watch(0.2)
        assert len(run.seen) >= 6, "adapters did not start"
        run.watch(1.5)  # let the schedule kill and restart something
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(20)
        assert not run.survivors(), "adapters outlived their SIGKILLed runner"
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
        run.proc.communicate()


def test_a_run_whose_adapter_could_not_serve_is_never_valid(tmp_path: Path) -> None:
    bus = (
        f"exec:{sys.executable} {FLAKY} 150 -- {sys.executable} examples/python-adapter/adapter.py"
    )
    proc = knell("run", "quickstart", "--duration", "3s", "--reports", str(tmp_path), "--bus", bus)
    assert "AdapterError" in history_text(results(proc.stdout)[0])
    assert proc.returncode == 2 and "verdict: UNKNOWN" in proc.stdout, proc.stdout
    assert "the driver could not serve" in proc.stdout


@pytest.mark.parametrize("which", ["python", "node"])
def test_example_adapters_exit_when_stdin_closes(which: str, tmp_path: Path) -> None:
    from knell.buses.stdio import StdioBus

    if which == "node":
        need_node()
    driver = NODE if which == "node" else PYTHON
    argv = driver.removeprefix("exec:").split()
    bus = StdioBus(argv, f"sqlite:///{tmp_path.as_posix().lstrip('/')}/bus.db", cwd=REPO)
    assert bus.subscribe("w", "events") == 0
    child = bus._child
    assert child is not None
    started = time.monotonic()
    assert child.stop(grace=5.0) == 0  # stdin closed, no close request: exit 0 by itself
    assert time.monotonic() - started < 3
    bus._child = None
    bus.close()


@pytest.mark.parametrize("which", ["python", "node"])
def test_example_adapters_open_the_store_a_url_names(which: str, tmp_path: Path) -> None:
    """A path with a space, ``%`` and ``#`` in the sqlite:/// form knell
    builds (sqlite_url): the adapter opens that file, not a look-alike."""
    from knell.buses.sqlite_url import sqlite_url
    from knell.buses.stdio import StdioBus

    if which == "node":
        need_node()
    folder = tmp_path / "my run 50% #1"
    folder.mkdir()
    argv = (NODE if which == "node" else PYTHON).removeprefix("exec:").split()
    bus = StdioBus(argv, sqlite_url(folder / "bus.db", poll_interval=0.05), cwd=REPO)
    try:
        bus.subscribe("w", "events")
        assert bus.post("events", "x", "p").seq == 1
    finally:
        bus.close()
    assert (folder / "bus.db").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]
