"""An adapter that leaves a grandchild behind, the way a careless one does.

``python forking.py MARKER -- COMMAND...`` starts a helper the way a
daemon does (fork, and the child forks again and exits, so the helper is
re-parented at once, out of every process tree knell knows) and then
becomes COMMAND (a real adapter, by ``exec``, so knell talks to it
unchanged). The helper closes its stdin, so the end of input that stops
an adapter never reaches it, and sleeps with MARKER in its argv (for a
test to find it); it keeps the adapter's stdout and stderr open, as a
helper that nobody tidied up would. Only the adapter's process group and
its worker's session still hold it.
"""

from __future__ import annotations

import os
import sys

SLEEPER = "import time; time.sleep(60)"


def main() -> None:
    split = sys.argv.index("--")
    marker = sys.argv[1]
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER, marker])
        os._exit(0)
    os.waitpid(middle, 0)
    command = sys.argv[split + 1 :]
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
