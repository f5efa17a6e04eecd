"""The one redaction point: URLs, settings tables and free text lose their
secrets before anything is written or shown (knell.redact)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from knell.history_files import file_lines, part_path
from knell.redact import (
    BUS_URL_ENV,
    bus_env,
    is_secret_key,
    redact_settings,
    redact_text,
    redact_url,
    scrub,
    secrets_of,
)
from knell.runner import _public
from knell.stores.redis.server import RedisServer, _conf_quote
from knell.supervisor import Supervisor

PW = "s3cr3t-Pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{PW}@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        (
            f"redis://:{PW}@127.0.0.1:6379/0?prefix=knell:&op_timeout=5",
            "redis://:***@127.0.0.1:6379/0?prefix=knell:&op_timeout=5",
        ),
        (
            f"postgresql://knell:{PW}@[::1]:5432/db?schema=x",
            "postgresql://knell:***@[::1]:5432/db?schema=x",
        ),
        (
            f"postgresql://knell@h/db?password={PW}&sslmode=disable",
            "postgresql://knell@h/db?password=***&sslmode=disable",
        ),
        ("redis://127.0.0.1:6379/0?prefix=a:", "redis://127.0.0.1:6379/0?prefix=a:"),
        ("sqlite:///tmp/bus.db", "sqlite:///tmp/bus.db"),
        ("my_bus:factory", "my_bus:factory"),
        ("exec:node adapter.js", "exec:node adapter.js"),
    ],
)
def test_a_url_keeps_where_the_store_is_and_loses_its_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert PW not in redact_url(url)


def test_a_password_with_url_special_characters_is_hidden_whole() -> None:
    url = "redis://user:p%40ss%3Aw@h:1/0"
    assert redact_url(url) == "redis://user:***@h:1/0"
    assert scrub("failed: p@ss:w and p%40ss%3Aw", url) == "failed: *** and ***"


def test_a_placeholder_other_than_the_mask() -> None:
    assert redact_url(f"redis://:{PW}@h:1/0", "$X") == "redis://:$X@h:1/0"


def test_an_unparseable_url_still_hides_what_looks_like_a_password() -> None:
    assert PW not in redact_url(f"redis://:{PW}@h:notaport/0")


def test_scrub_removes_the_url_and_the_bare_password_from_text() -> None:
    url = f"redis://:{PW}@h:1/0"
    text = f"cannot open {url}: AUTH {PW} refused"
    assert scrub(text, url) == "cannot open redis://:***@h:1/0: AUTH *** refused"
    assert secrets_of("redis://h:1/0") == []


@pytest.mark.parametrize(
    "key", ["password", "requirepass", "masterauth", "tls-key-file-pass", "token", "sslpassword"]
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["port", "kind", "appendonly", "bind", "fsync", "data_dir"])
def test_plain_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_a_settings_table_is_masked_at_every_depth() -> None:
    table = {
        "kind": "redis",
        "url": f"redis://:{PW}@h:1/0",
        "password": PW,
        "port": 7000,
        "keep": None,
        "settings": {"requirepass": PW, "maxmemory": "1gb"},
    }
    shown = redact_settings(table)
    assert PW not in json.dumps(shown)
    assert shown == {
        "kind": "redis",
        "url": "redis://:***@h:1/0",
        "password": "***",
        "port": 7000,
        "keep": None,
        "settings": {"requirepass": "***", "maxmemory": "1gb"},
    }


def test_the_scenario_json_of_a_run_holds_no_password() -> None:
    data = {"name": "x", "store": {"kind": "redis", "password": PW, "settings": {"masterauth": PW}}}
    assert PW not in json.dumps(_public(data))


def test_a_worker_gets_a_secret_url_through_its_environment_only() -> None:
    assert bus_env(f"redis://:{PW}@h:1/0") == {BUS_URL_ENV: f"redis://:{PW}@h:1/0"}
    assert bus_env("redis://h:1/0") == {}


def test_the_supervisor_never_passes_on_an_inherited_bus_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUS_URL_ENV, "redis://:other@h:1/0")
    supervisor = Supervisor(tmp_path)
    assert BUS_URL_ENV not in supervisor.env
    worker = supervisor.add("w", tmp_path / "w.json", env={BUS_URL_ENV: "x"})
    assert worker.env == {BUS_URL_ENV: "x"}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_the_private_redis_gets_its_password_from_a_private_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "run", password=PW, settings={"masterauth": PW})
    server.binary = Path("/usr/bin/redis-server")
    server.port = 6390
    try:
        command = server._command()
        assert PW not in " ".join(command)
        conf = Path(command[1])
        assert conf.name == "secrets.conf" and not conf.is_relative_to(tmp_path / "run")
        assert conf.read_text(encoding="utf-8") == f'requirepass "{PW}"\nmasterauth "{PW}"\n'
        assert conf.stat().st_mode & 0o777 == 0o600
        assert conf.parent.stat().st_mode & 0o777 == 0o700
        assert "--port" in command and "--requirepass" not in command
    finally:
        server.stop()
    assert not conf.parent.exists()


def test_no_password_no_config_file(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "run")
    server.binary = Path("/usr/bin/redis-server")
    server.port = 6390
    assert server._command()[1] == "--port"


def test_a_redis_config_value_is_one_quoted_argument() -> None:
    assert _conf_quote('a b"c\\d') == '"a b\\"c\\\\d"'
    assert _conf_quote("é\n") == '"\\xc3\\xa9\\x0a"'


def test_a_worker_spec_on_disk_holds_no_password_and_the_worker_gets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner writes the redacted URL into workers/<name>.json and puts
    the real one in the worker's environment; the worker reads it from
    there and leaves none for what it starts."""
    from knell.runner import _Run
    from knell.workload.__main__ import load_spec
    from knell.workload.params import DrainParams

    (tmp_path / "workers").mkdir()
    run = _Run.__new__(_Run)  # only the parts _add_worker uses: no run is started
    run.run_dir = tmp_path
    run.supervisor = Supervisor(tmp_path)
    url = f"redis://:{PW}@127.0.0.1:6379/0?prefix=knell:"
    run._add_worker("drain-1", "drain", DrainParams(handle="h", channel="c"), url, None)
    path = tmp_path / "workers" / "drain-1.json"
    assert PW not in path.read_text(encoding="utf-8")
    env = run.supervisor.workers["drain-1"].env
    assert env == {BUS_URL_ENV: url}
    monkeypatch.setenv(BUS_URL_ENV, url)
    assert load_spec(path).bus_url == url
    assert BUS_URL_ENV not in os.environ


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            f"OperationalError: connection to postgresql://knell:{PW}@127.0.0.1:5432/db failed",
            "OperationalError: connection to postgresql://knell:***@127.0.0.1:5432/db failed",
        ),
        (
            f"KeyError: 'redis://:{PW}@h:6379/0?prefix=k:&op_timeout=5'",
            "KeyError: 'redis://:***@h:6379/0?prefix=k:&op_timeout=5'",
        ),
        (
            f"see http://h:8080/v1?timeout=3&token={PW} and postgresql://u@h/db?password={PW}",
            "see http://h:8080/v1?timeout=3&token=*** and postgresql://u@h/db?password=***",
        ),
        ('File "/src/knell/x.py", line 3: a: b@c', 'File "/src/knell/x.py", line 3: a: b@c'),
    ],
)
def test_text_loses_the_secrets_of_every_url_in_it(text: str, shown: str) -> None:
    assert redact_text(text) == shown


class _LeakyBus:
    """A bus whose errors quote its URL, password and all (a test double of
    a user's driver, inside a unit test of the worker around it)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def post(self, *_: object) -> None:
        raise ConnectionError(f"cannot reach {self.url}")

    def ack(self, *_: object) -> None:
        from knell.buses import DefiniteError

        raise DefiniteError(f"refused by {self.url} (password {PW})")

    def subscribe(self, *_: object) -> None: ...
    def fetch(self, *_: object) -> None: ...
    def cursor(self, *_: object) -> None: ...
    def head(self, *_: object) -> None: ...
    def wait(self, *_: object) -> None: ...
    def close(self) -> None: ...


def leaky_bus(url: str) -> _LeakyBus:
    return _LeakyBus(url)


def test_a_driver_error_quoting_the_url_is_recorded_without_its_password(
    tmp_path: Path,
) -> None:
    from knell.workload.params import DrainParams
    from knell.workload.worker import OpFailed, Worker, WorkerSpec

    (tmp_path / "history").mkdir()
    spec = WorkerSpec(
        name="drain-1",
        role="drain",
        bus_url=f"redis://:{PW}@127.0.0.1:6379/0",
        driver=f"{__name__}:leaky_bus",
        history_dir=str(tmp_path / "history"),
        control_dir=str(tmp_path),
        params=DrainParams(handle="h", channel="c"),
    )
    worker = Worker(spec, 1, None)
    try:
        for f, call in (("post", worker.bus.post), ("ack", worker.bus.ack)):
            with pytest.raises(OpFailed) as failed:
                worker.op(f, {}, call, lambda _: {})
            assert PW not in str(failed.value) and "***" in str(failed.value)
    finally:
        worker.close()
    history = b"".join(file_lines(part_path(tmp_path / "history", "drain-1", 1))).decode()
    assert PW not in history and history.count("***") >= 2


def test_an_internal_error_quoting_a_url_is_written_and_shown_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from knell.cli import _internal

    monkeypatch.setenv("KNELL_STATE_DIR", str(tmp_path))
    try:
        raise RuntimeError(f"lost postgresql://knell:{PW}@127.0.0.1:5432/postgres")
    except RuntimeError as exc:
        assert _internal(exc) == 4
    [crash] = (tmp_path / "knell-errors").iterdir()
    text = crash.read_text(encoding="utf-8")
    assert PW not in text and "knell:***@127.0.0.1" in text
    shown = capsys.readouterr().err
    assert "internal error" in shown and PW not in shown
