"""The history: what every process asked of the bus and what it saw.

This is Jepsen's model. Each operation is an ``invoke`` event followed by
exactly one completion: ``ok`` (it happened, here is what came back),
``fail`` (it definitely did not happen) or ``info`` (unknown: a timeout, a
reset, a crash). A process that is SIGKILLed mid-operation simply leaves an
invoke without a completion, which the checker treats like ``info``.

One event is one JSON object on one line::

    {"time": 1732871234123456789, "process": "consumer-1", "incarnation": 3,
     "pid": 4242, "type": "invoke", "f": "ack", "handle": "worker",
     "channel": "events", "value": {"up_to": 17}}

``value`` shapes per ``f`` (invoke -> ok):

=========  ===================================  ==========================================
f          invoke value                         ok value
=========  ===================================  ==========================================
post       {"id", "sender", "key"?}             the same plus "seq"
subscribe  {"at": "head" | "start"}             {"cursor"}
fetch      {"after": n | null}                  {"messages": [{"seq", "id"}, ...]}
handle     (single ok event)                    {"seq", "id"}
ack        {"up_to"}                            {"cursor"}
cursor     {}                                   {"cursor"}
head       {}                                   {"head"}
arm        {"timeout", "cursors"?}              {"rang": bool}
wake       (single ok event)                    {"seq", "sender", "reason"}
=========  ===================================  ==========================================

Queue channels (``channel`` at the top level; ``id`` is always the body's
unique id, ``msg`` the bus's own id of the message)::

    declare       {"max_deliveries"}            {"max_deliveries", "sweep_interval"}
    claim         {"consumer", "lease_s"}       {"consumer", "lease_s", "id": null} when
                                                nothing is claimable, else also "msg",
                                                "seq", "deliveries"
    renew         {"consumer", "id", "msg",     the same
                   "lease_s"}
    done/release  {"consumer", "id", "msg"}     the same
    work          (single ok event)             {"consumer", "id", "msg"}: the work done
    dead          {"after"}                     {"after", "messages": [{"id", "seq", "msg",
                                                "deliveries"}]}

At-most-once roles (``channel`` is the role)::

    claim_role    {"run", "lease_s"}            the same
    release_role  {"run"}                       the same
    receive       {"run", "limit"}              {"run", "limit", "messages": [{"id", "seq",
                                                "msg"}]}
    read          {"run", "id", "msg"}          the same
    stranded      {"run"?}                      {"messages": [{"id", "seq", "msg", "sender",
                                                "run", "at"}]}

A ``fail`` that is a refusal the contract requires (a lapsed holder's
``done``, a ``read`` by another run) carries ``"refused": kind`` as well.

``fail``/``info`` completions carry ``{"error": text}`` merged into the
invoke's value. Each value's fields and types are pydantic models in
:mod:`knell.history_schema`; the page ``docs/history.md`` says which check
reads which field and what ``knell check`` holds a history to
(:mod:`knell.checker.wellformed`). Nemesis actions (kill, pause, resume, restart, ...) are
events of the process ``"nemesis"`` with the target in ``value``.

Times are true wall-clock time even in a process whose clock a clock
fault moved (:mod:`knell.faketime.truetime`): histories of different
processes are compared by real time.

Why a hand-written writer: the one property that matters is that SIGKILL
can tear only the *last* event of a file. That holds when every event is a
single ``write()`` of one whole line (in a part, of its zstd block:
:mod:`knell.history_files`) to a descriptor opened ``O_APPEND``, which a
logging library does not promise. The reader mirrors it: a torn final line
(or block) is skipped and reported, a torn line anywhere else is an error.
"""

from __future__ import annotations

import heapq
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from knell.errors import KnellError
from knell.faketime.truetime import time_ns as true_time_ns
from knell.history_files import LineEncoder, open_lines, open_merged_writer

__all__ = [
    "OPERATIONS",
    "Event",
    "HistoryError",
    "HistoryReader",
    "HistoryWriter",
    "merge_histories",
    "read_history",
]

Event = dict[str, Any]
"""One history event. A plain dict: the checker reads millions of them and
attribute access through a model would dominate its cost."""

COMPLETIONS = ("ok", "fail", "info")
OPERATIONS = (
    "post",
    "subscribe",
    "fetch",
    "ack",
    "cursor",
    "head",
    "arm",
    "declare",
    "claim",
    "renew",
    "done",
    "release",
    "dead",
    "claim_role",
    "release_role",
    "receive",
    "read",
    "stranded",
    "declare_stream",
    "stream_tail",
)
"""The ``f`` of every operation a worker invokes on a bus (each an invoke and
one completion); everything else a worker logs is a single event."""
_TYPES = frozenset(("invoke", *COMPLETIONS))
REQUIRED = ("time", "process", "type", "f")
"""The fields every event must have, whatever its ``f``."""


def _what_is_wrong(event: object) -> str:
    """Why a parsed line is not a history event, in one phrase."""
    if not isinstance(event, dict):
        return f"not a history event (a JSON {type(event).__name__}, not an object)"
    for field_name in REQUIRED:
        if event.get(field_name) is None:
            return f"not a history event: {field_name!r} is missing or null"
    time_value = event["time"]
    if type(time_value) is not int:
        return f"'time' must be an integer number of nanoseconds, got {time_value!r:.40}"
    if not isinstance(event["type"], str) or event["type"] not in _TYPES:
        return f"'type' must be one of invoke, ok, fail, info, got {event['type']!r:.40}"
    for field_name in ("process", "f"):
        if type(event[field_name]) is not str:
            return f"{field_name!r} must be a string, got {event[field_name]!r:.40}"
    return "not a history event"


class HistoryError(KnellError):
    """A history file cannot be read as a history (named file and line)."""


class HistoryWriter:
    """Appends events for one process incarnation, one ``write()`` each."""

    def __init__(self, path: Path, process: str, incarnation: int) -> None:
        self.path = path
        self.process = process
        self.incarnation = incarnation
        self.pid = os.getpid()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._encode = LineEncoder(path)
        self._lock = threading.Lock()
        """One event at a time through the compressor: the runner's nemesis
        writer is shared with fault threads (a clock fault's ticker), and a
        zstd stream, unlike appended lines, cannot take two at once."""

    def write(
        self,
        type_: str,
        f: str,
        value: dict[str, Any] | None = None,
        *,
        handle: str | None = None,
        channel: str | None = None,
    ) -> Event:
        event: Event = {
            "time": true_time_ns(),
            "process": self.process,
            "incarnation": self.incarnation,
            "pid": self.pid,
            "type": type_,
            "f": f,
        }
        if handle is not None:
            event["handle"] = handle
        if channel is not None:
            event["channel"] = channel
        event["value"] = value if value is not None else {}
        line = orjson.dumps(event) + b"\n"
        with self._lock:
            os.write(self._fd, self._encode.encode(line))
        return event

    def close(self) -> None:
        with self._lock:
            try:
                os.write(self._fd, self._encode.finish())
            finally:
                os.close(self._fd)


@dataclass
class HistoryReader:
    """Reads one JSONL history file, tolerating only a torn *final* line.

    Every process incarnation writes its own file, so a SIGKILL can tear
    only that file's last line. A torn last line is skipped and recorded in
    :attr:`torn`; an unparsable line anywhere else means the file was damaged
    by something other than a kill, and reading stops with an error.
    """

    path: Path
    torn: list[str] = field(default_factory=list)
    line: int = 0
    """The line number of the event last yielded (for messages that name it)."""

    def __iter__(self) -> Iterator[Event]:
        # Streamed line by line: memory stays one line, however long the file.
        try:
            fh = open_lines(self.path)
        except OSError as exc:
            raise HistoryError(f"{self.path}: cannot read history: {exc.strerror}") from None
        loads = orjson.loads
        with fh:
            try:
                for number, raw in enumerate(fh, start=1):
                    try:
                        event = loads(raw)
                    except orjson.JSONDecodeError:
                        if not raw.strip():
                            continue  # a blank line
                        if not raw.endswith(b"\n") or not fh.read().strip():
                            self.torn.append(
                                f"{self.path}:{number}: torn last line skipped (its writer "
                                "stopped mid-line: killed, or out of disk space)"
                            )
                            return
                        shown = raw.rstrip(b"\r\n")[:80]
                        raise HistoryError(
                            f"{self.path}:{number}: line is not valid JSON and is not the last "
                            f"line (a torn line can only be last): {shown!r}"
                        ) from None
                    if (
                        type(event) is not dict
                        or type(event.get("time")) is not int
                        or type(event.get("type")) is not str
                        or event["type"] not in _TYPES
                        or type(event.get("process")) is not str
                        or type(event.get("f")) is not str
                    ):
                        raise HistoryError(f"{self.path}:{number}: {_what_is_wrong(event)}")
                    self.line = number
                    yield event
            except OSError as exc:
                raise HistoryError(f"{self.path}: cannot read history: {exc.strerror}") from None


def read_history(path: Path) -> Iterator[Event]:
    """Iterate a merged history file (torn lines raise, as a merged file is
    written whole by the runner)."""
    reader = HistoryReader(path)
    yield from reader


def merge_histories(paths: Iterable[Path], out: Path) -> tuple[int, list[str]]:
    """Merge per-process files into one time-ordered history with an index.

    Order within one file is preserved (heapq.merge is stable per input);
    across files the shared wall clock orders events. Returns the number of
    events written and the torn lines that were skipped. Writes to a
    temporary file first so a crash never leaves a half-merged history.
    """
    readers = [HistoryReader(p) for p in sorted(paths)]
    streams = [((e["time"], i, e) for e in r) for i, r in enumerate(readers)]
    tmp = out.with_suffix(out.suffix + ".tmp")
    count = 0
    try:
        with open_merged_writer(tmp, out) as fh:
            for index, (_, _, event) in enumerate(
                heapq.merge(*streams, key=lambda t: (t[0], t[1]))
            ):
                event["index"] = index
                fh.write(orjson.dumps(event) + b"\n")
                count += 1
    except BaseException:
        tmp.unlink(missing_ok=True)  # a damaged input leaves no half-merged file behind
        raise
    os.replace(tmp, out)
    torn = [t for r in readers for t in r.torn]
    return count, torn
