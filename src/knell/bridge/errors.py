"""One error envelope for every refusal and failure, and how bus errors map onto it.

A client through the bridge must record ``fail`` and ``info`` exactly as
a direct client would, so the envelope carries the contract's own
distinction: ``outcome`` is ``definite`` when the operation certainly did
not happen and ``indeterminate`` when it may have. The mapping follows the
error tree of :mod:`knell.buses.contract`:

=============================  ======  ==================  =============
raised by the bus              status  code                outcome
=============================  ======  ==================  =============
AckBeyondHead                  409     ack-beyond-head     definite
NotSubscribed                  404     not-subscribed      definite
a Refused subclass             409     its refusal kind    definite
                                       (lease-lost, ...)
any other DefiniteError        409     refused             definite
IndeterminateError             502     bus-error           indeterminate
anything else                  500     internal            indeterminate
=============================  ======  ==================  =============

Requests the bridge itself refuses (bad JSON, a bad name, a missing token,
an oversized body) never reach the bus: they are 4xx and ``definite``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

from knell.buses.contract import DefiniteError, IndeterminateError
from knell.buses.http_protocol import CODES
from knell.buses.operations import ERROR_KINDS

__all__ = ["JsonResponse", "Problem", "bus_problem", "envelope"]


class JsonResponse(Response):
    """A JSON response rendered by orjson (several times faster than the
    standard library's encoder, on the bridge's hottest path)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class Problem(Exception):
    """A request answered with the error envelope. ``code`` is one of
    :data:`knell.buses.http_protocol.CODES`, which fixes status and outcome."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}")
        known, self.outcome, _ = CODES[code]
        self.code = code
        self.detail = detail
        self.status = status or known
        self.headers = dict(headers or {})

    def response(self) -> Response:
        return envelope(self.code, self.detail, status=self.status, headers=self.headers)


def envelope(
    code: str, detail: str, *, status: int | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    """The error envelope for ``code`` as a response."""
    known, outcome, _ = CODES[code]
    body = {"error": code, "detail": detail, "outcome": outcome}
    return JsonResponse(body, status_code=status or known, headers=dict(headers or {}))


def bus_problem(exc: BaseException) -> Problem:
    """The envelope for an exception a bus raised (see the table above)."""
    text = str(exc) or type(exc).__name__
    for kind, cls in ERROR_KINDS.items():
        if isinstance(exc, cls):
            return Problem(kind, text)
    if isinstance(exc, DefiniteError):
        return Problem("refused", text)
    if isinstance(exc, IndeterminateError):
        return Problem("bus-error", text)
    return Problem("internal", f"{type(exc).__name__}: {text}")
