"""A scenario's store options as plain values (:class:`StoreSpec`).

The scenario file names the store and its options (the runner's ``[store]``
table); :class:`StoreSpec` holds them and nothing else. It sits below the
store registry, so a store kind can type against it; turning a spec into a
store, which needs the registry, is :mod:`knell.stores.create`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXISTING_ONLY", "PRIVATE_ONLY", "StoreSpec"]

PRIVATE_ONLY = ("port", "bin", "data_dir", "password", "settings")
EXISTING_ONLY = ("crash_command", "restart_command", "keep")


@dataclass(frozen=True, init=False)
class StoreSpec:
    """A run's store, as the scenario describes it. ``None`` means "the
    default"; see each store class for what the options do. Keywords
    beyond the common ones are the kind's own options (its
    :attr:`~knell.stores.kind.StoreKind.options`), kept in :attr:`options`."""

    kind: str = "sqlite"
    """A registered store kind's name."""
    url: str | None = None
    """An existing server (``store_url``), in a URL scheme of the kind."""
    poll_interval: float = 0.1
    op_timeout: float = 5.0
    # private servers
    port: int | None = None
    bin: str | None = None
    """The server's binaries (a folder or a path, as the kind says)."""
    data_dir: str | None = None
    password: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """Extra server settings."""
    # an existing server
    keep: bool | None = None
    crash_command: str | None = None
    restart_command: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """The kind's own options (``fsync``, ``persistence``, ...)."""

    def __init__(
        self,
        kind: str = "sqlite",
        url: str | None = None,
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        *,
        port: int | None = None,
        bin: str | None = None,
        data_dir: str | None = None,
        password: str | None = None,
        settings: dict[str, str] | None = None,
        keep: bool | None = None,
        crash_command: str | None = None,
        restart_command: str | None = None,
        **options: Any,
    ) -> None:
        values = dict(
            kind=kind,
            url=url,
            poll_interval=poll_interval,
            op_timeout=op_timeout,
            port=port,
            bin=bin,
            data_dir=data_dir,
            password=password,
            settings=dict(settings or {}),
            keep=keep,
            crash_command=crash_command,
            restart_command=restart_command,
            options={k: v for k, v in options.items() if v is not None},
        )
        for name, value in values.items():
            object.__setattr__(self, name, value)
