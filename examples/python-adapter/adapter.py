#!/usr/bin/env python3
"""A knell stdio adapter (protocol 1) for knell's own reference bus.

knell starts this program once per worker process and talks to it in
newline-delimited JSON on stdin/stdout (docs/stdio-protocol.md). It wraps
knell's reference SqliteBus, so a run through it tests exactly the same
bus as the in-process default: what differs is only the protocol between
them (which is what ``knell bench`` compares).

Run it the way knell does::

    knell run quickstart --bus "exec:$PWD/.venv/bin/python examples/python-adapter/adapter.py"

It reads one request per line and answers each before reading the next;
stdout carries nothing but replies (diagnostics go to stderr); it exits
when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from knell.buses import AckBeyondHead, DefiniteError, IndeterminateError, Message, Wake
from knell.buses.sqlite import SqliteBus, open_sqlite

PROTOCOL = 1


class Refused(Exception):
    """An error reply: (outcome, kind, message)."""

    def __init__(self, outcome: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.outcome, self.kind = outcome, kind


def message(m: Message) -> dict[str, Any]:
    return {
        "channel": m.channel,
        "seq": m.seq,
        "body": m.body,
        "sender": m.sender,
        "idempotency_key": m.idempotency_key,
    }


def wake(w: Wake | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {"channel": w.channel, "seq": w.seq, "sender": w.sender, "reason": w.reason}


def kind_of(exc: DefiniteError) -> str:
    """The protocol's error kind for one of the reference bus's refusals."""
    text = str(exc)
    if isinstance(exc, AckBeyondHead):
        return "ack-beyond-head"
    if "not subscribed" in text:
        return "not-subscribed"
    if "write lock" in text:
        return "busy"
    if "must be" in text:
        return "invalid-argument"
    return "refused"


class Adapter:
    def __init__(self) -> None:
        self.bus: SqliteBus | None = None
        self.ops: dict[str, Callable[[SqliteBus, dict[str, Any]], dict[str, Any]]] = {
            "post": lambda b, a: {
                "message": message(
                    b.post(a["channel"], a["body"], a["sender"], a.get("idempotency_key"))
                )
            },
            "subscribe": lambda b, a: {
                "cursor": b.subscribe(a["handle"], a["channel"], a.get("at", "head"))
            },
            "fetch": lambda b, a: {
                "messages": [
                    message(m)
                    for m in b.fetch(a["handle"], a["channel"], a.get("after"), a.get("limit", 100))
                ]
            },
            "ack": lambda b, a: {"cursor": b.ack(a["handle"], a["channel"], a["up_to"])},
            "cursor": lambda b, a: {"cursor": b.cursor(a["handle"], a["channel"])},
            "head": lambda b, a: {"head": b.head(a["channel"])},
            "wait": lambda b, a: {"wake": wake(b.wait(a["handle"], float(a["timeout"])))},
        }

    def hello(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("protocol") != PROTOCOL:
            raise Refused(
                "definite", "unsupported-protocol", f"this adapter speaks protocol {PROTOCOL}"
            )
        store = args.get("store") or os.environ.get("KNELL_STORE_URL", "")
        if not store.startswith("sqlite:"):
            raise Refused("definite", "invalid-argument", f"not a sqlite store URL: {store!r}")
        self.bus = open_sqlite(store)
        return {
            "protocol": PROTOCOL,
            "contracts": ["broadcast"],
            "bus": "knell reference SqliteBus (python adapter)",
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op, args = request.get("op"), request.get("args") or {}
        if op == "hello":
            return self.hello(args)
        if op == "close":
            if self.bus is not None:
                self.bus.close()
                self.bus = None
            return {}
        if self.bus is None:
            raise Refused("definite", "no-hello", "the first request must be hello")
        call = self.ops.get(str(op))
        if call is None:
            raise Refused("definite", "unknown-op", f"unknown op {op!r}")
        try:
            return call(self.bus, args)
        except (KeyError, TypeError, ValueError) as exc:
            raise Refused("definite", "invalid-argument", f"{op}: bad args: {exc}") from None
        except DefiniteError as exc:
            raise Refused("definite", kind_of(exc), str(exc)) from None
        except IndeterminateError as exc:
            raise Refused("indeterminate", "store", str(exc)) from None


def main() -> int:
    adapter = Adapter()
    out = sys.stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
            rid = request["id"]
        except (ValueError, KeyError, TypeError) as exc:
            print(f"adapter: cannot read request {line[:200]!r}: {exc}", file=sys.stderr)
            return 2
        try:
            reply: dict[str, Any] = {"id": rid, "ok": True, "result": adapter.handle(request)}
        except Refused as exc:
            error = {"outcome": exc.outcome, "kind": exc.kind, "message": str(exc)}
            reply = {"id": rid, "ok": False, "error": error}
        except Exception as exc:  # anything else: the outcome is unknown
            error = {"outcome": "indeterminate", "kind": "internal", "message": repr(exc)}
            reply = {"id": rid, "ok": False, "error": error}
        out.write(json.dumps(reply, separators=(",", ":")) + "\n")
        out.flush()
        if request.get("op") == "close":
            break
    if adapter.bus is not None:
        adapter.bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
