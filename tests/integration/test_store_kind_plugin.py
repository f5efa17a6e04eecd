"""A store kind registered from outside knell runs a shipped scenario end to
end: the runner registers it by calling register_store_kind, the worker
processes find it through the ``knell.stores`` entry-point group, as an
installed plugin package's would be found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from knell.runner import run_scenario
from knell.scenario import load_scenario
from knell.stores import registry

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _installed(site: Path) -> None:
    """What ``pip install`` of a package declaring the toy store writes: a
    dist-info whose entry point names the kind (here, on PYTHONPATH)."""
    dist = site / "toy_store-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-store\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[knell.stores]\ntoy = toy_store:ToyKind\n")


def test_a_registered_store_kind_runs_a_shipped_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    _installed(site)
    monkeypatch.setenv("PYTHONPATH", f"{HERE}{':' + str(site)}")
    monkeypatch.syspath_prepend(str(HERE))
    import toy_store

    registry.register_store_kind(toy_store.ToyKind)
    try:
        scenario = load_scenario(REPO / "scenarios" / "quickstart.toml")
        on_toy = scenario.with_overrides(store={"kind": "toy", "folder": "toys"}, duration=3.0)
        assert on_toy.store.kind == "toy"
        with pytest.raises(ValidationError, match="'fsync' does not apply to a toy store"):
            scenario.with_overrides(store={"kind": "toy", "fsync": False})
        outcome = run_scenario(on_toy, reports=tmp_path / "reports")
    finally:
        registry.STORE_KINDS.pop("toy")
    assert outcome.verdict.valid is True, outcome.verdict.to_json()
    toy_file = outcome.run_dir / "store" / "toys" / "bus.db"
    assert toy_file.is_file()
    ran = json.loads((outcome.run_dir / "scenario.json").read_text(encoding="utf-8"))
    assert ran["store"]["kind"] == "toy" and ran["store"]["folder"] == "toys"
    with pytest.raises(ValidationError, match="toy"):
        scenario.with_overrides(store="toy")  # unregistered again: the loader forgot it
