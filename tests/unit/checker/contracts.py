"""History builders for the queue and at-most-once contracts' checks.

Each helper appends the events a worker records (see knell.history) and
returns them, so tests can assert on witness indices. Times advance 1 ms
per event unless ``sleep`` moves the clock (leases are in seconds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knell.history import Event

from .builder import History

Pair = tuple[Event, Event]


class QueueHistory(History):
    """Claimers on queue channels."""

    def declare(self, process: str, channel: str, max_deliveries: int, sweep: float = 0.0) -> Pair:
        inv = self.invoke(process, "declare", {"max_deliveries": max_deliveries}, channel=channel)
        ok = self.ok(
            process,
            "declare",
            {"max_deliveries": max_deliveries, "sweep_interval": sweep},
            channel=channel,
        )
        return inv, ok

    def claim_invoke(
        self, process: str, channel: str, consumer: str, lease: float, incarnation: int = 1
    ) -> Event:
        return self.invoke(
            process,
            "claim",
            {"consumer": consumer, "lease_s": lease},
            channel=channel,
            incarnation=incarnation,
        )

    def claim_ok(
        self, invoke: Event, mid: str | None, seq: int | None = None, deliveries: int = 1
    ) -> Event:
        value: dict[str, Any] = {**invoke["value"], "id": mid}
        if mid is not None:
            value.update(msg=f"{invoke['channel']}/{seq}", seq=seq, deliveries=deliveries)
        return self.ok(
            invoke["process"],
            "claim",
            value,
            channel=invoke["channel"],
            incarnation=invoke["incarnation"],
        )

    def claim(
        self,
        process: str,
        channel: str,
        consumer: str,
        lease: float,
        mid: str | None,
        seq: int | None = None,
        deliveries: int = 1,
    ) -> Pair:
        inv = self.claim_invoke(process, channel, consumer, lease)
        return inv, self.claim_ok(inv, mid, seq, deliveries)

    def verb(
        self,
        f: str,
        process: str,
        channel: str,
        consumer: str,
        mid: str,
        outcome: str = "ok",
        lease: float | None = None,
        seq: int | None = None,
    ) -> Pair:
        value: dict[str, Any] = {"consumer": consumer, "id": mid, "msg": f"{channel}/x"}
        if seq is not None:
            value["seq"] = seq  # as the claimer records it (a forgotten message is known by it)
        if lease is not None:
            value["lease_s"] = lease
        inv = self.invoke(process, f, value, channel=channel)
        if outcome == "ok":
            done = self.ok(process, f, value, channel=channel)
        elif outcome == "fail":
            refused = {**value, "error": "LeaseLost", "refused": "lease-lost"}
            done = self.fail(process, f, refused, channel=channel)
        else:
            done = self.info(process, f, {**value, "error": "timeout"}, channel=channel)
        return inv, done

    def work(
        self, process: str, channel: str, consumer: str, mid: str, seq: int | None = None
    ) -> Event:
        value: dict[str, Any] = {"consumer": consumer, "id": mid, "msg": f"{channel}/x"}
        if seq is not None:
            value["seq"] = seq
        return self.ok(process, "work", value, channel=channel)

    def dead(self, process: str, channel: str, entries: Sequence[tuple[str, int, int]]) -> Pair:
        inv = self.invoke(process, "dead", {"after": 0}, channel=channel)
        messages = [
            {"id": m, "seq": s, "msg": f"{channel}/{s}", "deliveries": d} for m, s, d in entries
        ]
        return inv, self.ok(process, "dead", {"after": 0, "messages": messages}, channel=channel)

    def final(self, channel: str, contract: str = "queue", name: str = "queue-drain-1") -> Pair:
        """The runner's record of a contract's final phase (invoke, then ok)."""
        return self.final_invoke(channel, contract, name), self.final_ok(channel, contract, name)

    def final_invoke(self, channel: str, contract: str, name: str) -> Event:
        value = {"handle": name, "contract": contract}
        return self.invoke("nemesis", "drain", value, handle=name, channel=channel)

    def final_ok(self, channel: str, contract: str, name: str) -> Event:
        value = {"handle": name, "contract": contract}
        return self.ok("nemesis", "drain", value, handle=name, channel=channel)


class RoleHistory(QueueHistory):
    """Holders of a role inbox."""

    def claim_role(
        self, process: str, role: str, run: str, lease: float = 1.0, outcome: str = "ok"
    ) -> Pair:
        value = {"run": run, "lease_s": lease}
        inv = self.invoke(process, "claim_role", value, channel=role)
        if outcome == "ok":
            return inv, self.ok(process, "claim_role", value, channel=role)
        refused = {**value, "error": "RoleHeld", "refused": "role-held"}
        return inv, self.fail(process, "claim_role", refused, channel=role)

    def release_role(self, process: str, role: str, run: str) -> Pair:
        value = {"run": run}
        inv = self.invoke(process, "release_role", value, channel=role)
        return inv, self.ok(process, "release_role", value, channel=role)

    def receive(
        self, process: str, role: str, run: str, messages: Sequence[tuple[str, int]]
    ) -> Pair:
        value: dict[str, Any] = {"run": run, "limit": 2}
        inv = self.invoke(process, "receive", value, channel=role)
        got = [{"id": m, "seq": s, "msg": f"{role}/{s}", "role": role} for m, s in messages]
        return inv, self.ok(process, "receive", {**value, "messages": got}, channel=role)

    def receive_info(self, process: str, role: str, run: str) -> Pair:
        value: dict[str, Any] = {"run": run, "limit": 2}
        inv = self.invoke(process, "receive", value, channel=role)
        return inv, self.info(process, "receive", {**value, "error": "timeout"}, channel=role)

    def read(
        self,
        process: str,
        role: str,
        run: str,
        mid: str,
        outcome: str = "ok",
        probe: bool = False,
        seq: int | None = None,
    ) -> Pair:
        value: dict[str, Any] = {"run": run, "id": mid, "msg": f"{role}/x"}
        if seq is not None:
            value["seq"] = seq  # as the holder records it (a forgotten message is known by it)
        if probe:
            value["probe"] = True
        inv = self.invoke(process, "read", value, channel=role)
        if outcome == "ok":
            return inv, self.ok(process, "read", value, channel=role)
        refused = {**value, "error": "NotDeliveredTo", "refused": "not-delivered-to"}
        return inv, self.fail(process, "read", refused, channel=role)

    def stranded(
        self,
        process: str,
        role: str,
        run: str,
        entries: Sequence[tuple[str, int, str, float]],
    ) -> Pair:
        """``entries``: (id, seq, run delivered to, delivered_at seconds)."""
        inv = self.invoke(process, "stranded", {"run": run}, channel=role)
        messages = [
            {"id": m, "seq": s, "msg": f"{role}/{s}", "sender": "sender-1", "run": r, "at": at}
            for m, s, r, at in entries
        ]
        return inv, self.ok(process, "stranded", {"run": run, "messages": messages}, channel=role)

    def seconds(self) -> float:
        """The current time in seconds (what a bus reports as delivered_at)."""
        return self.now / 1e9


def clock_change(
    h: History,
    f: str,
    target: str,
    offset: float,
    *,
    fault: int = 1,
    rate: float = 1.0,
    processes: Sequence[str] = (),
    took_s: float = 0.0,
) -> Pair:
    """A clock fault's apply as the nemesis records it: the runner's invoke,
    then (after ``took_s`` of proving) the kind's record with the offset."""
    store = target in ("store", "host")
    inv = h.invoke("nemesis", f, {"target": target, "fault": fault, "kind": f})
    h.sleep(took_s)
    done = h.info(
        "nemesis",
        f,
        {
            "target": target,
            "fault": fault,
            "kind": f,
            "processes": list(processes),
            "store": store,
            "offset_s": offset,
            "rate": rate,
        },
    )
    return inv, done


def clock_reset(h: History, target: str, *, fault: int = 1, processes: Sequence[str] = ()) -> Event:
    """A clock fault's heal: every clock it moved is true again."""
    return h.info(
        "nemesis",
        "clock-reset",
        {
            "target": target,
            "fault": fault,
            "processes": list(processes),
            "store": target in ("store", "host"),
            "offset_s": 0.0,
            "rate": 1.0,
        },
    )
