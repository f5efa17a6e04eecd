"""A store password stays secret through a whole run: short runs through the
CLI with a password on a private Redis or Postgres (``[store] password``,
with and without HTTP bridges), a secret ``[store] settings`` key on a
private Postgres, and a password on an existing Redis or Postgres
(``--store-url``, ``KNELL_EXISTING_STORE_URL``) leave no copy of it in any file under
the run directory, in the terminal's output, or on the command line of any
process the run starts (``ps``), the private server and its keeper
included. The replay line names the existing server with a placeholder
instead."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from knell.redact import STORE_URL_ENV
from knell.report.replay import PASSWORD_ENV
from tests.integration.conftest import REPO
from tests.servers import require_postgres, require_redis

pytestmark = pytest.mark.integration

PW = "Sekr1t-pw-0f-this-run"


def _scenario(tmp_path: Path, base: str, store: str) -> Path:
    """A shipped scenario with its store line replaced."""
    text = (REPO / "scenarios" / f"{base}.toml").read_text(encoding="utf-8")
    assert 'store = "sqlite"\n' in text
    path = tmp_path / f"{base}-secret.toml"
    path.write_text(text.replace('store = "sqlite"\n', f"store = {store}\n", 1), encoding="utf-8")
    return path


def _run_watching_ps(
    args: list[str], reports: Path, env: dict[str, str] | None = None
) -> tuple[int, str, set[str]]:
    """Run ``knell run`` and read every descendant's command line while it
    runs: (exit code, output, the command lines seen). The command the user
    typed is theirs: only what knell starts is looked at. A child caught
    between fork and exec still shows its parent's command line: that line
    is the user's own too, and is left out."""
    typed = [sys.executable, "-m", "knell", "run", *args, "--reports", str(reports)]
    proc = subprocess.Popen(
        typed,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: set[str] = set()
    root = psutil.Process(proc.pid)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        for child in _descendants(root):
            try:
                line = " ".join(child.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if line != " ".join(typed):
                seen.add(line)
        time.sleep(0.1)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, seen


def _descendants(root: psutil.Process) -> Iterator[psutil.Process]:
    try:
        yield from root.children(recursive=True)
    except psutil.NoSuchProcess:
        return


def _files_holding(folder: Path, secret: str) -> list[str]:
    needle = secret.encode()
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and needle in p.read_bytes()
    ]


def _check(reports: Path, code: int, out: str, seen: set[str]) -> Path:
    runs = list(reports.rglob("scenario.json"))
    assert len(runs) == 1, out
    run_dir = runs[0].parent
    assert code in (0, 1, 2), out  # a verdict was reached, whatever it is
    assert (run_dir / "workers").is_dir() and any((run_dir / "workers").iterdir())
    assert (run_dir / "report.md").exists()
    assert _files_holding(reports, PW) == []  # the run directory and the index
    assert PW not in out
    assert [line for line in seen if PW in line] == []
    assert any("knell.workload" in line for line in seen), "the workers were looked at"
    return run_dir


@pytest.mark.parametrize(
    ("kind", "base"),
    [("redis", "quickstart"), ("redis", "bridge-mixed"), ("postgres", "quickstart")],
)
def test_a_private_store_password_is_nowhere_to_be_read(
    tmp_path: Path, kind: str, base: str
) -> None:
    require_redis() if kind == "redis" else require_postgres()
    scenario = _scenario(tmp_path, base, f'{{ kind = "{kind}", password = "{PW}" }}')
    reports = tmp_path / "reports"
    code, out, seen = _run_watching_ps([str(scenario), "--duration", "3s"], reports)
    _check(reports, code, out, seen)
    server = "redis-server" if kind == "redis" else "postgres -D"
    assert any(server in line for line in seen), "the private server's command line was looked at"
    if base == "bridge-mixed":
        assert any("knell.bridge" in line for line in seen), "the bridges were looked at"


def test_a_secret_postgres_setting_is_nowhere_to_be_read(tmp_path: Path) -> None:
    """A ``[store] settings`` key that names a secret reaches the private
    server through a config file of its own, never its command line (Redis
    does the same: test_a_private_store_password_is_nowhere_to_be_read)."""
    require_postgres()
    store = f'{{ kind = "postgres", settings = {{ "app.api_token" = "{PW}" }} }}'
    scenario = _scenario(tmp_path, "quickstart", store)
    reports = tmp_path / "reports"
    code, out, seen = _run_watching_ps([str(scenario), "--duration", "3s"], reports)
    _check(reports, code, out, seen)
    assert any("postgres -D" in line for line in seen), "the server's command line was looked at"


def test_a_secret_postgres_setting_is_read_back_as_given(tmp_path: Path) -> None:
    """The config file quotes what Postgres's parser unquotes (a quote, a
    backslash), survives a crash and restart, and is gone after the stop;
    the cluster's own postgresql.conf still applies."""
    require_postgres()
    import psycopg

    from knell.stores.postgres.server import PostgresServer

    value = f"{PW}'with\\odd\"bits"
    server = PostgresServer(tmp_path / "run", settings={"app.api_token": value})
    server.start()
    try:
        assert value not in " ".join(psutil.Process(server._server.pid).cmdline())  # type: ignore[union-attr]
        server.crash()
        server.restart()
        server.wait_ready(60)
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            assert conn.execute("SHOW app.api_token").fetchone() == (value,)
            files = conn.execute("SELECT DISTINCT sourcefile FROM pg_file_settings").fetchall()
        data = server.data_dir
        folder = server._secrets
        assert folder is not None and (folder / "postgresql.conf").stat().st_mode & 0o077 == 0
        assert data is not None and (str(data.resolve() / "postgresql.conf"),) in files, files
    finally:
        server.stop()
    assert not folder.exists()


def test_an_existing_postgres_password_is_nowhere_to_be_read(tmp_path: Path) -> None:
    """The same for a Postgres server of the user's own, given in the
    environment: the run's schema is made and dropped through the URL."""
    require_postgres()
    from knell.stores.postgres.server import PostgresServer

    server = PostgresServer(tmp_path / "server", password=PW)
    server.start()
    try:
        url = server.admin_url
        assert PW in url
        reports = tmp_path / "reports"
        args = ["scenarios/quickstart.toml", "--duration", "3s"]
        code, out, seen = _run_watching_ps(args, reports, env={STORE_URL_ENV: url})
    finally:
        server.stop()
    _check(reports, code, out, seen)
    replay = next(line for line in out.splitlines() if line.startswith("replay: "))
    assert f"${{{PASSWORD_ENV}}}@127.0.0.1:{server.port}" in replay


@pytest.mark.parametrize("given", ["argument", "environment"])
def test_an_existing_store_password_is_nowhere_to_be_read(tmp_path: Path, given: str) -> None:
    """Given on the command line, the URL is in the user's own command and
    nowhere else; given in ``KNELL_EXISTING_STORE_URL``, it is on no command line at
    all."""
    require_redis()
    from knell.stores.redis.server import RedisServer

    server = RedisServer(tmp_path / "server", persistence="none", password=PW)
    server.start()
    try:
        command = " ".join(psutil.Process(server._server.pid).cmdline())  # type: ignore[union-attr]
        assert PW not in command
        url = f"redis://:{PW}@127.0.0.1:{server.port}/0"
        reports = tmp_path / "reports"
        args = ["scenarios/quickstart.toml", "--duration", "3s"]
        if given == "argument":
            code, out, seen = _run_watching_ps([*args, "--store-url", url], reports)
        else:
            code, out, seen = _run_watching_ps(args, reports, env={STORE_URL_ENV: url})
    finally:
        server.stop()
    run_dir = _check(reports, code, out, seen)
    replay = next(line for line in out.splitlines() if line.startswith("replay: "))
    assert f'--store-url "redis://:${{{PASSWORD_ENV}}}@127.0.0.1:{server.port}/0"' in replay
    assert "--store-url" in (run_dir / "report.md").read_text(encoding="utf-8")
