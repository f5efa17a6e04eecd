"""stranded-listed: the stranded list shows what departed runs left unread.

At-most-once delivery never replays a message to a new holder, so a
message delivered to a run that then left (released the role, or died)
without reading it is *stranded*, and the only thing standing between it
and silent loss is the stranded list: a person reads it and decides
whether to resend. The list must therefore hold every such message, and
nothing else: not a message that was read (nothing to decide), not one
the current holder still has in hand (it may yet read it).

Each listing is judged against the history when its maker surely held
the role while listing (its ``claim_role`` completed before, its hold
cannot have lapsed before the listing returned, it had not begun to
release): every other run had then left. Then:

* ``missing``: a message whose delivery to another run completed before
  the listing began, and that its recipient had not begun to read before
  the listing returned, is not listed. When the list is full (the cap is
  50), only a message surely delivered before the last listed one is
  required: its receive returned before that delivery's time. (One
  receive delivers several messages at one instant, and the list orders
  those by seq, so the cap may fall between two of them.) Witness: the
  delivery and the listing.
* ``listed-read``: a listed message that its recipient had read (read ok)
  before the listing began.
* ``listed-current``: a listed message delivered to the lister itself.
* ``unordered``: entries not in order of delivery, oldest first.
* ``over-cap``: more than 50 entries.

A message its recipient read and that was forgotten since
(:mod:`knell.checker.atmostonce.settle`) is known by its seq: listed in a
judged listing, it is still ``listed-read`` (witness: the listing).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.buses.contract import STRANDED_CAP
from knell.checker.atmostonce.book import TOLERANCE_NS, Delivered, Key, RoleCheck
from knell.checker.base import CheckResult, witness
from knell.checker.clocks import STORE, ClockTimeline
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["StrandedListedCheck"]

NS = 1_000_000_000


class _Hold:
    __slots__ = ("claimed", "released", "sure_until", "term")

    def __init__(self, claimed: Event, sure_until: int, term: tuple[int, int, int]) -> None:
        self.claimed = claimed
        self.sure_until = sure_until
        """while the store's clock runs with true time"""
        self.term = term
        """(invoke, ok, lease ns) of the latest claim that renewed it"""
        self.released: int | None = None

    def until(self, clocks: ClockTimeline) -> int:
        """Until when the hold is surely live, judged by the store's clock."""
        if clocks.clock(STORE) is None:
            return self.sure_until
        return clocks.sure_until(*self.term)


class StrandedListedCheck(RoleCheck):
    name: ClassVar[str] = "stranded-listed"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "missing",
        "listed-read",
        "listed-current",
        "unordered",
        "over-cap",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._holds: dict[tuple[Any, Any], _Hold] = {}
        self._unread: dict[Any, dict[Any, Delivered]] = {}
        self._listings = 0
        self._judged = 0

    @on_op("claim_role", "ok")
    def _held(self, invoke: Event | None, done: Event) -> None:
        if invoke is None:
            return
        key = (done["channel"], done["value"]["run"])
        lease_ns = int(done["value"]["lease_s"] * NS)
        until = invoke["time"] + lease_ns
        term = (invoke["time"], done["time"], lease_ns)
        hold = self._holds.get(key)
        if hold is None or hold.released is not None:
            self._holds[key] = _Hold(done, until, term)
        else:
            hold.sure_until = max(hold.sure_until, until)
            hold.term = term

    @on("release_role", "invoke")
    def _releasing(self, event: Event) -> None:
        hold = self._holds.get((event["channel"], event["value"]["run"]))
        if hold is not None and hold.released is None:
            hold.released = event["time"]

    def delivery(
        self, key: Key, first: Delivered | None, invoke: Event | None, done: Event
    ) -> None:
        if first is None:
            self._unread.setdefault(key[0], {})[key[1]] = self.delivered[key]

    def reading(self, invoke: Event | None, done: Event, got: Delivered | None) -> None:
        if got is not None and got.read is not None:
            self._unread.get(done["channel"], {}).pop(done["value"]["id"], None)

    @on_op("stranded", "ok")
    def _listed(self, invoke: Event | None, done: Event) -> None:
        self._listings += 1
        role = done["channel"]
        lister = done["value"].get("run")
        entries = done["value"]["messages"]
        self._shape(role, entries, invoke, done)
        hold = self._holds.get((role, lister))
        if (
            invoke is None
            or hold is None
            or hold.claimed["time"] > invoke["time"]
            or done["time"] >= hold.until(self.windows.clocks) - TOLERANCE_NS
            or (hold.released is not None and hold.released <= done["time"])
        ):
            return  # the lister may not have held the role: "current holder" is unknown
        self._judged += 1
        listed = {entry["id"]: entry for entry in entries}
        for entry in entries:
            if self.is_forgotten(role, entry.get("seq")):
                self._report(
                    "listed-read",
                    None
                    if self.log.full("listed-read")
                    else f"message {entry['id']} (role {role}, seq {entry.get('seq')}) is listed "
                    "as stranded although its recipient read it long before (knell had settled "
                    "and forgotten it)",
                    witness(invoke, done),
                )
                continue
            got = self.delivered.get((role, entry["id"]))
            if entry.get("run") == lister or (got is not None and got.run == lister):
                self._report(
                    "listed-current",
                    None
                    if self.log.full("listed-current")
                    else f"message {entry['id']} (role {role}) is listed as stranded although "
                    f"it was delivered to {lister}, the run listing it, which holds the role",
                    witness(None if got is None else got.ok, invoke, done),
                )
            elif got is not None and got.read is not None and got.read["time"] < invoke["time"]:
                self._report(
                    "listed-read",
                    None
                    if self.log.full("listed-read")
                    else f"message {entry['id']} (role {role}) is listed as stranded although "
                    f"run {got.run} had read it",
                    witness(got.ok, got.read, invoke, done),
                )
        full = len(entries) >= STRANDED_CAP
        last_at = entries[-1].get("at") if entries else None
        for mid, got in self._unread.get(role, {}).items():
            if got.run == lister or mid in listed or got.ok["time"] >= invoke["time"]:
                continue
            if got.reading is not None and got.reading["time"] < done["time"]:
                continue  # its recipient may have read it first
            if full and self.maybe_beyond_cap(got, last_at):
                continue
            self._report(
                "missing",
                None
                if self.log.full("missing")
                else f"message {mid} (role {role}) was delivered to run {got.run}, which left "
                f"without reading it, but the stranded list made by {lister} omits it",
                witness(got.invoke, got.ok, invoke, done),
            )

    def _shape(self, role: Any, entries: list[Any], invoke: Event | None, done: Event) -> None:
        if len(entries) > STRANDED_CAP:
            self._report(
                "over-cap",
                f"the stranded list of role {role} has {len(entries)} entries; at most "
                f"{STRANDED_CAP} are allowed",
                witness(invoke, done),
            )
        times = [e.get("at") for e in entries]
        for i in range(1, len(times)):
            a, b = times[i - 1], times[i]
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b < a:
                self._report(
                    "unordered",
                    f"the stranded list of role {role} is not oldest first: entry {i} "
                    f"({entries[i]['id']}, delivered at {b:.3f}) follows one delivered at {a:.3f}",
                    witness(invoke, done),
                )
                break

    def result(self) -> CheckResult:
        return self._result({"listings": self._listings, "listings-judged": self._judged})
