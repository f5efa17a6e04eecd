"""The keeper: a small process that holds a server on a leash.

``python -m knell.platform.keeper PARENT [--user U] [--pidfile F] [--env K=V] -- CMD...``

A worker dies with its runner through the Linux parent-death signal, but
that signal is cleared when a process changes its user, and Postgres must
run as an unprivileged user. So servers are started through a keeper: it
starts ``CMD`` as the leader of its own process group (as ``U`` when
given), writes the server's pid to ``F``, and then watches two things.
When the server exits, the keeper exits with its code; when the runner
(``PARENT``) is gone, or the keeper is told to stop, it SIGKILLs the
server, its process group and everything it forked (a postmaster and every
backend, which Postgres moves to sessions of their own) first. A
runner that is itself SIGKILLed therefore leaves no server behind, within
the keeper's poll interval. On Windows the server is also put in the
keeper's kill-on-close job object (:func:`knell.platform.contain`), so it
dies with the keeper even when the keeper is the one hard-killed.
``--env`` variables are given to the server alone, never to the keeper
itself (a clock fault's preload library belongs in the server, not in
knell's leash).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from knell.platform import (
    SPAWN_GROUP,
    contain,
    kill_group,
    parent_alive,
    run_as,
    signal_server,
)

POLL = 0.1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m knell.platform.keeper")
    parser.add_argument("parent", type=int)
    parser.add_argument("--user")
    parser.add_argument("--pidfile", type=Path)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    if "--" not in argv:
        parser.error("give the server's command after --")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("no command given after --")
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    if not parent_alive(args.parent):
        return 70
    extra = dict(item.split("=", 1) for item in args.env if "=" in item)
    child = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **extra} if extra else None,
        **SPAWN_GROUP,
        **run_as(args.user),
    )
    contain(child)  # Windows: the server dies with this keeper, even a TerminateProcess'd one
    if args.pidfile is not None:
        tmp = args.pidfile.with_suffix(".tmp")
        tmp.write_text(f"{child.pid}\n", encoding="utf-8")
        tmp.replace(args.pidfile)
    while True:
        code = child.poll()
        if code is not None:
            kill_group(child.pid)  # anything the server forked and left behind
            return code if code >= 0 else 128 - code
        if stop or not parent_alive(args.parent):
            signal_server(child.pid, "kill")
            child.wait()
            return 70
        time.sleep(POLL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
