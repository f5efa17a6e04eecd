"""What every ``knell`` command shares: output, options, scenario lookup.

Output is rich on a terminal and plain in a pipe. Anything that came from
the bus under test (error texts, ids) is passed through
:func:`knell.text.clean` before it is printed.

The two consoles never read console markup or emoji codes: a scenario
name, a path, a store URL or a bus's error text may hold ``[/x]`` or
``[bold]`` or ``:smile:``, and a console that parsed them would show them
wrong or raise ``MarkupError`` in the middle of printing an error. Style is
given as data instead, with :func:`styled` (``(text, style)`` pairs), so
no text, knell's own or the user's, is ever parsed as markup.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from knell.errors import ExitCode, KnellError
from knell.redact import redact_text
from knell.scenario import Scenario, ScenarioError, load_scenario, parse_duration
from knell.shipped import shipped_dir
from knell.text import clean

__all__ = [
    "REPORTS",
    "SCENARIOS_DIR",
    "UsageProblem",
    "console",
    "duration_flag",
    "err",
    "error_line",
    "load_scenarios",
    "resolve_scenario",
    "scenario_files",
    "styled",
    "worst",
]

console = Console(highlight=False, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, markup=False, emoji=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line from plain ``str`` parts and ``(text, style)`` pairs, e.g.
    ``styled(("knell: error:", "bold red"), " ", message)``. No part is
    parsed as markup, so any text can be a part as it is."""
    return Text.assemble(*parts)


def error_line(message: object) -> Text:
    """``knell: error: MESSAGE``, the one-line form of every exit-3 error.
    Every URL's password in it is masked here, the one place every error
    line passes: a message quoting a store URL (a driver's own error, a
    library's) never shows the password on a terminal or in CI's log."""
    return styled(("knell: error:", "bold red"), " ", redact_text(str(message)))


class UsageProblem(KnellError, click.ClickException):
    """A command-line problem: printed as ``knell: error: ...``, exit 3."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)

    def show(self, file: object = None) -> None:
        err.print(error_line(clean(self.message, 2000, newlines=True)), soft_wrap=True)


def worst(codes: list[int]) -> int:
    """Combine run exit codes with Jepsen's priority: invalid beats unknown
    beats valid (a usage or internal error never reaches here)."""
    for code in (ExitCode.INVALID, ExitCode.UNKNOWN):
        if code in codes:
            return int(code)
    return int(ExitCode.VALID)


REPORTS = click.option(
    "--reports",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("reports"),
    show_default=True,
    help="Where results are written.",
)
SCENARIOS_DIR = click.option(
    "--scenarios-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where bare scenario names are looked up first "
    "(default: ./scenarios, then the scenarios shipped with knell).",
)


def duration_flag(value: str | None) -> float | None:
    """A ``--duration`` flag in seconds; a bad or non-positive one is the
    flag's fault, so the error names the flag rather than a scenario file."""
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageProblem(f"--duration: {exc}") from None
    if seconds <= 0:
        raise UsageProblem(f"--duration: must be positive, got {value!r}")
    return seconds


def _search_dirs(scenarios_dir: Path | None) -> list[Path]:
    dirs = [scenarios_dir] if scenarios_dir is not None else [Path("scenarios")]
    shipped = shipped_dir()
    if shipped is not None and scenarios_dir is None:
        dirs.append(shipped)
    return dirs


def scenario_files(scenarios_dir: Path | None) -> list[Path]:
    """The scenario files of a folder (given, else ./scenarios, else shipped)."""
    for directory in _search_dirs(scenarios_dir):
        files = sorted(directory.glob("*.toml"))
        if files:
            return files
    where = scenarios_dir or Path("scenarios")
    raise UsageProblem(
        f"{where}: no scenario files (*.toml) here; name a folder with --scenarios-dir"
    )


def resolve_scenario(arg: str, scenarios_dir: Path | None) -> Path:
    """A scenario argument: a path, or a bare name looked up in
    ``--scenarios-dir`` (or ./scenarios), then in the shipped scenarios."""
    path = Path(arg)
    if path.is_file():
        return path
    if path.is_dir():
        raise UsageProblem(f"{arg}: is a folder, not a scenario file (*.toml)")
    tried = []
    for directory in _search_dirs(scenarios_dir):
        candidate = directory / f"{arg}.toml"
        if candidate.is_file():
            return candidate
        tried.append(str(candidate))
    raise UsageProblem(
        f"{arg}: no such scenario file (looked for {', '.join(tried)}); give a path, "
        "or the folder of your scenarios with --scenarios-dir (see `knell list`)"
    )


def load_scenarios(
    args: tuple[str, ...] | list[str], scenarios_dir: Path | None, **overrides: object
) -> list[Scenario]:
    loaded = []
    for arg in args:
        try:
            loaded.append(load_scenario(resolve_scenario(arg, scenarios_dir), **overrides))
        except ScenarioError as exc:
            raise UsageProblem(str(exc)) from None
    return loaded
