"""The stdio protocol's JSON Schema, generated from the operations table.

An adapter author validates their adapter's lines against
``docs/stdio-protocol.schema.json``; knell's own codecs (:mod:`.wire`)
decode the same lines by walking the same table
(:data:`knell.buses.operations.OPERATIONS`), so the document cannot
describe an operation, an argument or a result field the driver does not
send or read. Only what is the stdio protocol's own is written here: the
envelope of a line, the ``hello`` handshake, ``close`` and the error
object.

``python -m knell.buses.stdio.schema [FILE]`` prints the schema (or
writes ``FILE``); the shipped copy is ``docs/stdio-protocol.schema.json``,
and a test fails when that copy is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from knell.buses.contract import CONTRACTS, FEATURES
from knell.buses.operations import ERROR_KINDS, OPERATIONS, RECORDS, SHARED_TYPES, Operation
from knell.buses.stdio.wire import PROTOCOL_VERSION

__all__ = ["schema_document", "schema_text"]

_KIND = {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}

_GENERIC_KINDS = (
    "Standard kinds: {definite}, invalid-argument, busy, unknown-op, unsupported-protocol,"
    " no-hello (definite); commit, store, internal (indeterminate). The refusals the contracts"
    " require, always definite: {refusals}. Others are allowed."
)


def _request(op: str, args: dict[str, Any], *, hello: bool = False) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["id", "op", "args"],
        "additionalProperties": False,
        "properties": {
            "id": {"const": 0} if hello else {"$ref": "#/$defs/id"},
            "op": {"const": op},
            "args": args,
        },
    }


def _args(op: Operation) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for arg in op.args:
        use = arg.type.schema_use()
        doc = arg.doc
        if arg.feature is not None:
            doc = (
                (
                    f"{doc} Sent only to an adapter whose hello reply declares the {arg.feature}"
                    f" feature, and then only when not {arg.default!r}: left out means"
                    f" {arg.default!r}."
                )
                .replace("None", "null")
                .replace("False", "false")
            )
        properties[arg.name] = {"description": doc, **use} if doc else use
    return {
        "type": "object",
        "required": [arg.name for arg in op.args if arg.feature is None],
        "additionalProperties": False,
        "properties": properties,
    }


def _result(op: Operation) -> dict[str, Any]:
    if op.result_key is None or op.result is None:
        return {
            "description": "Nothing to return: an empty object (unknown fields are ignored).",
            "type": "object",
        }
    use = op.result.schema_use()
    if op.result_doc:
        use = {"description": op.result_doc, **use}
    return {"type": "object", "required": [op.result_key], "properties": {op.result_key: use}}


def _envelope(ok: bool, key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A reply line: its id, ``ok``, and the result or the error."""
    return {
        "type": "object",
        "required": ["id", "ok", key],
        "properties": {"id": {"$ref": "#/$defs/id"}, "ok": {"const": ok}, key: schema},
    }


def _reply(op: str) -> dict[str, Any]:
    ok = {
        "allOf": [
            {"$ref": "#/$defs/ok-reply"},
            {"properties": {"result": {"$ref": f"#/$defs/results/{op}"}}},
        ]
    }
    return {"oneOf": [ok, {"$ref": "#/$defs/error-reply"}]}


_HELLO_ARGS = {
    "type": "object",
    "required": ["protocol", "store", "contracts", "client"],
    "additionalProperties": False,
    "properties": {
        "protocol": {"const": PROTOCOL_VERSION},
        "store": {
            "description": "The store knell provisioned for this run (e.g."
            " sqlite:///abs/path/bus.db?poll_interval=0.05); empty when the adapter brings its"
            " own. Also in $KNELL_STORE_URL.",
            "type": "string",
        },
        "contracts": {
            "description": f"The contracts knell can drive over this protocol"
            f" ({', '.join(CONTRACTS)}): information, not a demand. The adapter declares those"
            f" it implements in its reply.",
            "type": "array",
            "items": {"$ref": "#/$defs/contract"},
        },
        "client": {"type": "string"},
    },
}

_HELLO_RESULT = {
    "type": "object",
    "required": ["protocol", "contracts"],
    "properties": {
        "protocol": {"const": PROTOCOL_VERSION},
        "contracts": {
            "description": "The contracts the adapter implements: knell sends only their"
            " operations (and hello, close), and refuses a scenario for any other. At least"
            " one known one.",
            "type": "array",
            "items": {"$ref": "#/$defs/contract"},
            "minItems": 1,
        },
        "features": {
            "description": f"The optional features the adapter serves ({', '.join(FEATURES)}):"
            " knell sends a feature's arguments only to an adapter that lists it, and refuses a"
            " scenario that needs one it does not. Left out: none. Unknown names are ignored.",
            "type": "array",
            "items": _KIND,
        },
        "bus": {"description": "A name for the bus, for reports.", "type": "string"},
        "version": {"type": "string"},
    },
}


def _error() -> dict[str, Any]:
    refusals = [kind for kind, cls in ERROR_KINDS.items() if hasattr(cls, "refusal")]
    definite = [kind for kind in ERROR_KINDS if kind not in refusals]
    kinds = _GENERIC_KINDS.format(definite=", ".join(definite), refusals=", ".join(refusals))
    return {
        "type": "object",
        "required": ["outcome", "kind", "message"],
        "properties": {
            "outcome": {
                "description": "definite: the operation certainly did not take effect."
                " indeterminate: it may or may not have.",
                "enum": ["definite", "indeterminate"],
            },
            "kind": {"description": f"Machine-readable reason. {kinds}", **_KIND},
            "message": {"type": "string"},
        },
    }


def schema_document() -> dict[str, Any]:
    """The whole JSON Schema (draft 2020-12) of protocol version 1."""
    ops = ["hello", *OPERATIONS, "close"]
    requests: dict[str, Any] = {"hello": _request("hello", _HELLO_ARGS, hello=True)}
    results: dict[str, Any] = {"hello": _HELLO_RESULT}
    for op in OPERATIONS.values():
        requests[op.name] = {
            **_request(op.name, _args(op)),
            "description": f"{op.name}: {op.summary} ({', '.join(op.contracts)})",
        }
        results[op.name] = _result(op)
    close_args = {"type": "object", "additionalProperties": False}
    requests["close"] = _request("close", close_args)
    results["close"] = {"type": "object"}
    defs: dict[str, Any] = {
        "id": {
            "description": "Request id, echoed by the reply. 0 is the hello; then 1, 2, 3 ..."
            " increasing.",
            "type": "integer",
            "minimum": 0,
        },
        **{t.ref: dict(t.schema) for t in SHARED_TYPES if t.ref},
        "contract": {
            "description": f"A contract an adapter implements: {', '.join(CONTRACTS)}"
            " (docs/stdio-protocol.md sections 4-6). Unknown names are ignored.",
            **_KIND,
        },
        **{record.ref: record.schema() for record in RECORDS},
        "error": _error(),
        "request": {
            "description": "A line on the adapter's stdin.",
            "oneOf": [{"$ref": f"#/$defs/requests/{op}"} for op in ops],
        },
        "requests": requests,
        "reply": {
            "description": "A line on the adapter's stdout: a success or an error, for the"
            " request with the same id.",
            "oneOf": [{"$ref": "#/$defs/ok-reply"}, {"$ref": "#/$defs/error-reply"}],
        },
        "ok-reply": _envelope(True, "result", {"type": "object"}),
        "error-reply": _envelope(False, "error", {"$ref": "#/$defs/error"}),
        "results": results,
        "replies": {op: _reply(op) for op in ops},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/knell/knell/docs/stdio-protocol.schema.json",
        "title": f"knell stdio protocol, version {PROTOCOL_VERSION}",
        "description": "Every line knell writes to an adapter's stdin (a request) and every line"
        " an adapter writes to its stdout (a reply). One JSON object per line, UTF-8, ending in"
        " a newline. Specified in docs/stdio-protocol.md; generated from knell's table of"
        " contract operations (knell.buses.operations). A reply does not name its operation:"
        " validate it against $defs/replies/<op> for the op of the request it answers. Version"
        " 1 covers the broadcast, queue and at-most-once contracts; the queue and at-most-once"
        " operations were added to it without changing any existing message.",
        "oneOf": [{"$ref": "#/$defs/request"}, {"$ref": "#/$defs/reply"}],
        "$defs": defs,
    }


def schema_text() -> str:
    """The schema as the shipped file holds it (indented, table order)."""
    return json.dumps(schema_document(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if argv:
        Path(argv[0]).write_text(schema_text(), encoding="utf-8")
    else:
        sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
