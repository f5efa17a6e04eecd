"""no-loss: every acknowledged message reaches every handle that was there.

This is the property a durable bus exists for. A producer whose ``post``
returned ``ok`` has been told "your message is stored"; from then on every
handle that was already subscribed to the channel must eventually *handle*
it (at least once), however many of its processes are killed, paused or
cut off on the way. A message the bus said it stored and some subscriber
never handled is **lost**.

Which handles must handle a message: those whose first ``subscribe`` on the
channel *completed* ``ok`` before the post was first *invoked* (a handle
joining at the head concurrently with the post may legitimately start
after it), and every handle that joined asking for the whole history
(``at = "start"``): it must be handed every message ever posted. Which
messages count: every post that returned ``ok``, and every ``info`` or
unfinished post whose id was nevertheless observed in a fetch or
a handle event (it landed, so it must be delivered like any other).

"Never handled" can only be decided at the end: the runner's final phase
heals everything, restarts every consumer handle and *drains* it to the true
head, logging ``drain`` ``ok`` for the handle (nemesis process). A message
missing for a drained handle is ``lost``. A message missing for a handle
with no successful drain cannot be judged: the result is ``"unknown"`` with
the reason, never a false alarm.

What it keeps: per message its post (invoke and ok, the witnesses), per
handle the ids it handled, for the whole run. That is genuinely
O(messages x handles): which handles owe a message is known only at the
end (a handle may join at the start later and owe everything), and a
message is lost only when the final drain shows it never came. The posts are
kept as their compact JSON text (:mod:`knell.checker.keep`), the ids handled
as the strings the events already hold.

In a run that forgets (:mod:`knell.checker.settle`), a message is dropped
once every handle that owed it handled it and acked through it, and a
while has passed: its verdict is then fixed (handled by all), so it is
tallied as such and only what is still open is kept. A later handling of
a forgotten message tells nothing new and is passed over. A handle that
joins at the start after messages of its channel were forgotten owes
messages no longer known: the result is "unknown" for it, naming it.

A message posted with ``expires_at`` (counted as ``expiring``) is not
judged here: whether a handle owed it depends on when it expired, which
:mod:`knell.checker.expiry` judges by the store's clock.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckConfig, CheckResult, witness
from knell.checker.consumer import on, on_delivery
from knell.checker.keep import Held, keep
from knell.checker.windows import FaultWindows
from knell.history import Event

__all__ = ["LossCheck"]

# A post record: [position of first invoke, first invoke, first ok, seq]
_Post = list[Any]


class LossCheck(Check):
    name: ClassVar[str] = "no-loss"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("lost",)

    def __init__(self, config: CheckConfig, windows: FaultWindows | None = None) -> None:
        super().__init__(config, windows)
        self._pos = 0
        # channel -> id -> post record
        self._posts: dict[Any, dict[Any, _Post]] = {}
        # channel -> id -> first observation, for ids whose post had no ok yet
        self._observed: dict[Any, dict[Any, Held]] = {}
        # (handle, channel) -> ids handled
        self._handled: dict[tuple[Any, Any], set[Any]] = {}
        # channel -> the sets above of its handles (forgetting visits only these)
        self._handled_in: dict[Any, list[set[Any]]] = {}
        # channel -> handle -> (position, first subscribe ok)
        self._subs: dict[Any, dict[Any, tuple[int, Event]]] = {}
        # (handle, channel) -> "head" | "start" of its first subscribe
        self._join_at: dict[tuple[Any, Any], Any] = {}
        # Drains are keyed (handle, channel); channel None drains every channel.
        # -> (invoke position, invoke event)
        self._drain_invoked: dict[tuple[Any, Any], tuple[int, Event]] = {}
        # -> (invoke position, invoke event or None, ok event)
        self._drain_ok: dict[tuple[Any, Any], tuple[int, Event | None, Event]] = {}
        self._drain_info: dict[tuple[Any, Any], Event] = {}
        self._drains_seen = False
        # forgotten messages, tallied as settled: posted, expiring, and per
        # handle the messages it was required to handle (and did)
        self._settled = [0, 0]
        self._settled_by: dict[Any, int] = {}
        self._forgotten_in: dict[Any, int] = {}
        self._late_whole: dict[tuple[Any, Any], Event] = {}

    def _channel(self, channel: Any) -> tuple[dict[Any, _Post], dict[Any, Held]]:
        posts = self._posts.get(channel)
        if posts is None:
            posts = self._posts[channel] = {}
            self._observed[channel] = {}
        return posts, self._observed[channel]

    @on("handle", "ok")
    def _handle_ok(self, event: Event) -> None:
        # a third of a history: kept to one tuple, one lookup, one add
        self._pos += 1
        hc = (event["handle"], event["channel"])
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(hc[1], event["value"]["seq"]):
            return  # a forgotten message handled again: its verdict is fixed
        ids = self._handled.get(hc)
        if ids is None:
            ids = self._handled[hc] = set()
            self._handled_in.setdefault(hc[1], []).append(ids)
        ids.add(event["value"]["id"])

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        self._pos += 1
        value = event["value"]
        mid = value["id"]
        channel = event["channel"]
        posts = self._posts.get(channel)
        if posts is None:
            posts = self._channel(channel)[0]
        if mid not in posts:
            posts[mid] = [self._pos, keep(event), None, None]

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        self._pos += 1
        value = event["value"]
        mid = value["id"]
        channel = event["channel"]
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(channel, value["seq"]):
            return  # a retry answered with a forgotten message's seq
        posts = self._posts.get(channel)
        if posts is None:
            posts = self._channel(channel)[0]
        rec = posts.get(mid)
        if rec is None:
            rec = posts[mid] = [self._pos, None, None, None]
        if rec[2] is None:
            rec[2] = keep(event)
            rec[3] = value["seq"]

    @on("subscribe", "invoke")
    def _subscribe_invoke(self, event: Event) -> None:
        at = (event.get("value") or {}).get("at", "head")
        hc = (event["handle"], event["channel"])
        self._join_at.setdefault(hc, at)
        if at == "start" and self._forgotten_in.get(hc[1]):
            self._late_whole.setdefault(hc, event)

    @on("subscribe", "ok")
    def _subscribe_ok(self, event: Event) -> None:
        self._pos += 1
        by_handle = self._subs.setdefault(event["channel"], {})
        handle = event["handle"]
        if handle not in by_handle:
            # a join at the start owes the whole history: as if there before any post
            start = self._join_at.get((handle, event["channel"])) == "start"
            by_handle[handle] = (0 if start else self._pos, event)

    @on("drain")
    def _drain(self, event: Event) -> None:
        self._pos += 1
        self._drains_seen = True
        type_ = event["type"]
        dk = (
            (event.get("value") or {}).get("handle", event.get("handle")),
            event.get("channel"),
        )
        if type_ == "invoke":
            self._drain_invoked[dk] = (self._pos, event)
        elif type_ == "ok":
            inv = self._drain_invoked.pop(dk, None)
            if inv is None:
                self._drain_ok[dk] = (self._pos, None, event)
            else:
                self._drain_ok[dk] = (inv[0], inv[1], event)
        else:
            self._drain_invoked.pop(dk, None)
            self._drain_info[dk] = event

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Tally a settled message as handled by every handle that owed it,
        and drop it (:mod:`knell.checker.settle`)."""
        posts = self._posts.get(channel)
        rec = None if posts is None else posts.pop(mid, None)
        self._observed.get(channel, {}).pop(mid, None)
        for ids in self._handled_in.get(channel, ()):
            ids.discard(mid)
        if rec is None or again or rec[2] is None:
            return
        self._forgotten_in[channel] = self._forgotten_in.get(channel, 0) + 1
        if "expires_at" in (rec[1] or rec[2])["value"]:
            self._settled[1] += 1
            return
        self._settled[0] += 1
        pos = rec[0]
        for handle, (sub_pos, _) in self._subs.get(channel, {}).items():
            if sub_pos < pos:
                self._settled_by[handle] = self._settled_by.get(handle, 0) + 1

    @on_delivery
    def deliver(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        # the first fetch or handle showing (channel, seq, mid): proof that a
        # post without an ok (yet) landed
        posts = self._posts.get(channel)
        if posts is None:
            posts = self._channel(channel)[0]
        rec = posts.get(mid)
        if rec is None or rec[2] is None:
            observed = self._observed[channel]
            if mid not in observed:
                observed[mid] = keep(event)

    def result(self) -> CheckResult:
        posted = 0
        expiring = 0
        observed_indeterminate = 0
        unobserved_indeterminate = 0
        required = 0
        handled_required = 0
        after_drain = 0
        required_by: dict[Any, int] = {}
        lost_by: dict[Any, int] = {}
        unresolved_by: dict[Any, int] = {}
        log = self.log
        no_ids: set[Any] = set()
        # per channel: (handle, first subscribe position, subscribe ok,
        # drain or None, drain invoke position, head the drain read or None)
        plans: dict[Any, list[tuple[Any, int, Event, Any, int, Any]]] = {}
        for channel, subs in self._subs.items():
            plan = plans[channel] = []
            for handle, (sub_pos, sub_ok) in subs.items():
                drain = self._drain_ok.get((handle, channel)) or self._drain_ok.get((handle, None))
                if drain is None:
                    plan.append((handle, sub_pos, sub_ok, None, 0, None))
                    continue
                heads = (drain[2].get("value") or {}).get("heads")
                head = heads.get(channel) if isinstance(heads, dict) else None
                plan.append((handle, sub_pos, sub_ok, drain, drain[0], head))
        for channel, posts in self._posts.items():
            observed = self._observed[channel]
            plan = plans.get(channel, [])
            handled = [self._handled.get((p[0], channel), no_ids) for p in plan]
            # required per plan entry, tallied by position in the hot loop
            # (a list slot, not a dict lookup per post and handle) and folded
            # into required_by after the channel
            tally = [0] * len(plan)
            for mid, (pos, inv, ok, seq) in posts.items():
                if "expires_at" in (inv or ok or {"value": {}})["value"]:
                    expiring += 1  # may rightly never be handed out: the expiry check's to judge
                    continue
                proof = ok
                if ok is not None:
                    posted += 1
                else:
                    proof = observed.get(mid)
                    if proof is None:
                        unobserved_indeterminate += 1
                        continue
                    observed_indeterminate += 1
                for i, (handle, sub_pos, sub_ok, drain, drain_pos, head) in enumerate(plan):
                    if sub_pos >= pos:
                        continue
                    if drain is not None and (
                        pos >= drain_pos or (seq is not None and head is not None and seq > head)
                    ):
                        # invoked after the drain began, or landed above the head it read
                        after_drain += 1
                        continue
                    tally[i] += 1
                    if mid in handled[i]:
                        handled_required += 1
                        continue
                    if drain is None:
                        uk = (handle, channel)
                        unresolved_by[uk] = unresolved_by.get(uk, 0) + 1
                        continue
                    lost_by[handle] = lost_by.get(handle, 0) + 1
                    if log.full("lost"):
                        log.count("lost")
                        continue
                    how = "returned ok" if ok is not None else "was indeterminate but observed"
                    log.add(
                        "lost",
                        f"message {mid} (channel {channel}, seq {seq}) whose post {how} was never "
                        f"handled by handle {handle}, subscribed before the post and drained "
                        f"to the head",
                        witness(inv, proof, sub_ok, drain[2]),
                    )
            for i, n in enumerate(tally):
                if n:
                    required += n
                    required_by[plan[i][0]] = required_by.get(plan[i][0], 0) + n
        posted += self._settled[0]
        expiring += self._settled[1]
        for handle, n in self._settled_by.items():
            required += n
            handled_required += n
            required_by[handle] = required_by.get(handle, 0) + n
        reasons: list[str] = []
        for (handle, channel), event in self._late_whole.items():
            reasons.append(
                f"handle {handle} joined channel {channel} at the start (event "
                f"{event.get('index', '?')}) after {self._forgotten_in[channel]} settled "
                f"message(s) of it were forgotten: whether it was handed those cannot be judged"
            )
        if required and not self._drains_seen:
            reasons.append("no final drain in the history: loss cannot be decided")
        for (handle, channel), n in sorted(unresolved_by.items(), key=str):
            info = self._drain_info.get((handle, channel)) or self._drain_info.get((handle, None))
            if info is not None:
                error = (info.get("value") or {}).get("error", "unknown error")
                reasons.append(
                    f"final drain of handle {handle} on channel {channel} did not complete "
                    f"({error}); {n} message(s) it has not handled cannot be judged"
                )
            else:
                reasons.append(
                    f"no final drain recorded for handle {handle} on channel {channel}; "
                    f"{n} message(s) it has not handled cannot be judged"
                )
        counts: dict[str, int] = {
            "posted": posted,
            "expiring": expiring,
            "observed-indeterminate": observed_indeterminate,
            "unobserved-indeterminate": unobserved_indeterminate,
            "required": required,
            "handled": handled_required,
            "after-drain": after_drain,
            "unresolved": sum(unresolved_by.values()),
            "drained": len(self._drain_ok),
        }
        for handle in sorted(required_by, key=str):
            counts[f"required[{handle}]"] = required_by[handle]
            counts[f"lost[{handle}]"] = lost_by.get(handle, 0)
        metrics: dict[str, float | int | None] = {
            "handles": len({h for subs in self._subs.values() for h in subs}),
        }
        return self._result(counts, metrics, unknown_reason="; ".join(reasons) or None)
