"""The page cache of knell fs against a model of POSIX durability that
knows nothing of pages, undo logs or graveyards: random creates, writes,
truncations, renames, unlinks and syncs on real files, then a power cut,
and the backing folder must hold exactly the durable state: the entries
as of the folder's last fsync, each file's contents as of its own last
fsync (empty if it never had one); with journaled entries, any fsync
makes every entry change before it durable. Two rounds, so a cut after a cut is
checked too. ``KNELL_FUZZ_EXAMPLES`` sets the cases (short by default)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [
    pytest.mark.fuzz,
    pytest.mark.skipif(sys.platform == "win32", reason="the page cache is POSIX-only"),
]

if sys.platform != "win32":
    from knell.fs.cache import PAGE, LazyDisk
    from tests.unit.fs.test_cache import Files

NAMES = ["a", "b"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(NAMES)),
        st.tuples(
            st.just("write"),
            st.sampled_from(NAMES),
            st.integers(0, 3 * PAGE),
            st.integers(1, 2 * PAGE),
            st.integers(0, 255),
        ),
        st.tuples(st.just("truncate"), st.sampled_from(NAMES), st.integers(0, 4 * PAGE)),
        st.tuples(st.just("fsync"), st.sampled_from(NAMES)),
        st.tuples(st.just("fsyncdir")),
        st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("unlink"), st.sampled_from(NAMES)),
    ),
    max_size=25,
)


class Model:
    """POSIX durability by the book, on whole files."""

    def __init__(self, entries: str) -> None:
        self.journaled = entries == "journaled"
        self.live: dict[str, int] = {}
        self.data: dict[int, bytes] = {}
        self.durable_entries: dict[str, int] = {}
        self.durable_data: dict[int, bytes] = {}
        self.next = 0

    def apply(self, op: tuple[object, ...], files: Files) -> None:
        kind, *args = op
        name = str(args[0]) if args else ""
        if kind == "create" and name not in self.live:
            files.create(name)
            self.next += 1
            self.live[name] = self.next
            self.data[self.next] = b""
        elif kind == "write" and name in self.live:
            offset, length, byte = (int(a) for a in args[1:])  # type: ignore[call-overload]
            chunk = bytes([byte]) * length
            files.write(name, chunk, offset)
            old = self.data[self.live[name]]
            old = old.ljust(offset, b"\0")
            self.data[self.live[name]] = old[:offset] + chunk + old[offset + length :]
        elif kind == "truncate" and name in self.live:
            size = int(args[1])  # type: ignore[call-overload]
            files.truncate(name, size)
            node = self.live[name]
            self.data[node] = self.data[node][:size].ljust(size, b"\0")
        elif kind == "fsync" and name in self.live:
            files.fsync(name)
            self.durable_data[self.live[name]] = self.data[self.live[name]]
            if self.journaled:  # the journal commit carries every entry change
                self.durable_entries = dict(self.live)
        elif kind == "fsyncdir":
            files.fsync_dir()
            self.durable_entries = dict(self.live)
        elif kind == "rename" and name in self.live and args[1] != name:
            files.disk.rename(name, str(args[1]))
            self.live[str(args[1])] = self.live.pop(name)
        elif kind == "unlink" and name in self.live:
            files.disk.remove(name)
            del self.live[name]

    def power_cut(self) -> None:
        self.live = dict(self.durable_entries)
        self.data = {node: self.durable_data.get(node, b"") for node in self.live.values()}
        self.durable_data = dict(self.data)


@settings(
    max_examples=int(os.environ.get("KNELL_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    entries=st.sampled_from(["posix", "journaled"]),
    sizes=st.lists(st.integers(0, 3 * PAGE), min_size=len(NAMES), max_size=len(NAMES)),
    rounds=st.lists(ops, min_size=2, max_size=2),
)
def test_a_power_cut_leaves_exactly_the_durable_state(
    entries: str, sizes: list[int], rounds: list[list[tuple[object, ...]]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = Files(LazyDisk(Path(tmp), entries))
        model = Model(entries)
        # Start from durable files, so most operations have something to lose.
        for index, (name, size) in enumerate(zip(NAMES, sizes, strict=True)):
            model.apply(("create", name), files)
            if size:
                model.apply(("write", name, 0, size, 65 + index), files)
            model.apply(("fsync", name), files)
        model.apply(("fsyncdir",), files)
        for round_ops in rounds:
            for op in round_ops:
                model.apply(op, files)
            files.disk.lose_unsynced()
            model.power_cut()
            assert files.names() == set(model.live)
            for name, node in model.live.items():
                assert files.read(name) == model.data[node], name
