"""A tiny stdio adapter that breaks the protocol in one chosen way.

``python misbehaving.py MODE``: it answers ``hello`` correctly (unless the
mode is about the handshake) and serves a trivial in-memory bus (every
cursor and head is 0, fetch is empty, post appends), except for the one
misbehaviour MODE names. Standard library only: it stands for an adapter
written in any language.

With ``$MISBEHAVE_ONCE`` naming a file, the misbehaviour happens only in
the first adapter process (the file marks that it happened), so a test can
watch the driver restart a fresh adapter that then behaves.
"""

from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def misbehave_now() -> bool:
    marker = os.environ.get("MISBEHAVE_ONCE")
    if not marker:
        return True
    if os.path.exists(marker):
        return False
    with open(marker, "w") as fh:
        fh.write(str(os.getpid()))
    return True


def hello(rid: int) -> None:
    if MODE == "die-at-hello":
        sys.stderr.write("adapter: cannot open the store: permission denied\n")
        sys.stderr.flush()
        sys.exit(4)
    if MODE == "banner":
        sys.stdout.write("My Bus v1.0 starting up...\n")
    if MODE == "old-protocol":
        send({"id": rid, "ok": True, "result": {"protocol": 2, "contracts": ["broadcast"]}})
    elif MODE == "queue-only":
        send({"id": rid, "ok": True, "result": {"protocol": 1, "contracts": ["queue"]}})
    elif MODE == "no-known-contract":
        send({"id": rid, "ok": True, "result": {"protocol": 1, "contracts": ["sharded"]}})
    elif MODE == "refuse-hello":
        error = {"outcome": "definite", "kind": "invalid-argument", "message": "no such store"}
        send({"id": rid, "ok": False, "error": error})
    else:
        send({"id": rid, "ok": True, "result": {"protocol": 1, "contracts": ["broadcast"]}})


def result(op: str, args: dict, seq: int) -> dict:
    if op == "post":
        message = {
            "channel": args["channel"],
            "seq": seq,
            "body": args["body"],
            "sender": args["sender"],
            "idempotency_key": args.get("idempotency_key"),
        }
        return {"message": message}
    if op == "fetch":
        return {"messages": []}
    if op == "head":
        return {"head": seq - 1}
    if op == "wait":
        return {"wake": None}
    if op == "close":
        return {}
    return {"cursor": 0}


def main() -> int:
    seq = 1
    for line in sys.stdin:
        request = json.loads(line)
        rid, op, args = request["id"], request["op"], request.get("args", {})
        if op == "hello":
            hello(rid)
            continue
        bad = op != "close" and misbehave_now()
        if bad and MODE == "malformed":
            sys.stdout.write(f'{{"id": {rid}, "ok": true, "result": {{"cursor": 0\n')
            sys.stdout.flush()
            continue
        if bad and MODE == "unknown-id":
            send({"id": rid + 1000, "ok": True, "result": result(op, args, seq)})
            continue
        if bad and MODE == "exit":
            sys.stderr.write("adapter: simulated crash in the middle of " + op + "\n")
            sys.stderr.flush()
            os._exit(3)
        if bad and MODE == "hang":
            time.sleep(3600)
        if bad and MODE == "bad-shape":
            send({"id": rid, "ok": True, "result": {"cursor": "0"}})
            continue
        if bad and MODE == "bad-error":
            send(
                {"id": rid, "ok": False, "error": {"outcome": "maybe", "kind": "x", "message": ""}}
            )
            continue
        if bad and MODE == "refuse":
            error = {"outcome": "definite", "kind": "busy", "message": "write lock not taken"}
            send({"id": rid, "ok": False, "error": error})
            continue
        if bad and MODE == "unsure":
            error = {"outcome": "indeterminate", "kind": "commit", "message": "commit failed"}
            send({"id": rid, "ok": False, "error": error})
            continue
        send({"id": rid, "ok": True, "result": result(op, args, seq)})
        if op == "post":
            seq += 1
        if bad and MODE == "unsolicited":
            send({"id": rid, "ok": True, "result": result(op, args, seq)})
        if bad and MODE == "chatter":
            send({"event": "heartbeat"})
        if op == "close":
            break
    if MODE == "ignore-eof":
        time.sleep(3600)  # a bad adapter that outlives its stdin: only a kill ends it
    return 0


if __name__ == "__main__":
    sys.exit(main())
