"""Balancing shards by expected duration: every machine computes the same
split, every run is in exactly one shard, and on a skewed plan the longest
shard stays near the mean where striding does not."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from knell.campaign.balance import (
    DEFAULT_OVERHEAD,
    Overheads,
    assign,
    expected_ms,
    parse_overheads,
    split,
)
from knell.campaign.plan import Campaign, PlannedRun, expand
from knell.cli import cli, main

SKEWED = Campaign(
    name="skewed",
    seed=3,
    seeds=6,
    # One long scenario among short ones: with 4 shards and 6 seeds striding
    # hands the long runs out unevenly (k = 0..5 -> shards 0,1,2,3,0,1).
    scenarios=["long", "short-a", "short-b", "short-c", "short-d"],
)
DURATIONS = {"long": 60.0, "short-a": 2.0, "short-b": 2.0, "short-c": 3.0, "short-d": 5.0}
OVERHEAD = Overheads(5.0)


def _loads(parts: list[list[int]], cost: dict[int, int]) -> list[int]:
    return [sum(cost[k] for k in ks) for ks in parts]


def test_the_split_covers_every_run_once_and_is_the_same_every_time() -> None:
    runs = expand(SKEWED)
    cost = expected_ms(runs, DURATIONS, OVERHEAD)
    first = split(runs, 4, "duration", cost)
    assert sorted(k for ks in first for k in ks) == [r.k for r in runs]
    assert all(ks == sorted(ks) for ks in first)
    # Another machine: the runs and costs arrive in another order, the
    # assignment is the same (ties broken by k and shard index, not order).
    shuffled = runs[:]
    random.Random(1).shuffle(shuffled)
    again = split(shuffled, 4, "duration", dict(reversed(list(cost.items()))))
    assert again == first
    # Pinned: a change to the rule would split old campaigns' shards anew.
    assert first == [
        [0, 4, 10, 14],
        [1, 5, 11, 15],
        [2, 6, 8, 12, 16, 18, 20, 22, 24, 26, 28],
        [3, 7, 9, 13, 17, 19, 21, 23, 25, 27, 29],
    ]


def test_on_a_skewed_plan_the_longest_shard_is_near_the_mean() -> None:
    runs = expand(SKEWED)
    cost = expected_ms(runs, DURATIONS, OVERHEAD)
    for count in (2, 3, 4, 5, 8):
        balanced = _loads(split(runs, count, "duration", cost), cost)
        strided = _loads(split(runs, count, "stride", cost), cost)
        mean = sum(cost.values()) / count
        # Greedy list scheduling's bound: the longest shard exceeds the mean
        # by less than one run, and here by much less than the longest run.
        assert max(balanced) <= mean + max(cost.values()), (count, balanced)
        assert max(balanced) <= max(strided), (count, balanced, strided)
    balanced4 = _loads(split(runs, 4, "duration", cost), cost)
    strided4 = _loads(split(runs, 4, "stride", cost), cost)
    mean4 = sum(cost.values()) / 4
    # Striding: 179 s on the two shards that drew two long runs each, 112 s
    # on the others; balanced: 144-147 s each.
    assert max(balanced4) <= 1.02 * mean4 and 1.2 * mean4 < max(strided4)


def test_equal_runs_are_dealt_out_as_striding_does() -> None:
    runs = expand(SKEWED)
    cost = {r.k: 7000 for r in runs}
    for count in (1, 2, 3, 7):
        assert split(runs, count, "duration", cost) == split(runs, count, "stride", cost)


def test_more_shards_than_runs_leaves_the_extra_shards_empty() -> None:
    runs = [PlannedRun(k, "s", "sqlite", "reference", k) for k in range(3)]
    assert assign(runs, {0: 1, 1: 5, 2: 3}, 5) == [[1], [2], [0], [], []]


def test_expected_time_is_duration_plus_overhead_in_whole_milliseconds() -> None:
    runs = [PlannedRun(0, "a", "sqlite", "reference", 1), PlannedRun(1, "b", "sqlite", "x:y", 2)]
    table = parse_overheads(["b=0.25", "3"], ["a", "b"])
    assert table == Overheads(3.0, (("b", 0.25),))
    assert expected_ms(runs, {"a": 2.0, "b": 1 / 3}, table) == {0: 5000, 1: 583}
    assert parse_overheads([], ["a"]).default == DEFAULT_OVERHEAD


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["soon"], "expected SECONDS or SCENARIO=SECONDS, got 'soon'"),
        (["-1"], "seconds must be a finite number >= 0, got '-1'"),
        (["nan"], "seconds must be a finite number >= 0, got 'nan'"),
        (["c=2"], "'c' is not a scenario of this campaign (in 'c=2')"),
    ],
)
def test_a_bad_overhead_names_its_value(values: list[str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_overheads(values, ["a", "b"])
    assert str(caught.value) == message


def test_an_unknown_balance_or_no_shards_is_refused() -> None:
    runs = expand(SKEWED)
    with pytest.raises(ValueError, match="balance must be one of duration, stride"):
        split(runs, 2, "random", {})
    with pytest.raises(ValueError, match="count must be >= 1"):
        assign(runs, {}, 0)


PLAN = """\
[campaign]
name = "cli"
seed = 2
seeds = 3
scenarios = ["quickstart", "kill-consumers"]
duration = "4s"
"""


def test_plan_prints_each_shards_expected_seconds_and_the_ci_matrix(tmp_path: Path) -> None:
    spec = tmp_path / "c.toml"
    spec.write_text(PLAN, encoding="utf-8")
    runner = CliRunner()
    shown = runner.invoke(cli, ["campaign", "plan", str(spec), "--shards", "4"])
    assert shown.exit_code == 0, shown.output
    # Six runs of 4 s + 3 s overhead over four shards: 2, 2, 1, 1 runs.
    assert "shard 0/4: 2 run(s), expected 14.0 s one at a time (duration)" in shown.output
    assert "shard 3/4: 1 run(s), expected 7.0 s one at a time (duration)" in shown.output
    matrix = runner.invoke(cli, ["campaign", "plan", str(spec), "--shards", "4", "--matrix"])
    assert matrix.exit_code == 0, matrix.output
    assert matrix.output.count("\n") == 1  # one line, for $GITHUB_OUTPUT
    rows = json.loads(matrix.output)["include"]
    assert [(r["shard"], r["of"], r["runs"]) for r in rows] == [
        (0, 4, 2),
        (1, 4, 2),
        (2, 4, 1),
        (3, 4, 1),
    ]
    body = json.loads(
        runner.invoke(
            cli, ["campaign", "plan", str(spec), "--shards", "2", "--json", "--overhead", "1"]
        ).output
    )
    assert [s["k"] for s in body["shards"]] == [[0, 2, 4], [1, 3, 5]]
    assert body["runs"][0]["expected_seconds"] == 5.0 and body["balance"] == "duration"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["plan", "--overhead", "quickstrat=2"],
            "--overhead: 'quickstrat' is not a scenario of this campaign (in 'quickstrat=2')",
        ),
        (["run", "--overhead", "-3"], "--overhead: seconds must be a finite number >= 0"),
        (["run", "--balance", "random"], "'random' is not one of 'duration', 'stride'"),
    ],
)
def test_a_bad_overhead_or_balance_is_exit_3_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    spec = tmp_path / "c.toml"
    spec.write_text(PLAN, encoding="utf-8")
    command, *options = args
    with pytest.raises(SystemExit) as done:
        main(["campaign", command, str(spec), *options])
    err = capsys.readouterr().err
    assert done.value.code == 3, err
    assert message in err and "Traceback" not in err
