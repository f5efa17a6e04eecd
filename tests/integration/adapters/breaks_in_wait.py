"""A proxy that makes a good adapter break the protocol during ``wait``.

``python breaks_in_wait.py MODE -- COMMAND...`` starts COMMAND (a real
adapter) and forwards each request line to it and its reply back, except a
``wait``, which it answers itself in the way MODE names, with the waiter
armed:

* ``garbage``: a line that is not JSON;
* ``bad-error``: an error reply of the wrong shape (an outcome the
  protocol does not have);
* ``exit``: it exits with code 3, the request in flight.

Every other operation reaches the real bus, so the run's only trouble is
the adapter's, and the bus under test is correct.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main() -> int:
    mode = sys.argv[1]
    split = sys.argv.index("--")
    child = subprocess.Popen(sys.argv[split + 1 :], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if request.get("op") == "wait":
            if mode == "exit":
                sys.stderr.write("breaks_in_wait: exiting with wait in flight\n")
                sys.stderr.flush()
                os._exit(3)
            if mode == "garbage":
                sys.stdout.write("wake me up before you go-go\n")
            else:
                error = {"outcome": "maybe", "kind": "x", "message": "armed"}
                sys.stdout.write(json.dumps({"id": request["id"], "ok": False, "error": error}))
                sys.stdout.write("\n")
            sys.stdout.flush()
            continue
        child.stdin.write(line)
        child.stdin.flush()
        sys.stdout.buffer.write(child.stdout.readline())
        sys.stdout.buffer.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
