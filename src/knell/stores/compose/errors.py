"""What can go wrong with the containerized stack, as one small tree.

::

    ComposeError                 anything the compose provider could not do
    ├── EngineUnavailable        no Docker engine answers (not installed, not started)
    ├── ComposeNotFound          neither ``docker compose`` v2 nor ``docker-compose``
    └── StackFailed              a build, ``up``, healthcheck or fault failed

Every message names what failed and how to fix it, so the CLI can print it
as it is, never a traceback.
"""

from __future__ import annotations

__all__ = ["ComposeError", "ComposeNotFound", "EngineUnavailable", "StackFailed"]


class ComposeError(RuntimeError):
    """The compose provider could not do what was asked."""


class EngineUnavailable(ComposeError):
    """No Docker engine answers."""


class ComposeNotFound(ComposeError):
    """No compose command is installed."""


class StackFailed(ComposeError):
    """Building, starting, health-checking or faulting the stack failed."""
