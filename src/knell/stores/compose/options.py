"""The ``[store]`` settings of a scenario that runs its store in containers.

::

    [store]
    provider = "compose"
    airgap = "auto"            # auto | yes | no: build the images FROM debian:bookworm-slim
    build = "missing"          # missing | always | never: (re)build the knell-built images
    redis_appendonly = true    # Redis persistence: append-only file ...
    redis_appendfsync = "everysec"   # ... fsync'd always | everysec | no
    redis_save = ""            # RDB snapshot rule ("60 1"); empty: none
    health_timeout = "3m"

``airgap = "auto"`` runs the official images when they are present or can
be pulled, and the air-gapped override otherwise (``KNELL_COMPOSE_AIRGAP=1``
or ``0`` forces it for every run on a machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from knell.durations import parse_duration

__all__ = ["ComposeOptions"]


class ComposeOptions(BaseModel):
    """Validated ``[store]`` settings for ``provider = "compose"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["compose"] = "compose"
    airgap: Literal["auto", "yes", "no"] = "auto"
    build: Literal["missing", "always", "never"] = "missing"
    redis_appendonly: bool = True
    redis_appendfsync: Literal["always", "everysec", "no"] = "everysec"
    redis_save: str = ""
    health_timeout: float = Field(default=180.0, gt=0)
    compose_dir: Path | None = None
    """Where docker-compose.yml lives (default: the checkout's compose/)."""
    files: tuple[Path, ...] = ()
    """Extra compose override files, applied last."""

    @field_validator("airgap", mode="before")
    @classmethod
    def _yes_no(cls, value: object) -> object:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return value

    @field_validator("health_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_duration(value)
        return value

    def redis_env(self) -> dict[str, str]:
        """The variables docker-compose.yml passes to redis-server."""
        return {
            "KNELL_REDIS_APPENDONLY": "yes" if self.redis_appendonly else "no",
            "KNELL_REDIS_APPENDFSYNC": self.redis_appendfsync,
            "KNELL_REDIS_SAVE": self.redis_save,
        }
