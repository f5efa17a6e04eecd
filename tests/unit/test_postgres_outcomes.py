"""Which Postgres error replies mean "rolled back" (a definite failure)
and which leave a write's outcome unknown. Seen under a full disk: the
WAL flush of a commit failed, Postgres PANICked with SQLSTATE 53100
(disk_full), and after its crash recovery the post it had refused was
there (post-outcome: failed-but-applied)."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg

from knell.stores.postgres.bus import rolled_back


def _reply(sqlstate: str, severity: str) -> psycopg.Error:
    """An error reply of ``severity``: the class psycopg raises for the
    SQLSTATE, with its diagnostics' severity set (psycopg reads them from
    the server's reply, which a unit test has none of)."""
    base = psycopg.errors.lookup(sqlstate)
    diag = SimpleNamespace(severity_nonlocalized=severity, severity=severity)
    reply = type("Reply", (base,), {"diag": property(lambda self: diag)})
    return reply(f"{severity}: a reply")  # type: ignore[no-any-return]


def test_an_error_reply_rolled_back() -> None:
    assert rolled_back(_reply("53100", "ERROR"))  # a full disk refusing a statement
    assert rolled_back(_reply("23505", "ERROR"))


def test_a_panic_at_the_commit_flush_did_not_roll_back() -> None:
    assert not rolled_back(_reply("53100", "PANIC"))


def test_a_dead_session_did_not_roll_back() -> None:
    assert not rolled_back(_reply("57P01", "FATAL"))
    assert not rolled_back(_reply("08006", "ERROR"))
    assert not rolled_back(psycopg.OperationalError("connection lost"))
