"""``knell proxy``: knell's Toxiproxy-compatible server as a command.

Registered in :mod:`knell.cli`; anyone can run it for their own tests and
drive it with any Toxiproxy client::

    knell proxy --listen 127.0.0.1:8474
"""

from __future__ import annotations

from pathlib import Path

import click

from knell.errors import ExitCode

__all__ = ["proxy"]


class _Usage(click.ClickException):
    exit_code = ExitCode.USAGE


@click.command()
@click.option(
    "--listen",
    default="127.0.0.1:8474",
    show_default=True,
    help="Address of the HTTP API (host:port; port 0 picks a free one).",
)
@click.option(
    "--ready-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help='Once serving, write {"api": URL, "pid": PID} here.',
)
@click.option("--parent-pid", type=int, help="Exit when this process is gone.")
@click.option(
    "--public",
    is_flag=True,
    help="Allow a non-loopback --listen. The API has no authentication and creates TCP "
    "relays: only where the network in front of it is private (a container).",
)
def proxy(listen: str, ready_file: Path | None, parent_pid: int | None, public: bool) -> None:
    """A Toxiproxy-compatible fault proxy: Toxiproxy's HTTP API on LISTEN,
    with latency, bandwidth, timeout, reset_peer, slow_close, slicer and
    limit_data toxics. Stops on Ctrl-C or SIGTERM.

    LISTEN must be a loopback address unless --public is given: like
    Toxiproxy's, the API has no authentication, and anyone who reaches it
    can relay TCP through this host."""
    from knell.proxy.server import ListenError, run

    try:
        run(listen, ready_file=ready_file, parent_pid=parent_pid, public=public)
    except ListenError as exc:
        raise _Usage(str(exc)) from None
    except KeyboardInterrupt:
        pass
