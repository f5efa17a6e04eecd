"""Where the compose files live.

The compose stack is part of the repository (``compose/`` at its top): the
compose files, and the Dockerfiles whose build context is the repository
itself (the images built from knell's source). So the provider works from a
checkout of knell (the editable install every developer and CI has), or
from any copy of that folder named by ``KNELL_COMPOSE_DIR`` or the scenario's
``compose_dir``.
"""

from __future__ import annotations

import os
from pathlib import Path

from knell.stores.compose.errors import ComposeError

__all__ = ["AIRGAP_FILE", "BASE_FILE", "REPLICATED_FILE", "compose_dir"]

BASE_FILE = "docker-compose.yml"
AIRGAP_FILE = "docker-compose.airgap.yml"
REPLICATED_FILE = "docker-compose.replicated.yml"
"""A primary's streaming replicas (``[store] replicas``)."""
_CHECKOUT = Path(__file__).resolve().parents[4] / "compose"


def compose_dir(explicit: Path | None = None) -> Path:
    """The folder holding ``docker-compose.yml``: ``explicit``, else
    ``$KNELL_COMPOSE_DIR``, else ``compose/`` of the checkout knell runs from."""
    env = os.environ.get("KNELL_COMPOSE_DIR")
    if explicit is not None:
        where, source = Path(explicit), "compose_dir"
    elif env:
        where, source = Path(env), "KNELL_COMPOSE_DIR"
    else:
        where, source = _CHECKOUT, "the knell checkout"
    if not (where / BASE_FILE).is_file():
        raise ComposeError(
            f"{where}: no {BASE_FILE} (from {source}); the compose stack lives in the "
            "compose/ folder of a knell checkout: run from one, or set KNELL_COMPOSE_DIR"
        )
    return where.resolve()
