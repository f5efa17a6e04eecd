"""Sentinel's TILT mode, and why a failover waits it out before it starts.

A Sentinel runs its timer about ten times a second. When two runs are more
than two seconds apart (or the clock went back), it concludes that its view
of the world is stale (the machine stalled, its process was paused, the
clock jumped) and enters TILT mode for 30 seconds: it keeps watching, but
marks nothing down and starts no failover. A loaded CI machine that
stalls for ten seconds puts every Sentinel of a run into TILT at once.

A failover begun then does not merely wait: it cannot complete. When the
TILT ends, the Sentinels first mark the primary down, and then pick a
replica. Sentinel passes over a replica whose link to the primary has been
down for longer than ten ``down-after`` periods plus the time since the
primary was marked down (its replica-validity rule). A primary killed
during the TILT broke every replica's link at the kill, 30 seconds
before it was marked down, so no replica qualifies and every attempt ends
in ``-failover-abort-no-good-slave``, for as long as one waits. (Seen in a CI
run: a 13-second stall just before the scheduled kill; reproduced by
pausing the stack's containers for 13 seconds.)

So a failover, and a replication hold that precedes one, begins only once
no Sentinel reports ``sentinel_tilt:1`` in its ``INFO sentinel``, and the
fault records how long it waited. The stall is the machine's doing, not
the bus's: the wait moves the fault later, and the fault clock stops
meanwhile (:meth:`knell.runner._Run.drive`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from knell.stores.base import StoreError

__all__ = ["TILT_WAIT", "TiltWatch", "info_fields", "tilted", "wait_out_tilt"]

TILT_WAIT = 45.0
"""Seconds a failover waits for the Sentinels to leave TILT: a TILT lasts
30 seconds after the stall that caused it, and another stall while waiting
starts it again."""


def info_fields(text: object) -> dict[str, str]:
    """The ``field:value`` lines of an ``INFO`` reply (section headers and
    blank lines skipped)."""
    out = {}
    for line in str(text).splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def tilted(infos: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The Sentinels (by name) whose ``INFO sentinel`` says they are in TILT."""
    return sorted(name for name, info in infos.items() if info.get("sentinel_tilt") == "1")


class TiltWatch:
    """The Sentinels seen in TILT while a failover waits for its promotion,
    asked at most once a second: a stall after :func:`wait_out_tilt`
    leaves the replicas' links broken for longer than Sentinel accepts,
    and a failover that promotes nobody should say so."""

    def __init__(
        self,
        read: Callable[[], Mapping[str, Mapping[str, str]]],
        *,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._every = every
        self._clock = clock
        self._next = 0.0
        self.seen: set[str] = set()

    def look(self) -> None:
        """Ask the Sentinels, unless they were asked less than ``every`` ago."""
        if self._clock() >= self._next:
            self.seen.update(tilted(self._read()))
            self._next = self._clock() + self._every

    def note(self) -> str:
        """A clause for the error of a failover that promoted nobody."""
        if not self.seen:
            return ""
        return (
            f" ({', '.join(sorted(self.seen))} went into TILT mode meanwhile: the machine "
            "stalled or its clock jumped, and a replica whose link broke long before the "
            "primary was marked down cannot be promoted)"
        )


def wait_out_tilt(
    read: Callable[[], Mapping[str, Mapping[str, str]]],
    *,
    timeout: float = TILT_WAIT,
    poll: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Block until no Sentinel ``read`` reports is in TILT; the seconds
    waited (0 when none was). ``read`` gives each Sentinel's ``INFO
    sentinel`` fields by name (a Sentinel that does not answer is left out:
    whether the quorum is reachable is the failover's own question).
    :class:`StoreError`, naming them, if some still are after ``timeout``."""
    started = clock()
    while found := tilted(read()):
        waited = clock() - started
        if waited >= timeout:
            raise StoreError(
                f"redis: {', '.join(found)} still in TILT mode after {waited:.0f} s (a Sentinel "
                "enters it for 30 s when its timer stalls for 2 s or more: the machine stalled "
                "or its clock jumped); a failover begun now could not promote any replica"
            )
        sleep(poll)
    return round(clock() - started, 3)
