"""Every bus call a worker makes goes through :meth:`Worker.op`.

``Worker.op`` is the one place that records an operation's invoke and its
one completion, classified by the contract's error tree, and marks a
driver fault (a stdio adapter that died or broke the protocol) as knell's
side. A bus call written outside it records none of that: the waiter's
``wait`` was, and a correct bus behind a broken adapter was judged INVALID.
So the workload's source is read here, and every call of a contract
method must sit in a ``lambda`` handed to ``op``; the Worker's own wrappers
(``worker.post``, ``worker.subscribe``, ``worker.ack``) are such calls
themselves.
"""

from __future__ import annotations

import ast
from pathlib import Path

import knell.workload
from knell.buses.contract import CONTRACT_METHODS

WORKLOAD = Path(knell.workload.__file__).parent
METHODS = {m for names in CONTRACT_METHODS.values() for m in names} - {"close"}
WRAPPED = "worker"
"""The name the roles give their Worker, whose methods of these names wrap ``op``."""


def _outside_op(source: str) -> list[str]:
    """Calls of contract methods in ``source`` that no ``op`` records."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    stray = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in METHODS:
            continue
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id == WRAPPED:
            continue
        lam = parents.get(node)
        call = parents.get(lam) if isinstance(lam, ast.Lambda) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "op"
        ):
            continue
        stray.append(f"line {node.lineno}: {ast.unparse(node)}")
    return stray


def test_every_bus_call_of_the_workload_is_recorded_by_op() -> None:
    stray = {
        path.name: found
        for path in sorted(WORKLOAD.glob("*.py"))
        if (found := _outside_op(path.read_text(encoding="utf-8")))
    }
    assert not stray, stray


def test_the_guard_sees_a_bus_call_outside_op() -> None:
    bare = "def arm(worker):\n    return worker.bus.wait('h', 1.0)\n"
    assert _outside_op(bare) == ["line 2: worker.bus.wait('h', 1.0)"]
    recorded = (
        "def arm(worker):\n"
        "    return worker.op('arm', {}, lambda: worker.bus.wait('h', 1.0), dict)\n"
    )
    assert _outside_op(recorded) == []
