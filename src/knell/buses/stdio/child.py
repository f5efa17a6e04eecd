"""The adapter process: started leashed, read by threads, stopped for sure.

An adapter is an ordinary program in any language, so knell cannot ask it
to leash itself the way a Python worker does. Three leashes hold it
instead, each covering a way its worker can go:

* the worker is SIGKILLed by the nemesis: the supervisor kills the
  worker's whole process tree, and the adapter is in it;
* the runner (and so the worker) is SIGKILLed: on Linux the adapter gets
  the parent-death signal (:func:`knell.platform.leash_child`, requested
  between ``fork`` and ``exec``);
* everywhere: the worker's end of the adapter's stdin closes when the
  worker dies, and the protocol requires an adapter to exit on end of input.

None of these reaches what the adapter itself forks once it is out of the
adapter's tree (a helper that daemonised, or one left when the adapter
exited: re-parented, and deaf to the end of input). So an adapter leads a
process group of its own (:func:`knell.platform.leash_group`), and its end
(a stop, a kill, an exit noticed) kills that group whole before the
adapter is reaped (:func:`knell.platform.end_group`); a worker killed or
paused by the nemesis takes its whole session, adapter groups included
(:mod:`knell.supervisor`). On Windows a kill-on-close job of the adapter's
own does both: it is ended with the adapter and dies with its worker.

Two daemon threads per adapter: one reads stdout lines into a queue (so a
reply can be awaited with a timeout on every platform, and a line that
arrives while nothing was asked is noticed), one copies stderr to the
run's logs through a capped :class:`StderrSink`, keeping the last lines for
error messages even once the cap is reached.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from knell.buses.stdio.wire import MAX_LINE, snippet
from knell.platform import contain, end_group, kill_group, kill_tree, leash_group

__all__ = ["EOF", "TIMEOUT", "AdapterProcess", "StderrSink", "adapter_env"]

EOF: Final = "eof"
"""Queued when the adapter's stdout closes (it exited, or closed it)."""

TIMEOUT: Final = "timeout"
"""Returned by :meth:`AdapterProcess.next_line` when nothing came in time."""

TAIL_LINES = 8
"""Stderr lines kept per adapter for error messages."""


class StderrSink:
    """Where adapters' stderr goes: a file (appended) or this process's own
    stderr (a worker's stderr is its log in the run directory), with a cap
    in bytes shared by every adapter this sink serves. Each line is
    prefixed with the adapter's pid."""

    def __init__(self, path: str | Path | None, cap: int) -> None:
        self.cap = cap
        self.written = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "ab")  # noqa: SIM115 - closed in close()

    def write(self, pid: int, line: bytes) -> None:
        data = f"[adapter {pid}] ".encode() + line.rstrip(b"\r\n") + b"\n"
        with self._lock:
            if self.written + len(data) > self.cap:
                if not self.dropped:
                    self._emit(
                        f"[knell] adapter stderr capped at {self.cap} bytes; "
                        "the rest is dropped\n".encode()
                    )
                self.dropped += len(data)
                return
            self.written += len(data)
            self._emit(data)

    def note(self, text: str) -> None:
        """A line from knell itself (always written, even past the cap)."""
        with self._lock:
            self._emit(f"[knell] {text}\n".encode())

    def _emit(self, data: bytes) -> None:
        try:
            if self._file is not None:
                self._file.write(data)
                self._file.flush()
            else:
                sys.stderr.write(data.decode("utf-8", errors="replace"))
                sys.stderr.flush()
        except (OSError, ValueError):  # a closed log must not kill the pump
            pass

    def close(self) -> None:
        with self._lock:
            if self.dropped:
                self._emit(f"[knell] {self.dropped} bytes of adapter stderr dropped\n".encode())
                self.dropped = 0
            if self._file is not None:
                self._file.close()
                self._file = None


class AdapterProcess:
    """One running adapter: its pipes, its reader threads, and its end."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str],
        sink: StderrSink,
        trace: str | Path | None = None,
    ) -> None:
        self.popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            **leash_group(),
        )
        contain(self.popen, own_job=True)  # Windows: its own kill-on-close job
        self.pid = self.popen.pid
        self.lines: queue.Queue[bytes | str] = queue.Queue()
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._sink = sink
        self._trace: IO[bytes] | None = None
        self._trace_lock = threading.Lock()
        if trace is not None:
            try:
                Path(trace).mkdir(parents=True, exist_ok=True)
                self._trace = open(Path(trace) / f"adapter-{self.pid}.log", "ab")  # noqa: SIM115
            except OSError:
                self.kill()
                raise
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self._reader = threading.Thread(
            target=self._read, args=(self.popen.stdout,), daemon=True, name=f"adapter-{self.pid}"
        )
        self._pump = threading.Thread(
            target=self._copy_stderr,
            args=(self.popen.stderr,),
            daemon=True,
            name=f"adapter-{self.pid}-stderr",
        )
        self._reader.start()
        self._pump.start()

    # -- threads -----------------------------------------------------------------

    def _read(self, stdout: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while True:
                line = stdout.readline(MAX_LINE + 1)
                if not line:
                    break
                self._traced(b"< ", line)
                self.lines.put(line)
        self.lines.put(EOF)

    def _copy_stderr(self, stderr: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in iter(stderr.readline, b""):
                self.tail.append(snippet(line, 300))
                self._sink.write(self.pid, line)

    # -- talking -------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Write one request line; ``OSError`` when the adapter is gone."""
        stdin = self.popen.stdin
        if stdin is None:
            raise BrokenPipeError("stdin already closed")
        self._traced(b"> ", data)
        stdin.write(data)
        stdin.flush()

    def _traced(self, direction: bytes, line: bytes) -> None:
        """Append a line to the trace (``> `` knell to adapter, ``< `` back)."""
        if self._trace is None:
            return
        with self._trace_lock, contextlib.suppress(OSError, ValueError):
            self._trace.write(
                direction + line if line.endswith(b"\n") else direction + line + b"\n"
            )
            self._trace.flush()

    def next_line(self, timeout: float) -> bytes | str:
        """The next stdout line, :data:`EOF`, or :data:`TIMEOUT`."""
        try:
            return self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return TIMEOUT

    def pending(self) -> bytes | str | None:
        """A line (or :data:`EOF`) that arrived while nothing was asked."""
        try:
            return self.lines.get_nowait()
        except queue.Empty:
            return None

    # -- ending --------------------------------------------------------------------

    def exit_status(self, wait: float) -> str:
        """How the adapter ended ("exited with code 3", "was killed by
        signal 9"), waiting up to ``wait`` seconds; then :meth:`stderr_tail`
        has its last words."""
        code = end_group(self.popen, wait)
        self._pump.join(timeout=1.0)  # let its last words reach the tail
        if code is None:
            status = "closed its stdout but is still running"
        elif code < 0:
            status = f"was killed by signal {-code}"
        else:
            status = f"exited with code {code}"
        return status

    def stderr_tail(self) -> str:
        lines = [line for line in self.tail if line.strip()]
        if not lines:
            return "; it wrote nothing to stderr"
        return "; last stderr: " + " | ".join(lines[-4:])

    def kill(self) -> None:
        """Kill the adapter and anything it started; reap it."""
        if self.popen.returncode is None:
            kill_tree(self.pid)
            kill_group(self.pid)  # not reaped yet: the group id is still ours
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self._close_pipes()

    def stop(self, grace: float) -> int | None:
        """Close stdin (the protocol's signal to exit) and wait ``grace``
        seconds for the adapter to go; then kill it. Returns its exit code
        when it went by itself, else ``None``."""
        with contextlib.suppress(OSError, ValueError):
            if self.popen.stdin is not None:
                self.popen.stdin.close()
        code = end_group(self.popen, grace)
        if code is None:
            self.kill()
            return None
        self._pump.join(timeout=1.0)
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        """Close our ends. A reader thread still blocked on a pipe (some
        process outside the adapter's tree inherited its write end) holds
        the pipe's lock, and closing it would block too: leave that one."""
        self._reader.join(timeout=1.0)
        self._pump.join(timeout=1.0)
        pipes = [(self.popen.stdin, None), (self.popen.stdout, self._reader)]
        pipes.append((self.popen.stderr, self._pump))
        for pipe, thread in pipes:
            if pipe is not None and (thread is None or not thread.is_alive()):
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()
        if self._trace is not None and not self._reader.is_alive():
            with self._trace_lock:
                self._trace.close()
                self._trace = None


def adapter_env(base: Mapping[str, str], store: str, protocol: int) -> dict[str, str]:
    """The adapter's environment: ours, plus where its store is."""
    env = dict(base)
    env["KNELL_STORE_URL"] = store
    env["KNELL_PROTOCOL"] = str(protocol)
    return env
