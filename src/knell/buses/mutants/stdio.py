"""Mutants behind the stdio protocol: a bus in another language, with a seeded bug.

The ``exec:`` driver (:mod:`knell.buses.stdio`) promises that every scenario
and check works unchanged against a bus written in any language. A promise
like that needs its own mutant: a bug in a *Node.js* bus, reached only
through its adapter's stdin and stdout, that the shipped scenarios must
still catch, with the same check that catches the Python twin.

The bus is the example in ``examples/node-adapter`` (its ``--bug`` flag
seeds the bug), so these mutants need a source checkout, Node.js on
``PATH`` and the example's ``node_modules`` (``make node-adapter``);
:meth:`NodeStaleAckBus.unavailable` says what is missing, and opening one
without them is a clear :class:`~knell.buses.DriverError`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from knell.buses.mutants.registry import mutant
from knell.buses.stdio import StdioBus, options_from_env

__all__ = ["NodeStaleAckBus", "node_adapter_dir"]


def node_adapter_dir() -> Path:
    """The example Node adapter: ``$KNELL_NODE_ADAPTER_DIR``, or
    ``examples/node-adapter`` of the source checkout knell runs from."""
    env = os.environ.get("KNELL_NODE_ADAPTER_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[4] / "examples" / "node-adapter"


class _NodeMutant(StdioBus):
    """The example Node bus, started with one ``--bug``."""

    bug = ""

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this mutant cannot run here (``None``: it can)."""
        folder = node_adapter_dir()
        if shutil.which("node") is None:
            return "Node.js ('node') is not on PATH"
        if not (folder / "adapter.js").is_file():
            return f"{folder}/adapter.js is missing (a source checkout is needed)"
        if not (folder / "node_modules" / "better-sqlite3").is_dir():
            return f"{folder}/node_modules is not installed (run: make node-adapter)"
        return None

    @classmethod
    def from_url(cls, url: str) -> StdioBus:
        reason = cls.unavailable()
        if reason is not None:
            from knell.buses import DriverError

            raise DriverError(f"mutant bus {cls.__name__}: {reason}")
        folder = node_adapter_dir()
        node = shutil.which("node") or "node"
        argv = [node, str(folder / "adapter.js"), "--bug", cls.bug]
        return cls(argv, url, cwd=folder, **options_from_env())


@mutant(
    "node-stale-ack",
    failure_mode="Stale/replayed ack regresses the cursor (a Node.js bus, over stdio)",
    killed_by=("no-cursor-regression",),
    scenarios=("kill-consumers", "quickstart"),
    rule="Cursors are forward-only: MAX(acked, up_to) inside the write transaction",
)
class NodeStaleAckBus(_NodeMutant):
    """Failure mode: a stale or replayed ack regresses the cursor, in a bus
    written in Node.js and reached through the stdio protocol.

    The example bus (``examples/node-adapter/bus.js``) run with
    ``--bug stale-ack`` writes ``acked = up_to`` instead of
    ``MAX(acked, up_to)``. It is the ``stale-ack-regresses`` bug of the
    reference bus, in another language, behind an adapter: caught by
    ``no-cursor-regression`` exactly as the Python one is, or the exec
    driver is not as transparent as it promises.
    """

    bug = "stale-ack"
