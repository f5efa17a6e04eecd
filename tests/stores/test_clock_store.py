"""The ``store`` clock target on real private servers: the server starts
preloaded (its keeper does not), a clock fault moves the clock the server
answers with (Redis ``TIME``, Postgres ``clock_timestamp()``), proves it,
and the heal brings it back to true time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from knell.faketime import unavailable
from knell.faketime.probe import store_offset
from knell.nemesis import Action, NemesisContext, kinds
from knell.nemesis.clock_fault import ClockFault
from knell.scenario import Scenario
from knell.supervisor import Supervisor
from tests.conftest import require_server
from tests.histories import nemesis_text
from tests.servers import require_postgres, require_redis


@pytest.fixture(autouse=True)
def _libfaketime() -> None:
    """Skips where clock faults cannot run; fails in CI, which installs it."""
    why = unavailable()
    require_server("libfaketime", why is None, why or "")


def _server(kind: str, run_dir: Path) -> Any:
    if kind == "redis":
        require_redis()
        from knell.stores.redis.server import RedisServer

        return RedisServer(run_dir, persistence="none")
    require_postgres()
    from knell.stores.postgres.server import PostgresServer

    return PostgresServer(run_dir, fsync=False)


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def _clock_redis() -> None:
    """A Redis that runs under libfaketime: ``KNELL_REDIS_CLOCK_SERVER``, a
    libc-malloc build (CI builds one with tools/redis_libc.sh)."""
    from knell.stores.redis.server import CLOCK_SERVER_ENV

    path = os.environ.get(CLOCK_SERVER_ENV)
    require_server(
        "a redis-server built with libc malloc",
        bool(path) and Path(str(path)).is_file(),
        f"build one with tools/redis_libc.sh and name it in {CLOCK_SERVER_ENV}",
    )


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_clock_skew_on_the_store_moves_the_servers_clock(kind: str, tmp_path: Path) -> None:
    scenario = Scenario.model_validate(
        {
            "name": "store-clock",
            "description": "d",
            "duration": 10,
            "store": kind,
            "process": [{"role": "producer"}, {"role": "consumer"}],
            "nemesis": [{"fault": "clock-skew", "target": "store", "every": 5, "offset": "-45s"}],
        }
    )
    fault = kinds()["clock-skew"]
    assert isinstance(fault, ClockFault)
    spec = scenario.nemesis[0]
    env = fault.start_env(spec, scenario, tmp_path)
    assert set(env) == {"store"}
    if kind == "redis":
        _clock_redis()
    store = _server(kind, tmp_path)
    assert store.preload_refusal() is None  # Redis: the libc build is chosen for this run
    store.server_env = env["store"]
    records: list[tuple[str, dict[str, Any]]] = []
    ctx = NemesisContext(
        scenario,
        Supervisor(tmp_path),
        lambda f, target, **value: records.append((f, value)),
        stores={"store": store},
    )
    store.start()
    try:
        server = store._server
        assert "faketime" in _maps(server.pid)
        assert "faketime" not in _maps(server.keeper.pid)  # the leash is knell's, untouched
        before, _ = store_offset(store)
        assert abs(before) < 0.05
        action = Action(1.0, "clock-skew", "apply", "store", 0, fault.params(spec))
        assert fault.apply(action, ctx), records
        offset, _ = store_offset(store)
        assert abs(offset + 45) < 0.05
        assert records[-1][1]["store"] is True and records[-1][1]["processes"] == []
        assert fault.heal(action, ctx), records
        offset, _ = store_offset(store)
        assert abs(offset) < 0.05
        assert [f for f, _ in records] == ["clock-skew", "clock-reset"]
        children = psutil.Process(server.pid).children(recursive=True)
        if kind == "postgres":
            # every backend that is still there (one may end while we look)
            maps = [m for m in (_maps(c.pid) for c in children) if m]
            assert maps and all("faketime" in m for m in maps)
    finally:
        store.stop()


def test_a_jemalloc_redis_server_is_refused_because_it_dies_preloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal is needed: a jemalloc ``redis-server`` started under
    libfaketime never answers (libfaketime issue #130). Should a build of
    either fix it, this fails, and the refusal can go."""
    from knell.stores.redis.server import CLOCK_SERVER_ENV

    monkeypatch.delenv(CLOCK_SERVER_ENV, raising=False)
    store = _server("redis", tmp_path)
    why = store.preload_refusal()
    if why is None:
        pytest.skip("this redis-server is not built with jemalloc")
    assert "jemalloc" in why and "libfaketime" in why
    from knell.faketime import find_library
    from knell.faketime.control import STORE, control_path, preload_env
    from knell.stores.base import StoreError

    store.server_env = preload_env(find_library(), control_path(tmp_path, STORE))
    store.ready_timeout = 3.0
    try:
        with pytest.raises(StoreError):
            store.start()
    finally:
        store.stop()


def test_a_run_moving_a_jemalloc_redis_clock_exits_3_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_redis()
    from knell.stores.redis.server import CLOCK_SERVER_ENV, RedisServer

    monkeypatch.delenv(CLOCK_SERVER_ENV, raising=False)

    if RedisServer(tmp_path / "probe", persistence="none").preload_refusal() is None:
        pytest.skip("this redis-server is not built with jemalloc")
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "redis-clock"\ndescription = "d"\nstore = "redis"\nduration = "3s"\n'
        '[[process]]\nrole = "producer"\n[[process]]\nrole = "consumer"\n'
        '[[nemesis]]\nfault = "clock-skew"\ntarget = "host"\nevery = "1s"\noffset = "5s"\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "a clock fault must move the store's clock" in done.stderr
    assert "jemalloc" in done.stderr and "Traceback" not in done.stderr


def test_a_run_preloads_only_the_processes_its_clock_specs_target(tmp_path: Path) -> None:
    """Through ``knell run``: a skew on the consumers reaches them (each
    reports its offset) and no other process: the producer has no control
    file and never reports, and the run is VALID."""
    require_postgres()
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "pg-clock-skew"\ndescription = "d"\nstore = "postgres"\nduration = "4s"\n'
        '[[process]]\nrole = "producer"\nrate = 10\n[[process]]\nrole = "consumer"\ncount = 2\n'
        '[[nemesis]]\nfault = "clock-skew"\ntarget = "consumer"\nevery = "1.5s"\n'
        'offset = "-40s"\nduration = "0.5s"\n',
        encoding="utf-8",
    )
    reports = tmp_path / "r"
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(scenario), "--reports", str(reports)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = [p for p in (reports / "pg-clock-skew").iterdir() if p.name != "latest"]
    # A worker killed at the end of the run between writing its report's
    # temporary file and renaming it leaves ``.<name>.offset.<pid>.tmp``.
    files = sorted(p.name for p in (run / "clock").iterdir() if not p.name.startswith("."))
    assert files == [
        "consumer-1.faketime",
        "consumer-1.offset",
        "consumer-2.faketime",
        "consumer-2.offset",
    ]
    events = [json.loads(line) for line in nemesis_text(run).splitlines()]
    skews = [e for e in events if e["f"] == "clock-skew" and e["type"] == "info"]
    assert skews and all(e["value"]["offset_s"] == -40.0 for e in skews)
    assert all(e["value"]["processes"] in (["consumer-1"], ["consumer-2"]) for e in skews)
    resets = [e for e in events if e["f"] == "clock-reset"]
    assert len(resets) == len(skews)
