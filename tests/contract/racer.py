"""A racing process for the contract tests.

``python -m tests.contract.racer URL ROLE NAME COUNT [SEED]`` opens the
bus, connects, prints ``ready`` and waits for a line on its stdin (the
test's barrier: it writes ``go`` to every racer once all are ready, so
they start within a millisecond of each other), runs its role and prints
one JSON line:

* ``post``: COUNT posts of ``NAME:i`` on channel ``race``: ``{"seqs": [...],
  "failed": n}`` (posts refused with an error are counted, not fatal);
* ``post-keys``: COUNT posts with the keys ``k0``... shared by every racer:
  ``{"got": [[key, seq, body], ...]}``;
* ``ack``: COUNT acks of handle ``w`` on ``race``, ascending (seed 0) or in a
  seeded random order: ``{"acks": [[up_to, cursor], ...]}``;
* ``watch``: COUNT reads of handle ``w``'s cursor: ``{"cursors": [...]}``;
* ``subscribe``: subscribe handle ``NAME`` at head: ``{"cursor": n}``;
* ``claim``: COUNT claims on the queue ``jobs`` (30 s leases, never done):
  ``{"claimed": [body, ...]}``.

``$KNELL_RACE_DRIVER`` (``module:factory``) opens a bus other than the URL's
reference bus: a mutant, to show that the race exposes its bug.
"""

from __future__ import annotations

import json
import os
import random
import sys

from knell.buses import BusError, open_bus


def main(url: str, role: str, name: str, count: int, seed: int) -> None:
    bus = open_bus(url, os.environ.get("KNELL_RACE_DRIVER") or None)
    bus.head("race")  # connected before the start
    print("ready", flush=True)
    sys.stdin.readline()
    out: dict[str, object]
    if role == "post":
        seqs, failed = [], 0
        for i in range(count):
            try:
                seqs.append(bus.post("race", f"{name}:{i}", name).seq)
            except BusError:  # a mutant may refuse some; the reference never does
                failed += 1
        out = {"seqs": seqs, "failed": failed}
    elif role == "post-keys":
        got = []
        for i in range(count):
            m = bus.post("race", f"{name}:{i}", name, idempotency_key=f"k{i}")
            got.append([f"k{i}", m.seq, m.body])
        out = {"got": got}
    elif role == "ack":
        order = list(range(1, count + 1))
        if seed:
            random.Random(seed).shuffle(order)
        out = {"acks": [[up_to, bus.ack("w", "race", up_to)] for up_to in order]}
    elif role == "watch":
        out = {"cursors": [bus.cursor("w", "race") for _ in range(count)]}
    elif role == "subscribe":
        out = {"cursor": bus.subscribe(name, "race")}
    elif role == "claim":
        claims = [bus.claim("jobs", name, 30.0) for _ in range(count)]  # type: ignore[attr-defined]
        out = {"claimed": [c.body for c in claims if c is not None]}
    else:
        raise SystemExit(f"unknown role {role!r}")
    bus.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    url, role, name, count, *rest = sys.argv[1:]
    main(url, role, name, int(count), int(rest[0]) if rest else 0)
