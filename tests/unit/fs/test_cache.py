"""The durability model of knell fs, in-process on a temporary backing
folder: the hooks the FUSE operations call are called here by hand, in the
order the operations call them, so each rule is checked without a mount."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the page cache is POSIX-only")

if sys.platform != "win32":
    from knell.fs.cache import PAGE, LazyDisk


class Files:
    """Writes through the model, as the FUSE operations do."""

    def __init__(self, disk: LazyDisk) -> None:
        self.disk = disk

    def create(self, name: str, data: bytes = b"") -> None:
        self.disk.before_entry_change(name)
        fd = os.open(self.disk.real(name), os.O_RDWR | os.O_CREAT, 0o644)
        os.close(fd)
        if data:
            self.write(name, data, 0)

    def write(self, name: str, data: bytes, offset: int) -> None:
        fd = os.open(self.disk.real(name), os.O_RDWR)
        try:
            self.disk.before_write(fd, offset, len(data))
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def truncate(self, name: str, size: int) -> None:
        fd = os.open(self.disk.real(name), os.O_RDWR)
        try:
            self.disk.before_truncate(fd, size)
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def fsync(self, name: str) -> None:
        fd = os.open(self.disk.real(name), os.O_RDONLY)
        try:
            self.disk.synced(fd)
        finally:
            os.close(fd)

    def fail_fsync(self, name: str, *, drop_dirty: bool = True) -> None:
        fd = os.open(self.disk.real(name), os.O_RDONLY)
        try:
            self.disk.sync_failed(fd, drop_dirty=drop_dirty)
        finally:
            os.close(fd)

    def fsync_dir(self, name: str = "") -> None:
        self.disk.synced_dir(name)

    def read(self, name: str) -> bytes:
        return self.disk.real(name).read_bytes()

    def names(self, folder: str = "") -> set[str]:
        return {p.name for p in self.disk.real(folder).iterdir()} - {".knell-fs"}


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(LazyDisk(tmp_path))


def test_an_unsynced_write_is_lost_and_a_synced_one_kept(files: Files) -> None:
    files.create("a", b"durable")
    files.fsync("a")
    files.fsync_dir()
    files.write("a", b"LOST", 0)
    files.write("a", b"-appended", 7)
    files.disk.lose_unsynced()
    assert files.read("a") == b"durable"


def test_a_truncation_is_undone_with_the_bytes_it_cut(files: Files) -> None:
    body = bytes(range(256)) * 40  # 10 KiB, three pages
    files.create("a", body)
    files.fsync("a")
    files.fsync_dir()
    files.truncate("a", 100)
    files.write("a", b"x" * 5000, 100)
    files.disk.lose_unsynced()
    assert files.read("a") == body


def test_a_new_file_without_a_directory_fsync_vanishes_even_if_its_data_was_fsynced(
    files: Files,
) -> None:
    files.create("a", b"data")
    files.fsync("a")
    files.disk.lose_unsynced()
    assert files.names() == set()


def test_a_directory_fsync_keeps_the_entry_but_not_unsynced_data(files: Files) -> None:
    files.create("a", b"data")
    files.fsync_dir()
    files.disk.lose_unsynced()
    assert files.names() == {"a"}
    assert files.read("a") == b""


def test_an_unlinked_durable_file_comes_back_with_its_durable_contents(files: Files) -> None:
    files.create("a", b"kept")
    files.fsync("a")
    files.fsync_dir()
    files.write("a", b"gone", 0)
    files.disk.remove("a")
    assert files.names() == set()
    files.disk.lose_unsynced()
    assert files.read("a") == b"kept"


def test_an_unlink_made_durable_removes_the_file_for_good(files: Files) -> None:
    files.create("a", b"kept")
    files.fsync("a")
    files.fsync_dir()
    files.disk.remove("a")
    files.fsync_dir()
    files.disk.lose_unsynced()
    assert files.names() == set()
    assert list((files.disk.root / ".knell-fs" / "grave").iterdir()) == []


def test_a_rename_over_a_file_reverts_without_a_directory_fsync(files: Files) -> None:
    files.create("db", b"old")
    files.create("db.tmp", b"new")
    files.fsync("db")
    files.fsync("db.tmp")
    files.fsync_dir()
    files.disk.rename("db.tmp", "db")
    assert files.read("db") == b"new"
    files.disk.lose_unsynced()
    assert files.names() == {"db", "db.tmp"}
    assert files.read("db") == b"old"
    files.disk.rename("db.tmp", "db")
    files.fsync_dir()
    files.disk.lose_unsynced()
    assert files.names() == {"db"}
    assert files.read("db") == b"new"


def test_a_rename_across_folders_half_synced_keeps_the_file_under_one_name(
    files: Files,
) -> None:
    files.disk.before_entry_change("d")
    files.disk.real("d").mkdir()
    files.fsync_dir()
    files.create("d/a", b"x")
    files.fsync("d/a")
    files.fsync_dir("d")
    files.disk.rename("d/a", "b")
    files.fsync_dir()  # the new name is durable, the old folder still names it
    files.disk.lose_unsynced()
    # Both durable entries name one inode: the model keeps one name per
    # node (no hard links), so the file survives under exactly one.
    places = [p for p in ("b", "d/a") if files.disk.real(p).exists()]
    assert len(places) == 1
    assert files.read(places[0]) == b"x"


def test_a_new_folder_vanishes_with_its_contents_without_a_parent_fsync(files: Files) -> None:
    files.disk.before_entry_change("d")
    files.disk.real("d").mkdir()
    files.create("d/a", b"x")
    files.fsync("d/a")
    files.fsync_dir("d")
    files.disk.lose_unsynced()
    assert files.names() == set()


def _torn_state(files: Files) -> None:
    files.create("a", b"o" * (4 * PAGE))
    files.fsync("a")
    files.fsync_dir()
    files.write("a", b"N" * (4 * PAGE), 0)
    files.write("a", b"T" * (4 * PAGE), 4 * PAGE)


def test_torn_keeps_whole_pages_and_one_partial_last_page(files: Files) -> None:
    _torn_state(files)
    files.disk.torn(3)
    data = files.read("a")
    assert len(data) % 512 == 0 and PAGE * 4 <= len(data) <= PAGE * 8
    pages = [data[i : i + PAGE] for i in range(0, len(data), PAGE)]
    partial = 0
    for index, page in enumerate(pages):
        new, old = (b"N", b"o") if index < 4 else (b"T", b"\0")
        if page in (new * PAGE, old * PAGE) or (index >= 4 and page == new * len(page)):
            continue
        # the one page cut inside: new bytes up to a sector boundary, then old
        cut = page.index(old)
        assert cut % 512 == 0 and page == new * cut + old * (PAGE - cut)
        partial += 1
    assert partial <= 1


def test_torn_replays_identically_for_the_same_seed(tmp_path: Path) -> None:
    results = {}
    for run, seed in (("one", 11), ("two", 11), ("three", 12)):
        folder = tmp_path / run
        folder.mkdir()
        files = Files(LazyDisk(folder))
        _torn_state(files)
        files.disk.torn(seed)
        results[run] = files.read("a")
    assert results["one"] == results["two"]
    assert results["one"] != results["three"]
    assert results["one"] not in (b"o" * 4 * PAGE, b"N" * 4 * PAGE + b"T" * 4 * PAGE)


def test_fsyncgate_pages_dropped_by_a_failed_fsync_stay_lost_after_a_good_one(
    files: Files,
) -> None:
    files.create("a", b"o" * (2 * PAGE))
    files.fsync("a")
    files.fsync_dir()
    files.write("a", b"E" * PAGE, 0)
    files.fail_fsync("a")
    files.write("a", b"W" * PAGE, PAGE)
    files.fsync("a")  # succeeds, as on Linux, without the dropped page
    files.disk.lose_unsynced()
    assert files.read("a") == b"o" * PAGE + b"W" * PAGE


def test_without_fsyncgate_a_later_fsync_writes_the_pages(files: Files) -> None:
    files.create("a", b"o" * PAGE)
    files.fsync("a")
    files.fsync_dir()
    files.write("a", b"E" * PAGE, 0)
    files.fail_fsync("a", drop_dirty=False)
    files.fsync("a")
    files.disk.lose_unsynced()
    assert files.read("a") == b"E" * PAGE


def test_checkpoint_makes_everything_durable(files: Files) -> None:
    files.create("a", b"data")
    files.disk.checkpoint()
    files.disk.lose_unsynced()
    assert files.read("a") == b"data"


def test_what_a_previous_mount_left_in_the_reserved_folder_is_cleared(tmp_path: Path) -> None:
    (tmp_path / ".knell-fs" / "grave").mkdir(parents=True)
    (tmp_path / ".knell-fs" / "grave" / "123").write_bytes(b"stale")
    LazyDisk(tmp_path)
    assert list((tmp_path / ".knell-fs" / "grave").iterdir()) == []


def test_a_file_replaced_by_a_rename_leaves_no_record_for_a_reused_inode(files: Files) -> None:
    files.create("a", b"x")
    files.create("b", b"y")  # neither durable: "a" is deleted for real below
    replaced = files.disk.real("a").stat().st_ino
    files.disk.rename("b", "a")
    assert replaced not in files.disk.files


def test_journaled_entries_are_durable_after_any_sync(tmp_path: Path) -> None:
    files = Files(LazyDisk(tmp_path, "journaled"))
    files.create("new", b"x")
    files.create("other", b"y")
    files.fsync("other")  # one sync commits every entry change before it
    files.create("late", b"z")
    files.disk.lose_unsynced()
    assert files.names() == {"new", "other"}
    assert files.read("new") == b""  # the entry is durable, its data is not


def test_an_unknown_entry_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="entries must be one of posix, journaled"):
        LazyDisk(tmp_path, "ext4")


def test_a_folder_removed_for_good_leaves_no_entry_snapshot_for_a_reused_inode(
    files: Files,
) -> None:
    files.disk.before_entry_change("d")
    files.disk.real("d").mkdir()
    files.create("d/a")  # snapshots d's (empty) entries
    files.disk.remove("d/a")
    gone = files.disk.real("d").stat().st_ino
    assert gone in files.disk.dirs
    files.disk.remove("d")  # never durable: removed for real
    assert gone not in files.disk.dirs
