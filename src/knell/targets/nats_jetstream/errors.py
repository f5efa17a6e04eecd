"""What a nats-py failure means for the contract: definite or unknown.

A worker records a failed call as ``fail`` (it certainly did not happen)
or ``info`` (it may have), and a wrong ``fail`` is worse than a cautious
``info``: it would let the checker call a message lost that was stored.
So only what proves nothing took effect is definite:

* JetStream answered with an error (``APIError``: stream or consumer not
  found, a bad request, JetStream unavailable): the API refused before
  applying anything;
* nobody answered the request subject (``NoRespondersError``, or
  ``NoStreamResponseError`` for a publish): the server saw no stream or
  no JetStream to take it, so nothing stored it;
* the client was not connected when the call began, so nothing was sent
  (the driver checks before each request, see
  :meth:`~knell.targets.nats_jetstream.bus.JetStreamBus`).

Everything else is unknown: a timeout (the request may have been applied
and only the reply lost), a connection lost mid-request, anything
unexpected.
"""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors

from knell.buses.contract import BusError, DefiniteError, IndeterminateError

__all__ = ["classify"]


def classify(exc: BaseException, doing: str) -> BusError:
    """The contract error for ``exc`` raised while ``doing`` something."""
    if isinstance(exc, BusError):
        return exc
    if isinstance(exc, nats.js.errors.APIError):
        code = getattr(exc, "err_code", None) or getattr(exc, "code", None)
        return DefiniteError(f"{doing}: JetStream refused: {exc.description} ({code})")
    if isinstance(exc, (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError)):
        return DefiniteError(f"{doing}: no JetStream answered (nothing stored)")
    if isinstance(exc, (asyncio.TimeoutError, nats.errors.TimeoutError)):
        return IndeterminateError(f"{doing}: timed out waiting for the server's answer")
    text = " ".join(str(exc).split()) or type(exc).__name__
    return IndeterminateError(f"{doing}: {type(exc).__name__}: {text}")
