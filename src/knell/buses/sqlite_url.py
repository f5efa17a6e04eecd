"""The ``sqlite:///`` URL form, built and parsed the same way on POSIX and Windows.

A run hands its workers the store as a URL, so the path inside it must
survive the trip on both platforms. knell's form is three slashes and then
the absolute path written with forward slashes, as it is except for the
three characters a URL cannot carry in a path (``%``, ``?``, ``#``, written
``%25``, ``%3F``, ``%23``):

=====================================  ========================================
path                                   URL
=====================================  ========================================
``/tmp/run/store/bus.db``              ``sqlite:///tmp/run/store/bus.db``
``C:\\Users\\ci\\run\\bus.db``         ``sqlite:///C:/Users/ci/run/bus.db``
``\\\\server\\share\\run\\bus.db``     ``sqlite:////server/share/run/bus.db``
``/tmp/my run/50%/bus.db``             ``sqlite:///tmp/my run/50%25/bus.db``
``:memory:`` (no file)                 ``sqlite:///:memory:``
=====================================  ========================================

Parsing undoes exactly that (it percent-decodes the path): on Windows the
slash in front of a drive letter (``/C:/...``) is dropped and the path
becomes a Windows path (backslashes written by hand,
``sqlite:///C:\\run\\bus.db``, are accepted too); on POSIX the path is
taken as it stands (``/C:/x`` is a legal POSIX path and stays one). The
platform is a parameter (``windows=``, default: the running one), so both
directions are tested on any machine through
:class:`pathlib.PurePosixPath` and :class:`pathlib.PureWindowsPath`, which
implement each platform's path rules without touching its file system.

Written by hand because the standard library's ``pathname2url`` /
``url2pathname`` are per-platform modules (only the running platform's is
usable as ``urllib.request``'s), changed behaviour in Python 3.12-3.14, and
build ``file:`` URLs (``///C:`` vs ``C:``, ``|`` drive forms) rather than
this scheme; the rules above fit in a few lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath, PureWindowsPath
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

__all__ = ["MEMORY", "SqliteUrl", "parse_sqlite_url", "sqlite_url"]

MEMORY = ":memory:"
"""SQLite's name for a private in-memory database (no file at all)."""

_ESCAPES = str.maketrans({"%": "%25", "?": "%3F", "#": "%23"})
"""The only characters escaped: the three that would end or garble the
path inside a URL. Everything else (spaces, non-ASCII letters) is written
as it is, so an adapter that takes the path verbatim (the stdio protocol
allows it) still opens the right file for every ordinary path."""

_DRIVE = re.compile(r"^/(?P<drive>[A-Za-z]:)(?P<rest>[/\\].*)?$")


def _is_windows(windows: bool | None) -> bool:
    return os.name == "nt" if windows is None else windows


@dataclass(frozen=True)
class SqliteUrl:
    """A parsed ``sqlite:///`` URL: the file path (native to the platform it
    was parsed for) and the options of its query string, last value wins."""

    path: str
    options: dict[str, str]


def sqlite_url(
    path: str | os.PathLike[str], *, windows: bool | None = None, **options: object
) -> str:
    """The ``sqlite:///`` URL of ``path`` (made absolute first when it is a
    path of the running platform), with ``options`` as its query string."""
    flavour = PureWindowsPath if _is_windows(windows) else PurePosixPath
    if str(path) == MEMORY:
        text = MEMORY
    else:
        pure: PurePath = flavour(path)
        if not pure.is_absolute():
            if windows is not None and windows != (os.name == "nt"):
                raise ValueError(f"sqlite path must be absolute, got {str(path)!r}")
            pure = flavour(os.path.abspath(path))
        text = pure.as_posix()
        # ``C:/x`` -> ``/C:/x`` (the authority stays empty); ``/x`` and
        # ``//server/share`` already start with a slash.
        text = text if text.startswith("/") else "/" + text
        text = text.translate(_ESCAPES)
    query = urlencode({k: str(v) for k, v in options.items()})
    return f"sqlite:///{text.removeprefix('/')}" + (f"?{query}" if query else "")


def parse_sqlite_url(url: str, *, windows: bool | None = None) -> SqliteUrl:
    """Split a ``sqlite:///path?opt=value`` URL into its native path and its
    options; ``ValueError`` naming the URL when it is not one."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URL (sqlite:///path): {url!r}")
    if parts.netloc not in ("", "localhost"):
        hint = (
            f" (a Windows drive needs three slashes: sqlite:///{parts.netloc}/...)"
            if re.fullmatch(r"[A-Za-z]:", parts.netloc)
            else ""
        )
        raise ValueError(f"sqlite URL must be sqlite:///path, got {url!r}{hint}")
    raw = unquote(parts.path)
    if not raw or raw == "/":
        raise ValueError(f"sqlite URL names no file: {url!r}")
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if raw in (MEMORY, "/" + MEMORY):
        return SqliteUrl(MEMORY, options)
    if _is_windows(windows):
        drive = _DRIVE.match(raw)
        if drive:
            raw = drive["drive"] + (drive["rest"] or "\\")
        return SqliteUrl(str(PureWindowsPath(raw)), options)
    return SqliteUrl(str(PurePosixPath(raw)), options)
