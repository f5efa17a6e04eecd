"""wake: the doorbell rings when, and only when, there is something to do.

``wait(handle, timeout)`` is the doorbell an idle agent sleeps on. It holds
no durable state and carries no message body; it promises two things:

* it rings *at once* if the handle has unacked backlog written by others
  when it is armed, otherwise on the first post by someone else, so a
  sleeping agent never sleeps through work (a missed ring is a stalled
  session, the failure users notice first);
* it never rings on the handle's *own* posts, so two agents talking to each
  other do not wake themselves in a loop.

History: the waiter logs ``arm`` invoke ``{"timeout"}`` and ``arm`` ok
``{"rang": bool}`` around each wait, and when it rang, one ``wake`` ok
event ``{"seq", "sender", "reason"}`` with the handle and channel at the
top level. Anomalies, with ``B`` the configured ``wake_bound``:

* ``own-post-ring``: a wake whose ``(channel, seq)`` message was posted by
  the waiting handle itself (sender from the post in the history, falling
  back to the wake's own ``sender`` field);
* ``missed-backlog``: an arm that lasted longer than ``B`` and timed out
  (``rang: false``) although, when it was invoked, a post by another sender
  on a channel the handle had subscribed to had completed with a seq above
  everything the handle had acked (acks *invoked* before the arm completed
  count, as may have landed), subscribed at, or read as its cursor;
* ``missed-post``: an arm that timed out although such a post by another
  sender (above the handle's cursor) completed during the arm more than
  ``B`` before the arm completed;
* ``spurious-ring``: a ring naming a message at or below the handle's
  durable cursor as the waiter knew it when it armed: the doorbell woke
  the agent for work it had already done. What the waiter knew is the
  arm's ``cursors`` (channel -> cursor) when it records them, else the
  highest cursor its own process incarnation had seen for that handle
  and channel in ``subscribe``, ``ack`` and ``cursor`` results before the
  arm (exactly what a knell waiter records), so a history written
  without the field is judged the same way. A waiter that
  keeps waking for nothing is the resident poller the doorbell exists to
  replace, burning a session's turns;
* ``repeated-ring``: one waiter incarnation woken twice for the same
  message although it acked successfully in between (a restarted waiter
  may legitimately ring again for backlog it never acked).

A post with ``expires_at`` owes no ring (it may have expired before the
doorbell looked): it counts for neither ``missed-backlog`` nor
``missed-post``; a ring for it after it expired is
:mod:`knell.checker.expiry`'s ``expired-returned``.

Arms that a fault window touched directly at any point while armed (the
waiter was paused, its store or link was down: :mod:`knell.checker.windows`)
are excluded, since a frozen or cut-off waiter cannot ring; so are arms
with no completion (the waiter was killed while armed). A clock fault
excuses nothing: a wait's timeout is a duration, which a bus measures on
a monotonic clock, so a moved wall clock must not change when it rings.
Wake latency (``wake`` time minus the ``ok`` time of the post with that
(channel, seq), clamped at 0) of ``post`` rings is reported as count, p50,
p99 and max in milliseconds beside the bound; it is a metric, not a
verdict.

What it keeps, and for how long: per channel and seq, the sender, time and
post ok (packed, :mod:`knell.checker.keep`) of the first post ok at it, for
the whole run, and every ``wake`` ok. A wake may name any seq, however old
(a waiter woken for backlog names a message posted long before), and both
``own-post-ring`` and the latency are judged once the pass is over (a
ring may come before its post's ``ok`` is logged), so no post can be
forgotten before the end, except in a run that forgets
(:mod:`knell.checker.settle`): there the wakes naming a settled message
are judged when it is forgotten (its post ok long since logged), and a
wake naming one already forgotten is judged by its own ``sender``, its
latency unknown (counted as unmatched), and is not held against
``repeated-ring``: what a waiter's rings named is dropped for a message
once it is forgotten, as a second copy of a message is passed over by the
other checks (``spurious-ring`` needs only the arm's cursors and still
judges it). Per waiter process, only its newest
incarnation's acks, rings and cursors are kept (a soak restarts a waiter
every second; an earlier incarnation's process is gone).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep
from knell.history import Event
from knell.stats import Tally

__all__ = ["WakeCheck"]

_NS = 1_000_000_000


class _Arm:
    __slots__ = ("backlog", "cursors", "during", "handle", "invoke")

    def __init__(self, invoke: Event, handle: Any, seen: dict[Any, int]) -> None:
        self.invoke = invoke
        self.handle = handle
        cursors = (invoke.get("value") or {}).get("cursors")
        # What the waiter knew: recorded by the arm, else read back from
        # the cursors its own process saw before arming.
        self.cursors: dict[Any, Any] = cursors if isinstance(cursors, dict) else dict(seen)
        # (channel, seq, post ok) of the highest backlog by others, per channel
        self.backlog: list[tuple[Any, int, Event]] = []
        # channel -> [(time, seq, post ok)] posts by others completed while armed
        self.during: dict[Any, list[tuple[int, int, Event]]] = {}


class WakeCheck(Check):
    name: ClassVar[str] = "wake"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "own-post-ring",
        "missed-backlog",
        "missed-post",
        "spurious-ring",
        "repeated-ring",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._bound_ns = int(self.config.wake_bound * _NS)
        # channel -> seq -> (sender, time, post ok) of its first post ok
        self._post_at: dict[Any, dict[Any, tuple[Any, Any, Held]]] = {}
        self._others_max: dict[Any, dict[Any, tuple[int, Event]]] = {}
        self._subs: dict[Any, set[Any]] = {}
        self._cursor: dict[tuple[Any, Any], int] = {}
        # (process, incarnation, handle) -> channel -> the highest cursor that
        # process saw in its own subscribe, ack and cursor results
        self._seen: dict[tuple[Any, Any, Any], dict[Any, int]] = {}
        self._active: dict[int, _Arm] = {}  # id(arm invoke) -> arm
        self._armed: dict[tuple[Any, Any], _Arm] = {}  # (process, incarnation) -> its arm
        # (process, incarnation) -> acks completed ok, and (channel, seq) -> the
        # ack count when it rang for it
        self._acks: dict[tuple[Any, Any], int] = {}
        self._rung: dict[tuple[Any, Any], dict[tuple[Any, Any], int]] = {}
        # process -> its newest incarnation seen: what the four dicts above
        # keep of an earlier one goes when a newer one appears (its process is
        # gone; a soak restarts a waiter every second)
        self._incarnation: dict[Any, Any] = {}
        self._wakes: list[Event] = []
        # (channel, seq) -> its wakes not yet judged, when the pass forgets
        self._wakes_at: dict[tuple[Any, Any], list[Event]] = {}
        self._latencies = Tally()  # bounded: a soak's wakes are counted, not kept
        self._over_bound = 0
        self._unmatched = 0
        self._judged = 0
        self._arms = 0
        self._rang = 0
        self._timed_out = 0
        self._excluded = 0

    # -- observation ---------------------------------------------------

    @on("wake", "ok")
    def _wake(self, event: Event) -> None:
        key = (event["process"], event.get("incarnation"))
        value = event.get("value") or {}
        channel, seq = event.get("channel"), value.get("seq")
        forgotten = self.forgotten
        if forgotten is None:
            self._wakes.append(event)
        elif forgotten.has(channel, seq):
            self._judge(event, None)
        else:
            self._wakes_at.setdefault((channel, seq), []).append(event)
        arm = self._armed.get(key)
        known = arm.cursors.get(channel) if arm is not None else None
        if isinstance(seq, int) and isinstance(known, int) and seq <= known:
            assert arm is not None
            self._report(
                "spurious-ring",
                None
                if self.log.full("spurious-ring")
                else f"waiter {event['process']} (handle {event.get('handle')}) was woken "
                f"({value.get('reason')}) for seq {seq} on channel {channel}, at or below "
                f"cursor {known} that it had already acked when it armed",
                witness(arm.invoke, event),
            )
            return
        if forgotten is not None and forgotten.has(channel, seq):
            return  # what rang for a forgotten message is not kept (module docstring)
        rung = self._rung.setdefault(key, {})
        acks = self._acks.get(key, 0)
        before = rung.get((channel, seq))
        rung[(channel, seq)] = acks
        if before is not None and acks > before:
            self._report(
                "repeated-ring",
                None
                if self.log.full("repeated-ring")
                else f"waiter {event['process']} (handle {event.get('handle')}) was woken "
                f"again for seq {seq} on channel {channel} although it had acked "
                f"successfully since the first ring",
                witness(arm.invoke if arm is not None else None, event),
            )

    @on("subscribe", "ok")
    def _subscribe_ok(self, event: Event) -> None:
        self._subs.setdefault(event.get("handle"), set()).add(event.get("channel"))
        self._cursor_ok(event)

    @on("ack", "ok")
    def _ack_ok(self, event: Event) -> None:
        key = self._life(event)
        self._acks[key] = self._acks.get(key, 0) + 1
        self._cursor_ok(event)

    @on("cursor", "ok")
    def _cursor_ok(self, event: Event) -> None:
        value = (event.get("value") or {}).get("cursor")
        self._raise_cursor(event.get("handle"), event.get("channel"), value)
        if isinstance(value, int):
            self._life(event)
            key = (event["process"], event.get("incarnation"), event.get("handle"))
            seen = self._seen.get(key)
            if seen is None:
                seen = self._seen[key] = {}
            channel = event.get("channel")
            if value > seen.get(channel, value - 1):
                seen[channel] = value

    @on("ack", "invoke")
    def _ack_invoke(self, event: Event) -> None:
        value = (event.get("value") or {}).get("up_to")
        self._raise_cursor(event.get("handle"), event.get("channel"), value)

    def _raise_cursor(self, handle: Any, channel: Any, value: Any) -> None:
        if isinstance(value, int):
            k = (handle, channel)
            if value > self._cursor.get(k, 0):
                self._cursor[k] = value

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        value = event["value"]
        seq = value["seq"]
        channel = event["channel"]
        sender = value.get("sender")
        post_at = self._post_at.get(channel)
        if post_at is None:
            post_at = self._post_at[channel] = {}
        if seq not in post_at:
            post_at[seq] = (sender, event.get("time"), keep(event))
        if "expires_at" in value:
            return  # it may rightly never ring (expired): the expiry check judges its rings
        by_sender = self._others_max.get(channel)
        if by_sender is None:
            by_sender = self._others_max[channel] = {}
        best = by_sender.get(sender)
        if best is None or seq > best[0]:
            by_sender[sender] = (seq, event)
        if not self._active:
            return
        for arm in self._active.values():
            if arm.handle != sender and channel in self._subs.get(arm.handle, ()):
                arm.during.setdefault(channel, []).append((event["time"], seq, event))

    @on("arm", "invoke")
    def _arm_invoke(self, event: Event) -> None:
        self._arms += 1
        self._life(event)
        handle = event.get("handle")
        arm = _Arm(
            event, handle, self._seen.get((event["process"], event.get("incarnation"), handle), {})
        )
        for channel in self._subs.get(handle, ()):
            top: tuple[int, Event] | None = None
            for sender, best in self._others_max.get(channel, {}).items():
                if sender != handle and (top is None or best[0] > top[0]):
                    top = best
            if top is not None:
                arm.backlog.append((channel, top[0], top[1]))
        self._active[id(event)] = arm
        self._armed[(event["process"], event.get("incarnation"))] = arm

    def _life(self, event: Event) -> tuple[Any, Any]:
        """``(process, incarnation)`` of ``event``; the first event of a newer
        incarnation drops what was kept of the earlier ones of its process."""
        process, incarnation = event["process"], event.get("incarnation")
        known = self._incarnation.get(process, incarnation)
        if known != incarnation:
            if isinstance(known, int) and isinstance(incarnation, int) and incarnation < known:
                return (process, incarnation)  # a late event of a gone incarnation
            for table in (self._armed, self._acks, self._rung):
                for key in [k for k in table if k[0] == process and k[1] != incarnation]:
                    del table[key]
            for key3 in [k for k in self._seen if k[0] == process and k[1] != incarnation]:
                del self._seen[key3]
        self._incarnation[process] = incarnation
        return (process, incarnation)

    def _disarm(self, inv: Event) -> _Arm | None:
        arm = self._active.pop(id(inv), None)
        key = (inv["process"], inv.get("incarnation"))
        if arm is not None and self._armed.get(key) is arm:
            del self._armed[key]
        return arm

    @on_op("arm", "fail", "info", "lost")
    def _arm_failed(self, inv: Event | None, event: Event | None) -> None:
        if inv is not None:
            self._disarm(inv)
            if event is None:  # the waiter died: its rings are forgotten with it
                self._rung.pop((inv["process"], inv.get("incarnation")), None)
                self._acks.pop((inv["process"], inv.get("incarnation")), None)

    @on_op("arm", "ok")
    def _arm_ok(self, inv: Event | None, event: Event) -> None:
        arm = self._disarm(inv) if inv is not None else None
        if arm is None:
            return
        if (event.get("value") or {}).get("rang"):
            self._rang += 1
            return
        self._timed_out += 1
        process = event["process"]
        window = self.windows.touching(
            process, arm.invoke["time"], event["time"], indirect=False, grace=False, clocks=False
        )
        if window is not None:
            self._excluded += 1
            return
        self._judge_timeout(arm, event)

    def _judge_timeout(self, arm: _Arm, ok: Event) -> None:
        handle = arm.handle
        cursor = self._cursor
        started = arm.invoke["time"]
        ended = ok["time"]
        if ended - started > self._bound_ns:
            for channel, seq, post in arm.backlog:
                acked = cursor.get((handle, channel), 0)
                if seq > acked:
                    poster = (post.get("value") or {}).get("sender")
                    self._report(
                        "missed-backlog",
                        f"waiter {ok['process']} (handle {handle}) armed for "
                        f"{(ended - started) / _NS:.3f}s and timed out although seq {seq} "
                        f"on channel {channel}, posted by {poster}, "
                        f"was unacked backlog (cursor at most {acked}) when it armed",
                        witness(post, arm.invoke, ok),
                    )
                    break
        threshold = ended - self._bound_ns
        for channel, posts in arm.during.items():
            acked = cursor.get((handle, channel), 0)
            for time_, seq, post in posts:
                if time_ >= threshold:
                    break
                if seq > acked:
                    self._report(
                        "missed-post",
                        f"waiter {ok['process']} (handle {handle}) timed out although seq "
                        f"{seq} on channel {channel}, posted by "
                        f"{(post.get('value') or {}).get('sender')}, completed "
                        f"{(ended - time_) / _NS:.3f}s before (bound "
                        f"{self.config.wake_bound}s)",
                        witness(arm.invoke, post, ok),
                    )
                    return

    # -- result ----------------------------------------------------------

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Judge the wakes naming a settled message, then drop its post
        (module docstring)."""
        by_seq = self._post_at.get(channel)
        post = None if by_seq is None else by_seq.pop(seq, None)
        for wake in self._wakes_at.pop((channel, seq), ()):
            self._judge(wake, post)
        for rung in self._rung.values():  # one per live waiter incarnation
            rung.pop((channel, seq), None)

    def _judge(self, wake: Event, post: tuple[Any, Any, Held] | None) -> None:
        """Judge one wake against the first post ok at its seq (``None``:
        none known): a ring by its own post, and its latency."""
        self._judged += 1
        value = wake.get("value") or {}
        handle = wake.get("handle")
        sender = post[0] if post is not None else value.get("sender")
        if sender is not None and sender == handle:
            self._report(
                "own-post-ring",
                f"handle {handle} was woken ({value.get('reason')}) by seq {value.get('seq')} "
                f"on channel {wake.get('channel')}, which it posted itself",
                witness(post[2] if post is not None else None, wake),
            )
            return
        if value.get("reason") != "post":
            return
        if post is None:
            self._unmatched += 1
            return
        ms = max(0, wake["time"] - post[1]) / 1e6
        self._latencies.add(ms)
        if ms > self.config.wake_bound * 1000.0:
            self._over_bound += 1

    def result(self) -> CheckResult:
        bound_ms = self.config.wake_bound * 1000.0
        for wake in self._wakes:
            value = wake.get("value") or {}
            self._judge(wake, self._post_at.get(wake.get("channel"), {}).get(value.get("seq")))
        self._wakes = []
        for (channel, seq), wakes in self._wakes_at.items():
            for wake in wakes:
                self._judge(wake, self._post_at.get(channel, {}).get(seq))
        self._wakes_at = {}
        latencies = self._latencies
        over_bound, unmatched = self._over_bound, self._unmatched
        counts = {
            "arms": self._arms,
            "rang": self._rang,
            "timed-out": self._timed_out,
            "excluded-paused": self._excluded,
            "wakes": self._judged,
        }
        metrics: dict[str, float | int | None] = {
            "latency-count": latencies.count,
            "latency-p50-ms": latencies.percentile(0.50),
            "latency-p99-ms": latencies.percentile(0.99),
            "latency-max-ms": latencies.max,
            "latency-over-bound": over_bound,
            "latency-unmatched": unmatched,
            "bound-ms": bound_ms,
        }
        return self._result(counts, metrics)
