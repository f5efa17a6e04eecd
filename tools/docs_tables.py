"""The documentation's tables of checks, fault kinds, scenarios and mutants.

A table typed by hand into a page goes stale the day someone adds a check
and forgets the page. So the pages hold a marker instead,
``<!-- generated: checks -->``, and the documentation build
(``docs/hooks.py``, run by ``make docs``) replaces it with a table drawn
from the registry itself: the checker's ``CHECKS``, the nemesis's fault
kinds, the store kinds, the scenario files knell ships (read by knell's own loader, so a
scenario that does not load breaks the build rather than the page) and the
mutant registry. ``tests/unit/test_docs_tables.py`` calls the same
functions and requires every registered name to appear exactly once.

Each table's one-line descriptions come from the docstring of the class,
or failing that of its module, whose first line already says what the
thing is ("no-loss: every acknowledged message reaches ..."): the
documentation says what the code says about itself.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

__all__ = [
    "MARKER",
    "TABLES",
    "checks_table",
    "fault_kinds_table",
    "fill",
    "mutants_table",
    "scenarios_table",
    "stores_table",
    "table",
]

_CODE = re.compile(r"``([^`]+)``")


def cell(text: object) -> str:
    """One table cell: on one line, pipes escaped, reST ``code`` as Markdown."""
    flat = " ".join(str(text).split())
    return _CODE.sub(r"`\1`", flat).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table; the first column names the row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def summary(obj: type) -> str:
    """The first line of the class's docstring, else of its module's, with
    the leading ``name:`` (or ``The ``name`` fault:``) cut off."""
    doc = obj.__doc__ if "__doc__" in vars(obj) else None
    if not doc or not doc.strip():
        doc = sys.modules[obj.__module__].__doc__ or ""
    first = doc.strip().split("\n\n", 1)[0]
    head, sep, rest = first.partition(": ")
    return (rest if sep and len(head) < 40 else first).strip()


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _contract_of_check(module: str) -> str:
    parts = module.split(".")
    if "queue" in parts:
        return "queue"
    if "atmostonce" in parts:
        return "at-most-once"
    return "broadcast"


def checks_table() -> str:
    """Every check of ``knell.checker.registry.CHECKS``, in report order."""
    from knell.checker.registry import CHECKS

    return table(
        ("check", "contract", "anomaly kinds it reports", "what it holds the bus to"),
        (
            (
                f"`{check.name}`",
                _contract_of_check(check.__module__),
                _names(check.anomaly_kinds) or "none (never invalid)",
                summary(check),
            )
            for check in CHECKS
        ),
    )


def fault_kinds_table() -> str:
    """Every registered fault kind (built-in and plug-in), in registration
    order, with the ``[[nemesis]]`` fields of its own beyond the common ones."""
    from knell.nemesis import FaultSpec
    from knell.nemesis.registry import kinds

    common = set(FaultSpec.model_fields)
    return table(
        ("fault kind", "what it does", "its own fields", "window", "grace"),
        (
            (
                f"`{name}`",
                summary(type(kind)),
                _names(f for f in kind.spec.model_fields if f not in common) or "none",
                kind.effect,
                f"{kind.grace:g} s",
            )
            for name, kind in kinds().items()
        ),
    )


def scenarios_table(folder: Path | None = None) -> str:
    """Every scenario file of ``folder`` (default: the ones knell ships),
    loaded by knell's own scenario loader."""
    from knell.scenario import load_scenario
    from knell.shipped import shipped_dir

    where = folder if folder is not None else shipped_dir()
    if where is None:
        raise FileNotFoundError("this install ships no scenarios (no scenarios/ folder)")
    rows = []
    for path in sorted(where.glob("*.toml")):
        scenario = load_scenario(path)
        faults = _names(sorted({n.fault for n in scenario.nemesis})) or "none"
        expect = f" **{scenario.expect.describe()}**" if scenario.expect else ""
        rows.append(
            (
                f"`{scenario.name}`",
                scenario.store.kind,
                " + ".join(scenario.contracts),
                faults,
                f"{scenario.duration:g} s",
                scenario.description + expect,
            )
        )
    return table(("scenario", "store", "contract", "faults", "duration", "what it does"), rows)


def mutants_table() -> str:
    """Every mutant of every store, in registration order."""
    from knell.buses.mutants import all_mutants

    return table(
        (
            "mutant",
            "store",
            "failure mode of naive designs",
            "what kills it (the reference's rule)",
            "killed by",
            "scenarios",
        ),
        (
            (
                f"`{m.name}`",
                m.store,
                m.failure_mode,
                m.rule,
                _names(m.killed_by),
                ", ".join(m.scenarios),
            )
            for m in all_mutants().values()
        ),
    )


def stores_table() -> str:
    """Every registered store kind: how scenarios name it, how a run gets
    one, what reaches it, what it needs installed, what can go wrong with it."""
    from knell.buses.mutants import all_mutants
    from knell.stores import registry

    mutants = all_mutants().values()
    rows = []
    for kind in registry.kinds().values():
        faults = [
            f"{provision}: " + ", ".join(f"`store-{f}`" for f in sorted(can))
            for provision, can in sorted(kind.faults.items())
            if can
        ]
        options = [k for k in kind.options.model_fields]
        rows.append(
            (
                f"`{kind.name}`",
                ", ".join(f"`{s}://`" for s in kind.schemes),
                ", ".join(sorted(kind.provisions)),
                "network link" if kind.network else "in-process",
                f"`knell[{kind.extra}]`" if kind.extra else "core",
                _names(options) if options else "none",
                "; ".join(faults) or "none",
                sum(1 for m in mutants if m.store == kind.name),
                summary(type(kind)),
            )
        )
    return table(
        (
            "store kind",
            "URL schemes",
            "provisioning",
            "reached over",
            "install",
            "`[store]` options",
            "store faults (by provisioning)",
            "mutants",
            "what it is",
        ),
        rows,
    )


TABLES: dict[str, Callable[[], str]] = {
    "stores": stores_table,
    "checks": checks_table,
    "fault-kinds": fault_kinds_table,
    "scenarios": scenarios_table,
    "mutants": mutants_table,
}
"""The generated tables by marker name: ``<!-- generated: NAME -->``."""

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def fill(markdown: str, where: str) -> str:
    """``markdown`` with every marker replaced by its table; an unknown
    marker is an error naming the page, so a typo cannot leave a hole."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in TABLES:
            known = ", ".join(sorted(TABLES))
            raise ValueError(f"{where}: no generated table {name!r} (known: {known})")
        return TABLES[name]()

    return MARKER.sub(replace, markdown)
