"""The HTTP driver: a bus reached over HTTP + JSON, through a knell bridge or any server
that speaks its protocol.

``http://HOST:PORT`` (or ``https://``) bus URLs open an :class:`HttpBus`,
so every worker role and every check runs through a bridge unchanged,
and a bus that serves :mod:`knell.buses.http_protocol` itself is tested with
no bridge at all. Its methods are the rows of
:data:`knell.buses.operations.OPERATIONS` (broadcast, queue and
at-most-once), each sent along the row's route.

The one thing a driver must get right is the outcome of a call that went
wrong, because the history records it (``fail``: it did not happen;
``info``: it may have). Over HTTP that is decided by *how far the request
got*:

=========================================  =====================  =======
what happened                              raised                 history
=========================================  =====================  =======
connection refused / connect timeout,      DefiniteError          fail
no free connection in the pool
(nothing was sent)
read or write timeout, reset, the server   IndeterminateError     info
closed mid-request (it may have acted)
4xx with the envelope                      DefiniteError          fail
                                           (the contract's class
                                           for a known code:
                                           AckBeyondHead on
                                           ``ack-beyond-head``,
                                           LeaseLost on
                                           ``lease-lost``...)
5xx                                        by the envelope's      fail or
                                           ``outcome``; no        info
                                           envelope: info
2xx whose body cannot be read              IndeterminateError     info
=========================================  =====================  =======

Nothing is retried: a retry would hide exactly the ambiguity knell
records (the producers retry posts themselves, with idempotency keys).

URL options (query string): ``token`` (else ``$KNELL_BRIDGE_TOKEN``),
``timeout`` (read/write seconds, default 10), ``connect_timeout``
(default 2), ``wait_margin`` (seconds added to a ``wait``'s own timeout
for its read timeout, default 2), ``failover`` (other bridges,
``host:port,host:port``: a request that could not be *sent* to the
current one, because it refuses connections, goes to the next instead,
and after a connection that failed mid-request the next request does;
nothing that was sent is ever sent again). A token in the environment keeps it
off command lines, where other users of the machine can read it.

Built on httpx: a thread-safe connection pool with keep-alive and an
exception tree that separates "could not connect" from "failed after
sending", which is the whole classification above.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Generator
from typing import Any, NoReturn
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import httpx

from knell.buses.calls import OperationCalls, refuse_undeclared
from knell.buses.contract import (
    BROADCAST,
    CONTRACT_METHODS,
    CONTRACTS,
    FEATURES,
    DefiniteError,
    IndeterminateError,
)
from knell.buses.http_protocol import PING, ROUTES, TOKEN_ENV, name_problem
from knell.buses.http_tail import TailItem, sse_tail
from knell.buses.operations import ERROR_KINDS, MESSAGE, OPERATIONS, DecodeError

__all__ = ["HttpBus", "open_http"]

HEALTH_TIMEOUT = 0.5
"""Seconds the ``contracts`` probe waits for ``/health``."""

_OPTIONS = {"token", "timeout", "connect_timeout", "wait_margin", "failover"}


class HttpBus(OperationCalls):
    """A :class:`~knell.buses.contract.Bus`, ``QueueBus`` and ``RoleBus``
    over HTTP + JSON, as far as the server serves them: :attr:`contracts`
    is what its ``/health`` answer declares."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 2.0,
        wait_margin: float = 2.0,
        failover: tuple[str, ...] = (),
    ) -> None:
        for label, value in (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
            ("wait_margin", wait_margin),
        ):
            if not value > 0:
                raise ValueError(f"http bus: {label} must be > 0 seconds, got {value}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.wait_margin = wait_margin
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        # Idle connections are dropped well before the bridge's own
        # keep-alive timeout (30 s), so a request is never written to a
        # connection the server is closing at that moment.
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout, pool=connect_timeout)
        self._clients = [
            httpx.Client(
                base_url=base,
                headers=headers,
                timeout=self._timeout,
                transport=httpx.HTTPTransport(
                    limits=httpx.Limits(keepalive_expiry=2.0),
                    # httpx writes a request's headers and body separately; with
                    # Nagle's algorithm on, the body then waits for the server's
                    # delayed ACK (40 ms on Linux) on every post.
                    socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                ),
                trust_env=False,
            )
            for base in (self.base_url, *(b.rstrip("/") for b in failover))
        ]
        self._current = 0
        self._contracts: frozenset[str] | None = None
        self._features: frozenset[str] | None = None

    @property
    def contracts(self) -> frozenset[str]:
        """The contracts the server declares in its ``/health`` answer
        (asked once, with a short read timeout: a bus is opened by every
        worker, and a paused bridge must not hold a worker's start). A
        server that declares none serves broadcast (every bridge did before
        the other contracts); one that does not answer now is taken to
        serve all three, and each call then answers for itself (``501
        unsupported`` is a definite error). A contract the server's bus
        declares that this driver has no calls for (a stream, which the
        bridge does not carry) is left out: the driver declares what it
        can drive, so the bus still opens for the contracts it carries."""
        if self._contracts is None:
            try:
                data = self._request("health", {}, read_timeout=HEALTH_TIMEOUT)
            except (DefiniteError, IndeterminateError):
                data = {"contracts": list(CONTRACTS)}
            declared = data.get("contracts") if isinstance(data, dict) else None
            if not isinstance(declared, list):
                declared = [BROADCAST]
            self._contracts = frozenset(
                str(c) for c in declared if c in CONTRACTS and _speaks(str(c))
            )
        return self._contracts

    @property
    def features(self) -> frozenset[str]:
        """The optional features the server declares in its ``/health``
        answer (none when it names none, as every bridge did before
        features). Unlike :attr:`contracts`, a server that does not answer
        now is taken to declare *no* feature, and is asked again next
        time: a feature's arguments are sent only to a server known to
        take them, so a paused bridge costs a refused call (definite,
        nothing sent), never an argument it might ignore."""
        if self._features is None:
            try:
                data = self._request("health", {}, read_timeout=HEALTH_TIMEOUT)
            except (DefiniteError, IndeterminateError):
                return frozenset()
            declared = data.get("features") if isinstance(data, dict) else None
            self._features = frozenset(
                str(f) for f in (declared if isinstance(declared, list) else []) if f in FEATURES
            )
        return self._features

    def feature_hint(self, feature: str) -> str:
        """How a server declares ``feature``, for the runner's refusal of a
        scenario that needs it."""
        return (
            f"a bridge lists {feature!r} in its GET /health answer's features when the bus"
            " behind it declares it (docs/bridge.md)"
        )

    # -- one request ---------------------------------------------------------------

    def _request(
        self,
        op: str,
        names: dict[str, str],
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        read_timeout: float | None = None,
    ) -> Any:
        for what, value in names.items():
            problem = name_problem(what, value)
            if problem is not None:
                raise DefiniteError(f"not sent: {problem}")
        for what, value in (body or {}).items():
            if isinstance(value, float) and not math.isfinite(value):
                # JSON has no spelling for it: refused here, nothing sent
                raise DefiniteError(f"{op} not sent: {what} = {value!r} is not a finite number")
        method, template = ROUTES[op]
        path = template.format(**{k: quote(v, safe="") for k, v in names.items()})
        timeout = self._timeout
        if read_timeout is not None:
            timeout = httpx.Timeout(
                self.timeout,
                connect=self.connect_timeout,
                pool=self.connect_timeout,
                read=read_timeout,
            )
        try:
            response = self._send(method, path, body, params, timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise DefiniteError(f"{op} not sent: {type(exc).__name__}: {exc}") from exc
        except httpx.TransportError as exc:
            # Sent, then the connection failed: never resent, but the next
            # request tries the next bridge (a proxy in front of a dead
            # bridge accepts and then closes rather than refusing).
            self._current = (self._current + 1) % len(self._clients)
            raise IndeterminateError(
                f"{op} sent, no answer: {type(exc).__name__}: {exc or 'connection lost'}"
            ) from exc
        if response.status_code >= 400:
            self._raise(op, response)
        try:
            return response.json()
        except ValueError as exc:
            raise IndeterminateError(
                f"{op}: unreadable answer (HTTP {response.status_code}): {response.text[:200]!r}"
            ) from exc

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, Any] | None,
        timeout: httpx.Timeout,
    ) -> httpx.Response:
        """Send through the current bridge; one that could not be reached at
        all (nothing was sent) hands the request to the next, once round."""
        for attempt in range(len(self._clients)):
            client = self._clients[self._current]
            try:
                return client.request(method, path, json=body, params=params, timeout=timeout)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
                if attempt == len(self._clients) - 1:
                    raise
                self._current = (self._current + 1) % len(self._clients)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _raise(op: str, response: httpx.Response) -> NoReturn:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("error"), str):
            text = f"{op}: HTTP {status} without an error envelope: {response.text[:200]!r}"
            if status < 500:
                raise DefiniteError(text)
            raise IndeterminateError(text)
        code, detail = data["error"], data.get("detail", "")
        text = f"{op}: HTTP {status} {code}: {detail}"
        if status < 500:
            raise ERROR_KINDS.get(code, DefiniteError)(text)
        if data.get("outcome") == "definite":
            raise DefiniteError(text)
        raise IndeterminateError(text)

    # -- the contract ------------------------------------------------------------

    def _op(self, name: str, *values: Any) -> Any:
        """One row of the operations table: the row's route says which
        arguments go in the path, the query or the body, and its wire type
        reads the answer (the methods themselves are :class:`OperationCalls`)."""
        op = OPERATIONS[name]
        refuse_undeclared(
            name, values, lambda: self.features, lambda: f"the server at {self.base_url}"
        )
        args = op.encode_args(values)
        for arg in op.args:
            if arg.type.key == "name":
                problem = name_problem(arg.name, args[arg.name])
                if problem is not None:
                    raise DefiniteError(f"{name} not sent: {problem}")
        read_timeout = None
        if op.blocks_for is not None:
            args[op.blocks_for] = op.blocking_seconds(values)
            read_timeout = args[op.blocks_for] + self.wait_margin
        names = {k: args.pop(k) for k in op.http.path_args()}
        body: dict[str, Any] | None = None
        params: dict[str, Any] | None = None
        if op.http.method == "GET":
            params = {k: _query_text(v) for k, v in args.items() if v is not None}
        else:
            body = args
        data = self._request(name, names, body=body, params=params, read_timeout=read_timeout)
        if op.http.bare:
            data = {op.result_key: data}
        if not isinstance(data, dict):
            raise IndeterminateError(f"{name}: unexpected answer {data!r:.200}")
        try:
            return op.decode_result(data)
        except DecodeError as exc:
            raise IndeterminateError(f"{name}: unexpected answer ({exc}): {data!r:.200}") from exc

    def follow(
        self, channel: str, last_event_id: int | None = None, *, ping: float = PING
    ) -> Generator[TailItem, None, None]:
        """The channel's SSE tail (see :mod:`knell.buses.http_tail`): every
        message from ``last_event_id`` on (``None``: from the head), through
        every bridge in turn, reconnecting with ``Last-Event-ID`` after each
        drop, until the caller closes the iterator. Not a contract
        operation: an SSE tail is served by a bridge, never by a bus itself
        (the stream contract's ``tail``, a page of a ring, is another thing)."""
        problem = name_problem("channel", channel)
        if problem is not None:
            raise DefiniteError(f"tail not started: {problem}")
        path = ROUTES["follow"][1].format(channel=quote(channel, safe=""))
        return sse_tail(
            list(self._clients), path, ping=ping, last_event_id=last_event_id, decode=MESSAGE
        )

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def __repr__(self) -> str:
        return f"HttpBus({self.base_url!r})"


def _query_text(value: Any) -> str:
    """A query parameter's text (a float with millisecond precision, a
    flag as JSON spells it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def open_http(url: str) -> HttpBus:
    """Build an :class:`HttpBus` from ``http://HOST:PORT[/prefix]?token=..&timeout=..``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"http bus URL must be http://HOST:PORT, got {url!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(query) - _OPTIONS
    if unknown:
        raise ValueError(
            f"http bus URL has unknown option(s) {sorted(unknown)} "
            f"(known: {', '.join(sorted(_OPTIONS))})"
        )
    numbers: dict[str, float] = {}
    for key in ("timeout", "connect_timeout", "wait_margin"):
        if key in query:
            try:
                numbers[key] = float(query[key])
            except ValueError:
                raise ValueError(
                    f"http bus URL: {key} must be seconds, got {query[key]!r}"
                ) from None
    token = query.get("token") or os.environ.get(TOKEN_ENV) or None
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    others = tuple(
        urlunsplit((parts.scheme, address.strip(), parts.path, "", ""))
        for address in query.get("failover", "").split(",")
        if address.strip()
    )
    return HttpBus(base, token=token, failover=others, **numbers)


def _speaks(contract: str) -> bool:
    """Whether this driver has every call of ``contract``."""
    return all(callable(getattr(HttpBus, m, None)) for m in CONTRACT_METHODS[contract])
