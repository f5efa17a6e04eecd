"""``knell bridge`` (also ``python -m knell.bridge``): serve a bus over HTTP.

Start-up problems (a bad address, a port in use, a non-loopback address
without a token, a bus URL that does not open, an unknown mutant) are
one line on stderr and exit code 3, never a traceback, so a supervisor
can tell "the bridge could not start" from "the bridge was killed".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

import click

from knell.buses.http_protocol import MAX_WAIT, TOKEN_ENV
from knell.redact import BUS_URL_ENV

__all__ = ["EXIT_STARTUP", "bridge", "main"]

EXIT_STARTUP = 3
"""Exit code of a bridge that could not start (usage or environment)."""


class _StartupProblem(click.ClickException):
    exit_code = EXIT_STARTUP

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"knell bridge: error: {self.message}", err=True)


class _Command(click.Command):
    """A click command whose usage errors also exit with :data:`EXIT_STARTUP`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            setattr(exc, "exit_code", EXIT_STARTUP)  # noqa: B010 (a class variable in click's stubs)
            raise


def _mutant_driver(name: str) -> str:
    from knell.buses.mutants import all_mutants

    bridge_mutants = {n: m for n, m in all_mutants().items() if m.store == "bridge"}
    if name not in bridge_mutants:
        known = ", ".join(sorted(bridge_mutants))
        raise _StartupProblem(f"--mutant {name!r}: no such bridge mutant (known: {known})")
    return bridge_mutants[name].factory


@click.command("bridge", cls=_Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--bus",
    "bus_url",
    required=True,
    envvar=BUS_URL_ENV,
    metavar="URL",
    help=f"Store URL of the bus to serve (or ${BUS_URL_ENV}: a URL with a password is "
    "better kept off the command line, which any local user can read).",
)
@click.option("--driver", metavar="MODULE:FACTORY", help="Open the bus with this factory.")
@click.option(
    "--mutant",
    metavar="NAME",
    help="Serve a bridge mutant (a seeded bug; see knell matrix --list).",
)
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on; port 0 picks a free one. Beyond loopback needs --token.",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    metavar="TOKEN",
    help=f"Bearer token every request must carry (or ${TOKEN_ENV}).",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Write {"url", "pid", "listen"} here, atomically, once serving.',
)
@click.option("--parent-pid", type=int, metavar="PID", help="Exit when this process is gone.")
@click.option(
    "--max-body", default=1 << 20, show_default=True, type=click.IntRange(min=64), metavar="BYTES"
)
@click.option(
    "--max-waits",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Long polls served at once (each holds a thread).",
)
@click.option(
    "--max-wait",
    default=MAX_WAIT,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Longest wait timeout a client may ask for, in seconds.",
)
@click.option(
    "--threads",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Threads for ordinary bus calls.",
)
@click.option(
    "--read-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Time a client has to send a whole request (head and body); then it is cut off.",
)
@click.option(
    "--idle-timeout",
    default=30,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="SECONDS",
    help="Time a keep-alive connection may sit idle between requests.",
)
@click.option("--access-log", is_flag=True, help="Log every request to stdout.")
def bridge(
    bus_url: str,
    driver: str | None,
    mutant: str | None,
    listen: str,
    token: str | None,
    ready_file: Path | None,
    parent_pid: int | None,
    max_body: int,
    max_waits: int,
    max_wait: float,
    threads: int,
    read_timeout: float,
    idle_timeout: int,
    access_log: bool,
) -> None:
    """Serve the bus at store URL --bus over HTTP + JSON (the knell bridge).

    Clients reach it through knell's http:// driver, e.g.
    knell run SCENARIO with bus URL http://127.0.0.1:PORT.
    """
    os.environ.pop(BUS_URL_ENV, None)  # not inherited by what the bus driver starts
    if parent_pid is not None:
        from knell.platform import die_with_parent, parent_alive

        if not parent_alive(parent_pid):
            raise _StartupProblem(
                f"--parent-pid {parent_pid} is not this process's parent (or it is gone)"
            )
        die_with_parent(parent_pid)
    from knell.bridge.app import BridgeConfig
    from knell.bridge.server import StartupError, parse_listen, serve

    if mutant is not None:
        if driver is not None:
            raise _StartupProblem("give --mutant or --driver, not both")
        driver = _mutant_driver(mutant)
    if token is not None and (not token or not token.isascii() or not token.isprintable()):
        raise _StartupProblem("--token must be printable ASCII without spaces")
    if token is not None and " " in token:
        raise _StartupProblem("--token must be printable ASCII without spaces")
    config = BridgeConfig(
        max_body=max_body, threads=threads, max_waits=max_waits, max_wait=max_wait
    )
    try:
        serve(
            bus_url,
            driver=driver,
            listen=parse_listen(listen),
            token=token,
            ready_file=ready_file,
            config=config,
            access_log=access_log,
            read_timeout=read_timeout,
            idle_timeout=idle_timeout,
            say=lambda line: click.echo(line, err=True),
        )
    except StartupError as exc:
        raise _StartupProblem(str(exc)) from None


def main() -> None:
    """``python -m knell.bridge``."""
    from knell.faketime import faked

    faked.start()  # a clock fault's target: report the offset, repair sleep
    bridge(prog_name="python -m knell.bridge")
    sys.exit(0)
