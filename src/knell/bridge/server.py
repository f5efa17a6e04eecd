"""Running one bridge process: listen, serve, report readiness, die with the parent.

A chaos run starts bridges as it starts workers: as child processes it
may SIGKILL, pause and restart at any moment, and that must never outlive
it. So this module does the few things a supervisor needs and uvicorn
alone does not:

* it binds the listening socket itself, before uvicorn starts, so a port
  in use is one clear start-up error, and an ephemeral port (``:0``) is
  known before the first request;
* once uvicorn accepts connections it writes a *ready file*, atomically,
  ``{"url": "http://127.0.0.1:PORT", "pid": PID, "listen": "HOST:PORT"}``,
  which a supervisor polls for instead of guessing when the bridge is up;
* with ``parent_pid`` it dies with its parent
  (:func:`knell.platform.die_with_parent`);
* it refuses to listen beyond loopback without a bearer token;
* it gives every request a read deadline and every idle connection a
  time limit (:mod:`knell.bridge.deadlines`), so a client that opens
  connections and trickles bytes into them cannot hold them forever.

A restarted bridge binds the same port again at once: the socket is
created with :func:`socket.create_server`, which sets ``SO_REUSEADDR`` on
POSIX, so connections of the killed bridge left in ``TIME_WAIT`` do not
block the port.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import uvicorn

from knell.bridge.app import LOOPBACK_HOSTS, BridgeConfig, create_app
from knell.bridge.deadlines import deadline_protocol
from knell.buses import open_bus
from knell.redact import redact_url, scrub

__all__ = ["IDLE_TIMEOUT", "READ_TIMEOUT", "Listen", "StartupError", "parse_listen", "serve"]

READ_TIMEOUT = 30.0
"""Seconds a client has to send a whole request, head and body, from the
moment it opens the connection (or sends the first byte of a later
request); past it the connection is closed (:mod:`knell.bridge.deadlines`)."""

IDLE_TIMEOUT = 30
"""Seconds a keep-alive connection may sit idle between requests."""

GRACEFUL_SHUTDOWN = 2.0
"""Seconds a stopping bridge gives requests in flight (long polls
included) before it closes their connections."""


class StartupError(Exception):
    """The bridge cannot start (bad address, port in use, bad bus URL...)."""


@dataclass(frozen=True)
class Listen:
    """Where a bridge listens."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything

    def url(self, port: int | None = None) -> str:
        """The URL a client on this machine reaches the bridge at."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port if port is None else port}"


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> :class:`Listen`."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise StartupError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:0")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise StartupError(f"--listen {text!r}: write an IPv6 address in brackets, [::1]:PORT")
    if not port.isdigit() or int(port) > 65535:
        raise StartupError(f"--listen {text!r}: the port must be 0 to 65535, got {port!r}")
    return Listen(host, int(port))


def _bind(listen: Listen) -> socket.socket:
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    try:
        sock = socket.create_server((listen.host, listen.port), family=family, backlog=2048)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StartupError(f"cannot listen on {listen.host}:{listen.port}: {reason}") from None
    # create_server leaves the socket's protocol number 0, and asyncio only
    # turns Nagle's algorithm off (TCP_NODELAY) on accepted sockets whose
    # protocol says TCP: without it every keep-alive response would wait
    # for the client's delayed ACK, 40 ms on Linux.
    return socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())


def _write_ready(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    tmp.replace(path)


class _Server(uvicorn.Server):
    """uvicorn, reporting readiness once it accepts connections."""

    def __init__(self, config: uvicorn.Config, ready: Path | None, data: dict[str, object]):
        super().__init__(config)
        self._ready = ready
        self._data = data

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        stop = getattr(getattr(self.config.app, "state", None), "stop", None)
        if callable(stop):
            stop()  # give up the long polls now, not after the graceful timeout

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._ready is not None:
            _write_ready(self._ready, self._data)


def serve(
    bus_url: str,
    *,
    driver: str | None = None,
    listen: Listen,
    token: str | None = None,
    ready_file: Path | None = None,
    config: BridgeConfig | None = None,
    access_log: bool = False,
    read_timeout: float = READ_TIMEOUT,
    idle_timeout: int = IDLE_TIMEOUT,
    say: Callable[[str], None] | None = None,
) -> None:
    """Open the bus, listen, and serve until told to stop (SIGINT/SIGTERM).

    Raises :class:`StartupError` before serving anything when the bridge
    cannot start.
    """
    if not listen.loopback and token is None:
        raise StartupError(
            f"--listen {listen.host}:{listen.port} is not a loopback address: "
            "a bridge reachable from other hosts needs --token (or KNELL_BRIDGE_TOKEN)"
        )
    try:
        bus = open_bus(bus_url, driver)
    except Exception as exc:
        shown = redact_url(bus_url) + (f" (driver {driver})" if driver else "")
        raise StartupError(f"cannot open bus {shown}: {scrub(str(exc), bus_url)}") from None
    try:
        sock = _bind(listen)
    except StartupError:
        bus.close()
        raise
    port = sock.getsockname()[1]
    hosts = None if token is not None else LOOPBACK_HOSTS | {listen.host}
    base = config or BridgeConfig()
    app_config = BridgeConfig(
        token=token,
        max_body=base.max_body,
        threads=base.threads,
        max_waits=base.max_waits,
        max_wait=base.max_wait,
        allowed_hosts=hosts,
    )
    app = create_app(bus, app_config)
    url = listen.url(port)
    uv = uvicorn.Config(
        app,
        log_level="warning",
        access_log=access_log,
        lifespan="on",
        http=deadline_protocol(read_timeout),
        timeout_keep_alive=idle_timeout,
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
        server_header=False,
        proxy_headers=False,  # no proxy in front: X-Forwarded-* would be a lie
    )
    data: dict[str, object] = {"url": url, "pid": os.getpid(), "listen": f"{listen.host}:{port}"}
    if say is not None:
        say(f"knell bridge: serving {redact_url(bus_url)} at {url} (pid {os.getpid()})")
    try:
        _Server(uv, ready_file, data).run(sockets=[sock])
    finally:
        sock.close()
