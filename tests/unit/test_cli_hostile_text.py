"""Text that looks like console markup is shown as written, by every command.

A scenario name, a path, a flag's value, a store URL or a field of a
scenario file can hold ``[/x]``, ``[bold]`` or ``:thumbs_up:``. If any of
it reached a console that reads rich markup, the printer would raise
``MarkupError`` while printing the error (a traceback and exit 1, which
means "invalid"), or show the text restyled. Each command here is given
such text where it takes user input and must answer with one ``knell:
error:`` line holding the text literally, its normal exit code, no
traceback. Only argument and file checking runs: nothing is started.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from knell.cli import _internal, main

HOSTILE = ["[/x]", "[bold]b[/bold]", "[/]", ":thumbs_up:", "[link=x]l[/link]"]
SRC = Path(__file__).resolve().parents[2] / "src" / "knell"


def _knell(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def _assert_literal(text: str, output: str, code: int, expected: int = 3) -> None:
    assert "Traceback" not in output and "MarkupError" not in output, output
    assert code == expected, output
    assert text in output, output  # shown as written, not restyled or dropped


def _hostile_args(text: str, tmp: Path) -> list[list[str]]:
    """One or more argument lists per command of ``knell --help``; each
    puts ``text`` into user input that the command refuses before it
    starts anything."""
    missing = str(tmp / f"no{text}")
    campaign = tmp / "campaign.toml"
    campaign.write_text(
        '[campaign]\nname = "c"\nseed = 1\nseeds = 1\nscenarios = ["quickstart"]\n',
        encoding="utf-8",
    )
    return [
        ["run", f"nosuch{text}"],
        ["run", "--duration", text, "quickstart"],
        ["run", "--schedule", f"{missing}.json", "quickstart"],
        ["run", f"quickstart@{text}"],
        ["soak", f"nosuch{text}", "--for", "1s"],
        ["soak", "quickstart", "--for", text],
        ["check", missing],
        ["list", missing],
        ["report", missing],
        ["matrix", "-s", f"nosuch{text}"],
        ["matrix", "--mutant", text],
        ["campaign", "plan", f"{missing}.toml"],
        ["campaign", "run", "--shard", text, str(campaign)],
        ["campaign", "merge", missing],
        ["campaign", "regressions", "add", missing, "--into", str(tmp / "store")],
        ["campaign", "regressions", "run", missing],
        ["campaign", "regressions", "run", str(tmp), "--bus", f"no{text}:x"],
        ["campaign", "compare", missing, missing],
        ["explore", f"nosuch{text}"],
        ["explore", "quickstart", "--kinds", text],
        ["bench", "--section", text],
        ["doctor", text],
        ["doctor", "--require", text],
        ["proxy", "--listen", text],
        ["bridge", "--bus", text, "--listen", "127.0.0.1:0"],
        ["compose", text],
        ["fs", "heal", f"{missing}.sock"],
        ["fs", "slow-disk", f"{missing}.sock", "--delay", text],
    ]


@pytest.mark.parametrize("text", HOSTILE)
def test_every_command_shows_markup_in_its_input_literally(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in _hostile_args(text, tmp_path):
        code, output = _knell(args, capsys)
        _assert_literal(text, output, code)


def test_every_command_is_in_the_sweep(tmp_path: Path) -> None:
    import click

    from knell.cli import cli

    swept = {args[0] for args in _hostile_args("[/x]", tmp_path)}
    listed = cli.list_commands(click.Context(cli))
    assert swept | {"reap"} == set(listed)  # reap takes no input


@pytest.mark.parametrize("text", HOSTILE)
def test_a_scenario_file_with_markup_in_its_fields(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    bad = folder / "bad.toml"
    bad.write_text(f'name = "bad"\nduration = "{text}"\n', encoding="utf-8")
    code, output = _knell(["run", str(bad)], capsys)
    _assert_literal(text, output, code)
    assert "bad.toml" in output and "duration" in output
    (folder / "good.toml").write_text(
        f'name = "good"\nduration = "5s"\ndescription = "{text} in a description"\n'
        '[[process]]\nrole = "producer"\n',
        encoding="utf-8",
    )
    code, output = _knell(["list", str(folder)], capsys)
    _assert_literal(text, output, code)  # exit 3: one file is bad
    assert f"{text} in a description" in output  # the good one, listed as written
    code, output = _knell(
        ["run", "--store-url", f"redis://h{text}", str(folder / "good.toml")], capsys
    )
    assert code == 3 and "Traceback" not in output and "url" in output, output


def test_a_store_url_that_is_no_url_is_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, output = _knell(["run", "--store-url", "redis://[/x]", "quickstart"], capsys)
    assert code == 3 and "url: not a URL" in output, output


@pytest.mark.parametrize("text", HOSTILE)
def test_the_internal_error_handler_shows_markup_literally(
    text: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KNELL_STATE_DIR", str(tmp_path))
    assert _internal(ValueError(f"bad {text}")) == 4
    output = capsys.readouterr().err
    assert f"ValueError: bad {text}" in output and "MarkupError" not in output


TAG = re.compile(
    r"\[/?(?:bold|dim|italic|underline|red|green|yellow|blue|cyan|magenta|white|link)\b[^\]]*\]"
    r"|\[/\]"
)


def _calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            out.append((node, name))
    return out


def test_no_console_reads_markup() -> None:
    """Safe by construction: every rich console is made with markup and
    emoji off, nothing asks for markup, and no printed literal carries a
    markup tag (with markup off it would be shown as ``[red]``: style is
    given with ``knell.cli.common.styled``)."""
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(SRC.parent)
        for call, name in _calls(tree):
            keywords = {k.arg: k.value for k in call.keywords}
            off = {
                k
                for k in ("markup", "emoji")
                if isinstance(keywords.get(k), ast.Constant) and keywords[k].value is False  # type: ignore[union-attr]
            }
            if name == "Console" and off != {"markup", "emoji"}:
                problems.append(f"{where}:{call.lineno}: Console without markup=False, emoji=False")
            if name in ("print", "log") and "markup" in keywords and "markup" not in off:
                problems.append(f"{where}:{call.lineno}: print with markup on")
            if name in ("from_markup", "render_markup"):
                problems.append(f"{where}:{call.lineno}: {name}")
            if name in ("print", "log", "styled", "Text"):
                for arg in ast.walk(call):
                    value = arg.value if isinstance(arg, ast.Constant) else None
                    if isinstance(value, str) and TAG.search(value):
                        problems.append(f"{where}:{call.lineno}: markup tag {value!r}")
    assert not problems, "\n".join(problems)


def test_an_error_line_never_shows_a_url_password() -> None:
    """Whatever a message quotes (a driver's exception text holding its
    URL), the error line masks the password."""
    from knell.cli.common import error_line

    line = error_line("bus driver 'm:f': cannot connect to redis://:Pw-9z@h:1/0").plain
    assert "Pw-9z" not in line and "redis://:***@h:1/0" in line
