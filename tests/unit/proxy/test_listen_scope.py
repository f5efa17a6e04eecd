"""The proxy's API (no authentication, and it creates TCP relays) listens
beyond loopback only when told the network in front of it is private
(``--public``); otherwise ``knell proxy`` refuses, exit 3, naming the address."""

from __future__ import annotations

import pytest

from knell.cli import main
from knell.proxy.server import ListenError, bind_api


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_beyond_loopback_is_refused(listen: str) -> None:
    with pytest.raises(ListenError, match=r"is not a loopback address.*--public"):
        bind_api(listen).close()


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "localhost:0", ":0"])
def test_loopback_is_served(listen: str) -> None:
    bind_api(listen).close()


def test_public_allows_it() -> None:
    bind_api("0.0.0.0:0", public=True).close()


@pytest.mark.timeout(30)  # before the check, the command served forever
def test_knell_proxy_refuses_with_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--listen", "0.0.0.0:0"])
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert "0.0.0.0" in err and "--public" in err and "Traceback" not in err
