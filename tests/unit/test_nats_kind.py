"""The NATS store kind and the nats-jetstream driver, in process: options,
the server's config file, names, URLs and how failures are classified
(the real server: tests/stores/test_nats_store.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats.errors
import nats.js.errors
import pytest
from pydantic import ValidationError

from knell.buses import DefiniteError, IndeterminateError
from knell.stores import registry
from knell.stores.base import StoreError
from knell.stores.nats import NatsOptions
from knell.stores.nats.discovery import ENV, find_nats_server
from knell.stores.nats.server import NatsServer
from knell.targets import TARGETS
from knell.targets.nats_jetstream.errors import classify
from knell.targets.nats_jetstream.names import Names, from_header, header_value


def test_nats_is_a_registered_network_kind_opening_the_target_driver() -> None:
    kind = registry.get("nats")
    assert kind.network and registry.by_scheme("nats") is kind
    assert kind.bus == TARGETS["nats-jetstream"].driver == "knell.targets.nats_jetstream:connect"


@pytest.mark.parametrize("value", ["always", "2m", "10s", "500ms"])
def test_sync_interval_takes_always_or_a_duration(value: str) -> None:
    assert NatsOptions(sync_interval=value).sync_interval == value


@pytest.mark.parametrize("value", ["sometimes", "0s", "10", "1 m"])
def test_a_bad_sync_interval_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ValidationError, match=f"sync_interval = {value!r}"):
        NatsOptions(sync_interval=value)
    with pytest.raises(StoreError, match="sync_interval"):
        NatsServer(Path("unused"), sync_interval=value)


def test_the_config_file_keeps_the_server_local_and_its_store_in_the_run(tmp_path: Path) -> None:
    server = NatsServer(tmp_path, sync_interval="always", settings={"max_payload": "65536"})
    server.port = 4333
    text = server._config_text()
    assert 'listen: "127.0.0.1:4333"' in text
    assert f'store_dir: "{(tmp_path / "store" / "nats").resolve()}"' in text
    assert "sync_interval: always" in text and "max_payload: 65536" in text
    default = NatsServer(tmp_path)
    default.port = 4333
    assert "sync_interval" not in default._config_text()


def test_settings_may_not_move_the_listener_or_the_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="listen"):
        NatsServer(tmp_path, settings={"listen": "0.0.0.0:4222"})
    with pytest.raises(StoreError, match="jetstream"):
        NatsServer(tmp_path, settings={"jetstream": "{}"})


def test_a_named_binary_that_is_missing_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "no-such"))
    with pytest.raises(StoreError, match=f"{ENV}=.*no such nats-server"):
        find_nats_server()
    with pytest.raises(StoreError, match="store bin"):
        find_nats_server(tmp_path / "nope")


@pytest.mark.parametrize("name", ["events", "ch:with:colons", "sender one", "héllo.*>"])
def test_any_channel_maps_to_a_jetstream_name_and_back(name: str) -> None:
    names = Names("t1")
    stream = names.stream(name)
    assert stream.replace("_", "").isalnum() and names.channel_of(stream) == name
    assert names.channel_of(Names("other").stream(name)) is None
    assert from_header(header_value(name)) == name and "\n" not in header_value("a\nb")


def test_a_prefix_that_is_no_stream_name_is_refused() -> None:
    with pytest.raises(ValueError, match="prefix = 'a:b'"):
        Names("a:b")


def test_refusals_are_definite_and_silence_is_unknown() -> None:
    refused = nats.js.errors.NotFoundError(code=404, description="stream not found", err_code=1)
    assert type(classify(refused, "post")) is DefiniteError
    assert type(classify(nats.js.errors.NoStreamResponseError(), "post")) is DefiniteError
    assert type(classify(nats.errors.NoRespondersError(), "head")) is DefiniteError
    assert type(classify(nats.errors.TimeoutError(), "post")) is IndeterminateError
    assert type(classify(asyncio.TimeoutError(), "post")) is IndeterminateError
    assert type(classify(nats.errors.UnexpectedEOF(), "ack")) is IndeterminateError
    assert type(classify(RuntimeError("boom"), "ack")) is IndeterminateError


def test_an_unknown_url_option_is_refused_naming_it() -> None:
    from knell.targets.nats_jetstream import connect

    with pytest.raises(ValueError, match="unknown option"):
        connect("nats://127.0.0.1:4222?prefix=a&colour=blue")
    with pytest.raises(ValueError, match="expected a nats:// URL"):
        connect("redis://127.0.0.1:6379")  # store-guard: ok


def test_a_store_on_the_faulty_disk_can_lose_power(tmp_path: Path) -> None:
    """disk = "faulty" puts the JetStream store on knell fs (mounted at
    start), which is what makes power-loss and disk faults possible; the
    scenario table says so before anything starts."""
    from knell.scenario import load_scenario
    from knell.stores import capabilities

    plain, faulty = NatsServer(tmp_path / "a"), NatsServer(tmp_path / "b", disk="faulty")
    assert "power-loss" not in plain.faults and plain.disk is None
    assert {"power-loss", "disk-fault"} <= faulty.faults and faulty.disk is not None
    scenario = load_scenario(Path("scenarios") / "nats-power-loss-default-sync.toml")
    assert "power-loss" in capabilities(scenario.store)


def test_the_duplicate_window_option_reaches_the_drivers_url_and_is_refused_below_100ms() -> None:
    assert NatsOptions(duplicate_window="250ms").duplicate_window == 0.25
    with pytest.raises(ValidationError, match=r"duplicate_window = 0\.05s: JetStream.s minimum"):
        NatsOptions(duplicate_window="50ms")
    server = NatsServer(Path("unused"), duplicate_window=0.25)
    server.port = 4333
    assert server.url.endswith("&duplicate_window=0.25")
    default = NatsServer(Path("unused"))
    default.port = 4333
    assert "duplicate_window" not in default.url


def test_the_queue_drivers_url_options_are_checked() -> None:
    from knell.targets.nats_jetstream.queue import connect

    with pytest.raises(ValueError, match="unknown option"):
        connect("nats://127.0.0.1:4222?prefix=a&lease=3")
    with pytest.raises(ValueError, match=r"max_deliveries = 2\.5"):
        connect("nats://127.0.0.1:4222?max_deliveries=2.5")
