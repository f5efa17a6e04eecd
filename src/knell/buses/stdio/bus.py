"""A bus in any language, reached through its adapter's stdin and stdout.

:class:`StdioBus` satisfies :class:`~knell.buses.contract.Bus`,
:class:`~knell.buses.contract.QueueBus` and
:class:`~knell.buses.contract.RoleBus` by starting the user's adapter
program, greeting it (``hello``: protocol version, the store URL, the
contracts knell can drive), and then sending one request per contract call
and waiting for its reply. Requests are strictly one at a time (the worker
calling it is single-threaded; a lock keeps it so), which keeps an adapter
as simple as a read-eval-print loop.

Its ``contracts`` are those the adapter declared in its ``hello`` reply
(the ones knell knows), so ``knell run`` refuses a scenario for a contract
the adapter lacks before any worker starts, naming the adapter and the
contract. ``hello`` itself fails only when the adapter declares no
contract knell can drive, or lacks one the caller asked for with
``require``. Its ``features`` likewise are those the reply's optional
``features`` array declares (``expiry``): a feature's arguments go only to
an adapter that declared it, and are otherwise refused with nothing sent.

Replies are trusted only as far as the protocol goes. The bus's own error
replies map through the contract's tree; everything else that can go
wrong (see :mod:`.errors`) is an :class:`AdapterError` for the call in
flight, after which the adapter is killed (it cannot be trusted to be in
step any more).

**After an adapter failure the next call starts a fresh adapter** (a new
``hello`` on the same store), as a client reconnects after a lost
connection; the store holds everything durable, and the contract keeps no
state in a connection that a restart could lose. Consecutive failed
restarts back off (50 ms doubling to 1 s) so a program that cannot start
does not spin. Every failure has already been recorded as ``info`` on the
call that met it, so a run whose adapter could not serve is never judged
on the operations that did get through alone.
"""

from __future__ import annotations

import functools
import itertools
import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from knell.buses.calls import OperationCalls, refuse_undeclared
from knell.buses.contract import CONTRACT_METHODS, CONTRACTS, FEATURES, BusError, DefiniteError
from knell.buses.operations import OPERATIONS
from knell.buses.stdio.child import EOF, TIMEOUT, AdapterProcess, StderrSink, adapter_env
from knell.buses.stdio.errors import AdapterError, AdapterStartError, ProblemKind
from knell.buses.stdio.wire import (
    OPS_OF,
    PROTOCOL_VERSION,
    Envelope,
    WireError,
    decode,
    encode,
    envelope,
    result_of,
    snippet,
)

__all__ = ["StdioBus"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds to wait for a reply (beyond a ``wait``'s own timeout). Longer
than a SQLite busy timeout, so a bus waiting for a lock is not a hang."""

DEFAULT_START_TIMEOUT = 30.0
DEFAULT_STDERR_CAP = 1024 * 1024
CLOSE_GRACE = 5.0
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 1.0


class StdioBus(OperationCalls):
    """A :class:`~knell.buses.contract.Bus` (and ``QueueBus``, ``RoleBus``,
    as the adapter declares) behind an adapter program.

    ``command``: the program and its arguments (a string is split like a
    shell would). ``store``: the store URL knell provisioned for the run,
    handed to the adapter in ``hello`` and as ``$KNELL_STORE_URL``.
    Keyword options: ``cwd`` for the adapter, per-reply ``timeout`` and
    ``start_timeout`` (seconds), ``stderr`` (a file path; default: this
    process's stderr) and ``stderr_cap`` (bytes), extra ``env``, and
    ``owner`` (a :class:`knell.owners.Owner` to record each adapter with),
    ``require`` (contracts the adapter must declare, or ``hello`` fails;
    by default any one knell can drive will do).
    The adapter is started at once: a program that cannot start or greet
    raises :class:`AdapterStartError` here. :attr:`contracts` is then the
    set the adapter declared.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        store: str = "",
        *,
        cwd: str | Path | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        stderr: str | Path | None = None,
        stderr_cap: int = DEFAULT_STDERR_CAP,
        env: Mapping[str, str] | None = None,
        trace: str | Path | None = None,
        owner: Any = None,
        require: Sequence[str] = (),
    ) -> None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("the adapter command is empty")
        if timeout <= 0 or start_timeout <= 0:
            raise ValueError("timeouts must be > 0")
        self.argv = argv
        self.store = store
        self.cwd = None if cwd is None else str(cwd)
        self.timeout = timeout
        self.start_timeout = start_timeout
        unknown = sorted(set(require) - set(CONTRACTS))
        if unknown:
            raise ValueError(f"unknown contract(s) {unknown}; known: {', '.join(CONTRACTS)}")
        self.require = tuple(require)
        self.contracts: frozenset[str] = frozenset()
        """The contracts the adapter declared in its ``hello`` reply (known ones)."""
        self.features: frozenset[str] = frozenset()
        """The optional features the adapter declared in its ``hello`` reply
        (known ones; none when the reply has no ``features``)."""
        self.hello: dict[str, Any] = {}
        self._env = adapter_env({**os.environ, **(env or {})}, store, PROTOCOL_VERSION)
        self._sink = StderrSink(stderr, stderr_cap)
        self._trace = trace
        self._owner = owner
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._child: AdapterProcess | None = None
        self._first_id = 1  # the first request id the current adapter saw
        self._last_id = 0  # the last request id sent
        self._restarts = 0  # failed (re)starts in a row
        self._closed = False
        try:
            self._start()
        except BaseException:
            self._sink.close()
            raise

    @property
    def label(self) -> str:
        """The adapter, for messages: its command (paths shortened to their
        file names) and current pid."""
        pid = f", pid {self._child.pid}" if self._child is not None else ""
        words = [Path(word).name if os.sep in word else word for word in self.argv]
        command = shlex.join(words)
        if len(command) > 100:
            command = command[:97] + "..."
        return f"{command}{pid}"

    # -- life cycle -------------------------------------------------------------

    def _start(self) -> None:
        """Start an adapter and greet it; on any problem kill it and raise
        :class:`AdapterStartError`."""
        try:
            child = AdapterProcess(
                self.argv, cwd=self.cwd, env=self._env, sink=self._sink, trace=self._trace
            )
        except OSError as exc:
            raise AdapterStartError(
                "exited", f"cannot start {shlex.join(self.argv)!r}: {exc.strerror or exc}"
            ) from None
        self._child = child
        if self._owner is not None:
            self._owner.process(child.pid, f"adapter {self.argv[0]}")
        self._first_id = self._last_id + 1
        args = {
            "protocol": PROTOCOL_VERSION,
            "store": self.store,
            "contracts": list(CONTRACTS),
            "client": "knell",
        }
        try:
            result = self._exchange(child, 0, "hello", args, _identity, self.start_timeout)
            declared = self._check_hello(result)
            features = self._check_features(result)
        except AdapterError as exc:
            self._discard()
            raise AdapterStartError(exc.kind, exc.detail, adapter=self.label) from None
        except BusError as exc:  # an "ok": false reply to hello
            self._discard()
            raise AdapterStartError(
                "handshake", f"the adapter refused hello: {exc}", adapter=self.label
            ) from None
        self.hello = result
        self.contracts = declared
        self.features = features

    def _check_hello(self, result: dict[str, Any]) -> frozenset[str]:
        """The known contracts the hello reply declares; a handshake error
        when there are none, or one is missing that the caller requires or
        that an earlier adapter of this bus declared (a restarted adapter
        may not serve less than the run was promised)."""
        version = result.get("protocol")
        if version != PROTOCOL_VERSION:
            raise AdapterError(
                "handshake",
                f"hello: the adapter speaks protocol {version!r}, knell speaks {PROTOCOL_VERSION}",
            )
        declared = result.get("contracts")
        if not isinstance(declared, list) or not all(isinstance(c, str) for c in declared):
            raise AdapterError("handshake", "hello: result.contracts must be an array of names")
        known = frozenset(c for c in declared if c in CONTRACTS)
        if not known:
            raise AdapterError(
                "handshake",
                f"hello: the adapter declares no contract knell can drive (it declares: "
                f"{', '.join(declared) or 'none'}; knell drives {', '.join(CONTRACTS)})",
            )
        needed = [*self.require, *sorted(self.contracts - set(self.require))]
        missing = [c for c in needed if c not in known]
        if missing:
            raise AdapterError(
                "handshake",
                f"hello: the adapter does not declare the {', '.join(missing)} contract(s) "
                f"(it declares: {', '.join(declared) or 'none'})",
            )
        return known

    def _check_features(self, result: dict[str, Any]) -> frozenset[str]:
        """The known features the hello reply declares (an adapter written
        before features existed declares none); a handshake error when a
        restarted adapter declares fewer than the first one did."""
        declared = result.get("features", [])
        if not isinstance(declared, list) or not all(isinstance(f, str) for f in declared):
            raise AdapterError("handshake", "hello: result.features must be an array of names")
        known = frozenset(f for f in declared if f in FEATURES)
        lost = sorted(self.features - known)
        if lost:
            raise AdapterError(
                "handshake",
                f"hello: the restarted adapter no longer declares the {', '.join(lost)}"
                f" feature (it declares: {', '.join(declared) or 'none'})",
            )
        return known

    def contract_hint(self, contract: str) -> str:
        """How an adapter implements ``contract``, for the runner's refusal
        of a scenario this one cannot serve."""
        ops = ", ".join(OPS_OF.get(contract, CONTRACT_METHODS.get(contract, ())))
        return (
            f"an adapter that implements it lists {contract!r} in its hello reply's "
            f"contracts and serves {ops} (docs/stdio-protocol.md)"
        )

    def feature_hint(self, feature: str) -> str:
        """How an adapter serves ``feature``, for the runner's refusal of a
        scenario that needs it."""
        return (
            f"an adapter that serves it lists {feature!r} in its hello reply's features"
            " (docs/stdio-protocol.md, section 4a)"
        )

    def _restart(self) -> AdapterProcess:
        if self._restarts:
            time.sleep(min(BACKOFF_FIRST * 2 ** (self._restarts - 1), BACKOFF_MAX))
        self._restarts += 1
        self._sink.note(f"starting a fresh adapter ({shlex.join(self.argv)})")
        try:
            self._start()
        except AdapterStartError as exc:
            # Not a usage error any more: a call of a running worker failed.
            raise AdapterError(exc.kind, f"restarting the adapter: {exc.detail}") from None
        assert self._child is not None
        return self._child

    def _discard(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None

    def close(self) -> None:
        """Say ``close``, close stdin, and make sure the adapter is gone.
        Never raises: a problem at the end is written to the adapter log."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            child, self._child = self._child, None
            try:
                if child is None:
                    return
                try:
                    if child.pending() is None:
                        rid = self._next_id()
                        self._exchange(child, rid, "close", {}, _identity, CLOSE_GRACE)
                except Exception as exc:
                    self._sink.note(f"close: {exc}")
                code = child.stop(CLOSE_GRACE)
                if code is None:
                    self._sink.note(f"adapter pid {child.pid} did not exit after close; killed")
                elif code != 0:
                    self._sink.note(f"adapter pid {child.pid} exited with code {code} at close")
            finally:
                self._sink.close()

    # -- one request ------------------------------------------------------------

    def _next_id(self) -> int:
        self._last_id = next(self._ids)
        return self._last_id

    def _call(
        self,
        op: str,
        args: dict[str, Any],
        parse: Callable[[dict[str, Any]], T],
        timeout: float | None = None,
    ) -> T:
        with self._lock:
            if self._closed:
                raise DefiniteError(f"{op}: the bus is closed")
            child = self._child if self._child is not None else self._restart()
            early = child.pending()
            if early is not None:
                self._discard_and_raise(child, op, early)
            rid = self._next_id()
            result = self._exchange(child, rid, op, args, parse, timeout or self.timeout)
            self._restarts = 0
            return result

    def _discard_and_raise(self, child: AdapterProcess, op: str, early: bytes | str) -> NoReturn:
        if early == EOF:
            status = child.exit_status(wait=1.0)
            self._fail(
                "exited",
                f"the adapter {status} between operations (before {op}){child.stderr_tail()}",
            )
        assert isinstance(early, bytes)
        self._fail(
            "unsolicited",
            f"the adapter sent a line while no request was in flight (before {op}): "
            f"{snippet(early)!r}",
        )

    def _exchange(
        self,
        child: AdapterProcess,
        rid: int,
        op: str,
        args: dict[str, Any],
        parse: Callable[[dict[str, Any]], T],
        timeout: float,
    ) -> T:
        """Send one request and return its ``result``, read by ``parse``;
        raises the bus's own error, or :class:`AdapterError` (after killing
        the adapter)."""
        what = f"{op} (id {rid})"
        try:
            child.send(encode(rid, op, args))
        except OSError:
            status = child.exit_status(wait=1.0)
            self._fail("exited", f"the adapter {status} before {what}{child.stderr_tail()}")
        deadline = time.monotonic() + timeout
        while True:
            line = child.next_line(deadline - time.monotonic())
            if line == TIMEOUT:
                self._fail("timeout", f"no reply to {what} within {timeout:g} s (killed)")
            if line == EOF:
                status = child.exit_status(wait=1.0)
                self._fail("exited", f"the adapter {status} during {what}{child.stderr_tail()}")
            assert isinstance(line, bytes)
            try:
                reply = envelope(line)
            except WireError as exc:
                self._fail("malformed", f"in reply to {what}: {exc}")
            if reply.id != rid:
                self._wrong_id(reply, rid, what, line)
            try:
                return parse(result_of(reply))
            except WireError as exc:
                self._fail("malformed", f"reply to {what}: {exc}: {snippet(line)!r}")

    def _wrong_id(self, reply: Envelope, rid: int, what: str, line: bytes) -> NoReturn:
        answered = reply.id == 0 or self._first_id <= reply.id < rid
        if answered:
            self._fail(
                "unsolicited",
                f"a second reply to id {reply.id}, already answered, while waiting for "
                f"{what}: {snippet(line)!r}",
            )
        self._fail(
            "unknown-id",
            f"a reply to id {reply.id}, which knell never sent, while waiting for {what}: "
            f"{snippet(line)!r}",
        )

    def _fail(self, kind: ProblemKind, detail: str) -> NoReturn:
        """Kill the adapter (the next call starts a fresh one) and raise."""
        label = self.label
        self._discard()
        self._sink.note(f"adapter error: {kind}: {detail}")
        raise AdapterError(kind, detail, adapter=label)

    # -- the contract ------------------------------------------------------------

    def _op(self, name: str, *values: Any) -> Any:
        """One row of the operations table: its arguments become the
        request's ``args``, the reply's result is read by the row's wire
        type (the methods themselves are :class:`OperationCalls`)."""
        op = OPERATIONS[name]
        refuse_undeclared(
            name, values, lambda: self.features, lambda: f"the adapter ({self.label})"
        )
        timeout = self.timeout + op.blocking_seconds(values)
        return self._call(name, op.encode_args(values), functools.partial(decode, name), timeout)


def _identity(result: dict[str, Any]) -> dict[str, Any]:
    return result
