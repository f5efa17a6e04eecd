"""The ``knell`` command.

One module per group of commands (:mod:`.run`: run, soak, check, list;
:mod:`.report`; :mod:`.matrix`; :mod:`.campaign`; :mod:`.explore`;
:mod:`.bench`; :mod:`.admin`: reap, doctor; :mod:`.fs`), and here the entry
point, which owns the exit-code contract (:mod:`knell.errors`): a command
ends with 0 (valid), 1 (invalid), 2 (unknown); bad input or environment is
one line on stderr and exit 3; anything else is a bug in knell, written
with its traceback to a file whose path is printed, and exit 4. No
traceback ever reaches the user's terminal.
"""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

import click

from knell.cli.common import err, error_line, styled
from knell.errors import ExitCode, KnellError
from knell.redact import redact_text
from knell.rundir import stamp
from knell.text import clean

__all__ = ["cli", "entry", "main"]

EXIT_CODES = """\b
Exit codes:
  0  valid: every check passed on a history that proves something
  1  invalid: a check found an anomaly (the report shows the events that prove it)
  2  unknown: the run could not decide (the reason is printed)
  3  bad input or environment (a scenario field, a driver, a server, the disk)
  4  a bug in knell (the traceback is written to a file; its path is printed)
"""

_ENVIRONMENT = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EMFILE}


COMMANDS = {
    "run": "knell.cli.run:run",
    "soak": "knell.cli.run:soak",
    "check": "knell.cli.run:check",
    "list": "knell.cli.run:list_",
    "report": "knell.cli.report:report",
    "matrix": "knell.cli.matrix:matrix",
    "campaign": "knell.cli.campaign:campaign",
    "explore": "knell.cli.explore:explore",
    "bench": "knell.cli.bench:bench",
    "reap": "knell.cli.admin:reap",
    "doctor": "knell.cli.admin:doctor",
    "proxy": "knell.proxy.cli:proxy",
    "bridge": "knell.bridge.cli:bridge",
    "compose": "knell.stores.compose.cli:compose",
    "fs": "knell.cli.fs:fs",
}
"""Each command and where it lives (``module:attribute``)."""


class _LazyGroup(click.Group):
    """Imports a command's module only when that command is asked for.

    Every ``knell run`` is a new interpreter, and its start is part of
    the fixed cost of each short run a matrix or a campaign pays: a run
    need not import the campaign dashboard, the compose stacks, the
    bridges and the proxy first. ``--help`` lists (and so imports) all."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES
)
@click.version_option(package_name="knell")
def cli() -> None:
    """knell: chaos testing for durable agent message buses."""


def _crash_file() -> Path:
    """Where an internal error's traceback goes: the run directory being
    written, if there is one, else a per-user folder."""
    from knell.runner import current_run_dir

    run_dir = current_run_dir()
    if run_dir is not None and run_dir.is_dir():
        return run_dir / "knell-error.txt"
    folder = Path(os.environ.get("KNELL_STATE_DIR") or tempfile.gettempdir()) / "knell-errors"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stamp()}-{os.getpid()}.txt"


def _internal(exc: BaseException) -> int:
    # A message may quote a store URL, password and all (see knell.redact).
    text = redact_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    try:
        path = _crash_file()
        path.write_text(text, encoding="utf-8")
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback could not be written to a file"
    err.print(
        styled(
            ("knell: internal error", "bold red"),
            f" (a bug in knell, not a finding about the bus): "
            f"{type(exc).__name__}: {redact_text(clean(exc))}; {where}",
        ),
        soft_wrap=True,
    )
    return int(ExitCode.INTERNAL)


def main(argv: list[str] | None = None) -> None:
    """Run the command line and exit with the contract's code."""
    try:
        code = cli.main(args=argv, prog_name="knell", standalone_mode=False)
    except click.exceptions.Abort:
        err.print("knell: interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.USAGE)
    except KnellError as exc:
        # Never parsed as markup: a message may hold brackets (pip install 'knell[postgres]').
        err.print(error_line(clean(exc, 2000, newlines=True)), soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("knell: interrupted; every process it started was stopped")
        sys.exit(130)
    except OSError as exc:
        if exc.errno in _ENVIRONMENT:
            where = exc.filename or "knell's files"
            why = "no space left on the device" if exc.errno == errno.ENOSPC else exc.strerror
            err.print(error_line(f"{clean(where)}: cannot write: {why}"), soft_wrap=True)
            sys.exit(ExitCode.USAGE)
        sys.exit(_internal(exc))
    except SystemExit:
        raise
    except Exception as exc:
        sys.exit(_internal(exc))
    sys.exit(code if isinstance(code, int) else 0)


def entry() -> None:
    """The ``knell`` process (the console script, ``python -m knell``):
    :func:`main`, then the interpreter's exit without its last collections.

    A command has closed what it wrote by the time it returns; what is
    left is the interpreter tearing down, whose final garbage collections
    walk every object knell imported (pydantic's validators, jinja2's and
    rich's): 80-100 ms of every ``knell run``, a matrix's or a campaign's
    included. Frozen first, those objects are skipped; the exit handlers,
    the wait for threads and the flushing of output all still run. Only
    here, never in :func:`main`, which tests call in a process that
    lives on."""
    try:
        main()
    finally:
        gc.freeze()
