"""Bad store input: a clear :class:`StoreError` naming the problem, and
nothing left running.

Each case a person can cause: an unreachable ``store_url``, refused
credentials, a port in use, a data directory that is not writable, a
missing server binary, and options that do not fit the store.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from knell.platform import is_root
from knell.stores import Store, StoreError, StoreSpec, create_store
from knell.stores.postgres import discovery as pg_discovery
from knell.stores.redis import discovery as redis_discovery
from tests.servers import require_postgres, require_redis


def _server_children() -> set[int]:
    """Keepers and servers this test process started (and that still run)."""
    return {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    }


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.NoSuchProcess:
        return ""


@pytest.fixture
def nothing_left() -> Iterator[None]:
    before = _server_children()
    yield
    after = _server_children() - before
    assert not after, f"left running: {[psutil.Process(p).cmdline() for p in after]}"


def fails(spec: StoreSpec, run_dir: Path, match: str) -> StoreError:
    store: Store | None = None
    with pytest.raises(StoreError, match=match) as caught:
        store = create_store(spec, run_dir)
        store.start()
    if store is not None:
        store.stop()
    message = str(caught.value)
    assert "Traceback" not in message and "\n  File " not in message
    return caught.value


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something already listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- unreachable, refused ------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgresql", "redis"])
def test_an_unreachable_store_url(tmp_path: Path, scheme: str, nothing_left: None) -> None:
    port = _closed_port()
    kind = "postgres" if scheme == "postgresql" else "redis"
    url = f"{scheme}://knell:s3cret@127.0.0.1:{port}/" + ("postgres" if kind == "postgres" else "0")
    error = fails(StoreSpec(kind=kind, url=url), tmp_path, "is unreachable")
    assert f"127.0.0.1:{port}" in str(error)
    assert "s3cret" not in str(error)  # the password never reaches a message


@pytest.mark.integration
def test_a_postgres_store_url_with_bad_credentials(tmp_path: Path, nothing_left: None) -> None:
    require_postgres()
    server = create_store(StoreSpec(kind="postgres", password="right-one"), tmp_path / "server")
    try:
        server.start()
        port = server.port  # type: ignore[attr-defined]
        url = f"postgresql://knell:wrong-one@127.0.0.1:{port}/postgres"
        error = fails(
            StoreSpec(kind="postgres", url=url), tmp_path / "run", "refused the credentials"
        )
        assert "wrong-one" not in str(error)
        good = f"postgresql://knell:right-one@127.0.0.1:{port}/postgres"
        store = create_store(StoreSpec(kind="postgres", url=good), tmp_path / "ok")
        store.start()
        store.stop()
    finally:
        server.stop()


@pytest.mark.integration
def test_a_redis_store_url_with_bad_credentials(tmp_path: Path, nothing_left: None) -> None:
    require_redis()
    server = create_store(StoreSpec(kind="redis", password="right-one"), tmp_path / "server")
    try:
        server.start()
        port = server.port  # type: ignore[attr-defined]
        url = f"redis://:wrong-one@127.0.0.1:{port}/0"
        error = fails(StoreSpec(kind="redis", url=url), tmp_path / "run", "refused the credentials")
        assert "wrong-one" not in str(error)
    finally:
        server.stop()


# -- private servers -----------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_port_in_use(tmp_path: Path, kind: str, listening: int, nothing_left: None) -> None:
    require_postgres() if kind == "postgres" else require_redis()
    fails(
        StoreSpec(kind=kind, port=listening), tmp_path, f"port {listening} on 127.0.0.1 is in use"
    )


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_data_directory_that_is_not_writable(
    tmp_path: Path, kind: str, nothing_left: None
) -> None:
    require_postgres() if kind == "postgres" else require_redis()
    if is_root():
        target = "/proc/knell-cannot-live-here"  # not writable even for root
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        target = str(locked / "data")
    fails(
        StoreSpec(kind=kind, data_dir=target), tmp_path / "run", "data directory .* is not writable"
    )


@pytest.mark.integration
@pytest.mark.skipif(
    sys.platform == "win32" or not is_root(), reason="only root runs Postgres as another user"
)
def test_postgres_data_directory_its_user_cannot_reach(tmp_path: Path, nothing_left: None) -> None:
    require_postgres()
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    fails(
        StoreSpec(kind="postgres", data_dir=str(private / "data")),
        tmp_path / "run",
        "data directory .* is not writable by user 'postgres'",
    )


def test_a_missing_server_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nothing_left: None
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    fails(
        StoreSpec(kind="postgres", bin=str(empty)),
        tmp_path,
        "no initdb and postgres in that folder",
    )
    fails(
        StoreSpec(kind="redis", bin=str(empty / "redis-server")), tmp_path, "no such redis-server"
    )
    monkeypatch.setenv("KNELL_POSTGRES_BIN", str(empty))
    fails(StoreSpec(kind="postgres"), tmp_path, "KNELL_POSTGRES_BIN=.*no initdb")
    monkeypatch.setenv("KNELL_REDIS_SERVER", str(empty / "nope"))
    fails(StoreSpec(kind="redis"), tmp_path, "KNELL_REDIS_SERVER=.*no such")


def test_nothing_found_anywhere_says_where_it_looked(monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine without the servers: nothing on PATH, nothing in the usual places.
    monkeypatch.delenv("KNELL_POSTGRES_BIN", raising=False)
    monkeypatch.delenv("KNELL_REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(pg_discovery, "_POSTGRES_GLOBS", ("/nonexistent/postgresql/*/bin",))
    monkeypatch.setattr(redis_discovery, "_REDIS_PLACES", ("/nonexistent/bin",))
    with pytest.raises(StoreError, match=r"no Postgres server binaries .* KNELL_POSTGRES_BIN"):
        pg_discovery.find_postgres()
    with pytest.raises(StoreError, match=r"no redis-server found .* KNELL_REDIS_SERVER"):
        redis_discovery.find_redis_server()


def test_debian_layout_is_searched_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("9.6", "13", "15"):
        folder = tmp_path / "lib" / version / "bin"
        folder.mkdir(parents=True)
        (folder / "initdb").write_text("")
        (folder / "postgres").write_text("")
    monkeypatch.delenv("KNELL_POSTGRES_BIN", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(pg_discovery, "_POSTGRES_GLOBS", (str(tmp_path / "lib" / "*" / "bin"),))
    assert pg_discovery.find_postgres().folder == tmp_path / "lib" / "15" / "bin"


# -- options that do not fit ---------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (StoreSpec(kind="mongo"), "sqlite, nats, postgres or redis"),
        (StoreSpec(kind="redis", fsync=False), "'fsync' does not apply to a redis store"),
        (StoreSpec(kind="postgres", persistence="always"), "'persistence' does not apply"),
        (StoreSpec(kind="postgres", synchronous_commit="sometimes"), "synchronous_commit must be"),
        (StoreSpec(kind="redis", persistence="rdb"), "persistence must be one of"),
        (StoreSpec(kind="sqlite", url="postgresql://x/y"), "store_url is for postgres or redis"),
        (StoreSpec(kind="postgres", url="redis://127.0.0.1/0"), "store_url is a redis URL"),
        (StoreSpec(kind="redis", url="http://x"), "expected a postgresql:// or redis://"),
        (
            StoreSpec(kind="postgres", url="postgresql://x/y", port=5),
            "'port' does not apply to an external",
        ),
        (StoreSpec(kind="postgres", crash_command="true"), "'crash_command' is for an external"),
        (StoreSpec(kind="postgres", port=70000), "port must be between"),
        (StoreSpec(kind="redis", op_timeout=0), "op_timeout must be > 0"),
        (
            StoreSpec(kind="postgres", url="postgresql://x/y?schema=bad-name"),
            "schema='bad-name' is not a valid",
        ),
    ],
)
def test_options_that_do_not_fit_are_named(tmp_path: Path, spec: StoreSpec, match: str) -> None:
    with pytest.raises(StoreError, match=match):
        create_store(spec, tmp_path)


def test_store_faults_a_store_cannot_take_are_refused(tmp_path: Path) -> None:
    sqlite = create_store(StoreSpec(kind="sqlite"), tmp_path)
    assert sqlite.faults == frozenset()
    with pytest.raises(StoreError, match="store-crash needs a store server"):
        sqlite.crash()
    with pytest.raises(StoreError, match="store-pause needs a store server"):
        sqlite.pause()
    external = create_store(StoreSpec(kind="redis", url="redis://127.0.0.1:1/0"), tmp_path)
    assert external.faults == frozenset()
    with pytest.raises(StoreError, match="needs crash_command and restart_command"):
        external.crash()
    with pytest.raises(StoreError, match="store-pause needs a private server"):
        external.pause()
    scripted = create_store(
        StoreSpec(
            kind="redis", url="redis://127.0.0.1:1/0", crash_command="false", restart_command="true"
        ),
        tmp_path,
    )
    assert scripted.faults == frozenset({"crash"})
    with pytest.raises(StoreError, match="crash_command 'false' failed"):
        scripted.crash()
    scripted.restart()


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ('fault = "store-disconnect"', 'only a containerized store can: provider = "compose"'),
        ('fault = "store-restart"', "store-restart needs a store that can restart"),
    ],
)
def test_container_faults_on_a_private_server_are_refused_before_anything_starts(
    tmp_path: Path, fault: str, match: str
) -> None:
    from knell.errors import KnellError
    from knell.runner import run_scenario
    from knell.scenario import load_scenario

    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\ndescription = "d"\nduration = "2s"\nstore = "redis"\n'
        '[[process]]\nrole = "producer"\n'
        f'[[nemesis]]\n{fault}\nevery = "1s"\n',
        encoding="utf-8",
    )
    # This process's children only: under xdist another worker starts its own servers.
    before = _server_children()
    with pytest.raises(KnellError, match=match) as caught:
        run_scenario(load_scenario(path), reports=tmp_path / "reports")
    assert caught.value.exit_code == 3
    assert not any((tmp_path / "reports").glob("s/*")), "nothing half-written"
    started = _server_children() - before
    assert not [pid for pid in started if "redis" in _name(pid)]
