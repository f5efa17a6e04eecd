"""What every bus's queue and role halves share: message ids and the
validation of their arguments.

The SQLite, Postgres and Redis implementations of the queue and
at-most-once contracts differ in where their atomicity comes from, not in
what they accept: the same id format (``CHANNEL/SEQ``, opaque to callers),
the same refusal of a lease that is not positive or a ``max_deliveries``
below one, with the same words. Keeping them here means a bus refuses bad
input the same way on every store, and a history reads the same.
"""

from __future__ import annotations

from knell.buses.contract import DefiniteError

__all__ = [
    "DEFAULT_MAX_DELIVERIES",
    "check_lease",
    "check_max_deliveries",
    "message_id",
    "split_id",
]

DEFAULT_MAX_DELIVERIES = 5
"""A queue claimed without being declared gets this many deliveries."""


def message_id(channel: str, seq: int) -> str:
    return f"{channel}/{seq}"


def split_id(message: str) -> tuple[str, int]:
    """``CHANNEL/SEQ`` back into its parts; a malformed id is a definite
    error (nothing can have happened to a message it cannot name)."""
    channel, _, seq = str(message).rpartition("/")
    if not channel or not seq.isdigit():
        raise DefiniteError(f"not a message id of this bus: {message!r}")
    return channel, int(seq)


def check_lease(lease_s: float) -> None:
    """A lease (of a message or a role) must be positive: refused otherwise."""
    if not lease_s > 0:
        raise DefiniteError(f"lease_s must be > 0, got {lease_s!r}")


def check_max_deliveries(max_deliveries: object) -> int:
    """A declared ``max_deliveries`` must be an int of at least one."""
    if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int):
        raise DefiniteError(f"max_deliveries must be an int, got {max_deliveries!r}")
    if max_deliveries < 1:
        raise DefiniteError(f"max_deliveries must be >= 1, got {max_deliveries}")
    return max_deliveries
