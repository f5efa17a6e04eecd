"""Fuzzing the files a regression store and a campaign comparison read.

A regressions folder lives in git and is edited by hand and by merges; a
merged ``campaign.json`` comes back from a CI artifact store. Either can be
damaged in any way, and knell must answer with one ``knell: error:`` line
naming the file (exit 3), never a traceback or exit 4. Two targets, both
in-process through :func:`knell.cli.main`:

- ``case.json``, ``scenario.json`` or ``schedule.json`` of a real case,
  mutated (a key deleted, a value replaced by any JSON, an unknown key, the
  file cut or junk): ``knell campaign regressions run`` with a bus that
  cannot be imported exits 3 naming a file of the case or the bus, before
  any replay (so an accepted case never starts a run here);
- a merged ``campaign.json``, mutated the same way: ``knell campaign
  compare`` gives a comparison (0 or 1) or names the file, or says it
  shares no cell with the other (3).

Cases per target: ``KNELL_FUZZ_EXAMPLES`` (short by default).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from knell.campaign.regressions import add_cases, failed_runs
from knell.campaign.summary import Finding
from knell.cli import main
from tests.unit.test_campaign_regressions import _shard

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("KNELL_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LOST = Finding("no-loss", "lost", "aaaaaaaaaaaa")

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["[/x]", "\x1b[31m", "m:bad", "reference", "invalid", "0" * 12]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _damage(draw: Any, data: Any) -> str:
    """``data`` (a JSON object) damaged one way, as text."""
    how = draw(st.sampled_from(["delete", "replace", "add", "cut", "junk", "nest"]))
    event(f"damage: {how}")
    body = dict(data)
    if how == "delete" and body:
        body.pop(draw(st.sampled_from(sorted(body))))
    elif how == "replace" and body:
        body[draw(st.sampled_from(sorted(body)))] = draw(_json)
    elif how == "add":
        body[draw(st.text(min_size=1, max_size=8))] = draw(_json)
    elif how == "nest":
        return json.dumps(draw(st.lists(_json, max_size=2)))
    text = json.dumps(body)
    if how == "cut":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if how == "junk":
        return draw(st.text(max_size=40))
    return text


def _knell(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


@pytest.fixture(scope="module")
def case_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base")
    shard = _shard(root, {2: ("invalid", [LOST])})
    add_cases(failed_runs(shard), root / "store")
    (folder,) = (root / "store").iterdir()
    return folder


@FUZZ
@given(file=st.sampled_from(["case.json", "scenario.json", "schedule.json"]), data=st.data())
def test_a_damaged_case_is_named_before_any_replay(
    file: str,
    data: Any,
    case_folder: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path_factory.mktemp("store")
    folder = store / case_folder.name
    shutil.copytree(case_folder, folder)
    original = json.loads((folder / file).read_text(encoding="utf-8"))
    (folder / file).write_text(data.draw(_damage(original)), encoding="utf-8")
    out = store / "replays"
    code, output = _knell(
        ["campaign", "regressions", "run", str(store), "--bus", "nosuch_bus:x", "--out", str(out)],
        capsys,
    )
    assert "Traceback" not in output and code == 3, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("knell: error: "), output
    named = f"{folder}/" in output or "--bus: bus driver 'nosuch_bus:x'" in output
    assert named, output
    event("refused: the case" if f"{folder}/" in output else "accepted: the bus refused")
    assert not out.exists()  # nothing ran


@FUZZ
@given(data=st.data())
def test_a_damaged_merged_result_is_compared_or_named(
    data: Any,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path_factory.mktemp("results")
    runs = [
        {"plan": "p", "k": k, "seed": k, "scenario": "quickstart", "store": "sqlite"}
        | {"bus": "reference", "knell": "0", "verdict": v, "findings": f, "detected": d}
        for k, (v, f, d) in enumerate(
            [("valid", [], None), ("invalid", [LOST.__dict__], 1.5), ("unknown", [], None)]
        )
    ]
    good = {"campaign": "gate", "plan": "p", "runs": runs}
    if data.draw(st.booleans()):  # one run's summary damaged inside a sound file
        damaged = data.draw(_damage(runs[0]))
        try:
            first = json.loads(damaged)
        except ValueError:
            first = damaged
        text = json.dumps({**good, "runs": [first, *runs[1:]]})
    else:
        text = data.draw(_damage(good))
    (root / "campaign.json").write_text(text, encoding="utf-8")
    (root / "ok").mkdir()
    (root / "ok" / "campaign.json").write_text(json.dumps(good), encoding="utf-8")
    code, output = _knell(["campaign", "compare", str(root / "ok"), str(root)], capsys)
    event(f"exit {code}")
    assert "Traceback" not in output and code in (0, 1, 3), output
    if code == 3:
        assert output.startswith("knell: error: ") and len(output.splitlines()) == 1, output
        # The file, or a sound file with no run in A's cells (an empty run list).
        assert "campaign.json" in output or "in common: nothing to compare" in output, output
