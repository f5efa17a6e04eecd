"""The documentation site's build hooks (``hooks:`` in mkdocs.yml).

Three things a plain mkdocs build cannot do, done here so that nothing is
written twice:

* the README and CONTRIBUTING.md are the site's home page and its
  contributing page, read from the repository root at build time rather
  than copied into ``docs/`` (where the copy would drift);
* ``<!-- generated: NAME -->`` markers become the tables of checks, fault
  kinds, store kinds, scenarios and mutants, drawn from knell's registries
  by :mod:`docs_tables`;
* a link that leaves ``docs/`` (to ``src/``, ``examples/``, ``tests/``:
  right on GitHub, nowhere on the site) becomes the path in code, so the
  strict build does not fail on it and the reader still sees where to look.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import docs_tables  # noqa: E402

__all__ = ["on_files", "on_page_markdown"]

ROOT_PAGES = {"README.md": "index.md", "CONTRIBUTING.md": "contributing.md"}
"""Files of the repository root published as pages, and their page names."""

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def on_files(files: Any, config: Any) -> Any:
    """Add the root files as generated pages."""
    from mkdocs.structure.files import File

    for source, page in ROOT_PAGES.items():
        text = (REPO / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=text))
    return files


def _site_target(target: str) -> str | None:
    """A repository-relative path as a link on the site, or None when the
    site does not hold it."""
    if target in ROOT_PAGES:
        return ROOT_PAGES[target]
    if target.startswith("docs/"):
        return target.removeprefix("docs/")
    return None


def relink(markdown: str, page: str) -> str:
    """``markdown`` of the page ``page`` (a site page name, or a root file
    published as one) with links that leave ``docs/`` mended."""
    base = "" if page in ROOT_PAGES.values() else "docs"

    def mend(match: re.Match[str]) -> str:
        bang, text, link = match.groups()
        if re.match(r"[a-z]+:|#", link):
            return match.group(0)
        path, hash_, anchor = link.partition("#")
        target = posixpath.normpath(posixpath.join(base, path))
        site = _site_target(target)
        if site is not None:
            return f"{bang}[{text}]({site}{hash_}{anchor})"
        if text.strip("`") == target:
            return f"`{target}`"
        return f"{text} (`{target}`)"

    # Code blocks are left as they are: a link there is text, not a link.
    pieces, last = [], 0
    for fence in _FENCE.finditer(markdown):
        pieces.append(_LINK.sub(mend, markdown[last : fence.start()]))
        pieces.append(fence.group(0))
        last = fence.end()
    pieces.append(_LINK.sub(mend, markdown[last:]))
    return "".join(pieces)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the generated tables, then mend the links. A marker naming no
    table is the page's mistake: one line naming it, no traceback."""
    from mkdocs.exceptions import PluginError

    name = page.file.src_uri
    try:
        filled = docs_tables.fill(markdown, name)
    except ValueError as exc:
        raise PluginError(f"docs/{exc}") from None
    return relink(filled, name)
