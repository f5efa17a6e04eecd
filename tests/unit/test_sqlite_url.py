"""The sqlite:/// URL form on both platforms.

Both directions are tested for POSIX and for Windows paths on any machine:
``windows=True`` selects :class:`pathlib.PureWindowsPath`, which applies
Windows' path rules as pure string logic (no Windows file system is
touched or pretended). The native round trip then opens a real file.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knell.buses import open_bus
from knell.buses.sqlite import SqliteBus, open_sqlite
from knell.buses.sqlite_url import MEMORY, parse_sqlite_url, sqlite_url

WINDOWS_CASES = [
    (r"C:\Users\ci\run\store\bus.db", "sqlite:///C:/Users/ci/run/store/bus.db"),
    (
        r"D:\a\knell\knell\reports\q\store\bus.db",
        "sqlite:///D:/a/knell/knell/reports/q/store/bus.db",
    ),
    (r"C:\Users\John Smith\bus.db", "sqlite:///C:/Users/John Smith/bus.db"),
    (r"C:\runs\50%#1?\bus.db", "sqlite:///C:/runs/50%25%231%3F/bus.db"),
    (r"\\server\share\run\bus.db", "sqlite:////server/share/run/bus.db"),
    ("C:/already/forward/bus.db", "sqlite:///C:/already/forward/bus.db"),
]

POSIX_CASES = [
    ("/tmp/run/store/bus.db", "sqlite:///tmp/run/store/bus.db"),
    ("/tmp/my run/bus.db", "sqlite:///tmp/my run/bus.db"),
    ("/tmp/Zoë/bus.db", "sqlite:///tmp/Zoë/bus.db"),
    ("/tmp/50%#1?/bus.db", "sqlite:///tmp/50%25%231%3F/bus.db"),
    ("/C:/odd/but/legal.db", "sqlite:///C:/odd/but/legal.db"),
]


@pytest.mark.parametrize(("path", "url"), WINDOWS_CASES)
def test_windows_paths_build_and_parse(path: str, url: str) -> None:
    assert sqlite_url(path, windows=True) == url
    parsed = parse_sqlite_url(url, windows=True)
    assert PureWindowsPath(parsed.path) == PureWindowsPath(path)
    assert parsed.path == str(PureWindowsPath(path))


@pytest.mark.parametrize(("path", "url"), POSIX_CASES)
def test_posix_paths_build_and_parse(path: str, url: str) -> None:
    assert sqlite_url(path, windows=False) == url
    assert parse_sqlite_url(url, windows=False).path == path


def test_a_drive_url_is_a_drive_path_on_windows_and_a_plain_path_on_posix() -> None:
    url = "sqlite:///C:/Users/ci/bus.db?poll_interval=0.05"
    on_windows = parse_sqlite_url(url, windows=True)
    assert on_windows.path == r"C:\Users\ci\bus.db"
    assert on_windows.options == {"poll_interval": "0.05"}
    assert parse_sqlite_url(url, windows=False).path == "/C:/Users/ci/bus.db"


def test_hand_written_windows_forms_are_accepted() -> None:
    # f"sqlite:///{tmp_path}/x.db" on Windows writes backslashes into the URL
    assert parse_sqlite_url(r"sqlite:///C:\Temp\pytest-0\x.db", windows=True).path == (
        r"C:\Temp\pytest-0\x.db"
    )
    assert parse_sqlite_url("sqlite:///c:/temp/x.db", windows=True).path == r"c:\temp\x.db"
    assert parse_sqlite_url("sqlite:///C:", windows=True).path == "C:\\"
    assert parse_sqlite_url("sqlite://localhost/C:/x.db", windows=True).path == r"C:\x.db"
    # percent-encoded by hand or by another tool: decoded
    assert parse_sqlite_url("sqlite:///C:/a%20b/x.db", windows=True).path == r"C:\a b\x.db"


def test_options_are_encoded_and_decoded() -> None:
    url = sqlite_url("/tmp/x.db", windows=False, poll_interval=0.05, synchronous="full")
    assert url == "sqlite:///tmp/x.db?poll_interval=0.05&synchronous=full"
    assert parse_sqlite_url(url, windows=False).options == {
        "poll_interval": "0.05",
        "synchronous": "full",
    }


def test_memory_is_no_file_on_either_platform() -> None:
    for windows in (True, False):
        assert sqlite_url(MEMORY, windows=windows) == "sqlite:///:memory:"
        assert parse_sqlite_url("sqlite:///:memory:", windows=windows).path == MEMORY


def test_memory_store_creates_no_file(tmp_path: Path) -> None:
    bus = open_bus("sqlite:///:memory:")
    try:
        assert isinstance(bus, SqliteBus) and bus.path == MEMORY
        assert bus.post("a", "x", "p").seq == 1
    finally:
        bus.close()
    assert not Path(os.path.abspath(MEMORY)).exists()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("sqlite://C:/x.db", "three slashes: sqlite:///C:/"),
        ("sqlite://host/x.db", "must be sqlite:///path"),
        ("sqlite:///", "names no file"),
        ("sqlite://", "names no file"),
        ("postgresql:///x", "not a sqlite URL"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, words: str) -> None:
    for windows in (True, False):
        with pytest.raises(ValueError, match="sqlite") as info:
            parse_sqlite_url(url, windows=windows)
        assert words in str(info.value) and repr(url) in str(info.value)


def test_a_foreign_relative_path_is_refused() -> None:
    foreign = os.name != "nt"  # Windows rules on POSIX, POSIX rules on Windows
    with pytest.raises(ValueError, match="absolute"):
        sqlite_url("relative/bus.db", windows=foreign)


def test_a_native_relative_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    parsed = parse_sqlite_url(sqlite_url("bus.db"))
    assert Path(parsed.path) == tmp_path / "bus.db"


_segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\\0:"),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", ".."))


@given(st.lists(_segment, min_size=1, max_size=5))
def test_any_posix_path_round_trips(segments: list[str]) -> None:
    path = str(PurePosixPath("/", *segments))
    assert parse_sqlite_url(sqlite_url(path, windows=False), windows=False).path == path


@given(st.sampled_from("CDEZcz"), st.lists(_segment, min_size=1, max_size=5))
def test_any_windows_drive_path_round_trips(drive: str, segments: list[str]) -> None:
    path = PureWindowsPath(f"{drive}:\\", *segments)
    back = parse_sqlite_url(sqlite_url(str(path), windows=True), windows=True).path
    assert PureWindowsPath(back) == path


def test_native_round_trip_opens_a_real_file(tmp_path: Path) -> None:
    """The runner's form (store_url) through the reference driver, on a path
    a URL must escape: the file opened is the file named."""
    folder = tmp_path / "my run #1"
    folder.mkdir()
    url = sqlite_url(folder / "bus.db", poll_interval=0.02)
    bus = open_sqlite(url)
    try:
        assert Path(bus.path) == (folder / "bus.db").resolve()
        assert bus.poll_interval == 0.02
        bus.post("a", "x", "p")
    finally:
        bus.close()
    assert (folder / "bus.db").is_file()


def test_the_run_store_url_uses_the_form(tmp_path: Path) -> None:
    from knell.runner import make_store
    from knell.scenario import Scenario

    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "duration": "1s", "process": [{"role": "producer"}]}
    )
    url = make_store(scenario, tmp_path, None).url
    parsed = parse_sqlite_url(url)
    assert Path(parsed.path) == (tmp_path / "store" / "bus.db").resolve()
    assert float(parsed.options["poll_interval"]) == scenario.poll_interval
