"""The lazy page cache: what a power cut would keep of a backing folder.

The live state of every file is the backing folder itself (reads and
writes pass straight through, so processes sharing a file see each other
at once, as on a real disk). What this module adds is the *durable* state
next to it, kept as an undo log rather than a copy:

- **Contents**, per file (keyed by inode, so a rename does not lose the
  record): the size the file had at its last ``fsync``/``fdatasync``, and
  for each 4 KiB page touched since, that page's durable bytes, read once
  before its first write or truncation. A sync drops the record (O(dirty
  pages), nothing is copied); losing the unsynced writes writes the old
  pages back and restores the size.
- **Directory entries**, per directory (keyed by inode): a snapshot of its
  ``name -> inode`` entries taken before the first create, rename, unlink
  or mkdir in it since its last ``fsync`` of the directory. A node unlinked
  or replaced while a durable entry still names it is not deleted but moved
  to a graveyard inside the backing folder (``.knell-fs/``, hidden from the
  mount), so a power cut can bring it back. This is POSIX: a file created
  or renamed, even one whose data was fsynced, has no durable name until
  its directory is fsynced; knell takes the strict reading (the entry
  vanishes or reverts), the one a bus must survive. The other mode,
  ``journaled``, is what ext4 and XFS do and what Postgres relies on (it
  never fsyncs the folder of a new relation file): every sync commits the
  journal, so every entry change made before any successful sync is
  durable with it.

Faults on top of the model: :meth:`LazyDisk.lose_unsynced` (a power cut),
:meth:`LazyDisk.torn` (a power cut during writeback: a seeded subset of the
dirty pages reaches the disk, the last one only partly),
:meth:`LazyDisk.checkpoint`, and the failed fsync of Linux ("fsyncgate"):
after an EIO the pages dirty at that moment are marked clean without being
written, so a later fsync succeeds and yet a power cut loses them.

Every method takes the model's lock: the filesystem's operations run on
libfuse's threads, and a fault must see a state between two operations.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

assert sys.platform != "win32"

__all__ = ["ENTRY_MODES", "PAGE", "RESERVED", "Dirty", "LazyDisk", "LossReport"]

ENTRY_MODES = ("posix", "journaled")
"""When a directory entry is durable: after an fsync of its folder
(``posix``), or after any successful sync at all (``journaled``)."""

PAGE = 4096
"""The page size of the cache: the unit a torn write keeps or loses."""
SECTOR = 512
"""The unit inside the partial last page of a torn write."""
RESERVED = ".knell-fs"
"""The folder inside the backing folder for nodes kept for a power cut."""


@dataclass
class Dirty:
    """The unsynced state of one file: its durable size, and the durable
    bytes of each page written or cut since its last sync (shorter than a
    page where the durable file ended inside it; empty past its end).
    ``poisoned`` holds the pages an fsync failed on (fsyncgate): they stay
    lost across later successful syncs until written again."""

    durable_size: int
    pages: dict[int, bytes] = field(default_factory=dict)
    poisoned: set[int] = field(default_factory=set)


@dataclass
class LossReport:
    """What a power cut changed: the files whose contents went back, the
    pages kept by a torn write, and the directory entries restored or
    dropped."""

    files_reverted: int = 0
    pages_kept: int = 0
    pages_lost: int = 0
    entries_changed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "files_reverted": self.files_reverted,
            "pages_kept": self.pages_kept,
            "pages_lost": self.pages_lost,
            "entries_changed": self.entries_changed,
        }


def _entries(folder: Path) -> dict[str, int]:
    with os.scandir(folder) as it:
        return {e.name: e.inode() for e in it}


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class LazyDisk:
    """The durability model of one backing folder.

    The filesystem calls the ``before_*`` hooks before it changes the
    backing folder and the ``synced*`` ones after a successful sync; a
    fault calls :meth:`lose_unsynced`, :meth:`torn` or :meth:`checkpoint`.
    Paths are relative to the backing root, with or without a leading
    ``/`` (as the mount sees them)."""

    def __init__(self, root: Path, entries: str = "posix") -> None:
        if entries not in ENTRY_MODES:
            raise ValueError(f"entries must be one of {', '.join(ENTRY_MODES)}, not {entries!r}")
        self.entries = entries
        self.root = Path(root).resolve()
        self.lock = threading.RLock()
        self.files: dict[int, Dirty] = {}
        self.dirs: dict[int, dict[str, int]] = {}
        self._reserved = self.root / RESERVED
        # Whatever a previous mount left here was never durable.
        _remove(self._reserved)
        self._grave = self._reserved / "grave"
        self._stage = self._reserved / "stage"
        self._grave.mkdir(parents=True)
        self._stage.mkdir()
        self._root_ino = self.root.stat().st_ino

    # -- paths ---------------------------------------------------------

    def real(self, path: str) -> Path:
        """The backing path of a mount path."""
        rel = path.lstrip("/")
        return self.root / rel if rel else self.root

    @staticmethod
    def hidden(path: str) -> bool:
        """Whether a mount path names the reserved folder (never shown)."""
        rel = path.lstrip("/")
        return rel == RESERVED or rel.startswith(RESERVED + "/")

    # -- contents ------------------------------------------------------

    def _record(self, fd: int) -> tuple[int, Dirty]:
        st = os.fstat(fd)
        dirty = self.files.get(st.st_ino)
        if dirty is None:
            dirty = self.files[st.st_ino] = Dirty(durable_size=st.st_size)
        return st.st_ino, dirty

    @staticmethod
    def _save(fd: int, dirty: Dirty, first: int, last: int) -> None:
        for page in range(first, last + 1):
            if page in dirty.pages:
                continue
            start = page * PAGE
            keep = max(0, min(PAGE, dirty.durable_size - start))
            dirty.pages[page] = os.pread(fd, keep, start) if keep else b""

    def before_write(self, fd: int, offset: int, length: int) -> None:
        """Save the durable bytes of the pages a write is about to change."""
        if length <= 0:
            return
        _, dirty = self._record(fd)
        first, last = offset // PAGE, (offset + length - 1) // PAGE
        self._save(fd, dirty, first, last)
        dirty.poisoned.difference_update(range(first, last + 1))

    def before_truncate(self, fd: int, length: int) -> None:
        """Save the pages a truncation cuts or grows (a shrink loses bytes
        the durable file still has; a growth makes a hole the durable one
        lacks)."""
        st = os.fstat(fd)
        if length == st.st_size:
            return
        _, dirty = self._record(fd)
        low, high = sorted((length, st.st_size))
        self._save(fd, dirty, low // PAGE, max(low, high - 1) // PAGE)

    def synced(self, fd: int) -> None:
        """A sync of the file succeeded: its contents are durable, except
        the pages a failed fsync dropped (fsyncgate)."""
        st = os.fstat(fd)
        self._journal_commit()
        dirty = self.files.pop(st.st_ino, None)
        if dirty is None or not dirty.poisoned:
            return
        self.files[st.st_ino] = Dirty(
            durable_size=st.st_size,
            pages={p: dirty.pages.get(p, b"") for p in dirty.poisoned},
            poisoned=set(dirty.poisoned),
        )

    def sync_failed(self, fd: int, *, drop_dirty: bool) -> None:
        """A sync of the file failed. With ``drop_dirty`` (Linux), the pages
        dirty now are marked clean without reaching the disk."""
        if not drop_dirty:
            return
        st = os.fstat(fd)
        dirty = self.files.get(st.st_ino)
        if dirty is not None:
            dirty.poisoned.update(dirty.pages)

    # -- directory entries ---------------------------------------------

    def before_entry_change(self, path: str) -> None:
        """Snapshot the entries of the folder holding ``path`` before the
        first change since the folder's last sync."""
        folder = self.real(path).parent
        ino = folder.stat().st_ino
        if ino not in self.dirs:
            self.dirs[ino] = {
                n: i for n, i in _entries(folder).items() if not self._is_reserved(folder, n)
            }

    def _is_reserved(self, folder: Path, name: str) -> bool:
        return folder == self.root and name == RESERVED

    def _durably_named(self, ino: int) -> bool:
        return any(ino in entries.values() for entries in self.dirs.values())

    def remove(self, path: str) -> None:
        """Unlink a file or remove an empty folder: into the graveyard if a
        durable entry still names it (a power cut brings it back)."""
        self.before_entry_change(path)
        real = self.real(path)
        ino = real.lstat().st_ino
        if self._durably_named(ino):
            real.rename(self._grave / str(ino))
        elif real.is_dir() and not real.is_symlink():
            real.rmdir()
            self.dirs.pop(ino, None)  # its inode number may come back
        else:
            real.unlink()
            self.files.pop(ino, None)

    def rename(self, old: str, new: str) -> None:
        """Rename, keeping a replaced node in the graveyard when a durable
        entry names it."""
        self.before_entry_change(old)
        self.before_entry_change(new)
        src, dst = self.real(old), self.real(new)
        try:
            replaced = dst.lstat()
        except FileNotFoundError:
            replaced = None
        if replaced is not None and replaced.st_ino != src.lstat().st_ino:
            if stat.S_ISDIR(replaced.st_mode) and any(dst.iterdir()):
                raise OSError(39, os.strerror(39), str(dst))  # ENOTEMPTY
            if self._durably_named(replaced.st_ino):
                dst.rename(self._grave / str(replaced.st_ino))
            else:
                # Gone for good: its inode number may be reused by a new node.
                self.files.pop(replaced.st_ino, None)
                self.dirs.pop(replaced.st_ino, None)
        os.rename(src, dst)

    def synced_dir(self, path: str) -> None:
        """A sync of the folder succeeded: its entries are durable. Nodes
        in the graveyard no durable entry names any more are deleted."""
        ino = self.real(path).stat().st_ino
        self._journal_commit()
        if self.dirs.pop(ino, None) is not None:
            self._bury()

    def _journal_commit(self) -> None:
        if self.entries == "journaled" and self.dirs:
            self.dirs.clear()
            self._bury()

    def _bury(self) -> None:
        for node in list(self._grave.iterdir()):
            ino = int(node.name)
            if not self._durably_named(ino):
                _remove(node)
                self.files.pop(ino, None)
                self.dirs.pop(ino, None)

    # -- faults ----------------------------------------------------------

    def checkpoint(self) -> None:
        """Make everything durable, as a clean shutdown would."""
        with self.lock:
            self.files.clear()
            self.dirs.clear()
            self._bury()

    def lose_unsynced(self) -> LossReport:
        """A power cut: every file and folder returns to its durable state."""
        return self.torn(None)

    def torn(self, seed: int | None) -> LossReport:
        """A power cut during writeback. With a seed, each dirty page of
        each file reaches the disk or not by a coin drawn from the seed
        (per file, in path order, so the same seed over the same state
        gives the same disk), and the last page kept is cut at a seeded
        sector boundary; a page past the durable end that was not kept
        reads as zeros if a later kept page extends the file. Without a
        seed, nothing unsynced is kept. Directory entries go back to their
        durable state either way."""
        with self.lock:
            report = LossReport()
            tree = self._walk()
            found = sorted((str(self._path(tree, i)), i) for i in self.files if i in tree)
            for path, ino in found:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    self._revert(Path(path), self.files[ino], seed, report)
            self.files.clear()
            self._restore_entries(tree, report)
            return report

    def _revert(self, path: Path, dirty: Dirty, seed: int | None, report: LossReport) -> None:
        rng = random.Random(f"{seed}:{path.relative_to(self.root)}")
        fd = os.open(path, os.O_RDWR)
        try:
            live = os.fstat(fd).st_size
            pages = sorted(dirty.pages)
            kept: dict[int, bytes] = {}
            if seed is not None:
                for page in pages:
                    if page not in dirty.poisoned and rng.random() < 0.5:
                        kept[page] = os.pread(fd, PAGE, page * PAGE)
                if kept:
                    last = max(kept)
                    cut = rng.randint(1, PAGE // SECTOR) * SECTOR
                    kept[last] = kept[last][:cut]
            report.pages_kept += len(kept)
            report.pages_lost += len(pages) - len(kept)
            size = dirty.durable_size
            os.ftruncate(fd, size)
            for page, old in dirty.pages.items():
                start = page * PAGE
                if start >= size:
                    continue
                end = min(start + PAGE, size)
                os.pwrite(fd, old.ljust(end - start, b"\0")[: end - start], start)
            for page, new in sorted(kept.items()):
                start = page * PAGE
                end = min(live, start + len(new))
                if end > size:
                    size = end
                    os.ftruncate(fd, size)
                if end > start:
                    os.pwrite(fd, new[: end - start], start)
            os.fsync(fd)
            report.files_reverted += 1
        finally:
            os.close(fd)

    # The namespace as a tree of (parent inode, name) per inode, so a move
    # is one update and every path is computed when needed.
    def _walk(self) -> dict[int, tuple[int, str]]:
        tree: dict[int, tuple[int, str]] = {}
        stack = [self.root]
        while stack:
            folder = stack.pop()
            parent = folder.stat().st_ino
            with os.scandir(folder) as it:
                for entry in it:
                    tree[entry.inode()] = (parent, entry.name)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        return tree

    def _path(self, tree: dict[int, tuple[int, str]], ino: int) -> Path:
        parts: list[str] = []
        while ino != self._root_ino:
            ino, name = tree[ino]
            parts.append(name)
        return self.root.joinpath(*reversed(parts))

    def _restore_entries(self, tree: dict[int, tuple[int, str]], report: LossReport) -> None:
        stage_ino = self._stage.stat().st_ino
        # First every entry that is not durable leaves its folder ...
        known = [f for f in self.dirs if f == self._root_ino or f in tree]
        for folder in known:
            durable = self.dirs[folder]
            for ino, (parent, name) in list(tree.items()):
                if parent != folder or durable.get(name) == ino:
                    continue
                if self._is_reserved(self._path(tree, folder), name):
                    continue
                self._path(tree, ino).rename(self._stage / str(ino))
                tree[ino] = (stage_ino, str(ino))
                report.entries_changed += 1
        # ... then every durable entry comes back from wherever it went.
        for folder in known:
            for name, ino in self.dirs[folder].items():
                if tree.get(ino) == (folder, name) or ino not in tree:
                    continue
                self._path(tree, ino).rename(self._path(tree, folder) / name)
                tree[ino] = (folder, name)
                report.entries_changed += 1
        self.dirs.clear()
        for node in list(self._stage.iterdir()):
            _remove(node)
        self._bury()
