"""The table of contract operations agrees with the contract's Protocols,
and the docs generated from it are current."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from knell.buses.contract import (
    BROADCAST,
    CONTRACT_METHODS,
    CONTRACTS,
    EXPIRY,
    FEATURES,
    QUEUE,
    ROLES,
    STREAM,
    Bus,
    Claim,
    QueueBus,
    RoleBus,
    StreamBus,
    features_of,
)
from knell.buses.operations import (
    OPERATIONS,
    REQUIRED,
    DecodeError,
    operations_of,
    render_operations_markdown,
    render_routes_markdown,
    with_generated_sections,
    with_operations_markdown,
)
from knell.buses.operations import main as operations_main
from knell.buses.sqlite import SqliteBus

DOCS = Path(__file__).resolve().parents[2] / "docs"
PROTOCOLS = {BROADCAST: Bus, QUEUE: QueueBus, ROLES: RoleBus, STREAM: StreamBus}


@pytest.mark.parametrize("contract", CONTRACTS)
def test_every_protocol_method_is_one_row_with_the_same_parameters(contract: str) -> None:
    rows = operations_of(contract)
    assert {op.name for op in rows} | {"close"} == set(CONTRACT_METHODS[contract])
    for op in rows:
        method = getattr(PROTOCOLS[contract], op.name)
        params = list(inspect.signature(method).parameters.values())[1:]
        own = [a for a in op.args if a.feature is None]
        assert [p.name for p in params] == [a.name for a in own], op.name
        for p, a in zip(params, own, strict=True):
            expected = REQUIRED if p.default is inspect.Parameter.empty else p.default
            assert a.default == expected or (a.required and expected is REQUIRED), (op.name, a)


def test_a_feature_argument_is_the_reference_bus_keyword_with_its_default() -> None:
    """A feature's arguments (expiry) widen the Protocol's methods: they come
    after the contract's own, and the reference bus that declares the feature
    takes each under the same name with the same default."""
    seen = set()
    for op in OPERATIONS.values():
        names = [a.feature is not None for a in op.args]
        assert names == sorted(names), f"{op.name}: a feature argument before a contract one"
        for a in op.args:
            if a.feature is None:
                continue
            assert a.feature in FEATURES and a.feature in features_of(SqliteBus), a
            p = inspect.signature(getattr(SqliteBus, op.name)).parameters[a.name]
            assert p.default == a.default and type(p.default) is type(a.default), a
            seen.add((op.name, a.name))
    assert seen == {
        ("post", "expires_at"),
        ("fetch", "include_expired"),
        ("tail", "include_expired"),
    }


def test_a_feature_argument_at_its_default_is_left_off_the_wire() -> None:
    post, fetch = OPERATIONS["post"], OPERATIONS["fetch"]
    assert post.encode_args(("c", "b", "s", None, None)) == {
        "channel": "c",
        "body": "b",
        "sender": "s",
        "idempotency_key": None,
    }
    assert post.encode_args(("c", "b", "s", None, 12.5))["expires_at"] == 12.5
    assert "include_expired" not in fetch.encode_args(("h", "c", None, 10, False))
    assert fetch.encode_args(("h", "c", None, 10, True))["include_expired"] is True
    assert fetch.features_used({"include_expired": False}) == frozenset()
    assert fetch.features_used({"include_expired": True}) == {EXPIRY}
    assert post.features_used({"expires_at": 0.0}) == {EXPIRY}  # 0.0 is a time, not "none"
    values = {"channel": "c", "body": "b", "sender": "s", "idempotency_key": "k"}
    assert post.bus_call({**values, "expires_at": None}) == (("c", "b", "s", "k"), {})
    assert post.bus_call({**values, "expires_at": 3.0}) == (
        ("c", "b", "s", "k"),
        {"expires_at": 3.0},
    )


def test_a_feature_argument_of_the_wrong_type_is_named() -> None:
    post, fetch = OPERATIONS["post"], OPERATIONS["fetch"]
    expires = next(a for a in post.args if a.name == "expires_at")
    flag = next(a for a in fetch.args if a.name == "include_expired")
    assert expires.type.decode(None, "args.expires_at") is None
    assert expires.type.decode(7, "args.expires_at") == 7.0
    for bad in (True, "7", float("inf")):
        with pytest.raises(DecodeError, match=r"args\.expires_at must be a number"):
            expires.type.decode(bad, "args.expires_at")
    with pytest.raises(DecodeError, match=r"args\.include_expired must be true or false, got 1"):
        flag.type.decode(1, "args.include_expired")


def test_a_result_round_trips_and_a_wrong_one_is_named() -> None:
    op = OPERATIONS["renew"]
    claim = Claim("q/1", "q", 1, "b", "p", "c", 1, 12.5)
    assert op.decode_result(op.encode_result(claim)) == claim
    with pytest.raises(DecodeError, match=r"result\.claim\.seq must be an integer, got '1'"):
        op.decode_result({"claim": {**op.encode_result(claim)["claim"], "seq": "1"}})


def test_every_route_path_names_arguments_of_its_operation() -> None:
    for op in OPERATIONS.values():
        assert set(op.http.path_args()) <= {a.name for a in op.args}, op.name


@pytest.mark.parametrize(
    ("page", "tables"),
    [("contracts.md", render_operations_markdown), ("bridge.md", render_routes_markdown)],
)
def test_the_docs_hold_the_current_tables(page: str, tables: Callable[[], str]) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert tables() in text
    assert with_generated_sections(text) == text, (
        f"docs/{page} is stale: regenerate it with "
        "`python -m knell.buses.operations docs/contracts.md docs/bridge.md`"
    )


def test_the_command_rewrites_a_stale_page_and_refuses_one_without_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    begin = "<!-- routes: generated by knell.buses.operations; do not edit by hand -->"
    stale = tmp_path / "stale.md"
    stale.write_text(f"# API\n\n{begin}\n| old |\n<!-- routes: end -->\n", encoding="utf-8")
    assert operations_main([str(stale)]) == 0
    assert "| old |" not in stale.read_text() and "POST /claims/renew" in stale.read_text()
    plain = tmp_path / "plain.md"
    plain.write_text("# nothing generated here\n", encoding="utf-8")
    assert operations_main([str(plain)]) == 2
    assert "plain.md: no generated section (operations, routes)" in capsys.readouterr().err


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no '<!-- operations"):
        with_operations_markdown("# no markers here\n")


def test_only_the_long_poll_may_hold_its_answer_back() -> None:
    assert OPERATIONS["wait"].blocking_seconds(("h", 2.5)) == 2.5
    assert OPERATIONS["wait"].blocking_seconds(("h", -1)) == 0.0
    assert [op.name for op in OPERATIONS.values() if op.blocks_for] == ["wait"]
    assert OPERATIONS["post"].blocking_seconds(("c", "b", "s", None)) == 0.0


def test_a_stream_page_from_a_peer_that_predates_expired_decodes_with_none_hidden() -> None:
    """``expired`` is optional on the wire: an adapter or bridge written
    before expiry on tails leaves it out, and the page reads as hiding none."""
    from knell.buses.operations import OPERATIONS

    reply = {"page": {"channel": "s", "messages": [], "first": 1, "head": 0}}
    page = OPERATIONS["tail"].decode_result(reply)
    assert page.expired == ()
    reply["page"]["expired"] = [2, 3]
    assert OPERATIONS["tail"].decode_result(reply).expired == (2, 3)
