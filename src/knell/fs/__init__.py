"""``knell fs``: a FUSE filesystem that can forget, for storage faults.

It passes through to a backing folder and keeps its own page cache
(:mod:`.cache`): every write, truncation, create, rename and unlink since
the last ``fsync`` of the file (for entries, of its folder) is held until
made durable, as Jepsen's LazyFS does. A nemesis drives it over a Unix
socket (:mod:`.control_channel`): lose the unsynced writes (a power cut), keep a
seeded subset of them (a torn write), fail fsyncs with EIO, fill the disk,
slow fsync down, heal, checkpoint. Modules by role: :mod:`.cache` the
durability model, :mod:`.faults` the switches, :mod:`.operations` the FUSE
operations, :mod:`.control_channel` the channel, :mod:`.mount` mounting and
unmounting; the commands are in :mod:`knell.cli.fs`.

Why mfusepy over pyfuse3 (both maintained, both over Debian's libfuse3):
measured on the same machine, a passthrough of each doing a 4 KiB
``pwrite`` + ``fsync`` loop ran at about 1,600-2,000 loops/s through
mfusepy and about 1,050 through pyfuse3 (the backing folder directly: about
3,400). Beyond speed, mfusepy fits the model: its API is by path, which is
how durable directory entries are kept; it runs on libfuse's own threads,
so one process's slow fsync does not stall another's reads, where pyfuse3
runs every handler on one trio loop; and it is a pure-Python wheel (ctypes)
with no compiler or ``libfuse3-dev`` headers needed, where pyfuse3 builds
a C extension.
"""

from __future__ import annotations

__all__: list[str] = []
