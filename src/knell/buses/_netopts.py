"""What the network buses (Postgres, Redis) read from their driver URL.

A driver URL carries two kinds of query options: the store client's own
(libpq's ``sslmode``, redis-py's ``ssl_cert_reqs`` ...), passed through
untouched, and knell's (``poll_interval``, ``op_timeout``, the namespace),
which the client library would reject. :func:`split_url` takes knell's out,
validates them, and gives back the URL the client library sees.

``op_timeout`` bounds every call: a store that is SIGSTOPped still has a
kernel that accepts connections and ACKs bytes, so without a client-side
bound a call would hang for as long as the store is paused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from knell.redact import redact_url

__all__ = ["NetOptions", "redact", "split_url"]


@dataclass(frozen=True)
class NetOptions:
    """knell's options of one network-bus URL."""

    poll_interval: float
    op_timeout: float
    namespace: str | None
    notify: bool
    max_deliveries: int = 5
    """For queues claimed without being declared (the bus's default)."""


def _positive(name: str, value: str, url: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a number of seconds, got {value!r} in {redact(url)}"
        ) from None
    if not number > 0:
        raise ValueError(f"{name} must be > 0, got {value!r} in {redact(url)}")
    return number


def split_url(
    url: str, *, namespace_key: str, namespace_check: re.Pattern[str], schemes: tuple[str, ...]
) -> tuple[str, NetOptions]:
    """``(client_url, options)``: the URL without knell's query options,
    and those options, validated (a ``ValueError`` names the bad one)."""
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(
            f"expected a {' or '.join(s + '://' for s in schemes)} URL, got {redact(url)}"
        )
    keep: list[tuple[str, str]] = []
    mine: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("poll_interval", "op_timeout", "notify", "max_deliveries", namespace_key):
            mine[key] = value
        else:
            keep.append((key, value))
    namespace = mine.get(namespace_key)
    if namespace is not None and not namespace_check.fullmatch(namespace):
        raise ValueError(
            f"{namespace_key}={namespace!r} is not a valid name "
            f"(expected {namespace_check.pattern}) in {redact(url)}"
        )
    notify = mine.get("notify", "1").lower()
    if notify not in ("0", "1", "true", "false", "on", "off", "yes", "no"):
        raise ValueError(f"notify must be 0 or 1, got {notify!r} in {redact(url)}")
    most = mine.get("max_deliveries", "5")
    if not most.isdigit() or int(most) < 1:
        raise ValueError(f"max_deliveries must be an integer >= 1, got {most!r} in {redact(url)}")
    options = NetOptions(
        poll_interval=_positive("poll_interval", mine.get("poll_interval", "0.1"), url),
        op_timeout=_positive("op_timeout", mine.get("op_timeout", "5"), url),
        namespace=namespace,
        notify=notify in ("1", "true", "on", "yes"),
        max_deliveries=int(most),
    )
    client = urlunsplit(parts._replace(query=urlencode(keep)))
    return client, options


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``: URLs end up in
    error messages, logs and reports (the one redaction point:
    :func:`knell.redact.redact_url`)."""
    return redact_url(url)
