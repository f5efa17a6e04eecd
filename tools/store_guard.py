"""The store guard: a store's name is spoken only inside its own package.

A store kind (Postgres, Redis, ...) is one package under
``src/knell/stores/`` that registers itself with
:mod:`knell.stores.registry`; everything else in knell asks the registry.
This guard fails the lint when code elsewhere names a store (an
identifier, an import, a string constant), so knowledge of a store cannot
leak back into the runner, the doctor or the fault kinds one ``if kind ==
"redis"`` at a time. Docstrings and comments are exempt: prose may name
any store.

Usage: ``python tools/store_guard.py [ROOT ...]`` (default ``src/knell``).
Exit 1 and one line per finding (``file:line: what``) when anything is found.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

STORES: dict[str, tuple[re.Pattern[str], str]] = {
    "postgres": (re.compile(r"(?<![a-z])(?i:postgres|psycopg)"), "stores/postgres"),
    "redis": (re.compile(r"(?<![a-z])(?i:redis)"), "stores/redis"),
}
"""Each guarded store: the words that name it (at the start of a word, so
``StoreDisconnect`` is not Redis), and the package allowed to."""


PRAGMA = "# store-guard: ok"
"""A line that names a store as data, not as knowledge of it (a shipped
scenario's name, say) says so with this comment."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of string statements (module, class, function and attribute
    docstrings): prose, not code."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                found.add(id(statement.value))
    return found


def _words(node: ast.AST, prose: set[int]) -> Iterator[tuple[str, str]]:
    """The (what, text) pairs of ``node`` that could name a store."""
    if isinstance(node, ast.Name):
        yield "identifier", node.id
    elif isinstance(node, ast.Attribute):
        yield "attribute", node.attr
    elif isinstance(node, ast.arg):
        yield "argument", node.arg
    elif isinstance(node, ast.keyword) and node.arg:
        yield "keyword", node.arg
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield "definition", node.name
    elif isinstance(node, ast.Import):
        for alias in node.names:
            yield "import", alias.name
            if alias.asname:
                yield "import", alias.asname
    elif isinstance(node, ast.ImportFrom):
        yield "import", node.module or ""
        for alias in node.names:
            yield "import", alias.name
            if alias.asname:
                yield "import", alias.asname
    elif isinstance(node, ast.alias):
        return
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
        yield "string", node.value


def _findings(path: Path, allowed: set[str]) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(path))
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", 0)
        if 0 < lineno <= len(lines) and PRAGMA in lines[lineno - 1]:
            continue
        for what, text in _words(node, prose):
            for store, (pattern, _home) in STORES.items():
                if store in allowed or not pattern.search(text):
                    continue
                shown = text if len(text) <= 60 else text[:57] + "..."
                yield lineno, f"names the {store} store outside its package ({what} {shown!r})"


TARGETS = "knell/targets/"
"""Drivers of real systems (``knell.targets``): a module there named after a
store (``redis_streams.py``) drives a system built on it and may name it."""


def _allowed(path: Path) -> set[str]:
    """The stores ``path`` may name: the one whose package it is in, or the
    one a target driver's module is named after."""
    posix = path.as_posix()
    found = {store for store, (_p, home) in STORES.items() if f"knell/{home}/" in posix}
    if TARGETS in posix:
        found |= {store for store in STORES if path.stem.startswith(f"{store}_")}
    return found


def check(roots: list[Path]) -> list[str]:
    problems: list[str] = []
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            found = _findings(path, _allowed(path))
            problems += [f"{path}:{line}: {what}" for line, what in found]
    return problems


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("src/knell")]
    problems = check(roots)
    for line in problems:
        print(line)
    if problems:
        print(
            f"{len(problems)} mention(s) of a store outside its package: ask "
            "knell.stores.registry instead (the store kind declares it)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
