"""Scenario validation: every kind of bad input names file, field and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from knell.scenario import ScenarioError, load_scenario, parse_duration

GOOD = """
name = "s"
description = "a test scenario"
duration = "3s"

[[process]]
role = "producer"
rate = 10

[[process]]
role = "consumer"
count = 2

[[nemesis]]
fault = "kill"
target = "consumer"
every = "1s"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_good_scenario_loads(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD))
    assert s.duration == 3.0
    assert list(s.instances()) == ["producer-1", "consumer-1", "consumer-2"]
    assert s.targets("consumer") == ["consumer-1", "consumer-2"]
    assert s.targets("consumer-2") == ["consumer-2"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            GOOD.replace("rate = 10", "rate = 10\nspeed = 3"),
            ["process[0].speed", "unknown key", "9"],
        ),
        (GOOD.replace("count = 2", 'count = "two"'), ["process[1].count", "'two'"]),
        (GOOD.replace('duration = "3s"', 'duration = "-3s"'), ["duration", "'-3s'"]),
        (GOOD.replace('every = "1s"', 'every = "often"'), ["nemesis[0].every", "'often'"]),
        (GOOD.replace('role = "consumer"', 'role = "eater"'), ["process[1]", "'eater'"]),
        (GOOD.replace('fault = "kill"', 'fault = "explode"'), ["nemesis[0]", "'explode'"]),
        (
            GOOD.replace('target = "consumer"', 'target = "reviewer"'),
            ["nemesis[0].target", "'reviewer'", "names no process"],
        ),
    ],
)
def test_bad_input_is_named(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    for part in expected:
        assert part in message, message


SECRET = "Sekr1t-0f-this-file"


@pytest.mark.parametrize(
    "store",
    [
        'store = { kind = "redis", password = 8675309123 }',
        'store = { kind = "redis", settings = { masterauth = 8675309123 } }',
    ],
)
def test_a_refused_secret_is_not_quoted(tmp_path: Path, store: str) -> None:
    # a password of the wrong type is still the user's password
    path = write(tmp_path, f"{store}\n{GOOD}")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "8675309123" not in message and "(value: ***)" in message, message


def test_a_refused_url_is_quoted_without_its_password(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace('name = "s"', f'name = "redis://:{SECRET}@h:6379/0"'))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert SECRET not in message and "'redis://:***@h:6379/0'" in message, message


def test_line_number_points_at_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("count = 2", "count = 0"))
    with pytest.raises(ScenarioError, match=r"s\.toml:12: process\[1\]\.count"):
        load_scenario(path)


def test_toml_syntax_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(write(tmp_path, "name = \n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.toml")


def test_durations() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120
    assert parse_duration(3) == 3.0
    for bad in ("-1s", "1 parsec", True, None):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_shipped_scenarios_are_valid() -> None:
    files = sorted(Path("scenarios").glob("*.toml"))
    assert files, "no shipped scenarios found"
    for path in files:
        load_scenario(path)


def test_a_scenario_tests_the_contracts_of_its_roles() -> None:
    shipped = Path(__file__).resolve().parents[2] / "scenarios"
    assert load_scenario(shipped / "queue-kill-claimers.toml").contracts == ("queue",)
    assert load_scenario(shipped / "atmostonce-holder-churn.toml").contracts == ("at-most-once",)
    assert load_scenario(shipped / "quickstart.toml").contracts == ("broadcast",)


def test_a_channel_has_one_kind(tmp_path: Path) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text(
        'name = "mixed"\ndescription = "d"\nduration = "1s"\n'
        '[[process]]\nrole = "claimer"\nchannel = "jobs"\n'
        '[[process]]\nrole = "consumer"\nchannel = "jobs"\n'
    )
    with pytest.raises(ScenarioError, match="'jobs' is a queue for process\\[0\\]"):
        load_scenario(path)
    path.write_text(
        'name = "two"\ndescription = "d"\nduration = "1s"\n'
        '[[process]]\nrole = "claimer"\nname = "a"\nmax_deliveries = 2\n'
        '[[process]]\nrole = "claimer"\nname = "b"\nmax_deliveries = 3\n'
    )
    with pytest.raises(ScenarioError, match="disagree"):
        load_scenario(path)


def test_tailers_are_refused_without_a_bridge(tmp_path: Path) -> None:
    path = tmp_path / "tail.toml"
    head = 'name = "t"\ndescription = "d"\nduration = "1s"\n[[process]]\nrole = "tailer"\n'
    path.write_text(head)
    with pytest.raises(ScenarioError, match=r"process\[0\]: a tailer .* only a bridge serves"):
        load_scenario(path)
    path.write_text(head + 'via = "store"\n[[process]]\nrole = "bridge"\n')
    with pytest.raises(ScenarioError, match="cannot have via = 'store'"):
        load_scenario(path)
    path.write_text(head + '[[process]]\nrole = "bridge"\n')
    assert load_scenario(path).contracts == ("broadcast",)


def test_final_phase_names_are_reserved(tmp_path: Path) -> None:
    path = tmp_path / "reserved.toml"
    path.write_text(
        'name = "r"\ndescription = "d"\nduration = "1s"\n'
        '[[process]]\nrole = "claimer"\nname = "queue-drain"\n'
    )
    with pytest.raises(ScenarioError, match="reserved for the final phase"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("key", "shown"), [('""', '"": unknown key'), ('"a b"', '"a b": unknown key')]
)
def test_an_unknown_key_toml_must_quote_is_named_quoted(
    key: str, shown: str, tmp_path: Path
) -> None:
    """An empty key was reported as "(top level): unknown key", naming
    nothing (found by tests/slow/test_cli_fuzz.py)."""
    path = tmp_path / "odd.toml"
    path.write_text(
        f'name = "odd"\nduration = "5s"\n{key} = 1\n[[process]]\nrole = "producer"\n',
        encoding="utf-8",
    )
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert shown in str(caught.value)


def test_holders_together_share_one_run_named_after_their_group() -> None:
    """Competing receivers: every process of the group holds the role as one
    run; holders that take turns name their runs themselves (None)."""
    from knell.workload.params import HolderParams

    scenario = load_scenario(Path("scenarios") / "atmostonce-concurrent-receivers.toml")
    crew = scenario.instances()["crew-3"]
    params = crew.params()
    assert isinstance(params, HolderParams) and params.together == "crew.together"
    churn = load_scenario(Path("scenarios") / "atmostonce-holder-churn.toml")
    assert churn.instances()["killed-1"].params().together is None  # type: ignore[union-attr]


STREAM_HEAD = 'name = "s"\ndescription = "d"\nduration = "1s"\n'


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '[streams.ticks]\n[[process]]\nrole = "streamer"\nchannel = "ticks"\n',
            r"streams\.ticks: a ring needs a bound",
        ),
        (
            '[streams.ticks]\nmax_len = 0\n[[process]]\nrole = "streamer"\nchannel = "ticks"\n',
            r"streams\.ticks\.max_len",
        ),
        (
            '[[process]]\nrole = "streamer"\nchannel = "ticks"\n',
            r"process\[0\]\.channel: a streamer tails a stream, and 'ticks' is none "
            r"\(declare its ring as \[streams\.ticks\]\)",
        ),
        (
            '[streams.ticks]\nmax_len = 5\n[[process]]\nrole = "consumer"\nchannel = "ticks"\n',
            r"process\[0\]\.channel: 'ticks' is a stream \(streams\.ticks\), so a consumer "
            "cannot read it",
        ),
    ],
    ids=["no-bound", "zero-len", "not-a-stream", "stream-read-as-broadcast"],
)
def test_stream_scenarios_are_refused_with_the_field_named(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(ScenarioError, match=words):
        load_scenario(write(tmp_path, STREAM_HEAD + text))


def test_the_ring_reaches_the_producers_and_streamers_of_its_channel(tmp_path: Path) -> None:
    from knell.workload.params import ProducerParams, StreamerParams

    scenario = load_scenario(
        write(
            tmp_path,
            STREAM_HEAD + '[streams.ticks]\nmax_len = 5\nmax_age_s = "2s"\n'
            '[[process]]\nrole = "producer"\nchannel = "ticks"\n'
            '[[process]]\nrole = "producer"\nname = "other"\nchannel = "events"\n'
            '[[process]]\nrole = "streamer"\nchannel = "ticks"\n',
        )
    )
    assert scenario.contracts == ("stream",)
    workers = scenario.workers()
    ring = scenario.params_of(workers["producer-1"])
    assert isinstance(ring, ProducerParams)
    assert (ring.stream, ring.max_len, ring.max_age_s) == (True, 5, 2.0)
    plain = scenario.params_of(workers["other-1"])
    assert isinstance(plain, ProducerParams) and not plain.stream and plain.max_len is None
    tail = scenario.params_of(workers["streamer-1"])
    assert isinstance(tail, StreamerParams) and (tail.max_len, tail.max_age_s) == (5, 2.0)


def test_no_compose_key_is_a_store_tables_own_field() -> None:
    """A ``[store]`` table without keys beyond its own fields holds no
    compose key, so loading one never asks which keys are compose keys
    (importing the compose package: :meth:`StoreTable._compose_keys`)."""
    from knell.scenario import StoreTable
    from knell.stores.compose.options import compose_keys

    assert set(StoreTable.model_fields).isdisjoint(compose_keys())
