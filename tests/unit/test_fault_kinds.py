"""What fault kinds keep to themselves: a link fault's proof lives in its
kind (a kind registered from outside knell is proven the same way), the
on/off store faults share one switch, and no kind sees more of a scenario
than its targets."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

from knell.nemesis import NemesisContext, kinds, register_kind
from knell.nemesis.kind import Action, Band
from knell.nemesis.network import LinkFault, LinkFaultSpec
from knell.nemesis.probe import Exchange, Expectation, Held, Reset, expectation_for
from knell.nemesis.store_fault import StoreToggle
from knell.nemesis.toxiproxy import ToxicSpec
from knell.scenario import Scenario

NEMESIS = Path(__file__).resolve().parents[2] / "src" / "knell" / "nemesis"


class BlackholeSpec(LinkFaultSpec):
    fault: Literal["blackhole"]


class Blackhole(LinkFault):
    """A link fault with a toxic of its own, declared only here."""

    name = "blackhole"
    spec = BlackholeSpec
    apply_f = "blackhole"
    heal_f = "blackhole-end"
    band = Band("blackhole", "#000000")
    toxic_type = "blackhole"
    proof_order = 15  # between a partition (10) and a reset (20)

    def attributes(self, spec: LinkFaultSpec) -> dict[str, int]:
        return {}

    def expectation(
        self, attributes: Mapping[str, int], stream: str, exchange: Exchange, hold_ms: float
    ) -> Expectation | str:
        return Held(hold_ms * 2)


def test_every_built_in_link_fault_with_a_toxic_says_what_proves_it() -> None:
    link_kinds = [k for k in kinds().values() if isinstance(k, LinkFault) and k.toxic_type]
    assert len(link_kinds) == 7
    assert len({k.proof_order for k in link_kinds}) == len(link_kinds)  # a strict order
    for kind in link_kinds:
        assert type(kind).expectation is not LinkFault.expectation, kind.name


@pytest.mark.parametrize(
    ("toxic", "attributes"),
    [
        ("timeout", {}),
        ("timeout", {"timeout": 250}),
        ("reset_peer", {}),
        ("latency", {}),
        ("slow_close", {"delay": 100}),
    ],
)
def test_a_fault_that_needs_a_request_is_unproven_through_a_connect_only_probe(
    toxic: str, attributes: dict[str, int]
) -> None:
    got = expectation_for([ToxicSpec(toxic, attributes=attributes)], "connect")
    assert isinstance(got, str) and "sends nothing" in got


def test_a_registered_link_fault_is_proven_by_its_own_expectation() -> None:
    toxics = [ToxicSpec("blackhole"), ToxicSpec("reset_peer", attributes={"timeout": 5})]
    assert expectation_for(toxics, "echo") == Reset(within_ms=1005.0)  # not yet known
    register_kind(Blackhole)
    try:
        assert expectation_for(toxics, "echo", hold_ms=100.0) == Held(200.0)
        assert expectation_for([*toxics, ToxicSpec("timeout")], "echo") == Held(300.0)
    finally:
        kinds().pop("blackhole")
        register_kind(kinds().pop("kill"))  # re-registering rebuilds the scenario models


def test_no_nemesis_module_imports_the_scenario() -> None:
    offenders = []
    for path in NEMESIS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("knell.scenario")]
    assert offenders == []


class Switchable:
    """A test double of a store that can be paused and disconnected."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[str] = []
        self.fail = fail

    def _do(self, what: str) -> None:
        self.calls.append(what)
        if what == self.fail:
            raise OSError(f"{what} went wrong")

    def pause(self) -> None:
        self._do("pause")

    def resume(self) -> None:
        self._do("resume")

    def disconnect(self) -> None:
        self._do("disconnect")

    def reconnect(self) -> None:
        self._do("reconnect")

    def wait_ready(self, timeout: float) -> None:
        self._do("wait_ready")


def _context(store: Switchable, records: list[tuple[str, dict[str, Any]]]) -> NemesisContext:
    scenario = Scenario.model_validate(
        {
            "name": "s",
            "description": "d",
            "duration": 5,
            "store": "postgres",
            "process": [{"role": "producer"}, {"role": "consumer", "count": 2}],
        }
    )

    def record(f: str, target: str, **value: Any) -> None:
        records.append((f, value))

    supervisor: Any = None  # store faults never touch a process
    return NemesisContext(scenario, supervisor, record, stores={"store": store})


@pytest.mark.parametrize(
    ("fault", "calls", "heal_f"),
    [
        ("store-pause", ["pause", "resume"], "store-resume"),
        ("store-disconnect", ["disconnect", "reconnect", "wait_ready"], "store-ready"),
    ],
)
def test_an_on_off_store_fault_switches_off_and_back_once(
    fault: str, calls: list[str], heal_f: str
) -> None:
    kind = kinds()[fault]
    assert isinstance(kind, StoreToggle)
    store, records = Switchable(), []
    ctx = _context(store, records)
    action = Action(1.0, fault, "apply", "store", 0)
    assert kind.apply(action, ctx) and kind.off in ctx.expected_down
    assert kind.heal(action, ctx) and kind.off not in ctx.expected_down
    assert not kind.heal(action, ctx)  # nothing switched off: nothing to heal
    kind.heal_all(ctx)
    assert store.calls == calls
    assert [f for f, _ in records] == [fault, heal_f]
    assert kind.radius(action, ctx).processes == {"producer-1", "consumer-1", "consumer-2"}


@pytest.mark.parametrize(
    ("fault", "switch_off", "switch_on"),
    [("store-pause", "pause", "resume"), ("store-disconnect", "disconnect", "reconnect")],
)
def test_a_switch_that_fails_is_a_failed_fault_and_the_final_phase_retries(
    fault: str, switch_off: str, switch_on: str
) -> None:
    kind = kinds()[fault]
    assert isinstance(kind, StoreToggle)
    off = Switchable(fail=switch_off)
    records: list[tuple[str, dict[str, Any]]] = []
    assert not kind.apply(Action(1.0, fault, "apply", "store", 0), _context(off, records))
    assert records[0][0] == "fault-failed" and kind.switching_off in records[0][1]["error"]

    stuck = Switchable(fail=switch_on)
    records = []
    ctx = _context(stuck, records)
    assert kind.apply(Action(1.0, fault, "apply", "store", 0), ctx)
    assert not kind.heal(Action(2.0, fault, "heal", "store", 0), ctx)
    assert records[-1][0] == "fault-failed" and kind.switching_on in records[-1][1]["error"]
    assert kind.off in ctx.expected_down  # still off: the final phase tries again
    stuck.fail = ""
    kind.heal_all(ctx)
    assert kind.off not in ctx.expected_down
