"""The stdio protocol's lines and reply shapes, without any process."""

from __future__ import annotations

import orjson
import pytest

from knell.buses import AckBeyondHead, DefiniteError, IndeterminateError, Message, Wake
from knell.buses.stdio.wire import (
    WireError,
    bus_error,
    encode,
    envelope,
    result_of,
    to_messages,
    to_wake,
)


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
    assert type(refused) is DefiniteError
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
