"""``host:port`` text, the way Toxiproxy (Go's ``net`` package) reads and writes it.

Proxies are described by addresses as text (``"localhost:26379"``,
``"[::1]:0"``), and clients compare what they sent with what the server
reports. So a listen address is resolved once, to the literal IP Go would
bind, and written back as Go writes a ``TCPAddr`` (IPv6 in brackets), and the
error messages name the address the way Go's do (``address local373: missing
port in address``), because clients and tests match on them.

One deliberate difference: an empty host (``":0"`` or no ``listen`` at all)
binds loopback, not every interface. knell is a fault injector for local
tests, and a proxy that nobody asked to expose must not be reachable from
the network.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["AddressError", "format_hostport", "resolve_listen", "split_hostport"]

LOOPBACK = "127.0.0.1"


class AddressError(ValueError):
    """An address that cannot be split or resolved; the message is Go's."""


def split_hostport(text: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> ``(host, port)``."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise AddressError(f"address {text}: missing ']' in address")
        host, rest = text[1:end], text[end + 1 :]
        if not rest.startswith(":"):
            raise AddressError(f"address {text}: missing port in address")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise AddressError(f"address {text}: missing port in address")
        if ":" in host:
            raise AddressError(f"address {text}: too many colons in address")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise AddressError(f"address {port_text}: invalid port")
    return host, int(port_text)


def format_hostport(host: str, port: int) -> str:
    """Go's ``JoinHostPort``: brackets around an IPv6 literal."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def resolve_listen(text: str) -> tuple[str, int]:
    """The literal IP and port a listen address binds (IPv4 first, as Go
    does for a name like ``localhost``). Blocking DNS only for a host name
    that is not an IP literal."""
    host, port = split_hostport(text)
    if host == "":
        return LOOPBACK, port
    literal = _literal(host)
    if literal is not None:
        return literal, port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise AddressError(f"lookup {host}: no such host") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]), port
