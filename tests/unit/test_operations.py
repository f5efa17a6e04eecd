"""The table of contract operations agrees with the contract's Protocols,
and the docs generated from it are current."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from knell.buses.contract import (
    BROADCAST,
    CONTRACT_METHODS,
    CONTRACTS,
    QUEUE,
    ROLES,
    Bus,
    Claim,
    QueueBus,
    RoleBus,
)
from knell.buses.operations import (
    OPERATIONS,
    REQUIRED,
    DecodeError,
    operations_of,
    render_operations_markdown,
    with_operations_markdown,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"
PROTOCOLS = {BROADCAST: Bus, QUEUE: QueueBus, ROLES: RoleBus}


@pytest.mark.parametrize("contract", CONTRACTS)
def test_every_protocol_method_is_one_row_with_the_same_parameters(contract: str) -> None:
    rows = operations_of(contract)
    assert {op.name for op in rows} | {"close"} == set(CONTRACT_METHODS[contract])
    for op in rows:
        method = getattr(PROTOCOLS[contract], op.name)
        params = list(inspect.signature(method).parameters.values())[1:]
        assert [p.name for p in params] == [a.name for a in op.args], op.name
        for p, a in zip(params, op.args, strict=True):
            expected = REQUIRED if p.default is inspect.Parameter.empty else p.default
            assert a.default == expected or (a.required and expected is REQUIRED), (op.name, a)


def test_a_result_round_trips_and_a_wrong_one_is_named() -> None:
    op = OPERATIONS["renew"]
    claim = Claim("q/1", "q", 1, "b", "p", "c", 1, 12.5)
    assert op.decode_result(op.encode_result(claim)) == claim
    with pytest.raises(DecodeError, match=r"result\.claim\.seq must be an integer, got '1'"):
        op.decode_result({"claim": {**op.encode_result(claim)["claim"], "seq": "1"}})


def test_every_route_path_names_arguments_of_its_operation() -> None:
    for op in OPERATIONS.values():
        assert set(op.http.path_args()) <= {a.name for a in op.args}, op.name


def test_the_contracts_page_holds_the_current_tables() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert render_operations_markdown() in text
    assert with_operations_markdown(text) == text, (
        "docs/contracts.md is stale: regenerate it with "
        "`python -m knell.buses.operations docs/contracts.md`"
    )


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no '<!-- operations"):
        with_operations_markdown("# no markers here\n")


def test_only_the_long_poll_may_hold_its_answer_back() -> None:
    assert OPERATIONS["wait"].blocking_seconds(("h", 2.5)) == 2.5
    assert OPERATIONS["wait"].blocking_seconds(("h", -1)) == 0.0
    assert [op.name for op in OPERATIONS.values() if op.blocks_for] == ["wait"]
    assert OPERATIONS["post"].blocking_seconds(("c", "b", "s", None)) == 0.0
