"""Driver URLs of the Postgres and Redis buses: knell's options are taken
out and validated, the client library's pass through, secrets never show.
No server needed: the buses connect lazily, on their first call."""

from __future__ import annotations

import pytest

from knell.buses import DefiniteError, DriverError, open_bus
from knell.buses._netopts import redact


def test_options_are_read_and_the_rest_goes_to_the_client() -> None:
    pg = open_bus(
        "postgresql://u:pw@127.0.0.1:1/db?schema=run_7&poll_interval=0.02&op_timeout=3&sslmode=disable"
    )
    assert (pg.schema, pg.poll_interval, pg.op_timeout) == ("run_7", 0.02, 3.0)  # type: ignore[attr-defined]
    assert "sslmode=disable" in pg._conninfo and "schema" not in pg._conninfo  # type: ignore[attr-defined]
    assert pg.notify_channel == "knell_run_7"  # type: ignore[attr-defined]
    assert open_bus("postgresql://u@h/db?notify=0").notify_channel is None  # type: ignore[attr-defined]
    rd = open_bus("redis://:pw@127.0.0.1:1/2?prefix=run:7:&op_timeout=2")
    assert (rd.prefix, rd.op_timeout) == ("run:7:", 2.0)  # type: ignore[attr-defined]
    assert rd.log_key("a") == "run:7:log:a"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("postgresql://u@h/db?poll_interval=soon", "poll_interval must be a number"),
        ("postgresql://u@h/db?op_timeout=0", "op_timeout must be > 0"),
        ("postgresql://u@h/db?schema=bad-name", "schema='bad-name' is not a valid name"),
        ("postgresql://u@h/db?schema=" + "x" * 60, "is not a valid name"),
        ("postgresql://u@h/db?no_such_libpq_option=1", "bad postgres URL"),
        ("redis://h/0?prefix=has space", "is not a valid name"),
        ("redis://h/0?prefix=glob*", "is not a valid name"),
        ("redis://h/0?notify=maybe", "notify must be 0 or 1"),
    ],
)
def test_bad_options_are_named(url: str, match: str) -> None:
    with pytest.raises(DriverError, match=match):  # a ValueError of the driver, named
        open_bus(url)


def test_passwords_never_reach_a_message() -> None:
    assert redact("postgresql://knell:s3cret@h:5/db?x=1") == "postgresql://knell:***@h:5/db?x=1"
    assert redact("redis://:s3cret@h:5/0") == "redis://:***@h:5/0"
    assert redact("redis://h:5/0") == "redis://h:5/0"
    with pytest.raises(DriverError) as caught:
        open_bus("postgresql://u:s3cret@h/db?op_timeout=-1")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("scheme", ["postgresql", "redis"])
def test_an_unreachable_server_is_a_definite_failure(scheme: str) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bus = open_bus(f"{scheme}://u:s3cret@127.0.0.1:{port}/0?op_timeout=2")
    try:
        with pytest.raises(DefiniteError, match="cannot connect") as caught:
            bus.post("a", "m", "p")  # nothing was sent: certainly not applied
        assert "s3cret" not in str(caught.value)
        with pytest.raises(DefiniteError):
            bus.head("a")
    finally:
        bus.close()
