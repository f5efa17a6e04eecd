"""The ``knell`` command.

One module per group of commands (:mod:`.run`: run, check, list;
:mod:`.report`; :mod:`.matrix`; :mod:`.explore`; :mod:`.bench`; :mod:`.admin`: reap,
doctor; :mod:`.fs`), and here the entry
point, which owns the exit-code contract (:mod:`knell.errors`): a command
ends with 0 (valid), 1 (invalid), 2 (unknown); bad input or environment is
one line on stderr and exit 3; anything else is a bug in knell, written
with its traceback to a file whose path is printed, and exit 4. No
traceback ever reaches the user's terminal.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
import traceback
from pathlib import Path

import click

from knell.bridge.cli import bridge
from knell.cli.admin import doctor, reap
from knell.cli.bench import bench
from knell.cli.common import err, error_line, styled
from knell.cli.explore import explore
from knell.cli.fs import fs
from knell.cli.matrix import matrix
from knell.cli.report import report
from knell.cli.run import check, list_, run
from knell.errors import ExitCode, KnellError
from knell.proxy.cli import proxy
from knell.redact import redact_text
from knell.rundir import stamp
from knell.stores.compose.cli import compose
from knell.text import clean

__all__ = ["cli", "main"]

EXIT_CODES = """\b
Exit codes:
  0  valid: every check passed on a history that proves something
  1  invalid: a check found an anomaly (the report shows the events that prove it)
  2  unknown: the run could not decide (the reason is printed)
  3  bad input or environment (a scenario field, a driver, a server, the disk)
  4  a bug in knell (the traceback is written to a file; its path is printed)
"""

_ENVIRONMENT = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EMFILE}


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(package_name="knell")
def cli() -> None:
    """knell: chaos testing for durable agent message buses."""


for _command in (
    run,
    check,
    list_,
    report,
    matrix,
    explore,
    bench,
    reap,
    doctor,
    proxy,
    bridge,
    compose,
    fs,
):
    cli.add_command(_command)


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
