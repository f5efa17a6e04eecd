"""Probes: a fault window counts only once a real connection shows the fault.

Toxiproxy's own users report toxics that some connections never get, admin
calls that return while nothing changed, and heals that silently fail. So
knell does not trust the API's ``200``: before a fault window counts, a
*probe* opens a real TCP connection through the same proxy, to the same
upstream the workers use, and measures what happens; after a heal, probes
repeat until the link carries traffic again.

**How a probe talks to a database it does not know.** The upstream is a
store (Postgres, Redis, ...), not an echo server, and a probe must neither
log in nor change data. So a probe speaks one *exchange*: the smallest
request the store answers without authentication, and the reply that proves
the answer came from the store:

==============  =============================  ===================================
exchange        request                        reply
==============  =============================  ===================================
``postgres``    an 8-byte ``SSLRequest``       one byte, ``N`` or ``S``
``redis``       ``PING``                       ``+PONG`` (or ``-NOAUTH``: still an answer)
``echo``        any bytes (sized to the test)  the same bytes (test upstreams, bridges)
``connect``     nothing: TCP connect only      -
==============  =============================  ===================================

That exchange is enough to see the faults knell injects through the
request and reply path: *refused* (connect refused: the proxy is disabled),
*held* (a partition: the request goes in, nothing comes back, the
connection stays open for the whole wait), *reset* (an RST), *closed* (a
FIN with no reply: ``timeout`` > 0, ``limit_data`` below the request size),
*delayed* (the reply arrives at least the added latency late) and a *slow
close* (after the probe half-closes, the store's close comes back late).
Faults that only show on bulk data (``bandwidth``, ``slicer``, a
``limit_data`` above the exchange's size) are measured only through an
``echo`` exchange; with a database exchange :func:`expectation_for` says so
and the window is recorded as *unproven*, never as proven by assumption.
What proves a toxic is known by the fault kind that applies it (its
``expectation``, see :class:`ProvesToxic`): this module measures, the
kinds say what the measure must show.

Each probe returns :class:`Evidence` (what was measured, in milliseconds and
bytes), each fault an :class:`Expectation` (what the evidence must show),
and :func:`prove` a :class:`Proof`: ``proven``, ``disproven`` (the probe saw
a healthy link: the fault did not take) or ``unproven`` (the probe cannot
tell, for example with ``toxicity`` below 1, where a probe connection may
legitimately be spared, or a fault the exchange cannot measure). The proof
is plain JSON (:meth:`Proof.to_json`) for the history's nemesis events.
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "EXCHANGES",
    "Carries",
    "Closed",
    "Delayed",
    "Evidence",
    "Exchange",
    "Expectation",
    "Held",
    "LimitedTo",
    "LinkDown",
    "Proof",
    "ProvesToxic",
    "Refused",
    "Reset",
    "Sliced",
    "SlowClosed",
    "Throttled",
    "expectation_for",
    "probe",
    "prove",
    "sends_nothing",
    "wait_carries_traffic",
]

Outcome = Literal["reply", "held", "partial", "closed", "reset", "refused", "timeout", "error"]


@dataclass(frozen=True)
class Exchange:
    """The smallest request an upstream answers, and how to recognise the
    answer. ``echo``: the reply mirrors the request, so a probe can size it
    (bulk faults become measurable)."""

    name: str
    request: bytes
    replies: tuple[bytes, ...] = ()
    echo: bool = False

    def reply_size(self, request: bytes) -> int:
        if self.echo:
            return len(request)
        return min((len(r) for r in self.replies), default=1) if self.request else 0

    def recognises(self, data: bytes, request: bytes) -> bool:
        if self.echo:
            return data[: len(request)] == request[: len(data)]
        return not self.replies or any(data.startswith(r[: len(data)]) for r in self.replies)


class _Exchanges(dict[str, Exchange]):
    """The exchanges by name: the protocol ones below, and each store
    kind's greeting under the kind's name (:mod:`knell.stores.registry`),
    looked up when first asked."""

    def __missing__(self, name: str) -> Exchange:
        from knell.stores import registry

        kind = registry.kinds().get(name)
        if kind is None or kind.greeting is None:
            raise KeyError(name)
        found = Exchange(name, kind.greeting.request, kind.greeting.replies)
        self[name] = found
        return found


EXCHANGES: dict[str, Exchange] = _Exchanges(
    {
        "echo": Exchange("echo", b"knell-probe\n", (), echo=True),
        "http": Exchange("http", b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", (b"HTTP/",)),
        "connect": Exchange("connect", b""),
    }
)


@dataclass(frozen=True)
class Evidence:
    """What one probe connection measured. Times are milliseconds from the
    start of the request (``connect_ms`` from the connect call)."""

    outcome: Outcome
    address: str
    exchange: str
    connect_ms: float | None = None
    reply_ms: float | None = None  # first reply byte
    done_ms: float | None = None  # whole reply
    end_ms: float | None = None  # EOF / RST seen
    close_ms: float | None = None  # from our half-close to the peer's EOF
    sent: int = 0
    received: int = 0
    reads: int = 0
    waited_ms: float = 0.0
    recognised: bool | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _dial_target(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, int(port)


def probe(
    address: str,
    exchange: Exchange | str = "echo",
    *,
    wait: float = 1.0,
    payload: bytes | None = None,
    half_close: bool = False,
    connect_timeout: float = 2.0,
) -> Evidence:
    """Open one connection to ``address`` (a proxy's ``listen``), send the
    exchange's request (or ``payload``, for an echo exchange) and watch for
    up to ``wait`` seconds: the reply, an EOF, an RST, or nothing. With
    ``half_close``, once the reply is in, shut down our sending side and
    time how long the peer's EOF takes (``close_ms``)."""
    ex = EXCHANGES[exchange] if isinstance(exchange, str) else exchange
    request = payload if (payload is not None and ex.echo) else ex.request
    expected = ex.reply_size(request)
    host, port = _dial_target(address)
    base: dict[str, Any] = {"address": address, "exchange": ex.name}
    t0 = time.perf_counter()
    try:
        sock = socket.create_connection((host, port), timeout=connect_timeout)
    except ConnectionRefusedError:
        return Evidence("refused", connect_ms=_ms(t0), **base)
    except TimeoutError:
        return Evidence("timeout", connect_ms=_ms(t0), detail="connect timed out", **base)
    except OSError as exc:
        return Evidence("error", connect_ms=_ms(t0), detail=f"connect: {exc}", **base)
    connect_ms = _ms(t0)
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        return _exchange(sock, request, expected, ex, wait, half_close, connect_ms, base)


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


def _exchange(
    sock: socket.socket,
    request: bytes,
    expected: int,
    ex: Exchange,
    wait: float,
    half_close: bool,
    connect_ms: float,
    base: dict[str, Any],
) -> Evidence:
    start = time.perf_counter()
    deadline = start + wait
    out = memoryview(request)
    data = bytearray()
    reads = 0
    first: float | None = None
    done: float | None = None
    shut: float | None = None
    outcome: Outcome = "held"
    end: float | None = None
    detail = ""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0))
    try:
        while True:
            if done is not None and not half_close:
                outcome = "reply"
                break
            if done is not None and shut is None:
                sock.shutdown(socket.SHUT_WR)
                shut = time.perf_counter()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                outcome = "reply" if done is not None else ("partial" if data else "held")
                detail = "no EOF after the half-close" if shut is not None else detail
                break
            events = sel.select(remaining)
            try:
                for _, mask in events:
                    if mask & selectors.EVENT_WRITE and out:
                        sent = sock.send(out)
                        out = out[sent:]
                        if not out:
                            sel.modify(sock, selectors.EVENT_READ)
                    if mask & selectors.EVENT_READ:
                        chunk = sock.recv(1 << 16)
                        now = time.perf_counter()
                        if not chunk:
                            end = now
                            raise EOFError
                        reads += 1
                        first = now if first is None else first
                        data += chunk
                        if done is None and len(data) >= max(expected, 1) and expected > 0:
                            done = now
            except EOFError:
                outcome = "reply" if done is not None else "closed"
                break
            except (ConnectionResetError, BrokenPipeError) as exc:
                end = time.perf_counter()
                outcome = "reset"
                detail = type(exc).__name__
                break
            except OSError as exc:
                end = time.perf_counter()
                outcome = "reset" if exc.errno in (errno.ECONNRESET, errno.EPIPE) else "error"
                detail = str(exc)
                break
            if expected == 0 and not out and not half_close:
                outcome = "reply"  # connect-only: the connection is up, nothing to wait for
                break
    finally:
        sel.close()

    def rel(t: float | None) -> float | None:
        return None if t is None else (t - start) * 1000.0

    return Evidence(
        outcome,
        connect_ms=connect_ms,
        reply_ms=rel(first),
        done_ms=rel(done),
        end_ms=rel(end),
        close_ms=None if (shut is None or end is None) else (end - shut) * 1000.0,
        sent=len(request) - len(out),
        received=len(data),
        reads=reads,
        waited_ms=_ms(start),
        recognised=ex.recognises(bytes(data), request) if data else None,
        detail=detail,
        **base,
    )


# -- expectations ------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """What a probe must show for a fault to count; ``wait`` is how long
    the probe watches (seconds)."""

    def describe(self) -> str:
        raise NotImplementedError

    def wait(self) -> float:
        return 1.0

    def payload(self, ex: Exchange) -> bytes | None:
        return None

    half_close = False

    def holds(self, ev: Evidence) -> bool:
        raise NotImplementedError

    def run(self, address: str, ex: Exchange) -> Evidence:
        return probe(
            address, ex, wait=self.wait(), payload=self.payload(ex), half_close=self.half_close
        )


@dataclass(frozen=True)
class Refused(Expectation):
    """A disabled proxy: the connect itself is refused."""

    def describe(self) -> str:
        return "connection refused"

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "refused"


@dataclass(frozen=True)
class Held(Expectation):
    """A partition: the request goes in, nothing comes back, and the
    connection stays open for at least ``min_ms``."""

    min_ms: float = 300.0

    def describe(self) -> str:
        return f"no reply and no close for >= {self.min_ms:g} ms"

    def wait(self) -> float:
        return self.min_ms / 1000.0

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "held" and ev.waited_ms >= self.min_ms


@dataclass(frozen=True)
class Delayed(Expectation):
    """Latency: the reply comes, at least ``min_ms`` after the request."""

    min_ms: float
    max_wait_ms: float = 5000.0

    def describe(self) -> str:
        return f"reply after >= {self.min_ms:g} ms"

    def wait(self) -> float:
        return max(self.max_wait_ms, self.min_ms * 3) / 1000.0

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "reply" and ev.done_ms is not None and ev.done_ms >= self.min_ms


@dataclass(frozen=True)
class Reset(Expectation):
    """``reset_peer``: the connection is reset, within ``within_ms``."""

    within_ms: float = 1000.0

    def describe(self) -> str:
        return f"connection reset within {self.within_ms:g} ms"

    def wait(self) -> float:
        return self.within_ms / 1000.0

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "reset"


@dataclass(frozen=True)
class Closed(Expectation):
    """The proxy closes the connection (a FIN) with at most ``max_bytes``
    of reply, within ``within_ms``: ``timeout`` > 0, ``limit_data``."""

    within_ms: float = 1000.0
    max_bytes: int = 0
    echo_size: int = 0

    def describe(self) -> str:
        return f"closed within {self.within_ms:g} ms after <= {self.max_bytes} reply bytes"

    def wait(self) -> float:
        return self.within_ms / 1000.0

    def payload(self, ex: Exchange) -> bytes | None:
        return b"k" * self.echo_size if self.echo_size else None

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome in ("closed", "reset") and ev.received <= self.max_bytes


@dataclass(frozen=True)
class LimitedTo(Closed):
    """``limit_data``: exactly ``max_bytes`` come back, then the close."""

    def describe(self) -> str:
        return f"closed after exactly {self.max_bytes} bytes"

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "closed" and ev.received == self.max_bytes


@dataclass(frozen=True)
class SlowClosed(Expectation):
    """``slow_close``: after the probe half-closes, the peer's EOF arrives
    at least ``min_ms`` later."""

    min_ms: float = 0.0
    half_close = True

    def describe(self) -> str:
        return f"close delayed >= {self.min_ms:g} ms"

    def wait(self) -> float:
        return (self.min_ms + 2000.0) / 1000.0

    def holds(self, ev: Evidence) -> bool:
        return ev.close_ms is not None and ev.close_ms >= self.min_ms


@dataclass(frozen=True)
class Throttled(Expectation):
    """``bandwidth`` (echo only): a payload of ``size`` bytes comes back no
    faster than ``rate_kbs`` KB/s allows (with ``slack``)."""

    rate_kbs: int = 0
    size: int = 0
    slack: float = 0.25

    def describe(self) -> str:
        return f"{self.size} bytes at <= {self.rate_kbs * (1 + self.slack):g} KB/s"

    def wait(self) -> float:
        return 3.0 * self.size / (self.rate_kbs * 1000.0) + 2.0

    def payload(self, ex: Exchange) -> bytes | None:
        return b"b" * self.size

    def holds(self, ev: Evidence) -> bool:
        if ev.outcome != "reply" or not ev.done_ms:
            return False
        return ev.received / ev.done_ms <= self.rate_kbs * (1 + self.slack)


@dataclass(frozen=True)
class Sliced(Expectation):
    """``slicer`` (echo only): a payload arrives in several reads."""

    size: int = 0

    def describe(self) -> str:
        return f"{self.size} bytes in >= 2 reads"

    def wait(self) -> float:
        return 5.0

    def payload(self, ex: Exchange) -> bytes | None:
        return b"s" * self.size

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "reply" and ev.reads >= 2


@dataclass(frozen=True)
class Carries(Expectation):
    """A healthy link: the whole, recognised reply within ``within_ms``."""

    within_ms: float = 1000.0

    def describe(self) -> str:
        return f"recognised reply within {self.within_ms:g} ms"

    def wait(self) -> float:
        return self.within_ms / 1000.0

    def holds(self, ev: Evidence) -> bool:
        return ev.outcome == "reply" and ev.recognised is not False


# -- from a fault to what proves it -----------------------------------------


@dataclass(frozen=True)
class ToxicView:
    """What :func:`expectation_for` reads of a toxic (a ``ToxicSpec`` fits)."""

    type: str
    stream: str = "downstream"
    toxicity: float = 1.0
    attributes: dict[str, int] = field(default_factory=dict)


class ProvesToxic(Protocol):
    """What a link fault kind declares about the toxic it applies: which
    toxic it is, how visible it is beside others, and what a probe must
    see for it (see :class:`knell.nemesis.network.LinkFault`)."""

    @property
    def toxic_type(self) -> str: ...

    @property
    def proof_order(self) -> int: ...

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str: ...


def sends_nothing(exchange: Exchange, what: str) -> str | None:
    """Why ``exchange`` cannot show ``what`` (it sends no request, so no
    reply can be late, cut or held), or None when it can."""
    if exchange.request:
        return None
    return f"the '{exchange.name}' exchange sends nothing, so it cannot show a {what}"


def _toxic_kinds() -> dict[str, ProvesToxic]:
    """Toxic type -> the registered link fault kind that applies it: each
    kind keeps the knowledge of how its toxic is proven."""
    from knell.nemesis.network import LinkFault  # the kinds sit above the probe
    from knell.nemesis.registry import kinds

    found: dict[str, ProvesToxic] = {}
    for kind in kinds().values():
        if isinstance(kind, LinkFault) and kind.toxic_type:
            found.setdefault(kind.toxic_type, kind)
    return found


def expectation_for(
    toxics: Sequence[Any],
    exchange: Exchange | str,
    *,
    disabled: bool = False,
    hold_ms: float = 300.0,
) -> Expectation | str:
    """The expectation that proves this fault through ``exchange``, or the
    reason it cannot be proven that way. ``toxics`` are the toxics of the
    fault (objects with ``type``, ``stream``, ``attributes``); ``disabled``
    is the refuse fault. The fault kind that applies a toxic says what
    proves it (:class:`ProvesToxic`); with several toxics the most visible
    one decides (refusal, then the kind with the lowest ``proof_order``:
    timeout, reset, limit, latency, bandwidth, slicer, slow close)."""
    ex = EXCHANGES[exchange] if isinstance(exchange, str) else exchange
    if disabled:
        return Refused()
    by_type: dict[str, Any] = {}
    for toxic in toxics:
        by_type.setdefault(toxic.type, toxic)
    known = _toxic_kinds()
    present = sorted((known[t] for t in by_type if t in known), key=lambda k: k.proof_order)
    if not present:
        return "no toxic of this fault changes what a probe sees"
    kind = present[0]
    toxic = by_type[kind.toxic_type]
    attributes = dict(getattr(toxic, "attributes", {}) or {})
    return kind.expectation(attributes, toxic.stream, ex, hold_ms)


@dataclass(frozen=True)
class Proof:
    """Whether a fault window is proven by a real connection.

    ``status``: ``proven`` (the probe showed the fault), ``disproven`` (it
    did not: the fault did not take; recreate the proxy and re-apply) or
    ``unproven`` (the probe cannot tell: ``toxicity`` below 1, or a fault
    the exchange cannot measure; the window is recorded, not counted)."""

    status: Literal["proven", "disproven", "unproven"]
    expected: str
    reason: str = ""
    evidence: Evidence | None = None

    @property
    def proven(self) -> bool:
        return self.status == "proven"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "expected": self.expected,
            "reason": self.reason,
            "evidence": None if self.evidence is None else self.evidence.to_json(),
        }


def prove(
    address: str,
    toxics: Sequence[Any] = (),
    exchange: Exchange | str = "echo",
    *,
    disabled: bool = False,
    hold_ms: float = 300.0,
) -> Proof:
    """Probe ``address`` for the fault made of ``toxics`` (or ``disabled``)."""
    ex = EXCHANGES[exchange] if isinstance(exchange, str) else exchange
    expectation = expectation_for(toxics, ex, disabled=disabled, hold_ms=hold_ms)
    if isinstance(expectation, str):
        return Proof("unproven", "-", reason=expectation)
    evidence = expectation.run(address, ex)
    partial = [t for t in toxics if getattr(t, "toxicity", 1.0) < 1.0]
    if partial and not disabled:
        names = ", ".join(f"{getattr(t, 'name', t.type)} ({t.toxicity:g})" for t in partial)
        reason = f"toxicity below 1 ({names}): a probe connection may be spared"
        return Proof("unproven", expectation.describe(), reason=reason, evidence=evidence)
    if expectation.holds(evidence):
        return Proof("proven", expectation.describe(), evidence=evidence)
    return Proof(
        "disproven",
        expectation.describe(),
        reason=f"the probe saw {evidence.outcome}",
        evidence=evidence,
    )


class LinkDown(Exception):
    """The link did not carry traffic again within the time given."""

    def __init__(self, message: str, evidence: Evidence | None) -> None:
        super().__init__(message)
        self.evidence = evidence


def wait_carries_traffic(
    address: str,
    exchange: Exchange | str = "echo",
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
) -> Evidence:
    """Probe until a recognised reply comes back through ``address``;
    returns that probe's evidence (``detail`` says after how many tries),
    or raises :class:`LinkDown` with the last evidence after ``timeout``."""
    ex = EXCHANGES[exchange] if isinstance(exchange, str) else exchange
    expectation = Carries()
    start = time.perf_counter()
    deadline = start + timeout
    last: Evidence | None = None
    tries = 0
    while True:
        tries += 1
        remaining = deadline - time.perf_counter()
        wait = max(0.05, min(1.0, remaining))
        last = probe(address, ex, wait=wait, connect_timeout=wait)
        if expectation.holds(last):
            detail = f"carried traffic after {tries} probe(s), {_ms(start):.0f} ms"
            return Evidence(**{**asdict(last), "detail": detail})
        if time.perf_counter() >= deadline:
            raise LinkDown(
                f"{address} carried no traffic within {timeout:g} s "
                f"({tries} probes; last: {last.outcome})",
                last,
            )
        time.sleep(interval)
