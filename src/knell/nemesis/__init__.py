"""The nemesis: the faults a run inflicts, one module per fault kind.

Jepsen's word for the adversary. A scenario's ``[[nemesis]]`` tables name
fault kinds (``kill``, ``pause``); the seed expands them into a timed plan
(:mod:`knell.schedule`); the runner hands each step to its kind, which acts
on real processes and records what it did; the history's fault windows
(:mod:`knell.checker.windows`) tell the checks when each fault held.

* :mod:`~knell.nemesis.kind`: what a fault kind is (the one interface);
* :mod:`~knell.nemesis.targets`: what a kind sees of a scenario (its
  targets, a protocol the scenario satisfies);
* :mod:`~knell.nemesis.registry`: the kinds by name, and how to add one;
* :mod:`~knell.nemesis.kill`, :mod:`~knell.nemesis.pause`: process faults;
* :mod:`~knell.nemesis.store_fault`: what the store faults share (and the
  on/off switch of ``store-pause`` and ``store-disconnect``);
* :mod:`~knell.nemesis.network`: what the link faults share (one module
  per kind, each saying what proves it);
* :mod:`~knell.nemesis.toxiproxy`: the one client adapter for the Toxiproxy
  HTTP API that network faults go through, :mod:`~knell.nemesis.probe`
  (proof on a real connection that a fault took effect). The server they
  drive when a machine has no ``toxiproxy-server``, knell's own
  Toxiproxy-compatible one, is a package of its own (:mod:`knell.proxy`):
  it knows nothing of scenarios or fault kinds.
"""

from __future__ import annotations

from knell.nemesis.kind import (
    Action,
    Band,
    Effect,
    FaultKind,
    FaultSpec,
    NemesisContext,
    Radius,
    StoreHandle,
)
from knell.nemesis.registry import FAULT_KINDS, kinds, register_kind
from knell.nemesis.targets import FaultTargets

__all__ = [
    "FAULT_KINDS",
    "Action",
    "Band",
    "Effect",
    "FaultKind",
    "FaultSpec",
    "FaultTargets",
    "NemesisContext",
    "Radius",
    "StoreHandle",
    "kinds",
    "register_kind",
]
