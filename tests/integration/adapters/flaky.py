"""A proxy that makes a good adapter crash now and then.

``python flaky.py N -- COMMAND...`` starts COMMAND (a real adapter),
forwards each request line to it and its reply back, and exits with code 3
(the adapter behind it then sees its stdin close and exits too) when the
Nth request after ``hello`` arrives, before forwarding it: an adapter that
dies with an operation in flight, every N operations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main() -> int:
    split = sys.argv.index("--")
    every = int(sys.argv[1])
    child = subprocess.Popen(sys.argv[split + 1 :], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    count = 0
    for line in sys.stdin.buffer:
        op = json.loads(line).get("op")
        if op not in ("hello", "close"):
            count += 1
            if count >= every:
                sys.stderr.write(f"flaky: crashing on purpose with {op} in flight\n")
                sys.stderr.flush()
                os._exit(3)
        child.stdin.write(line)
        child.stdin.flush()
        sys.stdout.buffer.write(child.stdout.readline())
        sys.stdout.buffer.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
