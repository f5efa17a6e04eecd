"""Labels: how a container, network or volume names the run that owns it.

Every resource of a knell stack carries ``knell=1`` and its owner:
``knell.owner=<runner pid>-<token>`` (the same two parts as the runner's
file in the owner registry), plus the runner's process start time and host
name. Those last two make the label enough on its own to decide whether the
owner still runs: a pid alive with the same start time on the same host is
the same runner, not a later process that reused the number. So leftovers
can be found and removed from the engine alone (:func:`knell.stores.compose.
reaper.reap_labelled`), even when the runner's file is lost. A resource
without an owner pid (a stack brought up by hand) is never reaped.

Compose fills the labels from environment variables (see
``compose/docker-compose.yml``), so one file serves every run.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from knell.owners import Owner
from knell.platform import pid_alive, process_stamp, process_started

__all__ = ["KNELL", "OWNER", "PROJECT", "SERVICE", "OwnerTag"]

KNELL = "knell"
OWNER = "knell.owner"
OWNER_PID = "knell.owner.pid"
OWNER_STARTED = "knell.owner.started"
OWNER_STAMP = "knell.owner.stamp"
OWNER_HOST = "knell.owner.host"
PROJECT = "com.docker.compose.project"
"""Set by both compose v1 and v2 on every container, network and volume."""
SERVICE = "com.docker.compose.service"


@dataclass(frozen=True)
class OwnerTag:
    """The owner of a stack, as its labels carry it."""

    pid: int
    token: str
    started: float
    host: str
    stamp: str = ""
    """The runner's :func:`knell.platform.process_stamp` (empty on a
    resource labelled by an earlier version: ``started`` decides)."""

    @property
    def ident(self) -> str:
        return f"{self.pid}-{self.token}"

    @classmethod
    def of(cls, owner: Owner | None) -> OwnerTag:
        """The tag of a runner's :class:`~knell.owners.Owner`, or of this
        process when there is none."""
        if owner is not None:
            return cls(owner.pid, owner.token, owner.started, socket.gethostname(), owner.stamp)
        import os

        pid = os.getpid()
        started = process_started(pid) or 0.0
        stamp = process_stamp(pid) or ""
        return cls(pid, uuid.uuid4().hex[:12], started, socket.gethostname(), stamp)

    def env(self) -> dict[str, str]:
        """The variables ``compose/docker-compose.yml`` puts in its labels."""
        return {
            "KNELL_OWNER": self.ident,
            "KNELL_OWNER_PID": str(self.pid),
            "KNELL_OWNER_STARTED": repr(self.started),
            "KNELL_OWNER_HOST": self.host,
            "KNELL_OWNER_STAMP": self.stamp,
        }

    @classmethod
    def from_labels(cls, labels: Mapping[str, str] | None) -> OwnerTag | None:
        """The owner named by a resource's labels; None when it names none
        (not knell's, or brought up by hand)."""
        if not labels or labels.get(KNELL) != "1":
            return None
        try:
            pid = int(labels.get(OWNER_PID, ""))
            started = float(labels.get(OWNER_STARTED, ""))
        except ValueError:
            return None
        token = labels.get(OWNER, "").partition("-")[2]
        return cls(pid, token, started, labels.get(OWNER_HOST, ""), labels.get(OWNER_STAMP, ""))

    def alive(self) -> bool:
        """Whether the owner still runs. An owner on another host (an
        engine shared through ``DOCKER_HOST``) cannot be checked from here
        and counts as alive."""
        if self.host != socket.gethostname():
            return True
        return pid_alive(self.pid, self.stamp or self.started)
