"""Shared test policy: tiers by folder, the in-process guard, servers.

**Tiers.** A test's folder says how slow it is, and the folder's marker is
added here at collection, so a new test file cannot forget it
(``tests/README.md`` maps the folders):

* ``tests/unit``, ``tests/contract`` (SQLite runs): in-process, no marker,
  ``make test-unit``;
* ``tests/integration``, ``tests/stores``: real processes and servers,
  marked ``integration``;
* ``tests/slow``: in-process but long (the check fuzz), marked ``slow``.

Any test that uses a session server (``postgres_store``, ``redis_store``,
``nats_store``) is marked ``integration`` wherever it lives.

**The guard.** A test without the ``integration`` marker that starts a
child process fails, naming the test and what it started: "fast" stays
true by construction, not by review.

**Servers.** Tests that need a server (Postgres, Redis, Docker) use
``require_server(name, available)``: on a developer's machine without the
server they skip with the reason; in CI (``KNELL_REQUIRE_SERVERS=1``, set by
``.ci/run``) a missing server is a failure, so nothing skips silently.
"""

from __future__ import annotations

import multiprocessing.process
import os
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent

# The first folder under tests/ -> the markers every test in it carries.
TIERS: dict[str, tuple[str, ...]] = {
    "integration": ("integration",),
    "stores": ("integration",),
    "slow": ("slow",),
}
SERVER_FIXTURES = frozenset({"postgres_store", "redis_store", "nats_store"})

# Audit events that start another program (``multiprocessing``'s spawn
# context forks and execs without one: its ``start`` is guarded below).
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec",
     "os.system", "os.startfile"}
)  # fmt: skip


def require_server(name: str, available: bool, how: str = "") -> None:
    if available:
        return
    reason = f"{name} is not available here{': ' + how if how else ''}"
    if os.environ.get("KNELL_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason} (KNELL_REQUIRE_SERVERS=1: CI must provide it)", pytrace=False)
    pytest.skip(reason)


def tier_markers(path: Path) -> tuple[str, ...]:
    """The markers of a test file's tier (none outside ``tests/``)."""
    try:
        top = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return ()
    return TIERS.get(top, ())


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in tier_markers(item.path):
            item.add_marker(marker)
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("integration")


_guarded: list[str] = []  # the node id of the in-process test running now, if any


def _refuse(what: str) -> None:
    raise RuntimeError(
        f"{_guarded[0]} starts a process ({what}) but is not marked integration: "
        "move it to tests/integration/ or mark it @pytest.mark.integration (tests/README.md)"
    )


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _guarded and event in PROCESS_EVENTS:
        _refuse(event)


sys.addaudithook(_audit)
_start: Callable[[multiprocessing.process.BaseProcess], None] = (
    multiprocessing.process.BaseProcess.start
)


def _guarded_start(self: multiprocessing.process.BaseProcess) -> None:
    if _guarded:
        _refuse("multiprocessing")
    _start(self)


multiprocessing.process.BaseProcess.start = _guarded_start  # type: ignore[method-assign]


def _no_leash(parent: int, *args: object, **kwargs: object) -> None:
    """The pytest process is never a knell child: a leash here (a worker's,
    a bridge's or a proxy's :func:`knell.platform.die_with_parent`, called
    in-process with another process's pid) would ``os._exit(70)`` this
    pytest-xdist worker, at once or whenever that pid ends, and the
    controller would wait for it forever. So it fails the test that did it,
    with a traceback naming the caller."""
    raise RuntimeError(
        f"a test leashed the pytest process {os.getpid()} to pid {parent} "
        "(knell.platform.die_with_parent in-process): run that code in a child process"
    )


def _forbid_leashes() -> None:
    from knell.platform import _common

    _common.leash = _no_leash  # type: ignore[assignment]


_forbid_leashes()


def _warm_font_cache() -> None:
    """Build matplotlib's font cache now, outside any test. Its first
    import on a machine runs ``fc-list``: inside an in-process test that
    draws a plot, the process guard above would refuse it, and a fresh
    machine's first ``make test`` would fail every such test (once per
    xdist worker) until something else had built the cache."""
    import matplotlib.font_manager  # noqa: F401


_warm_font_cache()


def _in_process(item: pytest.Item) -> bool:
    return item.get_closest_marker("integration") is None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guard(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guard(item))


def _guard(item: pytest.Item) -> Generator[None, object, object]:
    if not _in_process(item):
        return (yield)
    _guarded.append(item.nodeid)
    try:
        return (yield)
    finally:
        _guarded.clear()


pytest_plugins = ["tests.servers"]
