"""A tail page as the history records it (the streamer's ``stream_tail``)."""

from __future__ import annotations

from dataclasses import dataclass

from knell.history import Event

__all__ = ["TAIL_F", "Page", "page_of"]

TAIL_F = "stream_tail"
"""The ``f`` of a stream tail in the history."""


@dataclass(frozen=True, slots=True)
class Page:
    """One ``stream_tail`` ok: what was asked and what came back."""

    channel: str
    after: int
    limit: int
    first: int
    head: int
    seqs: tuple[int, ...]
    ids: tuple[str, ...]
    expired: tuple[int, ...] = ()
    """The seqs the page hid because their message expired (a bus with the
    expiry feature names them): accounted for, not shown."""
    forensic: bool = False
    """A tail with ``include_expired``: a look at what the ring keeps."""

    @property
    def covered(self) -> tuple[int, ...]:
        """Every seq the page accounts for, shown or hidden as expired,
        ascending (the page's span, which must be consecutive)."""
        if not self.expired:
            return self.seqs
        return tuple(sorted({*self.seqs, *self.expired}))

    @property
    def start(self) -> int:
        """Where the page must start: after ``after``, not before the ring."""
        return max(self.after + 1, self.first)


def page_of(done: Event) -> Page:
    """The page of a ``stream_tail`` ok event."""
    value = done["value"]
    messages = value["messages"]
    return Page(
        str(done["channel"]),
        int(value["after"]),
        int(value["limit"]),
        int(value["first"]),
        int(value["head"]),
        tuple(int(m["seq"]) for m in messages),
        tuple(str(m["id"]) for m in messages),
        tuple(int(seq) for seq in value.get("expired") or ()),
        value.get("include_expired") is True,
    )
