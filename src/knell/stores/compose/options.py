"""The ``[store]`` settings of a scenario that runs its store in containers.

::

    [store]
    provider = "compose"
    airgap = "auto"            # auto | yes | no: build the images FROM debian:bookworm-slim
    build = "missing"          # missing | always | never: (re)build the knell-built images
    health_timeout = "3m"
    # and the store kind's own compose keys, e.g. Redis's persistence:
    redis_appendonly = true    # an append-only file ...
    redis_appendfsync = "everysec"   # ... fsync'd always | everysec | no
    redis_save = ""            # RDB snapshot rule ("60 1"); empty: none

``airgap = "auto"`` runs the official images when they are present or can
be pulled, and the air-gapped override otherwise (``KNELL_COMPOSE_AIRGAP=1``
or ``0`` forces it for every run on a machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from knell.durations import parse_duration

__all__ = ["ComposeOptions", "compose_keys"]

_INTERNAL = ("provider", "compose_dir", "files")


def _store_keys() -> dict[str, type[BaseModel]]:
    """Each store kind's compose-only key, with the model that types it
    (:attr:`~knell.stores.kind.ComposeService.options`)."""
    from knell.stores import registry

    keys: dict[str, type[BaseModel]] = {}
    for kind in registry.kinds().values():
        if kind.compose is not None and kind.compose.options is not None:
            keys.update(dict.fromkeys(kind.compose.options.model_fields, kind.compose.options))
    return keys


def compose_keys() -> tuple[str, ...]:
    """The ``[store]`` keys of ``provider = "compose"``: the stack's own and
    every store kind's."""
    own = [k for k in ComposeOptions.model_fields if k not in _INTERNAL]
    return (*own, *_store_keys())


class ComposeOptions(BaseModel):
    """Validated ``[store]`` settings for ``provider = "compose"``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    provider: Literal["compose"] = "compose"
    airgap: Literal["auto", "yes", "no"] = "auto"
    build: Literal["missing", "always", "never"] = "missing"
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

    @model_validator(mode="after")
    def _store_options(self) -> ComposeOptions:
        """Keys beyond the stack's own are a store kind's, typed by it."""
        known = _store_keys()
        for key, value in (self.model_extra or {}).items():
            model = known.get(key)
            if model is None:
                raise ValueError(f"{key}: not a compose option")
            try:
                model.model_validate({key: value})
            except ValidationError as exc:
                raise ValueError(f"{key}: {exc.errors()[0]['msg']}") from None
        return self

    def store_env(self) -> dict[str, str]:
        """The variables docker-compose.yml passes to the store containers
        (each kind's :meth:`~knell.stores.kind.StoreKind.compose_env`)."""
        from knell.stores import registry

        extra = self.model_extra or {}
        env: dict[str, str] = {}
        for kind in registry.kinds().values():
            if kind.compose is not None and kind.compose.options is not None:
                fields = kind.compose.options.model_fields
                env.update(kind.compose_env({k: v for k, v in extra.items() if k in fields}))
        return env
