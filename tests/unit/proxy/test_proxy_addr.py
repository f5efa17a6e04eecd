"""Listen addresses read and written the way Go does."""

from __future__ import annotations

import pytest

from knell.proxy.addr import AddressError, format_hostport, resolve_listen, split_hostport


def test_split_and_format() -> None:
    assert split_hostport("localhost:26379") == ("localhost", 26379)
    assert split_hostport("[::1]:0") == ("::1", 0)
    assert split_hostport(":8474") == ("", 8474)
    assert format_hostport("::1", 5) == "[::1]:5"
    assert format_hostport("127.0.0.1", 5) == "127.0.0.1:5"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("local373", "address local373: missing port in address"),
        ("host:99999", "invalid port"),
        ("a:b:c", "too many colons"),
        ("[::1", "missing ']'"),
    ],
)
def test_bad_addresses_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(AddressError, match=message.replace("[", r"\[")):
        split_hostport(text)


def test_resolve_prefers_ipv4_and_keeps_empty_hosts_on_loopback() -> None:
    assert resolve_listen("localhost:0") == ("127.0.0.1", 0)
    assert resolve_listen(":0") == ("127.0.0.1", 0)
    assert resolve_listen("[::1]:7") == ("::1", 7)
