"""Hostile scenario files and command lines: never a traceback, never exit 4.

Two fuzz targets, both in-process through :func:`knell.cli.main` exactly as
the ``knell`` entry point runs it:

* **scenario files.** Hypothesis starts from a shipped scenario (a file
  knell accepts) and mutates it: wrong types, out-of-range and huge
  numbers, deleted and unknown keys, deep nesting, unicode and console
  markup in any field, and raw damage to the TOML text (cut, junk, a
  hundred thousand brackets). Each file goes through ``knell list`` (load
  and validate, nothing started); a file it refuses goes through ``knell
  run`` too (refused the same way, before anything starts); a file it
  accepts has its fault plan expanded, as ``knell run`` would.
* **schedule files.** A saved fault plan (``knell run --schedule``) of a
  shipped scenario, mutated (wrong types, missing fields, numbers JSON can
  hold but a float cannot): refused with the file named, or read.
* **run directories.** A checked run (a stored history's start, checked
  once) with its ``results.json``, ``scenario.json``, ``series.json`` or
  ``summary.json`` deleted, emptied, replaced by junk or mutated inside:
  ``knell report`` draws the page (0) or refuses the file, naming it (3).
* **command lines.** Random options and values for every command, drawn
  from the command's own options (and unknown ones), always with one
  argument the command refuses before it starts anything (a scenario name
  that does not exist, an unknown capability, a listen address that is no
  address), so no case becomes a real run, server or container.

The property: exit 0-3, never 4 (a bug in knell) and never a traceback;
exit 3 (bad input) says ``error`` and names what it refuses. Cases per
target: ``KNELL_FUZZ_EXAMPLES`` (short by default, ``make fuzz`` runs
more; the run-directory target a tenth of it, as each case draws a page).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from knell.cli import main
from knell.scenario import ScenarioError, load_scenario
from knell.schedule import ScheduleError, expand
from knell.text import clean

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("KNELL_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
SHIPPED = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))
SEEDS = {p.stem: tomllib.loads(p.read_text(encoding="utf-8")) for p in SHIPPED}
MARKUP = ["[/x]", "[bold]b", "[/]", ":thumbs_up:", "[link=x]l[/link]", "\x1b[31mred", "a\u202eb"]

# -- TOML out ----------------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE.match(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def to_toml(data: dict[str, Any]) -> str:
    """One ``key = value`` line per top-level key, tables inline."""
    return "".join(f"{_key(k)} = {_value(v)}\n" for k, v in data.items())


def test_the_toml_writer_round_trips_every_shipped_scenario() -> None:
    for name, data in SEEDS.items():
        assert tomllib.loads(to_toml(data)) == data, name


# -- scenario mutations ------------------------------------------------------------------------

hostile_text = (
    st.sampled_from(MARKUP) | st.text(max_size=12) | st.integers(300, 20_000).map(lambda n: "x" * n)
)
numbers = (
    st.sampled_from(
        [
            0,
            -1,
            1,
            2**63,
            -(2**63) - 1,
            2**200,
            1e308,
            -1e308,
            1e-300,
            math.inf,
            -math.inf,
            math.nan,
        ]
    )
    | st.floats(allow_nan=True)
    | st.integers()
)
durations = st.sampled_from(
    ["0s", "-5s", "1e308s", "1e-9ms", "5 parsecs", "", "s", "100000000000d", "nan s", "1_0s"]
) | st.builds(
    lambda n, u: f"{n}{u}",
    st.integers(-10, 10**12),
    st.sampled_from(["s", "ms", "m", "h", "d", "x"]),
)
scalars = (
    hostile_text
    | numbers
    | durations
    | st.booleans()
    | st.just(dt.datetime(1979, 5, 27, 7, 32, tzinfo=dt.timezone.utc))
    | st.just(dt.date(2026, 12, 1))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=5,
)
KEYS = [
    "role",
    "fault",
    "target",
    "every",
    "count",
    "duration",
    "kind",
    "url",
    "channel",
    "handle",
    "store",
    "name",
    "expect",
    "checks",
    "verdict",
    "settings",
    "port",
    "bus",
]


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path and list index in ``data``."""
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.append((*prefix, i))
            out += _paths(value, (*prefix, i))
    return out


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    return _at(data, path[:-1])


@st.composite
def scenario_files(draw: Any) -> tuple[str, list[str]]:
    """(TOML text, the keys a mutation touched)."""
    seed = draw(st.sampled_from(sorted(SEEDS)))
    data = json.loads(json.dumps(SEEDS[seed]))  # a deep copy (no dates in the shipped files)
    touched: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(data)
        how = draw(
            st.sampled_from(["set", "delete", "unknown", "nest", "repeat", "swap-kind", "number"])
        )
        if how == "unknown" or not paths:
            tables = [data, *(v for v in map(lambda p: _at(data, p), paths) if isinstance(v, dict))]
            parent = draw(st.sampled_from(tables))
            key = draw(hostile_text | st.sampled_from(KEYS))
            parent[key] = draw(values)
            touched.append(str(key))
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        step = path[-1]
        touched += [str(p) for p in path if isinstance(p, str)]
        if how == "set":
            parent[step] = draw(values)
        elif how == "number":
            parent[step] = draw(numbers | durations)
        elif how == "delete":
            del parent[step]
        elif how == "nest":
            depth = draw(st.integers(1, 300))
            value = parent[step]
            for _ in range(depth):
                value = [value] if draw(st.booleans()) else {"a": value}
            parent[step] = value
        elif how == "repeat" and isinstance(parent[step], list):
            parent[step] = parent[step] * draw(st.integers(2, 300))  # e.g. 300 process blocks
        elif how == "repeat" and isinstance(parent[step], dict):
            parent[step] = [parent[step]] * draw(st.integers(2, 300))
        elif how == "swap-kind":
            parent[step] = draw(
                st.sampled_from(
                    [
                        "producer",
                        "consumer",
                        "waiter",
                        "joiner",
                        "claimer",
                        "holder",
                        "bridge",
                        "kill",
                        "pause",
                        "partition",
                        "postgres",
                        "redis",
                        "nosuch",
                    ]
                )
            )
    text = to_toml(data)
    damage = draw(st.sampled_from(["none"] * 6 + ["cut", "junk", "deep", "bytes"]))
    if damage == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == "junk":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=20)) + text[at:]
    elif damage == "deep":
        n = draw(st.sampled_from([1_000, 100_000]))
        text += "deep = " + "[" * n + "]" * n + "\n"
        touched.append("deep")
    elif damage == "bytes":
        text += "\x00"
    return text, touched


def _knell(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


def _sound(code: int, output: str) -> None:
    assert "Traceback" not in output, output
    assert code in (0, 1, 2, 3), output  # 4 would be a bug in knell


FIELDS = sorted({p[-1] for data in SEEDS.values() for p in _paths(data) if isinstance(p[-1], str)})
"""Every key of the shipped scenarios: a cut file's message names one it misses."""
FILE_PROBLEMS = ("not valid TOML", "not a scenario file", "not UTF-8")


@FUZZ
@given(case=scenario_files())
def test_knell_list_and_run_on_hostile_scenario_files(
    case: tuple[str, list[str]],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text, touched = case
    folder = tmp_path_factory.mktemp("scenarios")
    path = folder / "fuzzed.toml"
    path.write_text(text, encoding="utf-8")
    code, listed = _knell(["list", str(folder)], capsys)
    event(f"knell list: exit {code}")
    _sound(code, listed)
    assert code in (0, 3), listed
    if code == 3:
        assert "fuzzed.toml" in listed, listed  # names the file
        # ... and what in it: a key the mutation touched, a field, or the file as a whole
        message = listed.split("fuzzed.toml", 2)[-1]
        named = [
            k
            for k in [*touched, *FIELDS]
            if (k and clean(k, 60)[:60] in message)
            # quoted as TOML must quote it, then made one safe line
            or clean(json.dumps(k, ensure_ascii=False), 60)[:60] in message
        ]
        assert named or any(p in message for p in FILE_PROBLEMS), (touched, listed)
        code, ran = _knell(["run", str(path), "--reports", str(folder / "reports")], capsys)
        _sound(code, ran)
        assert code == 3 and "knell: error:" in ran, ran
        assert not (folder / "reports").exists()  # refused before anything was written
        return
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:  # pragma: no cover - list just accepted it
        raise AssertionError(f"knell list accepted what load_scenario refuses: {exc}") from None
    try:
        schedule = expand(scenario)
    except ScheduleError:
        return  # refused with a message: exit 3 in knell run
    assert expand(scenario) == schedule  # the seed decides the plan
    assert type(schedule).from_json(json.loads(json.dumps(schedule.to_json()))) == schedule


# -- schedule files ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | numbers.filter(lambda n: not (isinstance(n, float) and math.isnan(n)))
    | hostile_text,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)
RAW_NUMBERS = ["1e999", "-1e999", "1" + "0" * 400, "-0", "1E-400"]


@st.composite
def schedule_files(draw: Any) -> str:
    """A saved fault plan (``schedule.json``) of a shipped scenario, mutated."""
    seed = draw(st.sampled_from(sorted(SEEDS)))
    data = expand(load_scenario(SHIPPED[sorted(SEEDS).index(seed)])).to_json()
    data["actions"] = data["actions"][:20]
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        how = draw(st.sampled_from(["set", "delete", "raw"]))
        if how == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = (
                draw(json_values) if how == "set" else draw(st.sampled_from(RAW_NUMBERS))
            )
    text = json.dumps(data)
    for raw in RAW_NUMBERS:  # numbers JSON can hold and Python's float cannot
        text = text.replace(json.dumps(raw), raw)
    return text


@FUZZ
@given(text=schedule_files())
def test_knell_run_on_hostile_schedule_files(
    text: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path_factory.mktemp("schedule")
    path = folder / "schedule.json"
    path.write_text(text, encoding="utf-8")
    # The schedule is read before the scenario is looked up: nosuch keeps it from running.
    code, output = _knell(["run", "--schedule", str(path), "nosuch-scenario"], capsys)
    _sound(code, output)
    assert code == 3, output
    assert "schedule.json" in output or "nosuch-scenario" in output, output


# -- run directories for knell report ---------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "reference--quickstart"
RUN_FILES = ["results.json", "scenario.json", "series.json", "summary.json"]


@pytest.fixture(scope="module")
def checked_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored run's first 2,000 events, checked: a small run directory
    that ``knell report`` draws in under a second (so this target runs a
    tenth of ``KNELL_FUZZ_EXAMPLES``)."""
    import lzma

    run = tmp_path_factory.mktemp("checked")
    lines = lzma.decompress((CORPUS / "history.jsonl.xz").read_bytes()).splitlines(True)
    (run / "history.jsonl").write_bytes(b"".join(lines[:2000]))
    (run / "scenario.json").write_bytes((CORPUS / "scenario.json").read_bytes())
    with pytest.raises(SystemExit):
        main(["check", str(run)])
    return run


@st.composite
def run_damage(draw: Any) -> tuple[str, str | None]:
    """(file, its new text, or None to delete it)."""
    name = draw(st.sampled_from(RUN_FILES))
    return name, draw(st.none() | st.just("") | st.text(max_size=30) | st.just("mutate"))


@settings(FUZZ, max_examples=max(1, EXAMPLES // 10))
@given(damage=st.lists(run_damage(), min_size=1, max_size=3), data=st.data())
def test_knell_report_on_damaged_run_directories(
    damage: list[tuple[str, str | None]],
    data: st.DataObject,
    checked_run: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    run = tmp_path_factory.mktemp("run") / "run"
    shutil.copytree(checked_run, run)
    for name, text in damage:
        path = run / name
        if text is None:
            path.unlink(missing_ok=True)
        elif text == "mutate" and path.exists():
            try:
                content = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # already damaged past reading
            for _ in range(data.draw(st.integers(1, 4))):
                paths = _paths(content)
                if not paths:
                    break
                where = data.draw(st.sampled_from(paths))
                parent = _parent(content, where)
                if data.draw(st.booleans()):
                    parent[where[-1]] = data.draw(json_values)
                else:
                    del parent[where[-1]]
            path.write_text(json.dumps(content), encoding="utf-8")
        else:
            path.write_text(text if text != "mutate" else "{}", encoding="utf-8")
    code, output = _knell(["report", str(run), "--no-index"], capsys)
    event(f"knell report: exit {code}")
    assert "Traceback" not in output and "internal error" not in output, output
    assert code in (0, 3), output  # 4: part of the page could not be drawn, a bug in the page


# -- command lines -----------------------------------------------------------------------------

ARGV_CHARACTERS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
"""What a command line can hold: exec passes C strings, so never a NUL."""
arg_values = (
    st.sampled_from(MARKUP)
    | st.sampled_from(
        [
            "",
            "-1",
            "0",
            "1e308",
            "nan",
            "inf",
            "-",
            "--",
            "5s",
            "-5s",
            "0s",
            "sqlite",
            "postgres",
            "all",
            "x:y",
            "127.0.0.1:0",
            "::",
            "a,b,,c",
            "9" * 40,
            "%s",
            "{}",
            "~",
            "/",
            ".",
        ]
    )
    | st.text(ARGV_CHARACTERS, max_size=10)
)


def _options(command: str) -> list[str]:
    import click

    from knell.cli import cli

    names: list[str] = []
    found = cli.get_command(click.Context(cli), command)
    assert found is not None, command
    for param in found.params:
        names += [n for n in param.opts + param.secondary_opts if n.startswith("-")]
    return [n for n in names if n not in ("-h", "--help")]


def _refused(command: str, draw: Any) -> list[str]:
    """An argument that ``command`` refuses before it starts anything."""
    text = draw(st.sampled_from(MARKUP) | st.text(ARGV_CHARACTERS, max_size=6))
    nosuch = f"nosuch-{text}"
    return {
        "run": [nosuch],
        "explore": [nosuch],
        "matrix": ["-s", nosuch],
        "bench": ["--section", nosuch],
        "doctor": [nosuch],
        "proxy": ["--listen", nosuch],
        "bridge": ["--bus", nosuch, "--listen", "127.0.0.1:0"],
        "compose": [nosuch],
        "check": [str(Path("/nonexistent") / nosuch)],
        "report": [str(Path("/nonexistent") / nosuch)],
        "list": [str(Path("/nonexistent") / nosuch)],
    }[command]


COMMANDS = [
    "run",
    "explore",
    "matrix",
    "bench",
    "doctor",
    "proxy",
    "bridge",
    "compose",
    "check",
    "report",
    "list",
]


@st.composite
def command_lines(draw: Any) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    options = [o for o in _options(command) if o not in ("--listen", "--bus")]
    args: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["option", "option", "unknown", "positional"]))
        if kind == "option" and options:
            args.append(draw(st.sampled_from(options)))
            if draw(st.booleans()):
                args.append(draw(arg_values))
        elif kind == "unknown":
            args.append("--" + draw(st.text(st.sampled_from("abcxyz-[]/"), min_size=1, max_size=8)))
        else:
            args.append(draw(arg_values))
    # First, so no option before it takes it as its value; the option it
    # sets is not drawn again (a later --listen would replace it).
    return [command, *_refused(command, draw), *args]


@FUZZ
@given(argv=command_lines())
def test_every_command_on_hostile_command_lines(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # relative --reports and the like land here
    monkeypatch.setenv("KNELL_STATE_DIR", str(tmp_path / "state"))
    code, output = _knell(argv, capsys)
    event(f"knell {argv[0]}: exit {code}")
    _sound(code, output)
    if code == 3:
        assert "error" in output.lower(), output
