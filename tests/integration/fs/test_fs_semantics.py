"""knell fs on real files, written by real processes: what a power cut
keeps, what a torn write keeps, and the errors a failing disk returns."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.fs.conftest import Mounted

PAGE = 4096


def child(code: str, cwd: Path) -> str:
    """Run Python code in a separate process in ``cwd`` (on the mount)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os\n" + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


SYNC_DIR = "d = os.open('.', os.O_RDONLY); os.fsync(d); os.close(d)\n"


def durable_file(m: Mounted, name: str, data: bytes) -> None:
    child(
        f"fd = os.open({name!r}, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)\n"
        f"os.write(fd, {data!r}); os.fsync(fd); os.close(fd)\n" + SYNC_DIR,
        m.root,
    )


def test_a_write_without_fsync_is_gone_after_a_power_cut(mounted: Mounted) -> None:
    durable_file(mounted, "log", b"acked\n")
    child("open('log', 'ab').write(b'not durable\\n')", mounted.root)
    assert (mounted.root / "log").read_bytes() == b"acked\nnot durable\n"
    report = mounted.control.lose_unsynced()
    assert report["files_reverted"] == 1
    assert (mounted.root / "log").read_bytes() == b"acked\n"


def test_a_write_with_fsync_is_kept(mounted: Mounted) -> None:
    durable_file(mounted, "log", b"acked\n")
    child(
        "fd = os.open('log', os.O_WRONLY | os.O_APPEND)\n"
        "os.write(fd, b'durable\\n'); os.fsync(fd); os.close(fd)",
        mounted.root,
    )
    mounted.control.lose_unsynced()
    assert (mounted.root / "log").read_bytes() == b"acked\ndurable\n"


def test_a_created_file_fsynced_without_its_directory_vanishes(mounted: Mounted) -> None:
    child(
        "fd = os.open('new', os.O_CREAT | os.O_WRONLY, 0o644)\n"
        "os.write(fd, b'data'); os.fsync(fd); os.close(fd)",
        mounted.root,
    )
    mounted.control.lose_unsynced()
    assert not (mounted.root / "new").exists()
    assert sorted(os.listdir(mounted.root)) == []


def test_a_rename_without_a_directory_fsync_reverts(mounted: Mounted) -> None:
    durable_file(mounted, "current", b"old")
    durable_file(mounted, "next", b"new")
    child("os.rename('next', 'current')", mounted.root)
    assert (mounted.root / "current").read_bytes() == b"new"
    mounted.control.lose_unsynced()
    assert sorted(os.listdir(mounted.root)) == ["current", "next"]
    assert (mounted.root / "current").read_bytes() == b"old"
    child("os.rename('next', 'current')\n" + SYNC_DIR, mounted.root)
    mounted.control.lose_unsynced()
    assert sorted(os.listdir(mounted.root)) == ["current"]
    assert (mounted.root / "current").read_bytes() == b"new"


def test_the_backing_folder_keeps_its_own_files_out_of_sight(mounted: Mounted) -> None:
    assert ".knell-fs" in os.listdir(mounted.backing)
    assert os.listdir(mounted.root) == []
    with pytest.raises(FileNotFoundError):
        (mounted.root / ".knell-fs").stat()


def _torn_once(m: Mounted, seed: int) -> bytes:
    durable_file(m, "data", b"o" * (4 * PAGE))
    child(f"open('data', 'r+b').write(b'N' * {8 * PAGE})", m.root)
    m.control.torn(seed)
    return (m.root / "data").read_bytes()


def test_torn_keeps_a_seeded_subset_of_whole_pages_and_replays_it(mounted: Mounted) -> None:
    first = _torn_once(mounted, 7)
    again = _torn_once(mounted, 7)
    other = _torn_once(mounted, 8)
    assert first == again
    assert other != first
    for data in (first, other):
        assert data not in (b"o" * 4 * PAGE, b"N" * 8 * PAGE)
        assert 4 * PAGE <= len(data) <= 8 * PAGE and len(data) % 512 == 0
        pages = [data[i : i + PAGE] for i in range(0, len(data), PAGE)]
        mixed = [
            p
            for i, p in enumerate(pages)
            if p not in (b"N" * PAGE, (b"o" if i < 4 else b"\0") * PAGE)
        ]
        # Only the last page kept may be cut, at a sector boundary.
        assert len(mixed) <= 1
        for page in mixed:
            cut = len(page.rstrip(b"o\0")) if page.startswith(b"N") else 0
            assert cut % 512 == 0 and page[:cut] == b"N" * cut


def test_an_armed_fsync_fails_with_eio_and_then_loses_the_dropped_pages(mounted: Mounted) -> None:
    durable_file(mounted, "wal", b"o" * PAGE)
    mounted.control.fsync_error(path="wal", count=1)
    out = child(
        "import errno\n"
        "fd = os.open('wal', os.O_WRONLY)\n"
        "os.pwrite(fd, b'E' * 4096, 0)\n"
        "try:\n    os.fsync(fd)\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"
        "os.fsync(fd)\n"  # Linux: the next fsync succeeds ...
        "print('second-ok')",
        mounted.root,
    )
    assert out.split() == ["EIO", "second-ok"]
    mounted.control.lose_unsynced()
    # ... and yet the page dirty at the failure never reached the disk.
    assert (mounted.root / "wal").read_bytes() == b"o" * PAGE


def test_keep_dirty_lets_a_later_fsync_write_the_pages(mounted: Mounted) -> None:
    durable_file(mounted, "wal", b"o" * PAGE)
    mounted.control.fsync_error(path="/wal", count=1, drop_dirty=False)
    out = child(
        "fd = os.open('wal', os.O_WRONLY)\nos.pwrite(fd, b'E' * 4096, 0)\n"
        "try:\n    os.fsync(fd)\nexcept OSError as e:\n    print(e.errno)\n"
        "os.fsync(fd)",
        mounted.root,
    )
    assert out.split() == [str(errno.EIO)]
    mounted.control.lose_unsynced()
    assert (mounted.root / "wal").read_bytes() == b"E" * PAGE


def test_a_full_disk_refuses_writes_and_fsyncs_with_enospc_until_healed(mounted: Mounted) -> None:
    durable_file(mounted, "f", b"x")
    mounted.control.disk_full()
    out = child(
        "fd = os.open('f', os.O_WRONLY)\n"
        "for call in (lambda: os.pwrite(fd, b'y', 1), lambda: os.fsync(fd)):\n"
        "    try:\n        call()\n    except OSError as e:\n        print(e.errno)",
        mounted.root,
    )
    assert out.split() == [str(errno.ENOSPC)] * 2
    mounted.control.heal()
    child("fd = os.open('f', os.O_WRONLY); os.pwrite(fd, b'y', 1); os.fsync(fd)", mounted.root)
    assert (mounted.root / "f").read_bytes() == b"xy"


def test_a_slow_disk_delays_fsync(mounted: Mounted) -> None:
    durable_file(mounted, "f", b"x")
    mounted.control.slow_disk(0.3)
    fd = os.open(mounted.root / "f", os.O_WRONLY)
    try:
        started = time.monotonic()
        os.fsync(fd)
        assert time.monotonic() - started >= 0.3
        mounted.control.heal()
        started = time.monotonic()
        os.fsync(fd)
        assert time.monotonic() - started < 0.3
    finally:
        os.close(fd)


def test_checkpoint_makes_everything_durable(mounted: Mounted) -> None:
    child("open('a', 'wb').write(b'data')", mounted.root)
    mounted.control.checkpoint()
    mounted.control.lose_unsynced()
    assert (mounted.root / "a").read_bytes() == b"data"


def test_open_with_o_trunc_truncates_and_a_power_cut_undoes_it(mounted: Mounted) -> None:
    durable_file(mounted, "f", b"long durable content")
    child("open('f', 'wb').write(b'ab')", mounted.root)  # O_WRONLY | O_CREAT | O_TRUNC
    assert (mounted.root / "f").read_bytes() == b"ab"
    mounted.control.lose_unsynced()
    assert (mounted.root / "f").read_bytes() == b"long durable content"


def test_ftruncate_of_a_durable_file_shrinks_it_and_a_power_cut_undoes_it(
    mounted: Mounted,
) -> None:
    # SQLite's first connection cuts a left-over -shm file with ftruncate(fd,
    # 3): the kernel sends it by path, without the handle, and the durable
    # bytes the cut removes must be read first (it failed with EBADF).
    durable_file(mounted, "shm", b"x" * (2 * PAGE + 100))
    child(
        "fd = os.open('shm', os.O_RDWR); os.ftruncate(fd, 3); os.close(fd)\nos.truncate('shm', 2)",
        mounted.root,
    )
    assert (mounted.root / "shm").read_bytes() == b"xx"
    mounted.control.lose_unsynced()
    assert (mounted.root / "shm").read_bytes() == b"x" * (2 * PAGE + 100)


def test_touch_sets_the_times_to_now(mounted: Mounted) -> None:
    durable_file(mounted, "f", b"x")
    os.utime(mounted.root / "f", ns=(10**18, 10**18))
    before = time.time_ns()
    os.utime(mounted.root / "f")  # UTIME_NOW for both
    st = os.stat(mounted.root / "f")
    assert st.st_mtime_ns >= before - 10**9 and st.st_atime_ns >= before - 10**9
    os.utime(mounted.root / "f", ns=(2 * 10**18, 10**18 + 5))
    assert os.stat(mounted.root / "f").st_mtime_ns == 10**18 + 5


def test_create_with_o_excl_refuses_an_existing_file(mounted: Mounted) -> None:
    durable_file(mounted, "f", b"x")
    with pytest.raises(FileExistsError):
        os.open(mounted.root / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY)


def test_rename_exchange_is_refused_not_turned_into_an_overwrite(mounted: Mounted) -> None:
    import ctypes

    durable_file(mounted, "a", b"a")
    durable_file(mounted, "b", b"b")
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    rc = libc.renameat2(
        at_fdcwd, bytes(mounted.root / "a"), at_fdcwd, bytes(mounted.root / "b"), rename_exchange
    )
    assert rc == -1 and ctypes.get_errno() == errno.EINVAL
    assert (mounted.root / "b").read_bytes() == b"b"
    assert (mounted.root / "a").read_bytes() == b"a"


def test_a_server_running_as_its_own_user_owns_what_it_creates(mounted: Mounted) -> None:
    import pwd
    import shutil

    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser (a server as another user is root's case)")
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user to run as")
    os.chown(mounted.root / ".", user.pw_uid, user.pw_gid)
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", "sh", "-c", "mkdir d && echo x > d/f && ln -s d/f l"],
        cwd=mounted.root, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("d", "d/f", "l"):
        st = os.lstat(mounted.backing / name)
        assert (st.st_uid, st.st_gid) == (user.pw_uid, user.pw_gid), name


def test_a_journaled_mount_keeps_entries_made_before_any_fsync(tmp_path: Path) -> None:
    from knell.fs.control_channel import FsControl
    from knell.fs.mount import MountProcess
    from tests.integration.fs.conftest import require_fuse

    require_fuse()
    backing, root = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    root.mkdir()
    with MountProcess(backing, root, tmp_path / "c.sock", tmp_path / "log", entries="journaled"):
        child(
            "os.mkdir('dir')\n"  # the parent is never fsynced, as Redis does
            "fd = os.open('dir/aof', os.O_CREAT | os.O_WRONLY, 0o644)\n"
            "os.write(fd, b'acked'); os.fsync(fd); os.close(fd)\n"
            "open('late', 'wb').close()",
            root,
        )
        FsControl(tmp_path / "c.sock").lose_unsynced()
        assert (root / "dir" / "aof").read_bytes() == b"acked"
        assert not (root / "late").exists()


def test_an_armed_fsync_error_fails_a_directory_fsync_with_eio(mounted: Mounted) -> None:
    mounted.control.fsync_error(count=1)
    out = child(
        "d = os.open('.', os.O_RDONLY)\n"
        "try:\n    os.fsync(d)\nexcept OSError as e:\n    print(e.errno)\n"
        "os.fsync(d)",
        mounted.root,
    )
    assert out.split() == [str(errno.EIO)]
