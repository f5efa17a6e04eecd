"""What history validation costs ``knell check``, and how two knell trees compare on it.

Every event of a history is held to the format (:mod:`knell.checker.wellformed`)
before any check reads it. This measures, on one synthetic history shaped
like a real run (:mod:`knell.bench.synth`), in fresh child processes:

* ``read``: knell's history reader alone, the floor;
* ``validate``: the reader and the validation pass, no checks;
* ``knell-check``: ``check_run`` end to end (checks, reports, the page);
* ``unvalidated``: the same with the validation pass replaced by the bare
  stream of events, what ``knell check`` would cost if validation were free.

With ``--against SRC`` (the ``src`` folder of another knell tree, e.g.
``git archive HEAD~3 src | tar -x -C /tmp/old`` then ``/tmp/old/src``),
every child runs once for each tree per round, alternately, so a busy
machine weighs on both alike, and the ratio this tree / that tree is
printed per mode (above 1: this tree is faster). Rates are events per CPU
second of the child, the median over the rounds.

Usage: ``python tools/check_speed.py [--events N] [--rounds R] [--against SRC]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from knell.bench.synth import write_history

_CHILD = """
import gc, json, sys, time
from pathlib import Path
mode, path = sys.argv[1], Path(sys.argv[2])
import knell
from knell.history import HistoryReader
from knell.checker.wellformed import WellFormed
from knell.runner import check_run
run_dir = path.parent / ("run-" + sys.argv[3])
if mode == "unvalidated":
    WellFormed.events = lambda self, events: iter(events)
if mode in ("knell-check", "unvalidated"):
    run_dir.mkdir(exist_ok=True)
    if not (run_dir / "history.jsonl").exists():
        (run_dir / "history.jsonl").symlink_to(path.resolve())
cpu = time.process_time()
events = 0
if mode == "read":
    gc.disable()
    for _ in HistoryReader(path):
        events += 1
elif mode == "validate":
    gc.disable()
    reader = HistoryReader(path)
    for _ in WellFormed(path, lambda: reader.line).events(reader):
        events += 1
else:
    events = check_run(run_dir).verdict.events
print(json.dumps({"cpu": time.process_time() - cpu, "events": events, "from": knell.__file__}))
"""
MODES = ("read", "validate", "knell-check", "unvalidated")


def _child(mode: str, path: Path, tree: str, src: Path | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path), tree],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="the src folder of another knell tree")
    args = parser.parse_args(argv)
    if args.against is not None and not (args.against / "knell" / "__init__.py").exists():
        print(f"--against {args.against}: no knell package there", file=sys.stderr)
        return 3
    trees: dict[str, Path | None] = {"this": None}
    if args.against is not None:
        trees["that"] = args.against.resolve()
    with tempfile.TemporaryDirectory(prefix="knell-check-speed-") as tmp:
        path = Path(tmp) / "history.jsonl"
        write_history(path, args.events)
        rates: dict[tuple[str, str], list[float]] = {}
        for index in range(args.rounds):
            order = list(trees) if index % 2 == 0 else list(reversed(trees))
            for mode in MODES:
                for tree in order:
                    got = _child(mode, path, tree, trees[tree])
                    rates.setdefault((tree, mode), []).append(got["events"] / got["cpu"])
    for mode in MODES:
        line = f"{mode:12s}"
        for tree in trees:
            line += f"  {tree}: {statistics.median(rates[(tree, mode)]):>9,.0f} events/s"
        if "that" in trees:
            ratios = [
                a / b for a, b in zip(rates[("this", mode)], rates[("that", mode)], strict=True)
            ]
            line += f"  this/that {statistics.median(ratios):.2f}"
        print(line)
    for tree in trees:
        read = statistics.median(rates[(tree, "read")])
        validate = statistics.median(rates[(tree, "validate")])
        unvalidated = statistics.median(rates[(tree, "unvalidated")])
        print(
            f"{tree}: validation costs {1e6 / validate - 1e6 / read:.2f} us per event "
            f"on top of reading ({1e6 / read:.2f} us); knell check runs at "
            f"{statistics.median(rates[(tree, 'knell-check')]) / unvalidated:.0%} of its "
            "speed without validation"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
