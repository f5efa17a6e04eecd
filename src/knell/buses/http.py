"""The HTTP driver: a bus reached over HTTP + JSON, through a knell bridge or any server
that speaks its protocol.

``http://HOST:PORT`` (or ``https://``) bus URLs open an :class:`HttpBus`,
so every worker role and every check runs through a bridge unchanged,
and a bus that serves :mod:`knell.bridge.protocol` itself is tested with
no bridge at all.

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
                                           (AckBeyondHead on
                                           ``ack-beyond-head``,
                                           NotSubscribed on
                                           ``not-subscribed``)
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

import os
import socket
from typing import Any, NoReturn
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import httpx

from knell.bridge.protocol import ROUTES, TOKEN_ENV, name_problem
from knell.buses.contract import (
    AckBeyondHead,
    DefiniteError,
    IndeterminateError,
    JoinAt,
    Message,
    NotSubscribed,
    Wake,
)

__all__ = ["HttpBus", "open_http"]

_OPTIONS = {"token", "timeout", "connect_timeout", "wait_margin", "failover"}


class HttpBus:
    """A :class:`~knell.buses.contract.Bus` over HTTP + JSON."""

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
            if code == "ack-beyond-head":
                raise AckBeyondHead(text)
            if code == "not-subscribed":
                raise NotSubscribed(text)
            raise DefiniteError(text)
        if data.get("outcome") == "definite":
            raise DefiniteError(text)
        raise IndeterminateError(text)

    # -- the contract ------------------------------------------------------------

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        problem = name_problem("sender", sender)
        if problem is not None:
            raise DefiniteError(f"post not sent: {problem}")
        payload = {"body": body, "sender": sender, "idempotency_key": idempotency_key}
        data = self._request("post", {"channel": channel}, body=payload)
        return _message(data, "post")

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        data = self._request("subscribe", {"channel": channel, "handle": handle}, body={"at": at})
        return _int(data, "cursor", "subscribe")

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]:
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        data = self._request("fetch", {"channel": channel, "handle": handle}, params=params)
        messages = data.get("messages") if isinstance(data, dict) else None
        if not isinstance(messages, list):
            raise IndeterminateError(f"fetch: unexpected answer {data!r:.200}")
        return [_message(m, "fetch") for m in messages]

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        data = self._request("ack", {"channel": channel, "handle": handle}, body={"up_to": up_to})
        return _int(data, "cursor", "ack")

    def cursor(self, handle: str, channel: str) -> int:
        data = self._request("cursor", {"channel": channel, "handle": handle})
        return _int(data, "cursor", "cursor")

    def head(self, channel: str) -> int:
        return _int(self._request("head", {"channel": channel}), "head", "head")

    def wait(self, handle: str, timeout: float) -> Wake | None:
        timeout = max(0.0, float(timeout))
        data = self._request(
            "wait",
            {"handle": handle},
            params={"timeout": f"{timeout:.3f}"},
            read_timeout=timeout + self.wait_margin,
        )
        wake = data.get("wake", ...) if isinstance(data, dict) else ...
        if wake is None:
            return None
        if not isinstance(wake, dict) or wake.get("reason") not in ("backlog", "post"):
            raise IndeterminateError(f"wait: unexpected answer {data!r:.200}")
        try:
            return Wake(str(wake["channel"]), int(wake["seq"]), str(wake["sender"]), wake["reason"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndeterminateError(f"wait: unexpected answer {data!r:.200}") from exc

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def __repr__(self) -> str:
        return f"HttpBus({self.base_url!r})"


def _int(data: Any, key: str, op: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise IndeterminateError(f"{op}: unexpected answer {data!r:.200}")
    return value


def _message(data: Any, op: str) -> Message:
    try:
        key = data.get("idempotency_key")
        return Message(
            str(data["channel"]),
            int(data["seq"]),
            str(data["body"]),
            str(data["sender"]),
            None if key is None else str(key),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise IndeterminateError(f"{op}: unexpected message {data!r:.200}") from exc


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
