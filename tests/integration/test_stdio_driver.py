"""The exec: driver against tiny adapters that break the protocol on purpose.

Each protocol error must surface as :class:`AdapterError` (an
indeterminate outcome: history ``info``) of the right kind, with a message
that names what the adapter did, for which operation, in one line, never a
traceback; and the adapter must be gone afterwards. The bus's own error
replies, by contrast, are the bus's verdicts and keep their outcome.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from knell.buses import DefiniteError, DriverError, IndeterminateError, open_bus, resolve_driver
from knell.buses.stdio import AdapterError, AdapterStartError, StdioBus
from tests.integration.conftest import REPO, knell

pytestmark = pytest.mark.integration

ADAPTERS = Path(__file__).parent / "adapters"
MISBEHAVING = ADAPTERS / "misbehaving.py"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """Every adapter a test starts is gone when it ends."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 5
    left: list[psutil.Process] = []
    while time.monotonic() < deadline:
        left = [p for p in me.children(recursive=True) if p.pid not in before]
        left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left behind: {[(p.pid, p.cmdline()) for p in left]}")


def adapter(mode: str, tmp_path: Path, **options: object) -> StdioBus:
    return StdioBus(
        [sys.executable, str(MISBEHAVING), mode],
        f"sqlite:///{tmp_path.as_posix().lstrip('/')}/bus.db",
        stderr=tmp_path / "adapter.log",
        **options,  # type: ignore[arg-type]
    )


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    assert text.startswith("stdio adapter "), text
    return text


def test_a_good_adapter_serves_every_operation(tmp_path: Path) -> None:
    bus = adapter("good", tmp_path)
    pid = bus._child.pid if bus._child else 0
    assert bus.hello == {"protocol": 1, "contracts": ["broadcast"]}
    assert bus.subscribe("w", "a") == 0
    message = bus.post("a", "m1", "p", "k1")
    assert (message.seq, message.body, message.idempotency_key) == (1, "m1", "k1")
    assert bus.fetch("w", "a") == []
    assert bus.ack("w", "a", 0) == 0 and bus.cursor("w", "a") == 0
    assert bus.head("a") == 1
    assert bus.wait("w", 0.01) is None
    bus.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(DefiniteError, match="closed"):
        bus.head("a")


def test_malformed_json(tmp_path: Path) -> None:
    bus = adapter("malformed", tmp_path)
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    text = one_line(caught.value)
    assert caught.value.kind == "malformed"
    assert "in reply to cursor (id 1): a line that is not JSON" in text
    assert '{"id": 1, "ok": true, "result": {"cursor": 0' in text
    assert "misbehaving.py malformed" in text  # which adapter
    bus.close()


def test_unknown_id(tmp_path: Path) -> None:
    bus = adapter("unknown-id", tmp_path)
    with pytest.raises(AdapterError) as caught:
        bus.head("a")
    text = one_line(caught.value)
    assert caught.value.kind == "unknown-id"
    assert "a reply to id 1001, which knell never sent, while waiting for head (id 1)" in text
    bus.close()


def test_second_reply_to_an_answered_request(tmp_path: Path) -> None:
    bus = adapter("unsolicited", tmp_path)
    assert bus.head("a") == 0
    with pytest.raises(AdapterError) as caught:
        bus.head("a")
    text = one_line(caught.value)
    assert caught.value.kind == "unsolicited"
    # The duplicate arrives either before the next request (idle) or while
    # it is in flight: both are named.
    assert "no request was in flight (before head)" in text or "a second reply to id 1" in text
    bus.close()


def test_a_line_while_nothing_was_asked(tmp_path: Path) -> None:
    bus = adapter("chatter", tmp_path)
    assert bus.cursor("w", "a") == 0
    time.sleep(0.3)  # the heartbeat line lands while nothing is in flight
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    text = one_line(caught.value)
    assert caught.value.kind == "unsolicited"
    assert "sent a line while no request was in flight (before cursor)" in text
    assert '{"event": "heartbeat"}' in text
    bus.close()


def test_adapter_exits_mid_operation(tmp_path: Path) -> None:
    bus = adapter("exit", tmp_path)
    with pytest.raises(AdapterError) as caught:
        bus.post("a", "m1", "p")
    text = one_line(caught.value)
    assert caught.value.kind == "exited"
    assert "the adapter exited with code 3 during post (id 1)" in text
    assert "last stderr: adapter: simulated crash in the middle of post" in text
    log = (tmp_path / "adapter.log").read_text()
    assert "simulated crash in the middle of post" in log and "[adapter " in log
    bus.close()


def test_adapter_that_hangs_is_killed_after_the_timeout(tmp_path: Path) -> None:
    bus = adapter("hang", tmp_path, timeout=0.5)
    pid = bus._child.pid if bus._child else 0
    started = time.monotonic()
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    assert 0.5 <= time.monotonic() - started < 3
    text = one_line(caught.value)
    assert caught.value.kind == "timeout"
    assert "no reply to cursor (id 1) within 0.5 s (killed)" in text
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    bus.close()


def test_wait_gets_its_own_timeout_on_top(tmp_path: Path) -> None:
    bus = adapter("good", tmp_path, timeout=0.5)
    assert bus.wait("w", 0.01) is None
    bus.close()


def test_result_of_the_wrong_shape(tmp_path: Path) -> None:
    bus = adapter("bad-shape", tmp_path)
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    text = one_line(caught.value)
    assert caught.value.kind == "malformed"
    assert "reply to cursor (id 1): result.cursor must be an integer, got '0'" in text
    bus.close()


def test_error_of_the_wrong_shape(tmp_path: Path) -> None:
    bus = adapter("bad-error", tmp_path)
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    text = one_line(caught.value)
    assert "error.outcome must be 'definite' or 'indeterminate', got 'maybe'" in text
    bus.close()


def test_the_buses_own_errors_keep_their_outcome(tmp_path: Path) -> None:
    bus = adapter("refuse", tmp_path)
    with pytest.raises(DefiniteError, match=r"^busy: write lock not taken$"):
        bus.post("a", "m", "p")
    bus.close()
    bus = adapter("unsure", tmp_path)
    with pytest.raises(IndeterminateError) as caught:
        bus.post("a", "m", "p")
    assert not isinstance(caught.value, AdapterError)
    assert str(caught.value) == "commit: commit failed"
    bus.close()


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("old-protocol", "handshake", "the adapter speaks protocol 2, knell speaks 1"),
        (
            "no-known-contract",
            "handshake",
            "the adapter declares no contract knell can drive (it declares: sharded; "
            "knell drives broadcast, queue, at-most-once, stream)",
        ),
        ("refuse-hello", "handshake", "refused hello: invalid-argument: no such store"),
        (
            "die-at-hello",
            "exited",
            "exited with code 4 during hello (id 0); last stderr: "
            "adapter: cannot open the store: permission denied",
        ),
        ("banner", "malformed", "a line that is not JSON"),
    ],
)
def test_handshake_failures_stop_before_anything_runs(
    tmp_path: Path, mode: str, kind: str, words: str
) -> None:
    with pytest.raises(AdapterStartError) as caught:
        adapter(mode, tmp_path)
    assert isinstance(caught.value, DriverError)  # knell run: a usage error, exit 3
    assert caught.value.kind == kind
    assert words in one_line(caught.value)


def test_an_adapter_that_declares_fewer_contracts_still_greets(tmp_path: Path) -> None:
    """What an adapter declares is what it is tested on: a queue-only
    adapter opens (each scenario is checked against it), unless the caller
    requires a contract it lacks."""
    bus = adapter("queue-only", tmp_path, trace=tmp_path / "trace")
    assert bus.contracts == {"queue"}
    bus.close()
    (trace,) = (tmp_path / "trace").glob("adapter-*.log")
    hello = orjson.loads(trace.read_bytes().splitlines()[0].removeprefix(b"> "))
    assert hello["op"] == "hello"  # knell offers what it can drive; the adapter picks
    assert hello["args"]["contracts"] == ["broadcast", "queue", "at-most-once", "stream"]
    with pytest.raises(AdapterStartError) as caught:
        adapter("queue-only", tmp_path, require=("broadcast",))
    assert caught.value.kind == "handshake"
    assert "does not declare the broadcast contract(s) (it declares: queue)" in one_line(
        caught.value
    )


def test_a_scenario_for_a_contract_the_adapter_lacks_is_a_usage_error(tmp_path: Path) -> None:
    proc = knell(
        "run",
        "quickstart",
        "--duration",
        "2s",
        "--reports",
        str(tmp_path),
        "--bus",
        f"exec:{sys.executable} {MISBEHAVING} queue-only",
        timeout=60,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "scenario 'quickstart' tests the broadcast contract, but bus 'exec:" in proc.stderr
    assert "misbehaving.py queue-only' implements queue only" in proc.stderr
    assert "lists 'broadcast' in its hello reply's contracts" in proc.stderr


def test_after_a_failure_the_next_call_starts_a_fresh_adapter(tmp_path: Path) -> None:
    bus = adapter("exit", tmp_path, env={"MISBEHAVE_ONCE": str(tmp_path / "once")})
    first = bus._child.pid if bus._child else 0
    with pytest.raises(AdapterError, match="exited with code 3"):
        bus.cursor("w", "a")
    assert bus.cursor("w", "a") == 0  # a new adapter, greeted again
    assert bus._child is not None and bus._child.pid != first
    assert "starting a fresh adapter" in (tmp_path / "adapter.log").read_text()
    bus.close()


def test_a_restart_that_fails_is_an_adapter_error_not_a_driver_error(tmp_path: Path) -> None:
    bus = adapter("exit", tmp_path)
    with pytest.raises(AdapterError):
        bus.cursor("w", "a")
    bus.argv[-1] = "die-at-hello"  # the program now cannot even start
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    assert not isinstance(caught.value, DriverError)
    assert "restarting the adapter: the adapter exited with code 4" in one_line(caught.value)
    bus.close()


def test_stderr_is_capped(tmp_path: Path) -> None:
    bus = adapter("exit", tmp_path, stderr_cap=10, env={"MISBEHAVE_ONCE": str(tmp_path / "o")})
    with pytest.raises(AdapterError) as caught:
        bus.cursor("w", "a")
    assert "simulated crash" in str(caught.value)  # the tail is kept past the cap
    bus.close()
    log = (tmp_path / "adapter.log").read_text()
    assert "adapter stderr capped at 10 bytes" in log
    assert "[adapter " not in log  # no line of its own made it under the cap
    assert "bytes of adapter stderr dropped" in log


# -- driver strings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "words"),
    [
        ("exec:", "give a command after 'exec:'"),
        ("exec:  ", "give a command after 'exec:'"),
        (
            "exec:no-such-program-knell-test x",
            "program 'no-such-program-knell-test' is not on PATH",
        ),
        ("exec:./nowhere/adapter", "no such program './nowhere/adapter'"),
        ("exec:node 'unclosed", "cannot split the command: No closing quotation"),
    ],
)
def test_bad_exec_drivers_are_named(driver: str, words: str) -> None:
    with pytest.raises(DriverError) as caught:
        resolve_driver("sqlite:///x.db", driver)
    assert words in str(caught.value) and repr(driver) in str(caught.value)


def test_exec_url_scheme_brings_its_own_store(tmp_path: Path) -> None:
    bus = open_bus(f"exec:{sys.executable} {MISBEHAVING} good")
    assert isinstance(bus, StdioBus) and bus.store == ""
    bus.close()


def test_bad_adapter_stops_knell_run_with_a_usage_error(tmp_path: Path) -> None:
    proc = knell(
        "run",
        "quickstart",
        "--duration",
        "2s",
        "--reports",
        str(tmp_path),
        "--bus",
        f"exec:{sys.executable} {MISBEHAVING} die-at-hello",
        timeout=60,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "stdio adapter exited: the adapter exited with code 4 during hello" in proc.stderr
    assert "cannot open the store: permission denied" in proc.stderr


# -- the leash -------------------------------------------------------------------------

WORKER = """
import sys, time
from knell.buses.stdio import StdioBus
bus = StdioBus([sys.executable, {adapter!r}, {mode!r}], "")
print(bus._child.pid, flush=True)
time.sleep(60)
"""


def start_worker(mode: str) -> tuple[subprocess.Popen[str], int]:
    """A stand-in worker process holding one adapter; returns it and the adapter's pid."""
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER.format(adapter=str(MISBEHAVING), mode=mode)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert worker.stdout is not None
    return worker, int(worker.stdout.readline())


def gone(pid: int, within: float = 5.0) -> bool:
    try:
        psutil.Process(pid).wait(within)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def test_killing_the_worker_tree_kills_its_adapter() -> None:
    from knell.platform import kill_tree

    worker, pid = start_worker("ignore-eof")
    kill_tree(worker.pid)  # what the supervisor does to a worker
    worker.wait()
    assert gone(pid), "the adapter outlived its worker"


def test_an_adapter_dies_with_its_worker_even_when_it_ignores_stdin() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux-only")
    worker, pid = start_worker("ignore-eof")
    os.kill(worker.pid, signal.SIGKILL)  # only the worker: the leash must do the rest
    worker.wait()
    assert gone(pid), "the adapter outlived its SIGKILLed worker"


def test_a_well_behaved_adapter_follows_its_worker_through_stdin() -> None:
    worker, pid = start_worker("good")
    worker.kill()
    worker.wait()
    assert gone(pid)
