"""The bridge's OpenAPI 3.1 description, built from the operations table and the models.

Anyone who wants knell to test their own bus over HTTP implements this
document: serve these routes with these bodies and this error envelope,
and every worker role and every check runs against it unchanged through
the ``http://`` driver. The document is generated, never written by hand,
from :data:`knell.buses.operations.OPERATIONS` (through
:data:`knell.buses.http_protocol.ROUTES`, the same table the app routes
from), :data:`knell.buses.http_protocol.CODES` and the pydantic models
built from that table, so it lists exactly the routes the bridge serves.

``python -m knell.bridge.openapi [FILE]`` prints it (or writes ``FILE``);
the shipped copy is ``docs/bridge-openapi.json``, and a test fails when
that copy is stale.
"""

from __future__ import annotations

import json
import string
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from knell.bridge.models import body_args, models, request_model, response_model_name
from knell.buses.http_protocol import (
    CODES,
    MAX_INT,
    MAX_LIMIT,
    MAX_PING,
    MAX_WAIT,
    MIN_PING,
    NAME_PATTERN,
    NAME_RULE,
    PING,
    ROUTES,
)
from knell.buses.operations import OPERATIONS

__all__ = ["openapi_document", "openapi_text"]

_QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "after": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
    "after?": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    "seconds": {"type": "number", "minimum": 0},
    "flag": {"type": "boolean"},
}

_TAIL_QUERY: dict[str, tuple[bool, dict[str, Any], str]] = {
    "after": (
        False,
        dict(_QUERY_SCHEMAS["after"]),
        "Start strictly after this seq (the Last-Event-ID header wins over it); with neither,"
        " the tail starts at the channel's head.",
    ),
    "ping": (
        False,
        {"type": "number", "minimum": MIN_PING, "maximum": MAX_PING, "default": PING},
        "Seconds between two `: ping` comments while the channel is idle.",
    ),
}

_TAIL_DESCRIPTION = (
    "Server-Sent Events, one per message as it is committed: `event: message`, `id:` its"
    " seq, `data:` the message as a fetch returns it; `: ping` comments while idle; one"
    " `event: error` with the error envelope if the bus fails, then the end of the stream."
    " A client that loses the connection reconnects with `Last-Event-ID` and the tail"
    " resumes strictly after that seq. On a stream channel, messages the ring dropped"
    " before they could be sent are announced, before the next message, by one"
    " `event: behind` whose `data` is `{channel, after, first}` (`after + 1 .. first - 1`"
    " are gone) and whose `id` is `first - 1`."
)

_OWN: dict[str, dict[str, Any]] = {
    "follow": {
        "summary": "follow: a channel's new messages as Server-Sent Events (the SSE tail),"
        " resumable by seq",
        "response": None,
        "stream": True,
        "errors": ["invalid-name", "invalid-request", "wrong-kind"],
        "query": _TAIL_QUERY,
        "headers": [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "Resume strictly after this seq (the `id` of the last event seen).",
                "schema": {"type": "integer", "minimum": 0, "maximum": MAX_INT},
            }
        ],
    },
    "health": {"summary": "health: the bridge is serving", "response": "HealthResponse"},
    "openapi": {"summary": "this document", "response": None},
}


def _spec(name: str, max_wait: float) -> dict[str, Any]:
    """What the document says about operation ``name``, from the table."""
    if name in _OWN:
        return {"errors": [], "query": {}, **_OWN[name]}
    op = OPERATIONS[name]
    in_path = set(op.http.path_args())
    query: dict[str, tuple[bool, dict[str, Any], str]] = {}
    if op.http.method == "GET":
        for arg in op.args:
            if arg.name not in in_path:
                schema = dict(_QUERY_SCHEMAS[arg.type.key])
                if not arg.required and arg.default is not None:
                    schema["default"] = arg.default
                doc = arg.doc or ""
                if name == "wait":
                    doc = "Seconds to wait for a ring (at most the bridge's --max-wait)."
                    schema["maximum"] = max_wait
                query[arg.name] = (arg.required, schema, doc)
    errors = ["unsupported", *op.refusals]
    if in_path:
        errors.append("invalid-name")
    model = request_model(name)
    if model is not None:
        errors += ["invalid-request", "malformed-json", "body-too-large"]
        if any(a.type.key == "name" for a in op.args if a.name in body_args(op)):
            errors.append("invalid-name")
    if query:
        errors.append("invalid-request")
    if name == "wait":
        errors += ["too-many-waits", "shutting-down"]
    return {
        "summary": f"{name}: {op.summary}",
        "request": None if model is None else model.__name__,
        "response": response_model_name(name),
        "query": query,
        "errors": errors,
    }


_COMMON_ERRORS = ["bad-host", "unauthorized", "internal"]
_BUS_ERRORS = ["refused", "bus-error"]


def _ref(model: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(op: str, method: str, path: str, max_wait: float) -> dict[str, Any]:
    spec = _spec(op, max_wait)
    path_names = [name for _, name, _, _ in string.Formatter().parse(path) if name]
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": f"A {name} name: {NAME_RULE}.",
            "schema": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 128},
        }
        for name in path_names
    ]
    for name, (required, schema, text) in spec.get("query", {}).items():
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": required,
                "description": text,
                "schema": schema,
            }
        )
    response = spec["response"]
    ok_schema = _ref(response) if response else {"type": "object"}
    if op in OPERATIONS and response is None:
        ok_schema = {"type": "object", "description": "Nothing to return: an empty object."}
    codes = list(spec["errors"]) + _COMMON_ERRORS
    if op not in ("health", "openapi"):
        codes += _BUS_ERRORS
    if spec.get("request"):
        codes.append("unsupported-media-type")
    parameters += spec.get("headers", [])
    ok: dict[str, Any] = {"description": "OK", "content": _json(ok_schema)}
    if spec.get("stream"):
        ok = {
            "description": _TAIL_DESCRIPTION,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    responses: dict[str, Any] = {"200": ok}
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(CODES[code][0], []).append(code)
    for status in sorted(by_status):
        names = sorted(set(by_status[status]))
        text = "; ".join(f"`{c}` ({CODES[c][1]}): {CODES[c][2]}" for c in names)
        responses[str(status)] = {"description": text, "content": _json(_ref("ErrorResponse"))}
    operation: dict[str, Any] = {
        "operationId": op,
        "summary": spec["summary"],
        "parameters": parameters,
        "responses": responses,
    }
    if not parameters:
        del operation["parameters"]
    if spec.get("request"):
        operation["requestBody"] = {"required": True, "content": _json(_ref(spec["request"]))}
    return operation


@lru_cache(maxsize=4)
def openapi_document(max_wait: float = MAX_WAIT) -> dict[str, Any]:
    """The whole OpenAPI 3.1 document (built once per process), for a
    bridge whose longest ``wait`` is ``max_wait`` seconds."""
    _, defs = models_json_schema(
        [(m, "validation") for m in models()], ref_template="#/components/schemas/{model}"
    )
    paths: dict[str, dict[str, Any]] = {}
    for op, (method, path) in ROUTES.items():
        paths.setdefault(path, {})[method.lower()] = _operation(op, method, path, max_wait)
    codes = "\n".join(
        f"| `{code}` | {status} | {outcome} | {text} |"
        for code, (status, outcome, text) in CODES.items()
    )
    description = (
        "The contracts of a knell bus (broadcast, queue, at-most-once) over HTTP + JSON,"
        " generated from knell's table of contract operations, served by `knell bridge`"
        " in front of any bus, and spoken by knell's `http://` driver. Every 4xx and 5xx"
        " answers with one envelope, `{error, detail, outcome}`: `definite` means the"
        " operation did not happen (a client records `fail`), `indeterminate` that it may"
        " have (`info`).\n\n| error | status | outcome | meaning |\n|---|---|---|---|\n" + codes
    )
    return {
        "openapi": "3.1.0",
        "info": {"title": "knell bridge", "version": "1", "description": description},
        "paths": paths,
        "components": {
            "schemas": defs["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }


def openapi_text() -> str:
    """The document as the shipped file holds it (stable key order, indented)."""
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if argv:
        Path(argv[0]).write_text(openapi_text(), encoding="utf-8")
    else:
        sys.stdout.write(openapi_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
