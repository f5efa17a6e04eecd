"""Which shard this process is, from a flag or the engine, and striding.

Striding by ``k`` (``k = I (mod N)``) rather than cutting the plan into
blocks spreads every scenario, store and bus over every shard without
knowing how long each run is; :mod:`knell.campaign.balance` splits by
expected duration instead (the default), and deals out equal runs exactly
as striding does. The shard may be named on the
command line (``--shard I/N``) or by the engine that started the process,
so one command line serves every job of a matrix:

- ``KNELL_SHARD=I/N``, for a CI job matrix (set it from the matrix index);
- ``JOB_COMPLETION_INDEX=I`` (a Kubernetes Indexed Job sets it) with the
  count from ``--shards N`` or ``KNELL_SHARDS=N`` (the Job's completions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knell.campaign.plan import PlannedRun
from knell.errors import KnellError

__all__ = ["Shard", "ShardError", "parse_shard", "resolve_shard", "select"]


class ShardError(KnellError):
    """A shard that names no part of the plan (exit 3)."""


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _check(index: int, count: int, source: str, text: str) -> Shard:
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"{source}: shard {text!r} must be I/N with N >= 1 and 0 <= I < N")
    return Shard(index, count)


def parse_shard(text: str, source: str = "--shard") -> Shard:
    """``"I/N"`` -> :class:`Shard`; ``source`` names where it came from."""
    index, slash, count = text.strip().partition("/")
    if not slash or not index.isdigit() or not count.isdigit():
        raise ShardError(f"{source}: expected I/N (for example 0/4), got {text!r}")
    return _check(int(index), int(count), source, text)


def resolve_shard(flag: str | None, shards: int | None, environ: Mapping[str, str]) -> Shard:
    """The shard this process runs: ``--shard``, else ``KNELL_SHARD``, else
    ``JOB_COMPLETION_INDEX`` with ``--shards``/``KNELL_SHARDS``; none of
    them is the whole plan (0/1)."""
    if flag is not None:
        return parse_shard(flag)
    if environ.get("KNELL_SHARD"):
        return parse_shard(environ["KNELL_SHARD"], "KNELL_SHARD")
    index = environ.get("JOB_COMPLETION_INDEX")
    if index:
        if shards is None:
            raw = environ.get("KNELL_SHARDS", "")
            if not raw.isdigit():
                raise ShardError(
                    f"JOB_COMPLETION_INDEX={index} is set but the shard count is not: give"
                    f" --shards N or KNELL_SHARDS=N (KNELL_SHARDS: {raw!r})"
                )
            shards = int(raw)
        if not index.isdigit():
            raise ShardError(f"JOB_COMPLETION_INDEX: expected a number, got {index!r}")
        return _check(int(index), shards, "JOB_COMPLETION_INDEX", f"{index}/{shards}")
    if shards is not None and shards != 1:
        raise ShardError("--shards N needs the index too: --shard I/N or JOB_COMPLETION_INDEX")
    return Shard(0, 1)


def select(runs: Sequence[PlannedRun], shard: Shard) -> list[PlannedRun]:
    """The runs of ``shard``: those with ``k = index (mod count)``."""
    return [r for r in runs if r.k % shard.count == shard.index]
