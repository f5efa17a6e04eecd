"""Merging shard folders, on handcrafted folders: one plan only, missing
runs named, failures deduplicated by (check, kind, witness signature), and
the page, JSON and JUnit written from the merged result."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from knell.campaign.dashboard import write_dashboard
from knell.campaign.junit import write_campaign_junit
from knell.campaign.merge import MergeError, merge
from knell.campaign.plan import Campaign, expand, plan_hash
from knell.campaign.shard import Shard, select
from knell.campaign.summary import Finding, RunSummary, signature

SPEC = Campaign(
    name="gate",
    seed=5,
    seeds=2,
    scenarios=["quickstart", "kill-consumers"],
    buses=["reference", "m:bad"],
    duration="2s",
)
SIG_A = signature("no-loss", "lost", [{"type": "invoke", "f": "post"}, {"type": "ok", "f": "read"}])
SIG_B = signature("no-loss", "lost", [{"type": "invoke", "f": "post"}])


def _shard(
    root: Path,
    shard: Shard,
    spec: Campaign = SPEC,
    verdicts: dict[int, tuple[str, list[Finding]]] | None = None,
    drop: frozenset[int] = frozenset(),
) -> Path:
    """A shard folder as `knell campaign run` writes it, with the given
    verdicts (k -> (verdict, findings); any other run valid)."""
    folder = root / f"shard-{shard.index}-of-{shard.count}"
    folder.mkdir(parents=True)
    plan = plan_hash(spec)
    runs = select(expand(spec), shard)
    header: dict[str, Any] = {
        "campaign": spec.name,
        "plan": plan,
        "shard": str(shard),
        "runs": [r.k for r in runs],
        "complete": True,
        "definition": spec.model_dump(),
    }
    (folder / "shard.json").write_text(json.dumps(header), encoding="utf-8")
    lines = []
    for r in runs:
        if r.k in drop:
            continue
        verdict, findings = (verdicts or {}).get(r.k, ("valid", []))
        run_dir = None
        if verdict != "valid":
            run_dir = f"runs/k{r.k:06d}/{r.scenario}/stamp"
            (folder / run_dir).mkdir(parents=True)
            (folder / run_dir / "index.html").write_text("<p>run</p>", encoding="utf-8")
        line = RunSummary(
            plan, r.k, r.seed, r.scenario, r.store, r.bus, "0.1.0", verdict,
            findings=findings, duration=6.0, checker_seconds=0.1, run_dir=run_dir,
            reason="stalled" if verdict == "unknown" else None,
        )  # fmt: skip
        lines.append(json.dumps(line.to_json()))
    (folder / "summary.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_shards_of_one_plan_merge_to_every_run(tmp_path: Path) -> None:
    folders = [_shard(tmp_path, Shard(i, 3)) for i in range(3)]
    result = merge(folders, tmp_path / "merged")
    assert [s.k for s in result.summaries] == list(range(8))
    assert result.missing == [] and result.failures == []
    assert (result.word, result.exit_code) == ("PASS", 0)


def test_a_shard_of_another_plan_is_refused_by_name(tmp_path: Path) -> None:
    ours = _shard(tmp_path / "a", Shard(0, 2))
    other = SPEC.model_copy(update={"seed": 6})
    theirs = _shard(tmp_path / "b", Shard(1, 2), spec=other)
    with pytest.raises(MergeError) as caught:
        merge([ours, theirs])
    message = str(caught.value)
    assert message.startswith(f"refused: {theirs} (plan {plan_hash(other)}, gate)")
    assert plan_hash(SPEC) in message
    assert MergeError.exit_code == 3


def test_a_header_whose_hash_is_not_its_definition_is_refused(tmp_path: Path) -> None:
    folder = _shard(tmp_path, Shard(0, 1))
    header = json.loads((folder / "shard.json").read_text())
    header["definition"]["seeds"] = 3  # edited by hand: its runs are not this plan's
    (folder / "shard.json").write_text(json.dumps(header))
    with pytest.raises(MergeError, match="does not match its own definition"):
        merge([folder])


def test_missing_runs_are_named_and_the_campaign_is_undecided(tmp_path: Path) -> None:
    folders = [_shard(tmp_path, Shard(0, 2)), _shard(tmp_path, Shard(1, 2), drop=frozenset({3}))]
    # shard 1/2 not given: its runs (the odd ones) are missing
    result = merge(folders[:1], tmp_path / "merged")
    assert [r.k for r in result.missing] == [1, 3, 5, 7]
    assert (result.word, result.exit_code) == ("UNKNOWN", 2)
    result = merge(folders, tmp_path / "merged")
    assert [r.k for r in result.missing] == [3]
    write_campaign_junit(tmp_path / "junit.xml", result)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.get("errors") == "1" and root.get("tests") == "8"


def test_failures_are_deduplicated_by_check_kind_and_signature(tmp_path: Path) -> None:
    a = Finding("no-loss", "lost", SIG_A)
    b = Finding("no-loss", "lost", SIG_B)  # same check and kind, another witness shape
    verdicts = {2: ("invalid", [a]), 3: ("invalid", [a]), 6: ("invalid", [a, b])}
    folders = [_shard(tmp_path, Shard(i, 2), verdicts=verdicts) for i in range(2)]
    result = merge(folders, tmp_path / "merged")
    groups = [(g.check, g.kind, g.signature, [s.k for s in g.runs]) for g in result.failures]
    assert groups == [("no-loss", "lost", SIG_A, [2, 3, 6]), ("no-loss", "lost", SIG_B, [6])]
    assert result.failures[0].first.k == 2
    assert (result.word, result.exit_code) == ("FAIL", 1)


def test_a_duplicate_report_of_one_run_counts_once(tmp_path: Path) -> None:
    first = _shard(tmp_path / "a", Shard(0, 1))
    again = _shard(tmp_path / "b", Shard(0, 1))  # a retried CI job
    result = merge([first, again])
    assert len(result.summaries) == 8 and result.exit_code == 0


def test_an_expected_finding_passes_and_a_missed_one_fails(tmp_path: Path) -> None:
    folder = _shard(tmp_path, Shard(0, 1), verdicts={0: ("invalid", [])})
    lines = (folder / "summary.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    rows[0]["expected"] = True  # invalid as the scenario expects: a pass
    rows[1]["expected"] = False  # valid where a finding was expected: a failure
    (folder / "summary.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = merge([folder])
    assert [s.k for s in result.failed] == [1]
    assert [(g.check, [s.k for s in g.runs]) for g in result.failures] == [("expect", [1])]


def test_an_unknown_run_is_undecided_not_failed(tmp_path: Path) -> None:
    folder = _shard(tmp_path, Shard(0, 1), verdicts={4: ("unknown", [])})
    result = merge([folder])
    assert result.failed == [] and [s.k for s in result.undecided] == [4]
    assert result.exit_code == 2


def test_a_torn_last_line_is_a_missing_run_a_torn_middle_line_is_refused(tmp_path: Path) -> None:
    folder = _shard(tmp_path, Shard(0, 1))
    path = folder / "summary.jsonl"
    text = path.read_text()
    path.write_text(text[:-20])  # killed mid-write
    assert [r.k for r in merge([folder]).missing] == [7]
    lines = text.splitlines()
    lines[2] = lines[2][:10]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MergeError, match=r"summary\.jsonl:3: not a run summary"):
        merge([folder])


def test_a_line_with_a_field_of_the_wrong_type_is_refused_by_name(tmp_path: Path) -> None:
    # A line from another tool or a hand edit: a string run number was an
    # exit 4 (a comparison of str and int) before the types were checked.
    folder = _shard(tmp_path, Shard(0, 1))
    path = folder / "summary.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "k": "2"})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        MergeError, match=r"summary\.jsonl:3: not a run summary: k: expected an integer"
    ):
        merge([folder])


def test_a_folder_that_is_no_shard_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MergeError, match="not a shard folder"):
        merge([tmp_path])


def test_the_page_links_each_failure_to_its_run(tmp_path: Path) -> None:
    a = Finding("no-loss", "lost", SIG_A)
    folders = [_shard(tmp_path, Shard(i, 2), verdicts={2: ("invalid", [a])}) for i in range(2)]
    out = tmp_path / "merged"
    out.mkdir()
    result = merge(folders, out)
    assert write_dashboard(result, out) == []
    page = (out / "campaign.html").read_text(encoding="utf-8")
    link = "../shard-0-of-2/runs/k000002/quickstart/stamp/index.html"
    assert f'href="{link}"' in page and (out / link).is_file()
    assert "FAIL" in page and SIG_A in page
    # quickstart x sqlite: reference 2 runs clean; m:bad 2 runs, 1 failed
    assert "2 / 0 / 0" in page and "2 / 1 / 0" in page
    body = result.to_json()
    assert body["failures"][0]["first_seed"] == result.failures[0].first.seed
    assert json.loads(json.dumps(body))["verdict"] == "FAIL"


def test_each_failure_shows_its_median_time_to_detect(tmp_path: Path) -> None:
    a = Finding("no-loss", "lost", SIG_A)
    verdicts = {2: ("invalid", [a]), 3: ("invalid", [a]), 6: ("invalid", [a])}
    folder = _shard(tmp_path, Shard(0, 1), verdicts=verdicts)
    out = tmp_path / "merged"
    out.mkdir()
    result = merge([folder], out)
    for s, seconds in zip(result.failed, (1.0, 4.0, None), strict=True):
        s.detected = seconds  # the third run's summary predates detection times
    (group,) = result.failures
    assert group.detected == 2.5 and result.to_json()["failures"][0]["detected_median_s"] == 2.5
    assert write_dashboard(result, out) == []
    assert '<td class="num">2.5 s</td>' in (out / "campaign.html").read_text(encoding="utf-8")


def test_a_summary_line_names_the_bus_release() -> None:
    """Two campaigns of two releases of a bus say which release each judged:
    the driver module's installed distribution and version."""
    from knell.campaign.summary import RunSummary, bus_version

    assert bus_version("knell.buses.mutants:stale_ack_regresses").startswith("knell ")
    assert bus_version("pytest:main").startswith("pytest ")
    assert bus_version("no_such_package.driver:open") == "unknown"
    line = RunSummary("p", 0, 1, "quickstart", "sqlite", "pytest:main", "0", "valid")
    line.bus_version = "pytest 8.0"
    assert RunSummary.from_json(line.to_json()).bus_version == "pytest 8.0"
    with pytest.raises(ValueError, match="bus_version"):
        RunSummary.from_json({**line.to_json(), "bus_version": 3})
