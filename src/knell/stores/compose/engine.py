"""The Docker engine, through the ``docker`` SDK (imported lazily).

Containers are controlled through the Engine API rather than the ``docker``
CLI: the SDK gives typed errors, one connection, and the same calls on every
platform. It is imported only when a compose stack is used, so ``knell``
starts as fast without it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from knell.stores.compose.errors import EngineUnavailable

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = ["client", "engine_available"]

HOW = (
    "install and start Docker (Debian: apt-get install -y docker.io, then run dockerd), "
    "or point DOCKER_HOST at a running engine"
)


@functools.lru_cache(maxsize=4)
def client(timeout: int = 120) -> DockerClient:
    """A client of the engine named by the environment (``DOCKER_HOST`` or
    the local socket), checked to answer; cached per process."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise EngineUnavailable(f"the docker Python package is missing: {exc}") from None
    try:
        engine = docker.from_env(timeout=timeout)
        engine.ping()
    except DockerException as exc:
        raise EngineUnavailable(f"no Docker engine answers ({exc}): {HOW}") from None
    return engine


def engine_available() -> bool:
    """Whether a Docker engine answers (for tests and the doctor)."""
    try:
        client()
    except EngineUnavailable:
        return False
    return True
