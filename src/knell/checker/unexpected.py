"""unexpected: every delivered message was posted by someone, on that channel.

Every producer puts a unique id in each message body (``producer-2:431``)
and logs it in its ``post`` invoke *before* calling the bus. A fetch or a
handle event carrying an id that no post invoke on that channel ever
carried is a message the bus made up: corruption, a torn write read back as
a message, a cross-channel leak, or a stale store from another run. Any of
them means the history's deliveries cannot be trusted.

Resolved at the end, not in order: a post's invoke is logged before the
message can exist, but the check does not rely on that. In a run that
forgets (:mod:`knell.checker.settle`), a settled message's id is dropped
once it is forgotten (sightings of its seq are passed over by the pass);
an id shown afterwards at a *new* seq is reported, its message saying it
may be a forgotten message shown again (a second copy: a violation
either way).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_delivery
from knell.history import Event

__all__ = ["UnexpectedCheck"]


class UnexpectedCheck(Check):
    name: ClassVar[str] = "unexpected"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("unexpected",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # channel -> ids some post invoke carried
        self._posted: dict[Any, set[Any]] = {}
        # channel -> id -> (seq, first observing event), for ids not yet posted
        self._suspects: dict[Any, dict[Any, tuple[Any, Event]]] = {}
        self._observations = 0
        self._forgotten: dict[Any, int] = {}

    def _channel(self, channel: Any) -> tuple[set[Any], dict[Any, tuple[Any, Event]]]:
        posted = self._posted.get(channel)
        if posted is None:
            posted = self._posted[channel] = set()
            self._suspects[channel] = {}
        return posted, self._suspects[channel]

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        posted = self._posted.get(channel)
        if posted is not None:
            posted.discard(mid)
            self._forgotten[channel] = self._forgotten.get(channel, 0) + (not again)

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        self._channel(event["channel"])[0].add(event["value"]["id"])

    # The deliveries themselves arrive through ``deliver``; these only count.
    @on("handle", "ok")
    def _handle_ok(self, event: Event) -> None:
        event["value"]  # an event without a value is unreadable, as in observe
        self._observations += 1

    @on("fetch", "ok")
    def _fetch_ok(self, event: Event) -> None:
        self._observations += len(event["value"]["messages"])

    @on_delivery
    def deliver(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        # the first time (channel, seq, mid) was shown; repeats add nothing
        posted, suspects = self._channel(channel)
        if mid not in posted and mid not in suspects:
            suspects[mid] = (seq, event)

    def result(self) -> CheckResult:
        log = self.log
        for channel, suspects in self._suspects.items():
            posted = self._posted[channel]
            for mid, (seq, event) in suspects.items():
                if mid in posted:
                    continue
                if log.full("unexpected"):
                    log.count("unexpected")
                    continue
                how = "handled" if event["f"] == "handle" else "fetched"
                forgotten = self._forgotten.get(channel, 0)
                log.add(
                    "unexpected",
                    f"handle {event.get('handle')} {how} message {mid} (channel {channel}, "
                    f"seq {seq}) that no post on channel {channel} ever carried"
                    + (
                        f", or one of the {forgotten} settled messages forgotten before it "
                        f"was shown again at a new seq"
                        if forgotten
                        else ""
                    ),
                    witness(event),
                )
        posted_ids = sum(map(len, self._posted.values())) + sum(self._forgotten.values())
        return self._result({"posted-ids": posted_ids, "observations": self._observations})
