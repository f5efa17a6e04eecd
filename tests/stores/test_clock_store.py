"""The ``store`` clock target on real private servers: the server starts
preloaded (its keeper does not), a clock fault moves the clock the server
answers with (Redis ``TIME``, Postgres ``clock_timestamp()``), proves it,
and the heal brings it back to true time."""

from __future__ import annotations

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
from tests.servers import require_postgres, require_redis

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


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


@pytest.mark.parametrize("kind", ["postgres"])
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
    store = _server(kind, tmp_path)
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
            assert children and all("faketime" in _maps(c.pid) for c in children)
    finally:
        store.stop()
