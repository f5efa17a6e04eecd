"""The stdio protocol's lines and reply shapes, without any process."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import knell.buses.contract as contract
from knell.buses import (
    CONTRACT_METHODS,
    AckBeyondHead,
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    IndeterminateError,
    Message,
    NotSubscribed,
    QueueInfo,
    Refused,
    RoleHold,
    Stranded,
    Wake,
)
from knell.buses.stdio import AdapterError, StdioBus
from knell.buses.stdio.wire import (
    DEFINITE_KINDS,
    OPS,
    OPS_OF,
    WireError,
    bus_error,
    decode,
    encode,
    envelope,
    result_of,
)


def reader(op: str) -> Callable[[dict[str, Any]], Any]:
    """The driver's reader of ``op``'s result (the table's wire type)."""
    return functools.partial(decode, op)


to_messages, to_wake, to_claim, to_renewed = map(reader, ("fetch", "wait", "claim", "renew"))
to_queue_info, to_dead, to_hold = map(reader, ("declare_queue", "dead", "claim_role"))
to_deliveries, to_stranded, to_nothing = map(reader, ("receive", "stranded", "done"))

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "stdio-protocol.schema.json"


def test_a_request_is_one_line_even_with_newlines_in_the_body() -> None:
    line = encode(7, "post", {"body": "two\nlines", "sender": "p"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {
        "id": 7,
        "op": "post",
        "args": {"body": "two\nlines", "sender": "p"},
    }


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"hello there\n", "a line that is not JSON"),
        (b"[1, 2]\n", "a JSON list instead of an object"),
        (b'{"ok": true}\n', "a reply without an integer 'id'"),
        (b'{"id": "3", "ok": true}\n', "a reply without an integer 'id'"),
        (b'{"id": true, "ok": true}\n', "a reply without an integer 'id'"),
        (b'{"id": 3, "ok": true}', "a line cut off before its newline"),
    ],
)
def test_bad_envelopes_are_named(line: bytes, words: str) -> None:
    with pytest.raises(WireError, match=words):
        envelope(line)


def test_results_and_errors() -> None:
    assert result_of(envelope(b'{"id": 1, "ok": true, "result": {"cursor": 4}}\n')) == {"cursor": 4}
    with pytest.raises(WireError, match="'ok' must be true or false, got 'yes'"):
        result_of(envelope(b'{"id": 1, "ok": "yes"}\n'))
    with pytest.raises(WireError, match="without a 'result' object"):
        result_of(envelope(b'{"id": 1, "ok": true, "result": 4}\n'))
    with pytest.raises(WireError, match="without an 'error' object"):
        result_of(envelope(b'{"id": 1, "ok": false}\n'))


def test_error_outcomes_map_to_the_contracts_tree() -> None:
    ack = bus_error({"outcome": "definite", "kind": "ack-beyond-head", "message": "9 > 3"})
    assert isinstance(ack, AckBeyondHead) and str(ack) == "ack-beyond-head: 9 > 3"
    refused = bus_error({"outcome": "definite", "kind": "not-subscribed", "message": "w"})
    assert type(refused) is NotSubscribed
    other = bus_error({"outcome": "definite", "kind": "busy", "message": "w"})
    assert type(other) is DefiniteError
    unknown = bus_error({"outcome": "indeterminate", "kind": "commit", "message": "?"})
    assert type(unknown) is IndeterminateError
    with pytest.raises(WireError, match=r"error\.kind must be a non-empty string"):
        bus_error({"outcome": "definite", "kind": "", "message": "x"})
    with pytest.raises(WireError, match=r"error\.message must be a string"):
        bus_error({"outcome": "definite", "kind": "busy"})


def test_message_and_wake_shapes() -> None:
    raw = {"channel": "a", "seq": 2, "body": "b", "sender": "p", "idempotency_key": None}
    assert to_messages({"messages": [raw]}) == [Message("a", 2, "b", "p", None)]
    with pytest.raises(WireError, match=r"result.messages\[0\].seq must be an integer, got 2.0"):
        to_messages({"messages": [{**raw, "seq": 2.0}]})
    with pytest.raises(WireError, match=r"result.messages\[0\].sender is missing"):
        to_messages({"messages": [{k: v for k, v in raw.items() if k != "sender"}]})
    with pytest.raises(WireError, match=r"result\.messages must be an array"):
        to_messages({"messages": {}})
    assert to_wake({"wake": None}) is None
    wake = {"channel": "a", "seq": 3, "sender": "p", "reason": "post"}
    assert to_wake({"wake": wake}) == Wake("a", 3, "p", "post")
    with pytest.raises(WireError, match=r"result\.wake\.reason must be 'backlog' or 'post'"):
        to_wake({"wake": {**wake, "reason": "ring"}})
    with pytest.raises(WireError, match=r"result\.wake is missing"):
        to_wake({})


# -- queue and at-most-once ------------------------------------------------------------

REFUSALS = sorted(
    (
        cls
        for cls in vars(contract).values()
        if isinstance(cls, type) and issubclass(cls, Refused) and cls is not Refused
    ),
    key=lambda cls: cls.refusal,
)


def test_the_protocol_has_an_op_for_every_contract_method() -> None:
    for name, methods in CONTRACT_METHODS.items():
        assert set(methods) - {"close"} == set(OPS_OF[name]), name
        assert set(methods) <= set(OPS), name
        for method in methods:
            assert callable(getattr(StdioBus, method, None)), method


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda cls: cls.refusal)
def test_every_refusal_kind_becomes_the_contracts_exception(cls: type[Refused]) -> None:
    kind = cls.refusal
    assert DEFINITE_KINDS[kind] is cls
    error = bus_error({"outcome": "definite", "kind": kind, "message": "no"})
    assert type(error) is cls and isinstance(error, Refused)
    assert error.refusal == kind  # what Worker.op records as "refused"
    assert str(error) == f"{kind}: no"
    # A refusal that may have happened is no refusal: the outcome wins.
    unsure = bus_error({"outcome": "indeterminate", "kind": kind, "message": "?"})
    assert type(unsure) is IndeterminateError


def test_the_refusals_are_the_five_the_contracts_require() -> None:
    assert [cls.refusal for cls in REFUSALS] == [
        "lease-lost",
        "not-delivered-to",
        "not-holder",
        "role-held",
        "wrong-kind",
    ]
    # "refused" itself (the base class) is no kind of its own on the wire.
    assert type(bus_error({"outcome": "definite", "kind": "refused", "message": ""})) is (
        DefiniteError
    )


CLAIM = Claim("jobs/7", "jobs", 7, "sender-1.1:7", "sender-1", "c-1.2", 2, 1796018110.5)
DEAD = DeadLetter("jobs/3", "jobs", 3, "sender-1.1:3", "sender-1", 3, 1796018100.25)
HOLD = RoleHold("reviewer", "holder-1.1.2", 1796018120.0)
DELIVERY = Delivery("reviewer/4", "reviewer", 4, "sender-2.1:4", "sender-2", "holder-1.1.2")
STRANDED = Stranded("reviewer/2", "reviewer", 2, "b", "sender-2", "holder-1.1.1", 1796018000.0)
INFO = QueueInfo("jobs", 3, 0.0)


def wire(value: Any) -> dict[str, Any]:
    """A value type as an adapter writes it: every field, under its own name."""
    return dataclasses.asdict(value)


CASES: list[tuple[str, Callable[[StdioBus], Any], dict[str, Any], dict[str, Any], Any]] = [
    (
        "declare_queue",
        lambda b: b.declare_queue("jobs", 3),
        {"channel": "jobs", "max_deliveries": 3},
        {"queue": wire(INFO)},
        INFO,
    ),
    (
        "claim",
        lambda b: b.claim("jobs", "c-1.2", 1.5),
        {"channel": "jobs", "consumer": "c-1.2", "lease_s": 1.5},
        {"claim": wire(CLAIM)},
        CLAIM,
    ),
    (
        "renew",
        lambda b: b.renew("jobs/7", "c-1.2", 2),
        {"id": "jobs/7", "consumer": "c-1.2", "lease_s": 2},
        {"claim": wire(CLAIM)},
        CLAIM,
    ),
    ("done", lambda b: b.done("jobs/7", "c-1.2"), {"id": "jobs/7", "consumer": "c-1.2"}, {}, None),
    (
        "release",
        lambda b: b.release("jobs/7", "c-1.2"),
        {"id": "jobs/7", "consumer": "c-1.2"},
        {},
        None,
    ),
    (
        "dead",
        lambda b: b.dead("jobs", 2, 10),
        {"channel": "jobs", "after": 2, "limit": 10},
        {"dead": [wire(DEAD)]},
        [DEAD],
    ),
    (
        "claim_role",
        lambda b: b.claim_role("reviewer", "holder-1.1.2", 0.5),
        {"role": "reviewer", "run": "holder-1.1.2", "lease_s": 0.5},
        {"hold": wire(HOLD)},
        HOLD,
    ),
    (
        "release_role",
        lambda b: b.release_role("reviewer", "holder-1.1.2"),
        {"role": "reviewer", "run": "holder-1.1.2"},
        {},
        None,
    ),
    (
        "receive",
        lambda b: b.receive("holder-1.1.2", 5),
        {"run": "holder-1.1.2", "limit": 5},
        {"deliveries": [wire(DELIVERY)]},
        [DELIVERY],
    ),
    (
        "read",
        lambda b: b.read("reviewer/4", "holder-1.1.2"),
        {"id": "reviewer/4", "run": "holder-1.1.2"},
        {},
        None,
    ),
    (
        "stranded",
        lambda b: b.stranded("reviewer"),
        {"role": "reviewer"},
        {"stranded": [wire(STRANDED)]},
        [STRANDED],
    ),
]


class Recorder(StdioBus):
    """A StdioBus whose adapter is a dict of canned results: the requests it
    would send are recorded as lines, the results parsed as from the wire."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        self.lines: list[bytes] = []
        self.results = results
        self.timeout = 30.0

    def _call(self, op: str, args: dict[str, Any], parse: Any, timeout: Any = None) -> Any:
        self.lines.append(encode(len(self.lines) + 1, op, args))
        reply = orjson.dumps({"id": 1, "ok": True, "result": self.results[op]}) + b"\n"
        return parse(result_of(envelope(reply)))


def test_every_new_op_is_covered() -> None:
    assert {case[0] for case in CASES} == set(OPS_OF["queue"] + OPS_OF["at-most-once"]) - {"post"}


@pytest.mark.parametrize(
    ("op", "call", "args", "result", "value"), CASES, ids=[c[0] for c in CASES]
)
def test_requests_and_results_of_the_queue_and_role_ops(
    op: str, call: Callable[[StdioBus], Any], args: dict, result: dict, value: Any
) -> None:
    bus = Recorder({op: result})
    assert call(bus) == value
    (line,) = bus.lines
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"id": 1, "op": op, "args": args}


@pytest.mark.parametrize(
    ("op", "call", "args", "result", "value"), CASES, ids=[c[0] for c in CASES]
)
def test_the_schema_agrees_with_the_wire_code(
    op: str, call: Callable[[StdioBus], Any], args: dict, result: dict, value: Any
) -> None:
    """What knell sends validates as the op's request, a reply carrying the
    value types validates as the op's reply, and the schema requires every
    field of each value type."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    defs = schema["$defs"]

    def validate(ref: str, instance: Any) -> None:
        validator = jsonschema.Draft202012Validator({"$ref": ref, "$defs": defs})
        errors = [e.message for e in validator.iter_errors(instance)]
        assert not errors, (ref, instance, errors)

    bus = Recorder({op: result})
    call(bus)
    validate("#/$defs/request", orjson.loads(bus.lines[0]))
    validate(f"#/$defs/replies/{op}", {"id": 1, "ok": True, "result": result})
    error = {"outcome": "definite", "kind": "lease-lost", "message": "gone"}
    validate(f"#/$defs/replies/{op}", {"id": 1, "ok": False, "error": error})
    for name, cls in [
        ("queue-info", QueueInfo),
        ("claim", Claim),
        ("dead-letter", DeadLetter),
        ("hold", RoleHold),
        ("delivery", Delivery),
        ("stranded", Stranded),
    ]:
        assert defs[name]["required"] == [f.name for f in dataclasses.fields(cls)], name


def test_claim_may_be_null_but_renew_may_not() -> None:
    assert to_claim({"claim": None}) is None
    with pytest.raises(WireError, match=r"result\.claim must be an object, got NoneType"):
        to_renewed({"claim": None})
    with pytest.raises(WireError, match=r"result\.claim is missing"):
        to_claim({})
    assert to_nothing({}) is None and to_nothing({"extra": 1}) is None


@pytest.mark.parametrize(
    ("parse", "result", "words"),
    [
        (
            to_claim,
            {"claim": {**wire(CLAIM), "seq": "7"}},
            r"result\.claim\.seq must be an integer, got '7'",
        ),
        (
            to_claim,
            {"claim": {**wire(CLAIM), "deliveries": 2.0}},
            r"result\.claim\.deliveries must be an integer",
        ),
        (
            to_claim,
            {"claim": {**wire(CLAIM), "expires_at": "soon"}},
            r"result\.claim\.expires_at must be a number, got 'soon'",
        ),
        (
            to_claim,
            {"claim": {**wire(CLAIM), "expires_at": True}},
            r"result\.claim\.expires_at must be a number, got True",
        ),
        (
            to_claim,
            {"claim": {k: v for k, v in wire(CLAIM).items() if k != "consumer"}},
            r"result\.claim\.consumer is missing",
        ),
        (to_claim, {"claim": [1]}, r"result\.claim must be an object, got list"),
        (
            to_renewed,
            {"claim": {**wire(CLAIM), "id": 7}},
            r"result\.claim\.id must be a string, got 7",
        ),
        (
            to_queue_info,
            {"queue": {**wire(INFO), "sweep_interval": None}},
            r"result\.queue\.sweep_interval must be a number",
        ),
        (
            to_queue_info,
            {"queue": {k: v for k, v in wire(INFO).items() if k != "sweep_interval"}},
            r"result\.queue\.sweep_interval is missing",
        ),
        (to_queue_info, {}, r"result\.queue is missing"),
        (to_dead, {"dead": {}}, r"result\.dead must be an array, got dict"),
        (
            to_dead,
            {"dead": [wire(DEAD), {**wire(DEAD), "died_at": "x"}]},
            r"result\.dead\[1\]\.died_at must be a number",
        ),
        (
            to_hold,
            {"hold": {**wire(HOLD), "run": None}},
            r"result\.hold\.run must be a string, got None",
        ),
        (to_hold, {"hold": None}, r"result\.hold must be an object, got NoneType"),
        (
            to_deliveries,
            {"deliveries": [{**wire(DELIVERY), "role": 1}]},
            r"result\.deliveries\[0\]\.role must be a string",
        ),
        (to_deliveries, {}, r"result\.deliveries is missing"),
        (
            to_stranded,
            {"stranded": [{**wire(STRANDED), "delivered_at": float("nan")}]},
            r"result\.stranded\[0\]\.delivered_at must be a number, got nan",
        ),
        (to_stranded, {"stranded": "none"}, r"result\.stranded must be an array, got str"),
    ],
)
def test_malformed_queue_and_role_results_are_named(
    parse: Callable[[dict[str, Any]], Any], result: dict[str, Any], words: str
) -> None:
    with pytest.raises(WireError, match=words):
        parse(result)


def test_numbers_are_json_numbers() -> None:
    """JSON has one number type: an integral time is a time, an integral
    sweep interval an interval."""
    assert to_hold({"hold": {**wire(HOLD), "expires_at": 1796018120}}) == HOLD
    assert to_queue_info({"queue": {**wire(INFO), "sweep_interval": 0}}) == INFO


def test_a_malformed_result_is_an_adapter_error_not_a_crash(tmp_path: Path) -> None:
    """Through the bus's own exchange, a bad shape is AdapterError "malformed"
    (an indeterminate outcome), never a TypeError or a KeyError."""

    class Child:
        pid = 4242

        def __init__(self, reply: bytes) -> None:
            self.reply = reply

        def send(self, data: bytes) -> None:
            self.sent = data

        def next_line(self, timeout: float) -> bytes:
            return self.reply

        def kill(self) -> None:
            pass

    class Sink:
        def note(self, text: str) -> None:
            pass

    bus = StdioBus.__new__(StdioBus)
    bus.argv, bus._sink, bus._child = ["adapter"], Sink(), None  # type: ignore[assignment]
    bus._first_id = 1
    reply = b'{"id": 3, "ok": true, "result": {"claim": {"id": "q/1", "seq": 1}}}\n'
    with pytest.raises(AdapterError) as caught:
        bus._exchange(Child(reply), 3, "claim", {}, to_claim, 1.0)  # type: ignore[arg-type]
    assert caught.value.kind == "malformed"
    assert "reply to claim (id 3): result.claim.channel is missing" in str(caught.value)


# -- the handshake's contracts ---------------------------------------------------------


def greeted(
    declared: list[str], *, before: frozenset[str] = frozenset(), require: tuple[str, ...] = ()
) -> Any:
    """What ``hello`` makes of a reply declaring ``declared``, for a bus whose
    earlier adapter declared ``before``."""
    bus = StdioBus.__new__(StdioBus)
    bus.contracts, bus.require = frozenset(before), require
    return bus._check_hello({"protocol": 1, "contracts": declared})


def test_the_adapter_declares_what_it_implements() -> None:
    assert greeted(["broadcast"]) == {"broadcast"}
    assert greeted(["queue"]) == {"queue"}  # a queue-only bus is fine: scenarios decide
    assert greeted(["broadcast", "queue", "at-most-once", "stream", "shard"]) == {
        "broadcast",
        "queue",
        "at-most-once",
        "stream",
    }  # unknown names are ignored


@pytest.mark.parametrize(
    ("declared", "options", "words"),
    [
        (["shard"], {}, "declares no contract knell can drive (it declares: shard; knell drives"),
        ([], {}, "declares no contract knell can drive (it declares: none;"),
        (
            ["queue"],
            {"require": ("broadcast",)},
            "does not declare the broadcast contract(s) (it declares: queue)",
        ),
        (
            ["broadcast"],
            {"before": frozenset({"broadcast", "queue"})},
            "does not declare the queue contract(s) (it declares: broadcast)",
        ),
    ],
)
def test_handshake_failures_about_contracts(
    declared: list[str], options: dict[str, Any], words: str
) -> None:
    with pytest.raises(AdapterError) as caught:
        greeted(declared, **options)
    assert caught.value.kind == "handshake"
    assert words in str(caught.value)


def test_a_missing_contract_is_refused_naming_the_adapter_and_how_to_declare_it() -> None:
    from knell.buses import ContractMissing, require_contract

    bus = StdioBus.__new__(StdioBus)
    bus.contracts = frozenset({"broadcast"})
    require_contract(bus, "broadcast", "exec:node adapter.js", "quickstart")
    with pytest.raises(ContractMissing) as caught:
        require_contract(bus, "queue", "exec:node adapter.js", "queue-kill-claimers")
    text = str(caught.value)
    assert "scenario 'queue-kill-claimers' tests the queue contract" in text
    assert "bus 'exec:node adapter.js' implements broadcast only" in text
    assert "lists 'queue' in its hello reply's contracts and serves post, declare_queue" in text
    assert "\n" not in text


def test_shipped_schema_is_up_to_date() -> None:
    from knell.buses.stdio.schema import schema_text

    assert SCHEMA.read_text(encoding="utf-8") == schema_text(), (
        "docs/stdio-protocol.schema.json is stale: regenerate it with "
        "`python -m knell.buses.stdio.schema docs/stdio-protocol.schema.json`"
    )


def test_the_schema_is_a_valid_schema_with_every_op() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    assert list(defs["requests"]) == list(OPS) == list(defs["replies"])
    for op in OPS_OF["queue"]:
        assert defs["requests"][op]["properties"]["op"] == {"const": op}
