"""The documentation's generated tables hold every registered check, fault
kind, shipped scenario and mutant, each exactly once, and a page's markers
are all filled (tools/docs_tables.py, run by ``make docs``)."""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from knell.buses.mutants import all_mutants
from knell.checker.registry import CHECKS
from knell.nemesis.registry import kinds
from knell.shipped import shipped_dir
from knell.stores.registry import kinds as store_kinds

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import docs_tables  # noqa: E402

_FIRST_CELL = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def first_column(markdown: str) -> Counter[str]:
    """How often each name stands in the first column of a table."""
    return Counter(_FIRST_CELL.findall(markdown))


def scenario_names() -> list[str]:
    folder = shipped_dir()
    assert folder is not None
    return [path.stem for path in sorted(folder.glob("*.toml"))]


@pytest.mark.parametrize(
    ("render", "names"),
    [
        (docs_tables.checks_table, lambda: [check.name for check in CHECKS]),
        (docs_tables.fault_kinds_table, lambda: list(kinds())),
        (docs_tables.scenarios_table, scenario_names),
        (docs_tables.mutants_table, lambda: list(all_mutants())),
        (docs_tables.stores_table, lambda: list(store_kinds())),
    ],
    ids=["checks", "fault-kinds", "scenarios", "mutants", "stores"],
)
def test_every_registered_name_is_one_row(
    render: Callable[[], str], names: Callable[[], list[str]]
) -> None:
    expected = names()
    assert expected, "the registry is empty: nothing to document"
    assert first_column(render()) == Counter(expected)


def test_a_missing_row_is_noticed() -> None:
    """The comparison above fails when a row is gone (so it can fail)."""
    rows = docs_tables.checks_table().splitlines()
    dropped = "\n".join(line for line in rows if not line.startswith("| `no-loss` |"))
    assert first_column(dropped) != Counter(check.name for check in CHECKS)


def test_a_plug_in_check_appears_without_touching_the_docs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check listed in the registry is in the table: the page has no list
    of its own to forget."""

    class Toy(CHECKS[0]):
        """toy-check: a check that exists only in this test."""

        name = "toy-check"
        anomaly_kinds = ("toy",)

    monkeypatch.setattr("knell.checker.registry.CHECKS", (*CHECKS, Toy))
    table = docs_tables.checks_table()
    assert first_column(table)["toy-check"] == 1
    assert "a check that exists only in this test." in table


def test_markers_are_filled_and_unknown_ones_refused() -> None:
    page = "# Checks\n\n<!-- generated: checks -->\n"
    filled = docs_tables.fill(page, "checks.md")
    assert "<!-- generated: checks -->" not in filled
    assert first_column(filled) == Counter(check.name for check in CHECKS)
    with pytest.raises(ValueError, match=r"checks\.md: no generated table 'chekcs'"):
        docs_tables.fill("<!-- generated: chekcs -->", "checks.md")


def test_the_pages_markers_name_known_tables() -> None:
    """Every marker in docs/ is one the build fills (or one pending)."""
    found = {
        name
        for page in (REPO / "docs").glob("*.md")
        for name in docs_tables.MARKER.findall(page.read_text(encoding="utf-8"))
    }
    assert found >= set(docs_tables.TABLES)
    assert found <= set(docs_tables.TABLES)


def test_links_that_leave_docs_are_mended_for_the_site() -> None:
    """The README (the home page) links into docs/ and beyond; on the site
    a link into docs/ is a page, anything else its path in code."""
    import mkdocs_hooks

    readme = (
        "See [Checks](docs/checks.md#every-check) and ![shot](docs/report-anomaly.png),\n"
        "[tests/README.md](tests/README.md), [the examples](examples/README.md),\n"
        "[CONTRIBUTING.md](CONTRIBUTING.md), [a site](https://example.org/x.md), [up](#top).\n"
        "```\n[not a link](docs/checks.md)\n```\n"
    )
    assert mkdocs_hooks.relink(readme, "index.md") == (
        "See [Checks](checks.md#every-check) and ![shot](report-anomaly.png),\n"
        "`tests/README.md`, the examples (`examples/README.md`),\n"
        "[CONTRIBUTING.md](contributing.md), [a site](https://example.org/x.md), [up](#top).\n"
        "```\n[not a link](docs/checks.md)\n```\n"
    )
    page = "[home](../README.md), [node](../examples/node-adapter), [faults](faults.md)"
    assert mkdocs_hooks.relink(page, "stdio-protocol.md") == (
        "[home](index.md), node (`examples/node-adapter`), [faults](faults.md)"
    )
