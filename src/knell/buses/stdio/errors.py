"""What can go wrong on knell's side of the stdio protocol.

A bus behind a stdio adapter can fail in two different ways, and knell
must never confuse them:

* The **bus** answers an operation with an error (``"ok": false``): that is
  the bus's own verdict on the operation, mapped through the contract's
  tree (``definite`` -> :class:`~knell.buses.contract.DefiniteError`,
  ``indeterminate`` -> :class:`~knell.buses.contract.IndeterminateError`).
* The **adapter** breaks the protocol: a line that is not JSON, a reply
  to an id never sent, a reply when nothing was asked, an adapter that
  exits or stops answering. Then knell cannot know what happened to the
  operation in flight, so it is :class:`AdapterError`, an
  ``IndeterminateError`` (history ``info``), and it says which of these it
  was (:attr:`AdapterError.kind`) in words a bus author can act on.

The tree::

    IndeterminateError
    └── AdapterError              the adapter broke the protocol     -> "info"
        └── AdapterStartError     ... before it could serve at all; also a
                                  DriverError, so ``knell run`` stops with
                                  a usage error instead of running blind

Every AdapterError message starts with ``stdio adapter`` (so a worker's
history records ``"AdapterError: stdio adapter <kind>: ..."``, the marker
a check uses to tell a broken adapter from a broken bus).
"""

from __future__ import annotations

from typing import Literal

from knell.buses import DriverError
from knell.buses.contract import DriverFault

__all__ = ["MARKER", "AdapterError", "AdapterStartError", "ProblemKind"]

ProblemKind = Literal["malformed", "unknown-id", "unsolicited", "exited", "timeout", "handshake"]

MARKER = "stdio adapter "
"""How every :class:`AdapterError` message begins."""


class AdapterError(DriverFault):
    """The adapter broke the stdio protocol; the operation's outcome is unknown."""

    def __init__(self, kind: ProblemKind, detail: str, *, adapter: str = "") -> None:
        where = f" [{adapter}]" if adapter else ""
        super().__init__(f"{MARKER}{kind}: {detail}{where}")
        self.kind: ProblemKind = kind
        self.detail = detail


class AdapterStartError(AdapterError, DriverError):
    """The adapter could not be started or failed its ``hello`` handshake."""
