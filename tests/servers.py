"""Private Postgres and Redis servers for the tests, one of each per session.

Started on first use through knell's own stores (so the tests exercise
them too), stopped at the end of the session, and checked gone. A machine
without the server skips the tests that need it (and CI fails them, see
``require_server``). Each test gets its own namespace on the shared server
(a schema / a key prefix), never a shared one.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from knell.owners import Owner, reap
from knell.stores.base import StoreError
from knell.stores.nats.discovery import find_nats_server
from knell.stores.postgres.discovery import find_postgres
from knell.stores.redis.discovery import find_redis_server
from tests.conftest import require_server

__all__ = [
    "assert_gone",
    "namespaced",
    "nats_available",
    "nats_store",
    "postgres_available",
    "postgres_store",
    "redis_available",
    "redis_store",
    "server_processes",
]


def postgres_available() -> bool:
    try:
        find_postgres()
    except StoreError:
        return False
    return True


def redis_available() -> bool:
    try:
        find_redis_server()
    except StoreError:
        return False
    return True


def nats_available() -> bool:
    try:
        find_nats_server()
    except StoreError:
        return False
    return True


def require_postgres() -> None:
    require_server(
        "postgres", postgres_available(), "install postgresql (initdb) or set KNELL_POSTGRES_BIN"
    )


def require_redis() -> None:
    require_server("redis", redis_available(), "install redis-server or set KNELL_REDIS_SERVER")


def require_nats() -> None:
    require_server("nats", nats_available(), "pip install 'knell[nats]' or set KNELL_NATS_SERVER")


def server_processes(store: object) -> list[psutil.Process]:
    """The keeper, the server and everything the server forked."""
    server = getattr(store, "_server", None)
    if server is None or server.keeper is None:
        return []
    procs: list[psutil.Process] = []
    for pid in (server.keeper.pid, server.pid):
        if pid is None:
            continue
        try:
            proc = psutil.Process(pid)
            procs += [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    return procs


def assert_gone(procs: list[psutil.Process], timeout: float = 10.0) -> None:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"


@pytest.fixture(scope="session")
def postgres_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    require_postgres()
    from knell.stores.postgres.server import PostgresServer

    owner = Owner()  # a pytest killed meanwhile: `knell reap` removes its server's folders
    store = PostgresServer(tmp_path_factory.mktemp("postgres-run"), fsync=False, owner=owner)
    store.start()
    procs = server_processes(store)
    yield store
    store.stop()
    owner.close()
    assert_gone(procs)


@pytest.fixture(scope="session")
def redis_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    require_redis()
    from knell.stores.redis.server import RedisServer

    owner = Owner()
    store = RedisServer(tmp_path_factory.mktemp("redis-run"), persistence="none", owner=owner)
    store.start()
    procs = server_processes(store)
    yield store
    store.stop()
    owner.close()
    assert_gone(procs)


@pytest.fixture(scope="session")
def nats_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    require_nats()
    from knell.stores.nats.server import NatsServer

    owner = Owner()
    store = NatsServer(tmp_path_factory.mktemp("nats-run"), owner=owner)
    store.start()
    procs = server_processes(store)
    yield store
    store.stop()
    owner.close()
    assert_gone(procs)


def namespaced(
    kind: str, store: object | None, tmp: Path, *, poll: float = 0.02, **opts: str
) -> str:
    """A fresh bus URL of ``kind``: its own SQLite file, schema or key prefix."""
    extra = "".join(f"&{k}={v}" for k, v in opts.items())
    if kind == "sqlite":
        path = (tmp / f"bus-{uuid.uuid4().hex[:8]}.db").as_posix().lstrip("/")
        return f"sqlite:///{path}?poll_interval={poll}{extra}"
    admin = store.admin_url  # type: ignore[attr-defined]
    tag = uuid.uuid4().hex[:12]
    if kind == "postgres":
        return f"{admin}?schema=t_{tag}&poll_interval={poll}{extra}"
    if kind == "nats":  # a JetStream name: no ':'
        return f"{admin}?prefix=t{tag}&poll_interval={poll}{extra}"
    return f"{admin}?prefix=t{tag}:&poll_interval={poll}{extra}"


@contextmanager
def runner_until_ready(script: str, run: Path, states: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A runner process (``python -c script RUN STATES``) that provisions a
    store on record in ``states`` and touches ``RUN/ready`` once it is up;
    yielded then, for the test to SIGKILL it. On the way out it is killed
    if still alive and ``knell reap`` runs on ``states``, also when an
    assertion failed: nothing a test started is left behind."""
    from tests.integration.conftest import REPO

    runner = subprocess.Popen([sys.executable, "-c", script, str(run), str(states)], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not (run / "ready").exists():
            assert runner.poll() is None, "the runner died before the store was up"
            assert time.monotonic() < deadline, "the store did not start within 60 s"
            time.sleep(0.05)
        yield runner
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        reap(states)
