"""Run knell's Toxiproxy-compatible server: the proxies and their HTTP API in
one asyncio loop.

The API socket is bound here, before uvicorn starts, so that ``--listen
127.0.0.1:0`` can report the port it got: once the server accepts, the
address and pid are written to the ready file (atomically: a reader sees
the whole JSON or nothing). With a parent pid the process is leashed to its
parent (:func:`knell.platform.die_with_parent`), so a runner that dies,
even by SIGKILL, leaves no proxy behind.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
from pathlib import Path
from types import FrameType

import uvicorn

from knell.proxy.addr import AddressError, format_hostport, resolve_listen
from knell.proxy.api import build_app
from knell.proxy.registry import Registry

__all__ = ["ListenError", "ParentError", "bind_api", "run", "serve"]

log = logging.getLogger("knell.proxy")


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM / SIGINT after its graceful shutdown, which
    would end the process before the proxies are closed; here a stop
    request just ends :func:`serve`, and the process exits 0."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()


class ListenError(Exception):
    """The API address cannot be bound; the message says which and why."""


class ParentError(ListenError):
    """``parent_pid`` does not name this process's parent: leashed to it,
    the proxy would exit at once, silently, with the leash's code."""


def bind_api(listen: str, *, public: bool = False) -> socket.socket:
    """A listening socket for the API at ``listen`` (``host:port``).

    The API has no authentication (Toxiproxy's has none, and its clients
    send none), and it creates TCP relays to any address: served beyond
    loopback, anyone who reaches it could relay through this host. So a
    non-loopback address is refused unless ``public`` says the network in
    front of it is private (the compose stack's container, whose port is
    published on 127.0.0.1 only)."""
    try:
        host, port = resolve_listen(listen)
    except AddressError as exc:
        raise ListenError(f"--listen {listen!r}: {exc}") from None
    if not public and not ipaddress.ip_address(host).is_loopback:
        raise ListenError(
            f"--listen {format_hostport(host, port)} is not a loopback address: the proxy's "
            "API has no authentication and creates TCP relays; give --public only where "
            "the network in front of it is private (a container), or tunnel to 127.0.0.1"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise ListenError(f"--listen {format_hostport(host, port)}: {reason}") from None
    sock.setblocking(False)
    return sock


def _write_ready(path: Path, api: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"api": api, "pid": os.getpid()}) + "\n", encoding="utf-8")
    tmp.replace(path)


async def serve(sock: socket.socket, *, ready_file: Path | None = None) -> None:
    """Serve the API on ``sock`` until told to stop (SIGINT / SIGTERM)."""
    registry = Registry()
    config = uvicorn.Config(
        build_app(registry),
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=1,
    )
    server = _Server(config)
    host, port = sock.getsockname()[:2]
    api = f"http://{format_hostport(host, port)}"
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.005)
        if ready_file is not None:
            _write_ready(ready_file, api)
        log.info("knell proxy: API on %s", api)
        await task
    finally:
        registry.close()


def run(
    listen: str,
    *,
    ready_file: Path | None = None,
    parent_pid: int | None = None,
    public: bool = False,
) -> None:
    """Bind, leash, serve: the body of ``knell proxy`` and of
    ``python -m knell.proxy``. Raises :class:`ListenError` (a non-loopback
    ``listen`` without ``public`` is one, see :func:`bind_api`; so is a
    ``parent_pid`` that is not this process's parent: :class:`ParentError`)."""
    if parent_pid is not None:
        from knell.platform import die_with_parent, parent_alive

        if not parent_alive(parent_pid):
            raise ParentError(
                f"--parent-pid {parent_pid} is not this process's parent (or it is gone)"
            )
        die_with_parent(parent_pid)
    sock = bind_api(listen, public=public)
    asyncio.run(serve(sock, ready_file=ready_file))
