from __future__ import annotations

import shutil
from collections.abc import Iterator

import psutil
import pytest

from knell.stores.compose import ComposeError
from knell.stores.compose.command import ComposeCommand
from knell.stores.compose.engine import engine_available
from tests.conftest import require_server

HOW = (
    "apt-get install -y docker.io docker-compose debootstrap, start dockerd "
    "(.ci/run does both), then make compose-test"
)


def _compose_available() -> bool:
    try:
        ComposeCommand.detect()
    except ComposeError:
        return False
    return True


@pytest.fixture(scope="session")
def docker() -> None:
    """A Docker engine, a compose command and a base image (or the means
    to make one) are needed; in CI their absence fails."""
    require_server("docker", engine_available(), HOW)
    require_server("docker compose", _compose_available(), HOW)
    from knell.stores.compose import images as img

    base = img.image_present(img.BASE_IMAGE) or shutil.which("debootstrap") is not None
    require_server(f"base image {img.BASE_IMAGE}", base, "compose/build-base.sh")


@pytest.fixture(autouse=True)
def no_stray_processes() -> Iterator[None]:
    """Every compose call (and its keeper) ends before the test does."""
    yield
    me = psutil.Process()
    left = [p for p in me.children(recursive=True) if p.is_running()]
    assert not left, f"processes left behind: {[p.cmdline() for p in left]}"
