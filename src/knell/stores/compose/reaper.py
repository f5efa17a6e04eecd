"""Removing what dead runners left in the Docker engine.

Two ways in, both removing only what belongs to runners that are gone:

* **Records** (:mod:`knell.owners`): a run records its compose project
  before ``up`` and each container, network and volume after; ``knell
  reap`` calls the functions below (registered in
  :data:`knell.owners.REAPERS`) for the records of dead runners only.
* **Labels** (:func:`reap_labelled`): every resource carries its owner's
  pid, start time and host (:mod:`.labels`), so leftovers are found from
  the engine alone, even when a runner's record file is lost.

Order matters to the engine: containers first (a network or volume in use
cannot be removed), then networks, then volumes. A resource that is
already gone is not an error: ``down`` usually got there first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from knell.stores.compose.engine import client
from knell.stores.compose.errors import EngineUnavailable
from knell.stores.compose.labels import KNELL, PROJECT, OwnerTag

__all__ = [
    "reap_labelled",
    "remove_container",
    "remove_network",
    "remove_project",
    "remove_volume",
]


def remove_container(record: dict[str, Any]) -> bool:
    from docker.errors import NotFound

    try:
        client().containers.get(str(record["id"])).remove(force=True, v=True)
    except NotFound:
        return False
    return True


def remove_network(record: dict[str, Any]) -> bool:
    from docker.errors import NotFound

    try:
        network = client().networks.get(str(record["id"]))
        network.reload()
        for container in network.containers:
            network.disconnect(container, force=True)
        network.remove()
    except NotFound:
        return False
    return True


def remove_volume(record: dict[str, Any]) -> bool:
    from docker.errors import NotFound

    try:
        client().volumes.get(str(record["id"])).remove(force=True)
    except NotFound:
        return False
    return True


def remove_project(record: dict[str, Any]) -> bool:
    """Everything labelled with the compose project ``record["id"]``."""
    label: dict[str, str | list[str] | bool] = {"label": f"{PROJECT}={record['id']}"}
    return _remove_matching(label, lambda labels: True) > 0


def _remove_matching(
    filters: dict[str, str | list[str] | bool], wanted: Callable[[dict[str, str]], bool]
) -> int:
    engine = client()
    removed = 0
    for container in engine.containers.list(all=True, filters=filters):
        if wanted(container.labels):
            removed += remove_container({"id": container.id})
    for network in engine.networks.list(filters=filters):
        if wanted(network.attrs.get("Labels") or {}):
            removed += remove_network({"id": network.id})
    for volume in engine.volumes.list(filters=filters):
        if wanted(volume.attrs.get("Labels") or {}):
            removed += remove_volume({"id": volume.name})
    return removed


def _orphaned(labels: dict[str, str]) -> bool:
    owner = OwnerTag.from_labels(labels)
    return owner is not None and not owner.alive()


def reap_labelled(*, say: Callable[[str], None] = lambda _: None) -> list[str]:
    """Remove every container, network and volume labelled ``knell=1``
    whose owning runner no longer runs; return what was removed. Without a
    Docker engine there is nothing to remove."""
    try:
        engine = client()
    except EngineUnavailable:
        return []
    removed: list[str] = []
    filters: dict[str, str | list[str] | bool] = {"label": f"{KNELL}=1"}

    def note(kind: str, name: str, labels: dict[str, str]) -> None:
        owner = labels.get("knell.owner", "?")
        removed.append(f"{kind} {name}")
        say(f"removed {kind} {name} (owner {owner} is gone)")

    for container in engine.containers.list(all=True, filters=filters):
        if _orphaned(container.labels) and remove_container({"id": container.id}):
            note("container", str(container.name), container.labels)
    for network in engine.networks.list(filters=filters):
        labels = network.attrs.get("Labels") or {}
        if _orphaned(labels) and remove_network({"id": network.id}):
            note("network", str(network.name), labels)
    for volume in engine.volumes.list(filters=filters):
        labels = volume.attrs.get("Labels") or {}
        if _orphaned(labels) and remove_volume({"id": volume.name}):
            note("volume", str(volume.name), labels)
    return removed
