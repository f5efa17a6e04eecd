"""The compose provider's parts that need no Docker engine: options, owner
labels, locating and reading the compose files, image tags, the compose
command wrapper (against a stand-in command), and the readiness probes
(against real sockets)."""

from __future__ import annotations

import importlib
import os
import re
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from knell.owners import REAPERS, Owner
from knell.stores.compose import ComposeCommand, ComposeError, ComposeOptions, ImageSpec
from knell.stores.compose import images as img
from knell.stores.compose.errors import ComposeNotFound, StackFailed
from knell.stores.compose.files import AIRGAP_FILE, BASE_FILE, compose_dir
from knell.stores.compose.labels import (
    OWNER,
    OWNER_HOST,
    OWNER_PID,
    OWNER_STAMP,
    OWNER_STARTED,
    OwnerTag,
)
from knell.stores.compose.links import API_PORT, LINKS, STORE_PORTS
from knell.stores.compose.probes import probe_of

COMPOSE = compose_dir()
redis_ready, postgres_ready = probe_of("redis"), probe_of("postgres")
BASE = (COMPOSE / BASE_FILE).read_text(encoding="utf-8")
AIRGAP = (COMPOSE / AIRGAP_FILE).read_text(encoding="utf-8")


# -- options ------------------------------------------------------------------


def test_options_defaults_and_coercions() -> None:
    options = ComposeOptions.model_validate({"provider": "compose", "airgap": True})
    assert options.airgap == "yes" and options.build == "missing"
    assert ComposeOptions.model_validate({"health_timeout": "2m"}).health_timeout == 120
    assert ComposeOptions(redis_appendonly=False, redis_appendfsync="always").store_env() == {
        "KNELL_REDIS_APPENDONLY": "no",
        "KNELL_REDIS_APPENDFSYNC": "always",
        "KNELL_REDIS_SAVE": "",
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [("airgap", "maybe"), ("redis_appendfsync", "sometimes"), ("health_timeout", -1), ("x", 1)],
)
def test_options_name_the_bad_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        ComposeOptions.model_validate({field: value})
    assert field in str(caught.value)


# -- labels -------------------------------------------------------------------


def _labels(tag: OwnerTag) -> dict[str, str]:
    env = tag.env()
    return {
        "knell": "1",
        OWNER: env["KNELL_OWNER"],
        OWNER_PID: env["KNELL_OWNER_PID"],
        OWNER_STARTED: env["KNELL_OWNER_STARTED"],
        OWNER_HOST: env["KNELL_OWNER_HOST"],
        OWNER_STAMP: env["KNELL_OWNER_STAMP"],
    }


def test_owner_tag_round_trips_through_labels_and_is_alive(tmp_path: Path) -> None:
    owner = Owner(states=tmp_path)
    try:
        tag = OwnerTag.of(owner)
        assert tag.ident == f"{os.getpid()}-{owner.token}"
        assert OwnerTag.from_labels(_labels(tag)) == tag
        assert tag.alive()
    finally:
        owner.close()


def test_owner_tag_dead_unowned_and_foreign() -> None:
    tag = OwnerTag.of(None)
    # same pid, another process: by its stamp, and by an earlier version's labels
    assert not OwnerTag(tag.pid, tag.token, tag.started, tag.host, tag.stamp + "0").alive()
    assert not OwnerTag(tag.pid, tag.token, tag.started - 100, tag.host).alive()
    assert OwnerTag(tag.pid, tag.token, tag.started, tag.host).alive()
    assert OwnerTag(tag.pid, tag.token, tag.started, "another-host").alive()
    by_hand = {**_labels(tag), OWNER_PID: ""}
    assert OwnerTag.from_labels(by_hand) is None
    assert OwnerTag.from_labels({"knell": "0"}) is None
    assert OwnerTag.from_labels(None) is None


def test_the_compose_file_carries_every_owner_label() -> None:
    for label, variable in [
        ("knell.owner", "KNELL_OWNER"),
        ("knell.owner.pid", "KNELL_OWNER_PID"),
        ("knell.owner.started", "KNELL_OWNER_STARTED"),
        ("knell.owner.host", "KNELL_OWNER_HOST"),
        ("knell.owner.stamp", "KNELL_OWNER_STAMP"),
    ]:
        assert f'{label}: "${{{variable}:-}}"' in BASE
    # every service, the network and every volume use the one label block
    assert BASE.count("labels: *knell-labels") == 4 + 1 + 2


# -- files, ports and images ----------------------------------------------------


def test_compose_dir_errors_name_the_place(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match=re.escape(str(tmp_path))):
        compose_dir(tmp_path)
    assert (COMPOSE / "docker-compose.yml").is_file()


def test_published_ports_are_loopback_ephemeral_and_match_the_links() -> None:
    published = re.findall(r'- "([^"]*)::(\d+)"', BASE)
    assert published and all(host == "127.0.0.1" for host, _ in published)
    ports = {int(port) for _, port in published}
    assert {API_PORT, *STORE_PORTS.values()} <= ports
    assert {link.listen_port for link in LINKS.values()} <= ports
    for service, link in LINKS.items():
        assert link.upstream == f"{service}:{STORE_PORTS[service]}"


def test_image_variables_and_defaults_match_the_python_side() -> None:
    for service, variable in img.ENV_VARS.items():
        assert f"${{{variable}:-" in BASE, service
    for service, tag in img.OFFICIAL.items():
        assert f"${{{img.ENV_VARS[service]}:-{tag}}}" in BASE
    for service, spec in img.airgap_images(COMPOSE).items():
        assert f"${{{img.ENV_VARS[service]}:-{spec.repository}:" in AIRGAP
        assert (spec.context / spec.dockerfile).is_file()
        assert (spec.context / spec.dockerfile).read_text().count("FROM ") == 1
        assert "FROM debian:bookworm-slim" in (spec.context / spec.dockerfile).read_text()


def test_image_tag_follows_the_inputs(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    spec = ImageSpec("knell/x", tmp_path, "Dockerfile", (tmp_path,))
    first = spec.tag
    assert first == spec.tag and first.startswith("knell/x:")
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN true\n")
    assert spec.tag != first


def test_reapers_are_known_to_a_fresh_reap() -> None:
    for kind in ("compose-project", "container", "network", "volume"):
        module, _, function = REAPERS[kind].partition(":")
        assert callable(getattr(importlib.import_module(module), function))


# -- the compose command wrapper -----------------------------------------------


def _fake_compose(tmp_path: Path, version: str, *, fail: bool = False) -> str:
    script = tmp_path / "fake-compose"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = version ]; then echo "{version}"; exit 0; fi\n'
        + ('echo "no such service: nope" >&2; exit 3\n' if fail else 'echo "$@"\n')
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.integration  # starts the stand-in command
@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in")
@pytest.mark.parametrize(("version", "flavour"), [("1.29.2", "v1"), ("v2.40.3", "v2")])
def test_detect_tells_v1_from_v2(tmp_path: Path, version: str, flavour: str) -> None:
    command = ComposeCommand.detect({"KNELL_COMPOSE": _fake_compose(tmp_path, version)})
    assert command.flavour == flavour and command.version == version.lstrip("v")


@pytest.mark.integration  # tries to start the command
def test_detect_names_a_bad_override() -> None:
    with pytest.raises(ComposeNotFound, match="KNELL_COMPOSE"):
        ComposeCommand.detect({"KNELL_COMPOSE": "/nonexistent/compose"})


@pytest.mark.integration  # starts the keeper and the stand-in command
@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script stand-in")
def test_run_passes_project_and_files_and_reports_failures(tmp_path: Path) -> None:
    command = ComposeCommand.detect({"KNELL_COMPOSE": _fake_compose(tmp_path, "2.40.3")})
    out = command.run("knell-1-x", [Path("/a.yml"), Path("/b.yml")], ["up", "-d"],
                      env=dict(os.environ), timeout=30)  # fmt: skip
    expected = ["--ansi", "never", "-p", "knell-1-x", "-f", "/a.yml", "-f", "/b.yml", "up", "-d"]
    assert out.split() == expected
    failing = ComposeCommand.detect({"KNELL_COMPOSE": _fake_compose(tmp_path, "2.0.0", fail=True)})
    log = tmp_path / "compose.log"
    with pytest.raises(StackFailed, match="exit 3") as caught:
        failing.run("p", [], ["up"], env=dict(os.environ), timeout=30, log=log)
    assert "no such service: nope" in str(caught.value)
    assert "no such service: nope" in log.read_text()


# -- probes ---------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[tuple[socket.socket, list[bytes]]]:
    """A real listening socket whose replies the test sets."""
    listener = socket.create_server(("127.0.0.1", 0))
    replies: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                if replies:
                    conn.sendall(replies.pop(0))
                else:
                    conn.recv(1024)  # say nothing: a paused store

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener, replies
    listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
    listener.close()
    thread.join(timeout=5)


def test_probes_want_the_stores_own_answer(server: tuple[socket.socket, list[bytes]]) -> None:
    listener, replies = server
    port = listener.getsockname()[1]
    replies += [b"+PONG\r\n", b"-LOADING\r\n", b"R\x00\x00\x00\x0c", b"EFATAL starting up"]
    assert redis_ready("127.0.0.1", port)
    assert not redis_ready("127.0.0.1", port)
    assert postgres_ready("127.0.0.1", port)
    assert not postgres_ready("127.0.0.1", port)
    assert not redis_ready("127.0.0.1", port, 0.2)  # accepts, never answers


def test_probes_on_a_closed_port_are_false() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    assert not redis_ready("127.0.0.1", port) and not postgres_ready("127.0.0.1", port)
