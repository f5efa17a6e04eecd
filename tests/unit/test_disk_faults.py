"""The ``fsync-error``, ``disk-full`` and ``slow-disk`` kinds: their
tables, refused on a plain disk saying how, and offered only where the
store's data is on the faulty disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from knell.nemesis.registry import kinds
from knell.scenario import Scenario, StoreTable

KINDS = ["fsync-error", "disk-full", "slow-disk"]


def _scenario(fault: dict[str, object], store: dict[str, object] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "x",
            "description": "x",
            "duration": "4s",
            "store": store or {"kind": "sqlite", "disk": "faulty"},
            "process": [{"role": "producer"}],
            "nemesis": [{"every": "1s", **fault}],
        }
    )


def test_fsync_error_reads_path_count_and_drop_dirty() -> None:
    kind = kinds()["fsync-error"]
    (spec,) = _scenario(
        {"fault": "fsync-error", "path": "bus.db-wal", "count": 3, "duration": "400ms"}
    ).nemesis
    assert kind.hold(spec) == pytest.approx(0.4)
    assert kind.params(spec) == {"path": "bus.db-wal", "count": 3, "drop_dirty": True}
    (keep,) = _scenario({"fault": "fsync-error", "drop_dirty": False}).nemesis
    assert kind.params(keep) == {"path": None, "count": 1, "drop_dirty": False}


def test_slow_disk_reads_its_delay() -> None:
    (spec,) = _scenario({"fault": "slow-disk", "delay": "20ms", "duration": "1s"}).nemesis
    assert kinds()["slow-disk"].params(spec) == {"delay": pytest.approx(0.02)}
    assert kinds()["slow-disk"].hold(spec) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("fault", "field", "value"),
    [("fsync-error", "count", 0), ("slow-disk", "delay", "0s"), ("disk-full", "duration", "0s")],
)
def test_a_bad_option_is_refused_naming_it(fault: str, field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        _scenario({"fault": fault, field: value})


@pytest.mark.parametrize("fault", KINDS)
def test_only_a_store_on_the_faulty_disk_can_suffer_it(fault: str) -> None:
    kind = kinds()[fault]
    for store in ("sqlite", "postgres", "redis"):
        assert kind.applicable(_scenario({"fault": fault}, {"kind": store, "disk": "faulty"}))
        assert not kind.applicable(_scenario({"fault": fault}, {"kind": store}))
    existing = StoreTable.model_validate(
        {"kind": "postgres", "disk": "faulty", "url": "postgresql://127.0.0.1/x"}
    )
    from knell.stores import capabilities

    assert kind.needs not in capabilities(existing)  # type: ignore[attr-defined]


@pytest.mark.parametrize("fault", KINDS)
def test_it_is_refused_on_a_plain_disk_saying_how(tmp_path: Path, fault: str) -> None:
    from knell.runner import RunError, _check_store_faults
    from knell.stores.sqlite import SqliteStore

    scenario = _scenario({"fault": fault}, {"kind": "sqlite"})
    with pytest.raises(RunError, match=rf'{fault} needs .*\[store\] disk = "faulty"'):
        _check_store_faults(scenario, SqliteStore(tmp_path))
    _check_store_faults(scenario, SqliteStore(tmp_path, disk="faulty"))  # nothing mounted yet


@pytest.mark.parametrize("fault", KINDS)
def test_its_events_are_ones_the_history_accepts(fault: str) -> None:
    kind = kinds()[fault]
    assert kind.apply_f != kind.heal_f
    assert {kind.apply_f, kind.heal_f}.isdisjoint(
        {k.apply_f for n, k in kinds().items() if n != fault}
        | {k.heal_f for n, k in kinds().items() if n != fault}
    )


class _DeafControl:
    """A control channel whose switches reach nothing: the plain folder
    under it never fails, so every probe must catch it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def fsync_error(self, *args: object, **kw: object) -> dict[str, object]:
        self.calls.append("fsync-error")
        return {}

    def disk_full(self) -> dict[str, object]:
        self.calls.append("disk-full")
        return {}

    def slow_disk(self, delay: float) -> dict[str, object]:
        self.calls.append("slow-disk")
        return {}

    def heal(self) -> dict[str, object]:
        self.calls.append("heal")
        return {}


@pytest.mark.parametrize(
    ("fault", "options"),
    [("fsync-error", {}), ("disk-full", {}), ("slow-disk", {"delay": "2s"})],
)
def test_a_fault_its_probe_does_not_see_is_failed_and_switched_back_off(
    tmp_path: Path, fault: str, options: dict[str, object]
) -> None:
    from types import SimpleNamespace

    from knell.nemesis.kind import Action, NemesisContext

    kind = kinds()[fault]
    (spec,) = _scenario({"fault": fault, **options}).nemesis
    control = _DeafControl()
    disk = SimpleNamespace(root=tmp_path, control=lambda: control)
    events: list[tuple[str, dict[str, object]]] = []
    ctx = NemesisContext(
        scenario=_scenario({"fault": fault}),
        supervisor=None,  # type: ignore[arg-type]
        record=lambda f, target, action=None, **value: events.append((f, value)),
        stores={"store": SimpleNamespace(disk=disk)},  # type: ignore[dict-item]
    )
    action = Action(1.0, fault, "apply", "store", 0, kind.params(spec))
    assert kind.apply(action, ctx) is False
    ((f, value),) = events
    assert f == "fault-failed" and "probe" in str(value["error"]).lower()
    assert control.calls == [*control.calls[:-1], "heal"] and len(control.calls) >= 2
    assert not ctx.expected_down
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
