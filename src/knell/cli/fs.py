"""``knell fs``: the fault-injecting filesystem as commands, for users to
run around their own tests::

    knell fs mount BACKING MOUNTPOINT --control SOCKET   # foreground
    knell fs lose-unsynced SOCKET
    knell fs torn SOCKET --seed 7
    knell fs unmount MOUNTPOINT

Each fault command prints the mount process's JSON reply on one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from knell.errors import ExitCode, KnellError

__all__ = ["fs"]


class _Usage(click.ClickException):
    exit_code = ExitCode.USAGE


def _say(result: dict[str, Any]) -> None:
    click.echo(json.dumps(result, sort_keys=True))


def _control(socket: Path) -> Any:
    if sys.platform == "win32":
        raise _Usage("knell fs: Unix sockets and FUSE are not available on Windows")
    assert sys.platform != "win32"
    from knell.fs import control_channel

    return control_channel.FsControl(socket)


def _call(socket: Path, op: str, **args: Any) -> None:
    try:
        _say(_control(socket).request(op, **args))
    except KnellError as exc:
        raise _Usage(str(exc)) from None


_SOCKET = click.argument("socket", type=click.Path(path_type=Path, dir_okay=False))


@click.group()
def fs() -> None:
    """A FUSE filesystem that can forget: power cuts, torn writes, failing
    fsyncs, a full or slow disk, over a backing folder."""


@fs.command()
@click.argument("backing", type=click.Path(path_type=Path))
@click.argument("mountpoint", type=click.Path(path_type=Path))
@click.option(
    "--control",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The Unix socket the fault commands talk to.",
)
@click.option(
    "--entries",
    type=click.Choice(["posix", "journaled"]),
    default="posix",
    show_default=True,
    help="When a created, renamed or unlinked entry is durable: after an fsync of its folder "
    "(posix), or after any fsync, as ext4 and XFS commit their journal (journaled).",
)
def mount(backing: Path, mountpoint: Path, control: Path, entries: str) -> None:
    """Mount BACKING at MOUNTPOINT in the foreground; SIGTERM or Ctrl-C
    unmounts cleanly. Until a file (or folder) is fsynced, its changes can
    be lost by the fault commands."""
    from knell.fs.mount import serve

    serve(backing, mountpoint, control, entries)


@fs.command()
@click.argument("mountpoint", type=click.Path(path_type=Path))
def unmount(mountpoint: Path) -> None:
    """Lazily unmount MOUNTPOINT, also when its process was killed."""
    from knell.fs.mount import unmount as lazy_unmount

    click.echo(
        f"unmounted {mountpoint}" if lazy_unmount(mountpoint) else f"{mountpoint}: not mounted"
    )


@fs.command("lose-unsynced")
@_SOCKET
def lose_unsynced(socket: Path) -> None:
    """A power cut: every unsynced write, create, rename and unlink is lost."""
    _call(socket, "lose-unsynced")


@fs.command()
@_SOCKET
@click.option("--seed", required=True, type=int, help="Which pages survive (same seed, same disk).")
def torn(socket: Path, seed: int) -> None:
    """A power cut during writeback: a seeded subset of the unsynced 4 KiB
    pages is kept, the last one partly; the rest is lost."""
    _call(socket, "torn", seed=seed)


@fs.command("fsync-error")
@_SOCKET
@click.option("--path", "path", help="Only syncs of this file (a path inside the mount).")
@click.option("--count", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--keep-dirty",
    is_flag=True,
    help="After the EIO keep the pages dirty (a later fsync writes them) instead of "
    "Linux's behaviour (they are dropped and a later fsync succeeds without them).",
)
def fsync_error(socket: Path, path: str | None, count: int, keep_dirty: bool) -> None:
    """The next COUNT fsyncs (of PATH, or of any file) fail with EIO."""
    _call(socket, "fsync-error", path=path, count=count, drop_dirty=not keep_dirty)


@fs.command("disk-full")
@_SOCKET
def disk_full(socket: Path) -> None:
    """Writes and fsyncs fail with ENOSPC until healed."""
    _call(socket, "disk-full")


@fs.command("slow-disk")
@_SOCKET
@click.option("--delay", required=True, help="Added to every fsync, e.g. 50ms.")
def slow_disk(socket: Path, delay: str) -> None:
    """Every fsync takes DELAY longer until healed."""
    from knell.durations import parse_duration

    try:
        seconds = parse_duration(delay)
    except ValueError as exc:
        raise _Usage(f"--delay: {exc}") from None
    _call(socket, "slow-disk", delay=seconds)


@fs.command()
@_SOCKET
def heal(socket: Path) -> None:
    """End fsync errors, the full disk and the slow disk."""
    _call(socket, "heal")


@fs.command()
@_SOCKET
def checkpoint(socket: Path) -> None:
    """Make everything durable, as a clean shutdown would."""
    _call(socket, "checkpoint")


@fs.command()
@_SOCKET
def status(socket: Path) -> None:
    """The faults in force and how much is unsynced."""
    _call(socket, "status")
