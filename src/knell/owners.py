"""The owner registry: everything a run starts, on record until it is gone.

A run starts worker processes, and later private database servers, fault
proxies and containers. Each is recorded here, with the pid and start
time of the *runner* that owns it, the moment it starts. The records live
in two places: ``owners.jsonl`` in the run directory (what this run
started, for the report) and one file per runner in a per-user state
folder (``$KNELL_STATE_DIR``, default ``~/.cache/knell/owners``), which is
what :func:`reap` reads.

Why a registry and not only leashes: leashes (the parent-death signal, the
keeper of :mod:`knell.platform.keeper`) cover processes, but a container
or a Docker network has no parent, and a leash can be cut (a runner
SIGKILLed during the instant between starting a server and leashing it).
The registry is the backstop: ``knell reap``, and every ``knell run`` as it
starts, removes what belongs to runners that are no longer alive, and
never touches what a live runner owns, so concurrent runs (a matrix, xdist
workers, two terminals) never clean up each other's resources. A recorded
process is only killed if its pid still names the *same* process (same
start time), never a later one that reused the number.

Kinds of resources and who removes them:

* ``process``: a process tree (killed with :func:`knell.platform.kill_tree`),
  and, for a worker recorded with its ``session``, every process left in
  that session that carries the runner's token (``marker``) in its
  environment, re-parented grandchildren included
  (:func:`knell.platform.signal_session`);
* ``group``: a server, its process group and everything it forked
  (:func:`knell.platform.signal_server`);
* anything else (``container``, ``network``, ``volume``, a faulty disk's
  ``fs-mount``, lazily unmounted ...): a reaper
  function registered in :data:`REAPERS` as ``"module:function"``, imported
  only when such a record is reaped.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.platform import (
    kill_tree,
    pid_alive,
    process_stamp,
    process_started,
    signal_server,
    signal_session,
)

__all__ = ["REAPERS", "Owner", "reap", "state_dir"]

REAPERS: dict[str, str] = {
    # Built in, so that a fresh ``knell reap`` process knows them without
    # importing the module that created the resources.
    "directory": "knell.stores.tempdirs:remove",
    "compose-project": "knell.stores.compose.reaper:remove_project",
    "container": "knell.stores.compose.reaper:remove_container",
    "network": "knell.stores.compose.reaper:remove_network",
    "volume": "knell.stores.compose.reaper:remove_volume",
    "fs-mount": "knell.stores.disk:reap_mount",
}
"""Resource kind -> ``"module:function"`` that removes one record's
resource (called with the record's dict, returns whether it removed
anything). Other modules that create such resources register theirs."""


def state_dir() -> Path:
    """Where runner files live: ``$KNELL_STATE_DIR`` or a per-user cache."""
    env = os.environ.get("KNELL_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.environ.get("LOCALAPPDATA")
    root = Path(base) if base else Path.home() / ".cache"
    return root / "knell" / "owners"


class Owner:
    """What one runner (one run, in one process) started."""

    def __init__(self, run_dir: Path | None = None, *, states: Path | None = None) -> None:
        self.pid = os.getpid()
        started = process_started(self.pid)
        self.started = started if started is not None else time.time()
        self.stamp = process_stamp(self.pid) or ""
        """What names this process and no later one with its pid
        (:func:`knell.platform.process_stamp`): ``started`` is kept beside
        it for people and for earlier versions' reapers, which read it."""
        self.run_dir = run_dir
        self._lock = threading.Lock()
        folder = states or state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.token = uuid.uuid4().hex[:12]
        """With the pid, names this runner everywhere (its file, container labels)."""
        self.path = folder / f"runner-{self.pid}-{self.token}.jsonl"
        self._write(
            {
                "kind": "runner",
                "pid": self.pid,
                "started": self.started,
                "stamp": self.stamp,
                "run_dir": str(run_dir),
            }
        )

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
            if self.run_dir is not None and self.run_dir.is_dir():
                with open(self.run_dir / "owners.jsonl", "a", encoding="utf-8") as fh:
                    fh.write(line)

    def process(self, pid: int, name: str, *, group: bool = False, session: bool = False) -> None:
        """Record a process tree (or, ``group=True``, a process group whose
        leader is ``pid``) that this run started. ``session=True``: ``pid``
        also leads a session, whose every process carrying this runner's
        token is its (a worker: see :mod:`knell.supervisor`)."""
        record: dict[str, Any] = {
            "kind": "group" if group else "process",
            "pid": pid,
            "started": process_started(pid),
            "stamp": process_stamp(pid),
            "name": name,
        }
        if session:
            record.update(session=pid, marker=self.token)
        self._write(record)

    def resource(self, kind: str, ident: str, **info: Any) -> None:
        """Record any other resource (a container, a network...)."""
        if kind not in REAPERS:
            raise ValueError(f"no reaper registered for resource kind {kind!r}")
        self._write({"kind": kind, "id": ident, **info})

    def close(self) -> None:
        """The run cleaned up after itself: drop the runner file."""
        with self._lock:
            self.path.unlink(missing_ok=True)


def _records(path: Path) -> list[dict[str, Any]]:
    records = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line: the runner died mid-write
        if isinstance(record, dict):
            records.append(record)
    return records


def _identity(record: dict[str, Any]) -> str | float:
    """What :func:`knell.platform.pid_alive` compares: the record's stamp,
    or, in a record of an earlier version, its epoch start time."""
    stamp = record.get("stamp")
    return stamp if isinstance(stamp, str) and stamp else float(record["started"])


def _remove(record: dict[str, Any]) -> str | None:
    kind = record.get("kind")
    if kind in ("process", "group"):
        pid, started = record.get("pid"), record.get("started")
        if not isinstance(pid, int) or not isinstance(started, (int, float)):
            return None
        hit = 0
        if pid_alive(pid, _identity(record)):
            if kind == "group":
                signal_server(pid, "kill")
            else:
                kill_tree(pid)
            hit += 1
        session, marker = record.get("session"), record.get("marker")
        if isinstance(session, int) and isinstance(marker, str):
            # The leader is gone (or just killed): only the runner's own
            # token names what is left in its session.
            hit += signal_session({session}, "kill", marker)
        if not hit:
            return None
        return f"{kind} {record.get('name', '')} (pid {pid})"
    target = REAPERS.get(str(kind))
    if target is None:
        return None
    module, _, function = target.partition(":")
    remover: Callable[[dict[str, Any]], bool] = getattr(importlib.import_module(module), function)
    if remover(record):
        return f"{kind} {record.get('id', '')}"
    return None


def reap(states: Path | None = None, *, say: Callable[[str], None] = lambda _: None) -> list[str]:
    """Remove everything recorded by runners that are no longer alive;
    return what was removed. Runner files of live runners are left alone."""
    folder = states or state_dir()
    removed: list[str] = []
    if not folder.is_dir():
        return removed
    for path in sorted(folder.glob("runner-*.jsonl")):
        records = _records(path)
        runner = next((r for r in records if r.get("kind") == "runner"), None)
        if runner is not None:
            pid, started = runner.get("pid"), runner.get("started")
            alive = isinstance(pid, int) and isinstance(started, (int, float))
            if alive and pid_alive(int(pid), _identity(runner)):  # type: ignore[arg-type]
                continue
        else:
            try:
                if time.time() - path.stat().st_mtime < 5:
                    continue  # being written right now
            except FileNotFoundError:
                continue  # another reaper (a run starting elsewhere) removed it just now
        # Reverse order: the last started (servers, containers) go first.
        for record in reversed(records):
            try:
                what = _remove(record)
            except Exception as exc:  # one stuck resource must not stop the rest
                say(f"could not remove {record.get('kind')} {record.get('id', '')}: {exc}")
                continue
            if what is not None:
                removed.append(what)
                say(f"removed {what} (owner runner {runner and runner.get('pid')} is gone)")
        path.unlink(missing_ok=True)
    return removed
