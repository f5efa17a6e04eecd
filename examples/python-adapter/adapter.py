#!/usr/bin/env python3
"""A knell stdio adapter (protocol 1) for knell's own reference bus.

knell starts this program once per worker process and talks to it in
newline-delimited JSON on stdin/stdout (docs/stdio-protocol.md). It wraps
knell's reference SqliteBus, so a run through it tests exactly the same
bus as the in-process default: what differs is only the protocol between
them (which is what ``knell bench`` compares). It serves all three
contracts the protocol covers (broadcast, queue, at-most-once, stream), because
the bus it wraps implements them, and says so in its hello reply.

Run it the way knell does (any shipped scenario on SQLite)::

    ADAPTER="$PWD/.venv/bin/python examples/python-adapter/adapter.py"
    knell run quickstart --bus "exec:$ADAPTER"
    knell run queue-kill-claimers --bus "exec:$ADAPTER"

``--mutant NAME`` serves one of knell's seeded-bug SQLite buses instead of
the reference (``knell matrix --list`` names them), so a test can show
that a bug is still caught when every call crosses the protocol::

    knell run queue-kill-claimers --bus "exec:$ADAPTER --mutant claim-without-guard"

It reads one request per line and answers each before reading the next;
stdout carries nothing but replies (diagnostics go to stderr); it exits
when stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from knell.buses import (
    AckBeyondHead,
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    IndeterminateError,
    Message,
    NotSubscribed,
    QueueInfo,
    Refused,
    RoleHold,
    Stranded,
    Wake,
    contracts_of,
)
from knell.buses.contract import features_of
from knell.buses.sqlite import open_sqlite

PROTOCOL = 1
KNOWN_CONTRACTS = ("broadcast", "queue", "at-most-once", "stream")
KNOWN_FEATURES = ("expiry",)

Op = Callable[[Any, dict[str, Any]], dict[str, Any]]


class ErrorReply(Exception):
    """An error reply: (outcome, kind, message)."""

    def __init__(self, outcome: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.outcome, self.kind = outcome, kind


# -- value types as the protocol writes them ---------------------------------------


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


def claim(c: Claim | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "id": c.id,
        "channel": c.channel,
        "seq": c.seq,
        "body": c.body,
        "sender": c.sender,
        "consumer": c.consumer,
        "deliveries": c.deliveries,
        "expires_at": c.expires_at,
    }


def queue_info(q: QueueInfo) -> dict[str, Any]:
    return {
        "channel": q.channel,
        "max_deliveries": q.max_deliveries,
        "sweep_interval": q.sweep_interval,
    }


def dead_letter(d: DeadLetter) -> dict[str, Any]:
    return {
        "id": d.id,
        "channel": d.channel,
        "seq": d.seq,
        "body": d.body,
        "sender": d.sender,
        "deliveries": d.deliveries,
        "died_at": d.died_at,
    }


def hold(h: RoleHold) -> dict[str, Any]:
    return {"role": h.role, "run": h.run, "expires_at": h.expires_at}


def delivery(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "role": d.role,
        "seq": d.seq,
        "body": d.body,
        "sender": d.sender,
        "run": d.run,
    }


def stranded(s: Stranded) -> dict[str, Any]:
    return {
        "id": s.id,
        "role": s.role,
        "seq": s.seq,
        "body": s.body,
        "sender": s.sender,
        "run": s.run,
        "delivered_at": s.delivered_at,
    }


def stream_info(s: Any) -> dict[str, Any]:
    return {"channel": s.channel, "max_len": s.max_len, "max_age_s": s.max_age_s}


def stream_page(p: Any) -> dict[str, Any]:
    return {
        "channel": p.channel,
        "messages": [message(m) for m in p.messages],
        "first": p.first,
        "head": p.head,
        "expired": list(getattr(p, "expired", ())),
    }


def nothing(_: None) -> dict[str, Any]:
    """The result of an operation that returns nothing (done, read...)."""
    return {}


def kind_of(exc: DefiniteError) -> str:
    """The protocol's error kind for one of the reference bus's definite
    failures. The contract's refusals carry their kind (``lease-lost``...)."""
    text = str(exc)
    if isinstance(exc, Refused):
        return exc.refusal
    if isinstance(exc, AckBeyondHead):
        return "ack-beyond-head"
    if isinstance(exc, NotSubscribed) or "not subscribed" in text:
        return "not-subscribed"
    if "write lock" in text:
        return "busy"
    if "must be" in text or "not a message id" in text:
        return "invalid-argument"
    return "rejected"


def expiry(args: dict[str, Any]) -> dict[str, Any]:
    """``expires_at`` as a keyword, only when knell sent it: knell sends it
    only because this adapter declared the expiry feature, which it does
    only when the wrapped bus has it."""
    return {"expires_at": args["expires_at"]} if args.get("expires_at") is not None else {}


def forensic(args: dict[str, Any]) -> dict[str, Any]:
    """``include_expired`` as a keyword, only when knell sent it true."""
    return {"include_expired": True} if args.get("include_expired") is True else {}


# -- the operations -------------------------------------------------------------------

BROADCAST_OPS: dict[str, Op] = {
    "post": lambda b, a: {
        "message": message(
            b.post(a["channel"], a["body"], a["sender"], a.get("idempotency_key"), **expiry(a))
        )
    },
    "subscribe": lambda b, a: {
        "cursor": b.subscribe(a["handle"], a["channel"], a.get("at", "head"))
    },
    "fetch": lambda b, a: {
        "messages": [
            message(m)
            for m in b.fetch(
                a["handle"], a["channel"], a.get("after"), a.get("limit", 100), **forensic(a)
            )
        ]
    },
    "ack": lambda b, a: {"cursor": b.ack(a["handle"], a["channel"], a["up_to"])},
    "cursor": lambda b, a: {"cursor": b.cursor(a["handle"], a["channel"])},
    "head": lambda b, a: {"head": b.head(a["channel"])},
    "wait": lambda b, a: {"wake": wake(b.wait(a["handle"], float(a["timeout"])))},
}

QUEUE_OPS: dict[str, Op] = {
    "declare_queue": lambda b, a: {
        "queue": queue_info(b.declare_queue(a["channel"], a["max_deliveries"]))
    },
    "claim": lambda b, a: {"claim": claim(b.claim(a["channel"], a["consumer"], a["lease_s"]))},
    "renew": lambda b, a: {"claim": claim(b.renew(a["id"], a["consumer"], a["lease_s"]))},
    "done": lambda b, a: nothing(b.done(a["id"], a["consumer"])),
    "release": lambda b, a: nothing(b.release(a["id"], a["consumer"])),
    "dead": lambda b, a: {
        "dead": [
            dead_letter(d) for d in b.dead(a["channel"], a.get("after", 0), a.get("limit", 100))
        ]
    },
}

ROLE_OPS: dict[str, Op] = {
    "claim_role": lambda b, a: {"hold": hold(b.claim_role(a["role"], a["run"], a["lease_s"]))},
    "release_role": lambda b, a: nothing(b.release_role(a["role"], a["run"])),
    "receive": lambda b, a: {
        "deliveries": [delivery(d) for d in b.receive(a["run"], a.get("limit", 50))]
    },
    "read": lambda b, a: nothing(b.read(a["id"], a["run"])),
    "stranded": lambda b, a: {"stranded": [stranded(s) for s in b.stranded(a["role"])]},
}

STREAM_OPS: dict[str, Op] = {
    "declare_stream": lambda b, a: {
        "stream": stream_info(b.declare_stream(a["channel"], a.get("max_len"), a.get("max_age_s")))
    },
    "tail": lambda b, a: {
        "page": stream_page(
            b.tail(a["channel"], a.get("after", 0), a.get("limit", 100), **forensic(a))
        )
    },
}

OPS_OF = {
    "broadcast": BROADCAST_OPS,
    "queue": QUEUE_OPS,
    "at-most-once": ROLE_OPS,
    "stream": STREAM_OPS,
}


def mutant_factory(name: str) -> Callable[[str], Any] | None:
    """The ``from_url`` of the SQLite mutant ``name`` (``None``: no such one)."""
    import knell.buses.mutants as mutants

    try:
        factory = getattr(mutants, name.replace("-", "_"))
    except AttributeError:
        return None
    found = mutants.MUTANTS.get(name)
    return factory if found is not None and found.store == "sqlite" else None


class Adapter:
    def __init__(self, mutant: str | None = None) -> None:
        self.mutant = mutant
        self.bus: Any = None
        self.ops: dict[str, Op] = {}

    def open(self, store: str) -> Any:
        if self.mutant is None:
            return open_sqlite(store)
        factory = mutant_factory(self.mutant)
        assert factory is not None  # checked at startup
        return factory(store)

    def hello(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("protocol") != PROTOCOL:
            raise ErrorReply(
                "definite", "unsupported-protocol", f"this adapter speaks protocol {PROTOCOL}"
            )
        store = args.get("store") or os.environ.get("KNELL_STORE_URL", "")
        if not store.startswith("sqlite:"):
            raise ErrorReply("definite", "invalid-argument", f"not a sqlite store URL: {store!r}")
        self.bus = self.open(store)
        # Pass through: declare exactly what the wrapped bus implements.
        contracts = [c for c in KNOWN_CONTRACTS if c in contracts_of(self.bus)]
        self.ops = {op: f for c in contracts for op, f in OPS_OF[c].items()}
        name = "knell reference SqliteBus (python adapter)"
        if self.mutant is not None:
            name = f"knell mutant {self.mutant} (python adapter)"
        features = [f for f in KNOWN_FEATURES if f in features_of(self.bus)]
        return {"protocol": PROTOCOL, "contracts": contracts, "features": features, "bus": name}

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
            raise ErrorReply("definite", "no-hello", "the first request must be hello")
        call = self.ops.get(str(op))
        if call is None:
            raise ErrorReply("definite", "unknown-op", f"unknown op {op!r}")
        try:
            return call(self.bus, args)
        except (KeyError, TypeError, ValueError) as exc:
            raise ErrorReply("definite", "invalid-argument", f"{op}: bad args: {exc}") from None
        except DefiniteError as exc:
            raise ErrorReply("definite", kind_of(exc), str(exc)) from None
        except IndeterminateError as exc:
            raise ErrorReply("indeterminate", "store", str(exc)) from None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="knell stdio adapter for the reference bus")
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="serve this seeded-bug SQLite bus of knell.buses.mutants instead of the reference",
    )
    args = parser.parse_args(argv)
    if args.mutant is not None and mutant_factory(args.mutant) is None:
        parser.error(f"no SQLite mutant named {args.mutant!r} (knell matrix --list names them)")
    return args


def main(argv: list[str]) -> int:
    adapter = Adapter(parse_args(argv).mutant)
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
        except ErrorReply as exc:
            error = {"outcome": exc.outcome, "kind": exc.kind, "message": str(exc)}
            reply = {"id": rid, "ok": False, "error": error}
        except Exception as exc:  # anything else: the outcome is unknown
            error = {"outcome": "indeterminate", "kind": "internal", "message": repr(exc)}
            reply = {"id": rid, "ok": False, "error": error}
        try:
            out.write(json.dumps(reply, separators=(",", ":")) + "\n")
            out.flush()
        except BrokenPipeError:
            # knell (or whatever sits between) is gone: nobody reads the
            # reply, and there is no one left to tell. Quietly, as Python's
            # documentation advises: stdout to /dev/null, so the flush at
            # exit does not raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            return 1
        if request.get("op") == "close":
            break
    if adapter.bus is not None:
        adapter.bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
