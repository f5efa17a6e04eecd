"""Untrusted text in each output: one inert line, whatever the bus sent."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from knell.cli.common import styled
from knell.text import clean, md, md_code
from knell.workload.hostile import HOSTILE_PAYLOADS, hostile_id


@pytest.mark.parametrize("payload", HOSTILE_PAYLOADS)
def test_hostile_payloads_are_inert_everywhere(payload: str) -> None:
    text = "producer-1.1:7" + payload
    for shown in (clean(text), md(text), md_code(text)):
        assert "\x1b" not in shown and "\n" not in shown and "\u202e" not in shown
        assert len(shown) < 700
    cell = md(text)
    assert "|" not in cell.replace("\\|", "")
    assert "<" not in cell.replace("\\<", "")
    console = Console(file=io.StringIO(), width=200, color_system=None, markup=False)
    console.print(styled(("x", "red"), f" {clean(text)}"))  # never parsed, shown as written
    out = console.file.getvalue()  # type: ignore[attr-defined]
    if "[bold red]" in text:
        assert "[bold red]" in out


def test_hostile_ids_stay_unique() -> None:
    ids = {hostile_id(f"producer-1.1:{n}", n) for n in range(1, 200)}
    assert len(ids) == 199


def test_md_code_survives_backticks_and_pipes() -> None:
    assert md_code("a`b|c") == "``a`b\\|c``"
    assert md_code("`x`") == "`` `x` ``"


def test_line_starts_that_imitate_structure_are_escaped() -> None:
    assert md("- item").startswith("\\-")
    assert md("1. first").startswith("\\1.")
    assert md("# heading").startswith("\\#")
