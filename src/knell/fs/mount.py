"""Mounting and unmounting: the mount process itself (:func:`serve`), the
check that FUSE is there at all (:func:`fuse_missing`), a lazy unmount that
also clears a mount whose process was SIGKILLed (:func:`unmount`), and
:class:`MountProcess`, which starts ``knell fs mount`` as a child and waits
until it serves, for whoever puts a store on it.

A mount whose process died is still in the mount table ("Transport endpoint
is not connected"): :func:`os.path.ismount` cannot stat it and says no, so
the mount table is read instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from knell.errors import KnellError

__all__ = [
    "INSTALL_HINT",
    "MountError",
    "MountProcess",
    "fuse_missing",
    "is_mounted",
    "serve",
    "unmount",
]

INSTALL_HINT = (
    "storage faults need Linux with /dev/fuse, Debian's fuse3 "
    "(apt-get install fuse3) and pip install 'knell[fs]'"
)


class MountError(KnellError):
    """The filesystem cannot be mounted here (exit 3, with what to install)."""


def fuse_missing() -> str | None:
    """Why ``knell fs mount`` cannot work on this machine, or None."""
    if not sys.platform.startswith("linux"):
        return f"FUSE mounts are not supported on {sys.platform}; {INSTALL_HINT}"
    if not Path("/dev/fuse").exists():
        return f"/dev/fuse is missing (a container needs --device /dev/fuse); {INSTALL_HINT}"
    if shutil.which("fusermount3") is None:
        return f"fusermount3 is not on PATH; {INSTALL_HINT}"
    try:
        import mfusepy  # noqa: F401
    except ImportError:
        return f"the Python binding mfusepy is not installed; {INSTALL_HINT}"
    except OSError as exc:
        return f"libfuse3 cannot be loaded ({exc}); {INSTALL_HINT}"
    return None


def _unescape(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 1 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def is_mounted(path: Path | str) -> bool:
    """Whether something is mounted at ``path``, also a dead FUSE mount."""
    target = os.path.abspath(path)
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return os.path.ismount(target)
    return any(_unescape(line.split()[4]) == target for line in lines if len(line.split()) > 4)


def unmount(path: Path | str, timeout: float = 10.0) -> bool:
    """Lazily unmount ``path`` (``fusermount3 -u -z``, else ``umount -l``).
    Returns whether something was mounted there."""
    if not is_mounted(path):
        return False
    for argv in (["fusermount3", "-u", "-z", str(path)], ["umount", "-l", str(path)]):
        if shutil.which(argv[0]) is None:
            continue
        subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
        if not is_mounted(path):
            return True
    raise MountError(f"{path}: cannot unmount (fusermount3 -u -z failed)")


def _check_folders(backing: Path, mountpoint: Path) -> None:
    if not backing.is_dir():
        raise MountError(f"{backing}: the backing folder does not exist")
    if not mountpoint.is_dir():
        raise MountError(f"{mountpoint}: the mount point is not a folder")
    if is_mounted(mountpoint):
        raise MountError(f"{mountpoint}: something is mounted there already")
    if any(mountpoint.iterdir()):
        raise MountError(f"{mountpoint}: the mount point is not empty")
    b, m = backing.resolve(), mountpoint.resolve()
    if b == m or b in m.parents or m in b.parents:
        raise MountError(f"{mountpoint}: the mount point and the backing folder {backing} overlap")


def serve(backing: Path, mountpoint: Path, control: Path, entries: str = "posix") -> None:
    """Mount and serve in the foreground until SIGTERM, SIGINT or an
    unmount; libfuse unmounts cleanly on the signals."""
    reason = fuse_missing()
    if reason is not None:
        raise MountError(reason)
    _check_folders(backing, mountpoint)
    # Absolute: libfuse may change the working folder once mounted.
    _serve_posix(backing.resolve(), mountpoint.resolve(), control.absolute(), entries)


if sys.platform != "win32":

    def _serve_posix(backing: Path, mountpoint: Path, control: Path, entries: str) -> None:
        from knell.fs.cache import LazyDisk
        from knell.fs.control_channel import ControlServer
        from knell.fs.faults import FaultSwitches
        from knell.fs.operations import FaultyFUSE, FaultyOperations

        disk = LazyDisk(backing, entries)
        switches = FaultSwitches()
        try:
            server = ControlServer(control, disk, switches)
        except OSError as exc:
            raise MountError(
                f"{control}: cannot serve the control socket there: {exc.strerror or exc}"
            ) from None
        server.start()
        try:
            FaultyFUSE(
                FaultyOperations(disk, switches),
                str(mountpoint.resolve()),
                foreground=True,
                fsname=f"knell-fs:{disk.root}",
                # Attributes and entries change under the kernel at a power cut.
                attr_timeout=0,
                entry_timeout=0,
                negative_timeout=0,
                # Root's mount is shared with every user (a server running
                # as its own user), with the kernel checking permissions.
                allow_other=os.geteuid() == 0,
                default_permissions=True,
            )
        except RuntimeError as exc:
            # fuse_main returns 8 when its loop ends with an error, and the
            # signal handler of libfuse records the signal as one: SIGTERM
            # and SIGINT end here, after libfuse has unmounted.
            if exc.args != (8,) or is_mounted(mountpoint):
                raise MountError(
                    f"{mountpoint}: libfuse could not mount or serve (fuse_main returned "
                    f"{exc.args[0] if exc.args else exc})"
                ) from None
        finally:
            server.stop()

    def _answers(control: Path) -> bool:
        from knell.fs.control_channel import ControlError, FsControl

        try:
            FsControl(control, timeout=5).status()
        except ControlError:
            return False
        return True

else:

    def _serve_posix(backing: Path, mountpoint: Path, control: Path, entries: str) -> None:
        raise MountError(INSTALL_HINT)

    def _answers(control: Path) -> bool:
        return False


class MountProcess:
    """``knell fs mount`` as a child process, for a test or a store.

    ``start`` returns once the mount is in the mount table and the control
    socket answers; ``stop`` sends SIGTERM (a clean unmount) and falls back
    to a lazy unmount if the process is gone or stuck."""

    def __init__(
        self, backing: Path, mountpoint: Path, control: Path, log: Path, entries: str = "posix"
    ) -> None:
        self.entries = entries
        self.backing, self.mountpoint, self.control, self.log = (
            Path(backing),
            Path(mountpoint),
            Path(control),
            Path(log),
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> MountProcess:
        argv = [sys.executable, "-m", "knell", "fs", "mount", str(self.backing)]
        argv += [str(self.mountpoint), "--control", str(self.control), "--entries", self.entries]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(encoding="utf-8", errors="replace").strip()
                raise MountError(f"knell fs mount exited {self.proc.returncode}: {tail[-400:]}")
            if is_mounted(self.mountpoint) and self.control.exists() and _answers(self.control):
                return self
            time.sleep(0.05)
        self.stop()
        raise MountError(f"{self.mountpoint}: knell fs mount did not serve within {timeout:g}s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        unmount(self.mountpoint)

    def __enter__(self) -> MountProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
