"""`knell run NAME@STORE`: the name a matrix cell shows runs as is.

The matrix names a scenario it re-targeted to another store
``contract-tour@redis``; pasting that name must run the shipped scenario
on that store, not answer "no such scenario file". Only name resolution
is exercised here: nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.cli import main
from knell.cli.common import load_scenarios
from knell.cli.run import named_stores
from knell.shipped import split_store


def test_a_matrix_cell_name_is_the_scenario_on_that_store() -> None:
    assert named_stores(("contract-tour@redis", "quickstart"), None) == [
        ("contract-tour", "redis"),
        ("quickstart", None),
    ]
    (scenario,) = load_scenarios(["contract-tour"], None, store="redis")
    assert scenario.name == "contract-tour" and scenario.store.kind == "redis"
    # the same store named twice is no conflict; --store applies to plain names
    assert named_stores(("contract-tour@redis", "quickstart"), "redis") == [
        ("contract-tour", "redis"),
        ("quickstart", "redis"),
    ]


def test_a_path_or_an_existing_file_is_never_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert split_store("scenarios/quickstart@redis") == ("scenarios/quickstart@redis", None)
    assert split_store("@redis") == ("@redis", None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine@redis").write_text("", encoding="utf-8")
    assert split_store("mine@redis") == ("mine@redis", None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["contract-tour@redis", "--store", "postgres"], "--store says postgres"),
        (["contract-tour@nosuchstore"], "unknown store 'nosuchstore'"),
    ],
)
def test_a_conflicting_or_unknown_store_is_exit_3(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", *args])
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
