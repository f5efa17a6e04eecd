"""The bridge as an ASGI app: every contract over HTTP + JSON.

Each route is one operation of the bus the bridge was given (broadcast,
queue and at-most-once: one row of
:data:`knell.buses.operations.OPERATIONS` each, served by one generic
handler, :meth:`_Bridge.serve`; only the doorbell's long poll has its
own). The route table is :data:`knell.buses.http_protocol.ROUTES` and the
bodies are :mod:`knell.bridge.models`, both built from that table. An
operation of a contract the bus lacks is answered ``501 unsupported``.
Everything a request can get wrong is refused *before* the bus is called
(bad JSON, a missing or mistyped field, a bad name, a negative ``up_to``,
an oversized body, a missing token), so a refused request never writes
to the store; what the bus itself refuses (an ack beyond head, a lost
lease) comes back through :func:`~knell.bridge.errors.bus_problem`.

Bus calls block (a SQLite statement, a network round trip), so each runs
in a worker thread, never on the event loop. Two separate thread budgets
keep long polls from starving everything else: ``threads`` for ordinary
operations, which are short and queue for a thread, and ``max_waits``
for the doorbell's long polls, which hold their thread for up to their
whole timeout and are refused with ``503 too-many-waits`` (definite:
nothing happened) when every slot is taken, rather than queued past their
own timeout. The bus must therefore be safe to call from several threads
at once; the reference SQLite bus is (one connection opened with
``check_same_thread=False`` behind an ``RLock``, and its ``wait`` takes
that lock only for each short poll query, never for the whole wait).

A stopping bridge (SIGTERM, Ctrl-C) answers its long polls at once with
``503 shutting-down`` (definite: a wait has no effect to lose) instead of
holding them for the graceful-shutdown window.

Safety by default, for a server that can write to a store:

* a bearer token, when one is configured, guards every route;
* without a token the bridge only listens on loopback (enforced by
  :mod:`knell.bridge.server`) and only answers requests whose ``Host``
  names a loopback address, so a web page cannot reach it through DNS
  rebinding;
* a body must be ``application/json``, which a browser cannot send
  cross-origin without a CORS preflight this bridge never grants.

A request refused before its body is read (401, 413, 415...) still has
its body read and dropped before the answer goes out
(:mod:`knell.bridge.drain`), so the client reads the envelope rather than
a connection reset.

Why Starlette with a hand-written route table and not FastAPI: FastAPI
would derive the OpenAPI document by itself, but its validation errors,
its 404s and its 405s have their own shape, and every one of them would
have to be overridden to answer with the one envelope the protocol
promises; here the same table drives both the routes and the document
(:mod:`knell.bridge.openapi`), so neither can list a route the other does
not.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from knell.bridge.drain import Drain
from knell.bridge.errors import JsonResponse, Problem, bus_problem, envelope
from knell.bridge.models import request_model
from knell.bridge.tail import TAIL_HANDLE, TAIL_PAGE, Page, resume_after, sse_frames
from knell.buses.contract import STREAM, Bus, Wake, WrongChannelKind, contracts_of, features_of
from knell.buses.http_protocol import (
    MAX_INT,
    MAX_LIMIT,
    MAX_PING,
    MAX_WAIT,
    MIN_PING,
    PING,
    ROUTES,
    name_problem,
)
from knell.buses.operations import OPERATIONS, Operation

__all__ = ["BridgeConfig", "create_app"]

T = TypeVar("T")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class BridgeConfig:
    """How one bridge serves its bus."""

    token: str | None = None
    """Bearer token every request must carry (``None``: no token)."""
    max_body: int = 1 << 20
    """Largest request body in bytes; a larger one is refused with 413."""
    threads: int = 16
    """Worker threads for ordinary bus calls."""
    max_waits: int = 64
    """Long polls (``wait``) served at once; one more is refused with 503."""
    max_wait: float = MAX_WAIT
    """Longest ``wait`` timeout a client may ask for, in seconds."""
    allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS
    """Host names a request's ``Host`` header may name (``None``: any)."""
    tail_poll: float = 0.02
    """Seconds between two reads of the bus by an SSE tail that is caught up."""


class _Bridge:
    """The bus, its thread budgets and the handlers of every route."""

    def __init__(self, bus: Bus, config: BridgeConfig) -> None:
        self.bus = bus
        self.config = config
        self.waiting = 0
        self._ops: anyio.CapacityLimiter | None = None
        self._waits: anyio.CapacityLimiter | None = None
        self._stopping = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._ops = anyio.CapacityLimiter(self.config.threads)
        self._waits = anyio.CapacityLimiter(self.config.max_waits)
        self._loop = asyncio.get_running_loop()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(self.bus.close)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one blocking bus call in a worker thread, mapping its
        exceptions onto the envelope."""
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._ops)
        except Exception as exc:
            raise bus_problem(exc) from exc

    async def _wait(self, handle: str, timeout: float) -> Wake | None:
        """The long poll, given up (503, definite) when the bridge is told
        to stop: a stopping server must not hold a connection for a whole
        wait timeout, and a wait has no effect to lose. The abandoned
        thread ends with its bus call (the bus is closed right after)."""
        call = asyncio.ensure_future(
            anyio.to_thread.run_sync(
                self.bus.wait, handle, timeout, limiter=self._waits, abandon_on_cancel=True
            )
        )
        stop = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not call.done():
            call.cancel()
            raise Problem("shutting-down", "the bridge is stopping; the wait was given up")
        stop.cancel()
        try:
            return call.result()
        except Exception as exc:
            raise bus_problem(exc) from exc

    def stop(self) -> None:
        """Tell the long polls the server is stopping (from any thread,
        signal handlers included)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    # -- the routes -----------------------------------------------------------

    async def serve(self, op: Operation, request: Request) -> Response:
        """Any operation of the table but ``wait``: its path names, its query
        (``GET``) or body arguments, one bus call, the result as the table
        encodes it."""
        values: dict[str, Any] = {name: _name(request, name) for name in op.http.path_args()}
        if op.http.method == "GET":
            rest = [a for a in op.args if a.name not in values]
            query = _query(request, [a.name for a in rest])
            for arg in rest:
                value = _query_value(query, arg.name, arg.type.key)
                values[arg.name] = arg.default if value is None else value
        else:
            model = request_model(op.name)
            assert model is not None
            body = await _body(request, model, self.config.max_body)
            values.update(body.model_dump())
        method = getattr(self.bus, op.name, None)
        if not callable(method):
            raise Problem(
                "unsupported",
                f"the bus behind this bridge ({type(self.bus).__name__}) does not implement "
                f"{op.name} (contracts: {', '.join(sorted(contracts_of(self.bus)))})",
            )
        missing = sorted(op.features_used(values) - features_of(self.bus))
        if missing:
            raise Problem(
                "unsupported",
                f"the bus behind this bridge ({type(self.bus).__name__}) does not declare the"
                f" {', '.join(missing)} feature {op.name} was asked to use",
            )
        positional, keywords = op.bus_call(values)
        call = functools.partial(method, *positional, **keywords) if keywords else method
        result = await self.call(call, *(() if keywords else positional))
        if op.http.bare:
            return JsonResponse(op.encode_result(result)[op.result_key or ""])
        return JsonResponse(op.encode_result(result))

    async def wait(self, request: Request) -> Response:
        handle = _name(request, "handle")
        query = _query(request, ("timeout",))
        timeout = _timeout_param(query, self.config.max_wait)
        if self.waiting >= self.config.max_waits:
            raise Problem(
                "too-many-waits",
                f"all {self.config.max_waits} long-poll slots are taken; retry later",
                headers={"Retry-After": "1"},
            )
        self.waiting += 1
        try:
            wake = await self._wait(handle, timeout)
        finally:
            self.waiting -= 1
        if wake is None:
            return JsonResponse({"wake": None})
        ring = {"channel": wake.channel, "seq": wake.seq, "sender": wake.sender}
        return JsonResponse({"wake": {**ring, "reason": wake.reason}})

    async def follow(self, request: Request) -> Response:
        """The SSE tail (:mod:`knell.bridge.tail`): everything is checked
        and the resume point read before the stream starts, so a bad
        request or a channel of another kind is an ordinary error answer."""
        channel = _name(request, "channel")
        query = _query(request, ("after", "ping"))
        after = _int_param(query, "after", low=0, high=None)
        header = request.headers.get("last-event-id")
        if header is not None:
            after = _last_event_id(header)
        ping = _seconds_param(query, "ping", PING, MIN_PING, MAX_PING)
        start = await self.call(resume_after, self.bus, channel, after)
        # One read before the stream starts: a channel of another kind (a
        # queue) is refused here, with its status, not mid-stream.
        fetch = await self._tail_reader(channel, start)

        def problem(exc: Exception) -> dict[str, Any] | None:
            found = bus_problem(exc)
            return {"error": found.code, "detail": found.detail, "outcome": found.outcome}

        frames = sse_frames(
            fetch,
            channel,
            start,
            poll=self.config.tail_poll,
            ping=ping,
            stopping=self._stopping.is_set,
            problem=problem,
        )
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)

    async def _tail_reader(self, channel: str, start: int) -> Callable[[int], Awaitable[Page]]:
        """How a tail of ``channel`` reads its next page, found by reading
        the first one: a broadcast channel's ``fetch(after=)``, or, when
        the bus serves streams and the channel refuses a fetch as of
        another kind, the stream's ``tail`` (whose ``first`` tells of what
        the ring dropped). Any other refusal is the answer, with its status."""
        bus: Any = self.bus
        try:
            await anyio.to_thread.run_sync(
                bus.fetch, TAIL_HANDLE, channel, start, 1, limiter=self._ops
            )
        except WrongChannelKind as exc:
            if STREAM not in contracts_of(bus):
                raise bus_problem(exc) from exc
            await self.call(bus.tail, channel, start, 1)

            async def ring(position: int) -> Page:
                page = await anyio.to_thread.run_sync(
                    bus.tail, channel, position, TAIL_PAGE, limiter=self._ops
                )
                return page.messages, page.first, page.last

            return ring
        except Exception as exc:
            raise bus_problem(exc) from exc

        async def log(position: int) -> Page:
            found = await anyio.to_thread.run_sync(
                bus.fetch, TAIL_HANDLE, channel, position, TAIL_PAGE, limiter=self._ops
            )
            return found, None, None

        return log

    async def health(self, request: Request) -> Response:
        _query(request, ())
        contracts = sorted(contracts_of(self.bus))
        answer: dict[str, Any] = {"ok": True, "bus": type(self.bus).__name__}
        answer["contracts"] = contracts
        features = sorted(features_of(self.bus))
        if features:  # left out when none: the answer of a bridge before features
            answer["features"] = features
        return JsonResponse(answer)

    async def openapi(self, request: Request) -> Response:
        from knell.bridge.openapi import openapi_document

        _query(request, ())
        return JsonResponse(openapi_document(self.config.max_wait))

    def routes(self) -> list[Route]:
        return [
            Route(path, self._handler(op), methods=[method], name=op)
            for op, (method, path) in ROUTES.items()
        ]

    def _handler(self, name: str) -> Callable[[Request], Awaitable[Response]]:
        handler: Callable[[Request], Awaitable[Response]] | None = getattr(self, name, None)
        if name in OPERATIONS and name != "wait":
            return functools.partial(self.serve, OPERATIONS[name])
        assert handler is not None, name
        return handler


# -- reading a request -----------------------------------------------------------


def _name(request: Request, param: str) -> str:
    value = request.path_params[param]
    problem = name_problem(param, value)
    if problem is not None:
        raise Problem("invalid-name", problem)
    return str(value)


def _query(request: Request, allowed: Iterable[str]) -> dict[str, str]:
    known = set(allowed)
    query: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in known:
            expected = ", ".join(sorted(known)) or "none"
            raise Problem(
                "invalid-request", f"unknown query parameter {key!r} (expected: {expected})"
            )
        if key in query:
            raise Problem("invalid-request", f"query parameter {key!r} is given twice")
        query[key] = value
    return query


def _query_value(query: dict[str, str], key: str, kind: str) -> int | bool | None:
    """A query parameter of an operation's ``GET`` route, by its wire type."""
    if kind == "flag":
        return _flag_param(query, key)
    if kind == "limit":
        return _int_param(query, key, low=1, high=MAX_LIMIT)
    if kind in ("after", "after?"):
        return _int_param(query, key, low=0, high=None)
    raise AssertionError(f"no query form for a {kind} argument ({key})")  # pragma: no cover


def _flag_param(query: dict[str, str], key: str) -> bool | None:
    """``true`` or ``false``, spelt as JSON spells them."""
    raw = query.get(key)
    if raw is None:
        return None
    if raw not in ("true", "false"):
        shown = raw if len(raw) <= 24 else raw[:21] + "..."
        raise Problem(
            "invalid-request", f"query parameter {key!r} must be true or false, got {shown!r}"
        )
    return raw == "true"


def _int_param(query: dict[str, str], key: str, *, low: int, high: int | None) -> int | None:
    raw = query.get(key)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit():
        raise Problem(
            "invalid-request",
            f"query parameter {key!r} must be a non-negative integer, got {raw!r}",
        )
    high = MAX_INT if high is None else high
    value = int(raw) if len(raw) <= 20 else MAX_INT + 1  # no 4300-digit int() for a huge one
    if value < low or value > high:
        shown = raw if len(raw) <= 24 else raw[:21] + "..."
        raise Problem(
            "invalid-request",
            f"query parameter {key!r} must be between {low} and {high}, got {shown}",
        )
    return value


def _last_event_id(header: str) -> int:
    """The seq a reconnecting SSE client saw last (the ``id`` of its last event)."""
    raw = header.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > MAX_INT:
        shown = raw if len(raw) <= 24 else raw[:21] + "..."
        raise Problem(
            "invalid-request",
            f"header 'Last-Event-ID' must be a seq (0 to {MAX_INT}), got {shown!r}",
        )
    return int(raw)


def _seconds_param(
    query: dict[str, str], key: str, default: float, low: float, high: float
) -> float:
    raw = query.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < low or value > high:
        raise Problem(
            "invalid-request",
            f"query parameter {key!r} must be a number of seconds from {low:g} to {high:g},"
            f" got {raw!r}",
        )
    return value


def _timeout_param(query: dict[str, str], max_wait: float) -> float:
    raw = query.get("timeout")
    if raw is None:
        raise Problem("invalid-request", "query parameter 'timeout' (seconds) is required")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or value > max_wait:
        raise Problem(
            "invalid-request",
            f"query parameter 'timeout' must be a number of seconds from 0 to {max_wait:g},"
            f" got {raw!r}",
        )
    return value


_M = TypeVar("_M", bound=BaseModel)


async def _body(request: Request, model: type[_M], limit: int) -> _M:
    """Read, parse and validate a JSON body, refusing it before the bus is
    ever called: wrong media type (415), over ``limit`` bytes (413), not a
    JSON object (400), a field missing, extra or of the wrong type (422)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise Problem(
            "unsupported-media-type",
            f"the body must be sent as application/json, got {media or 'no content type'!r}",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Problem("body-too-large", f"the body is {declared} bytes; the limit is {limit}")
    raw = bytearray()
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                raise Problem("body-too-large", f"the body is over the limit of {limit} bytes")
    except ClientDisconnect:
        raise Problem("invalid-request", "the client went away before its body was read") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Problem("malformed-json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Problem("malformed-json", f"the body must be a JSON object, got {_kind(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _invalid(exc: ValidationError) -> Problem:
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or "body"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    if first["type"] == "string_pattern_mismatch":
        return Problem("invalid-name", f"{name_problem(field, first['input'])}{more}")
    detail = f"field {field!r}: {first['msg']}"
    if first["type"] != "missing":
        shown = repr(first.get("input"))
        detail += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
    return Problem("invalid-request", detail + more)


# -- guards and error pages --------------------------------------------------------


class _Guard:
    """Checks the ``Host`` header and the bearer token of every request
    before any route (or 404) sees it. Plain ASGI rather than Starlette's
    ``BaseHTTPMiddleware``, which costs a task per request."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.expected = None if token is None else token.encode()
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = dict(scope["headers"])
        if self.hosts is not None:
            host = _hostname(headers.get(b"host", b"").decode("latin-1"))
            if host not in self.hosts:
                return envelope(
                    "bad-host", f"Host {host!r} is not an address of this bridge (loopback only)"
                )
        if self.expected is not None:
            given = headers.get(b"authorization")
            if given is None or not hmac.compare_digest(_bearer(given), self.expected):
                detail = "a bearer token is required" if given is None else "wrong bearer token"
                return envelope("unauthorized", detail, headers={"WWW-Authenticate": "Bearer"})
        return None


def _bearer(header: bytes) -> bytes:
    """The token of an ``Authorization: Bearer TOKEN`` header (``b""`` for
    another scheme). The scheme is case-insensitive (RFC 7235 section 2.1:
    ``bearer``, ``BEARER`` and ``Bearer`` are one scheme), and one or more
    spaces may separate it from the token."""
    scheme, _, rest = header.strip().partition(b" ")
    return rest.lstrip(b" ") if scheme.lower() == b"bearer" else b""


def _hostname(host: str) -> str:
    """``127.0.0.1:8080`` -> ``127.0.0.1``; ``[::1]:8080`` -> ``::1``."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return envelope("not-found", f"no route {request.method} {request.url.path}")
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        return envelope(
            "method-not-allowed",
            f"{request.url.path} does not take {request.method} (allowed: {allowed})",
            headers={"Allow": allowed} if allowed else None,
        )
    code = "invalid-request" if exc.status_code < 500 else "internal"
    return envelope(code, str(exc.detail), status=exc.status_code)


async def _crash(request: Request, exc: Exception) -> Response:
    return envelope("internal", f"{type(exc).__name__}: {exc}")


def create_app(bus: Bus, config: BridgeConfig | None = None) -> Starlette:
    """The bridge's ASGI app serving ``bus``."""
    config = config or BridgeConfig()
    bridge = _Bridge(bus, config)
    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        Problem: _problem,
        HTTPException: _http_error,
        Exception: _crash,
    }
    app = Starlette(
        routes=bridge.routes(),
        middleware=[
            Middleware(Drain),  # outermost: it also drains before the guard's refusals
            Middleware(_Guard, token=config.token, hosts=config.allowed_hosts),
        ],
        exception_handlers=handlers,
        lifespan=bridge.lifespan,
    )
    app.state.stop = bridge.stop
    return app
