"""``python -m knell.proxy --listen 127.0.0.1:0 [--ready-file F] [--parent-pid PID]``"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from knell.errors import ExitCode
from knell.proxy.server import ListenError, run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m knell.proxy")
    parser.add_argument("--listen", default="127.0.0.1:8474", help="API address (host:port)")
    parser.add_argument("--ready-file", type=Path, help='write {"api": URL, "pid": PID} here')
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    parser.add_argument(
        "--public", action="store_true", help="allow a non-loopback --listen (no authentication)"
    )
    args = parser.parse_args(argv)
    try:
        run(
            args.listen,
            ready_file=args.ready_file,
            parent_pid=args.parent_pid,
            public=args.public,
        )
    except ListenError as exc:
        print(f"knell proxy: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
