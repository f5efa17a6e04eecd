"""The JSON bodies the bridge reads and writes, as pydantic models.

One model per body, strict (``"5"`` is not an integer, ``true`` is not a
number, ``5.0`` is not a seq) and closed (an unknown field is refused,
so a misspelt ``idempotencyKey`` is an error rather than a post without
a key). The same models generate the OpenAPI description, so the
document cannot drift from what the bridge enforces.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from knell.bridge.protocol import MAX_NAME, NAME_PATTERN

__all__ = [
    "AckRequest",
    "CursorResponse",
    "ErrorResponse",
    "FetchResponse",
    "HeadResponse",
    "HealthResponse",
    "MessageResponse",
    "Name",
    "PostRequest",
    "SubscribeRequest",
    "WaitResponse",
    "WakeBody",
    "models",
]

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=MAX_NAME)]

Seq = Annotated[int, Field(ge=0, description="A sequence number (0: before the first message).")]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


# -- requests ------------------------------------------------------------------


class PostRequest(_Strict):
    """Append one message; a repeated ``idempotency_key`` returns the original."""

    body: str = Field(description="Opaque to the bus.")
    sender: Name = Field(description="Who posts (a handle): its own posts never ring it.")
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = Field(
        default=None, description="Retry key: one append per (channel, key)."
    )


class SubscribeRequest(_Strict):
    """Join at the channel's head (default) or its start; never moves an existing cursor."""

    at: Literal["head", "start"] = "head"


class AckRequest(_Strict):
    """Move the handle's cursor forward to ``up_to`` (never back; never beyond head)."""

    up_to: Seq


# -- responses -----------------------------------------------------------------


class MessageResponse(_Strict):
    channel: str
    seq: int
    body: str
    sender: str
    idempotency_key: str | None = None


class FetchResponse(_Strict):
    """A peek: a short page is the end of a batch, not the head."""

    messages: list[MessageResponse]


class CursorResponse(_Strict):
    cursor: int


class HeadResponse(_Strict):
    head: int


class WakeBody(_Strict):
    """A doorbell ring: what rang and why, never the message body."""

    channel: str
    seq: int
    sender: str
    reason: Literal["backlog", "post"]


class WaitResponse(_Strict):
    """``wake`` is null when the wait timed out without a ring."""

    wake: WakeBody | None


class HealthResponse(_Strict):
    ok: bool
    bus: str = Field(description="The kind of bus behind the bridge (its class name).")


class ErrorResponse(_Strict):
    """The one error envelope of every 4xx and 5xx."""

    error: str = Field(description="A stable code, e.g. ack-beyond-head.")
    detail: str = Field(description="What was wrong, and where.")
    outcome: Literal["definite", "indeterminate"] = Field(
        description="definite: it did not happen. indeterminate: it may have happened."
    )


def models() -> list[type[BaseModel]]:
    """Every body model, for the OpenAPI components."""
    return [
        PostRequest,
        SubscribeRequest,
        AckRequest,
        MessageResponse,
        FetchResponse,
        CursorResponse,
        HeadResponse,
        WakeBody,
        WaitResponse,
        HealthResponse,
        ErrorResponse,
    ]
