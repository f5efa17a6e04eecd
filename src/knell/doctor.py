"""What this machine can run: ``knell doctor``.

knell reaches for real parts (a Postgres and a Redis server it starts
itself, a Toxiproxy, a Docker engine, Node.js for the example adapter, a
headless browser for the HTML report's tests). Each is optional but the
embedded SQLite store: a missing part only means the scenarios, tests and
mutants that need it cannot run. The doctor finds each the way a run
would (the same discovery code, never a second guess), says which version
and where, and for each missing one what to install.

A *capability* groups findings under what a user wants to do ("run on
Postgres"); ``--require`` turns missing capabilities into exit 3, which is
how CI proves its machine has what its tests need before they run.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from knell.stores.kind import version_of

__all__ = ["CAPABILITIES", "Capability", "Finding", "diagnose"]


@dataclass(frozen=True)
class Finding:
    """One part: whether it is usable here, what was found, how to get it."""

    name: str
    ok: bool
    detail: str
    hint: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Capability:
    """Something a user wants to do, and the parts it needs."""

    name: str
    what: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "what": self.what,
            "ok": self.ok,
            "findings": [f.as_dict() for f in self.findings],
        }


def _sqlite() -> list[Finding]:
    return [
        Finding(
            "python",
            sys.version_info >= (3, 11),
            f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
            "knell needs Python 3.11 or newer",
        ),
        Finding("sqlite", True, f"SQLite {sqlite3.sqlite_version} (embedded, WAL)"),
    ]


def _store(name: str) -> Callable[[], list[Finding]]:
    """The doctor probe a store kind declares, as findings."""

    def probe() -> list[Finding]:
        from knell.stores import registry

        return [Finding(*p) for p in registry.get(name).doctor()]

    return probe


def _store_capabilities() -> dict[str, tuple[str, Callable[[], list[Finding]]]]:
    """Every registered store kind but the embedded default (checked with
    Python itself, in ``sqlite``)."""
    from knell.stores import registry

    return {
        kind.name: (kind.capability or f"run on a {kind.name} store", _store(kind.name))
        for kind in registry.kinds().values()
        if kind.name != "sqlite"
    }


def _network() -> list[Finding]:
    out = [
        Finding(
            "knell proxy",
            True,
            "built in (Toxiproxy's HTTP API; used when no toxiproxy-server is found)",
        )
    ]
    url = os.environ.get("TOXIPROXY_URL")
    binary = shutil.which("toxiproxy-server")
    if url:
        out.append(Finding("toxiproxy", True, f"TOXIPROXY_URL={url} (used by runs)"))
    elif binary:
        out.append(Finding("toxiproxy", True, f"{version_of([binary, '-version'])} ({binary})"))
    else:
        out.append(
            Finding(
                "toxiproxy",
                True,
                "toxiproxy-server not on PATH: runs use knell proxy (optional: install"
                " Toxiproxy to test against the original)",
            )
        )
    return out


def _node() -> list[Finding]:
    node = shutil.which("node")
    if node is None:
        return [
            Finding(
                "node",
                False,
                "not on PATH",
                "install Node.js 18+ (Debian: apt-get install nodejs npm)",
            )
        ]
    out = [Finding("node", True, f"{version_of([node, '--version'])} ({node})")]
    from knell.buses.mutants.stdio import node_adapter_dir

    folder = node_adapter_dir()
    if not (folder / "adapter.js").is_file():
        out.append(
            Finding("node adapter", False, f"{folder} missing", "a source checkout of knell")
        )
    elif not (folder / "node_modules" / "better-sqlite3").is_dir():
        out.append(Finding("node adapter", False, f"{folder}: not installed", "make node-adapter"))
    else:
        out.append(Finding("node adapter", True, str(folder)))
    return out


def _storage_faults() -> list[Finding]:
    """Whether ``knell fs`` can mount here (``[store] disk = "faulty"``)."""
    from knell.fs.mount import INSTALL_HINT, fuse_missing

    reason = fuse_missing()
    if reason is not None:
        return [Finding("knell fs", False, reason.split("; ")[0], INSTALL_HINT)]
    fusermount = shutil.which("fusermount3")
    return [Finding("knell fs", True, f"/dev/fuse, {fusermount} and mfusepy found")]


def _clock_faults() -> list[Finding]:
    """Whether clock faults can run here: libfaketime to preload, and the
    raw clock a faked process reads true time from."""
    from knell.faketime.library import ClockUnavailable, find_library
    from knell.faketime.truetime import supported

    try:
        library = find_library()
    except ClockUnavailable as exc:
        hint = "" if sys.platform == "win32" else "Debian: apt-get install faketime"
        return [Finding("libfaketime", False, str(exc), hint)]
    out = [Finding("libfaketime", True, str(library))]
    if supported():
        out.append(Finding("true time", True, "raw clock_gettime past the preload"))
    else:
        out.append(
            Finding(
                "true time",
                False,
                f"no raw clock_gettime known for {sys.platform}/{platform.machine()}: a faked "
                "process could not stamp its history with true time",
            )
        )
    return out


def _targets() -> list[Finding]:
    """Each real system's driver (:mod:`knell.targets`): its client library
    and store kind here; whether its store can start is the store's own
    capability above."""
    from knell.stores import registry
    from knell.targets import TARGETS, missing

    out = []
    for target in TARGETS.values():
        lacking = missing(target, registry.kinds())
        detail = (
            f"{target.driver} on a {target.store} store ({', '.join(target.contracts)})"
            if not lacking
            else "missing " + ", ".join(lacking)
        )
        out.append(Finding(target.name, not lacking, detail, target.install))
    return out or [Finding("targets", True, "none registered")]


def _containers() -> list[Finding]:
    from knell.stores.compose.doctor import doctor

    return [Finding(f.name, f.ok, f.detail, f.hint) for f in doctor()]


def _browser() -> list[Finding]:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return [Finding("headless browser", True, f"{version_of([path, '--version'])}")]
    return [
        Finding(
            "headless browser",
            False,
            "no chromium or chrome on PATH (only the HTML report's browser test needs one)",
            "Debian: apt-get install chromium",
        )
    ]


CAPABILITIES: dict[str, tuple[str, Callable[[], list[Finding]]]] = {
    "sqlite": ("run scenarios on the embedded SQLite store", _sqlite),
    **_store_capabilities(),
    "network": ("network faults (partition, latency, ...) through a Toxiproxy API", _network),
    "storage": (
        'storage faults: a store on a faulty disk (disk = "faulty", knell fs)',
        _storage_faults,
    ),
    "clock": ("clock faults (clock-skew, clock-jump, clock-strobe, clock-rate)", _clock_faults),
    "targets": ("real systems under knell's contracts (knell.targets, docs/findings.md)", _targets),
    "node": ("the Node.js example adapter and its mutant", _node),
    "docker": ("the compose stack (make compose-test)", _containers),
    "browser": ("the HTML report's headless-browser test", _browser),
}
"""Every capability the doctor knows: name -> (what it is for, its check)."""


def diagnose(only: list[str] | None = None) -> list[Capability]:
    """Check the named capabilities (default: all), in a stable order."""
    names = only or list(CAPABILITIES)
    out = []
    for name in names:
        what, check = CAPABILITIES[name]
        cap = Capability(name, what)
        try:
            cap.findings = check()
        except Exception as exc:  # one broken probe must not hide the others
            cap.findings = [Finding(name, False, f"the check failed: {type(exc).__name__}: {exc}")]
        out.append(cap)
    return out


def installed_at() -> Path:
    """Where knell itself runs from (for the doctor's header)."""
    return Path(__file__).resolve().parent
