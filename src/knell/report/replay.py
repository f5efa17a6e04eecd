"""The one line that runs an experiment again.

Every run ends with it (``knell run`` prints it, the report shows it): the
scenario as it was named, its seed, duration and bus, the fault plan the
run saved (``--schedule <run>/schedule.json``), so the same faults hit the
same processes at the same offsets, and the store it ran on, so the same
bus is tested on the same store:

* an existing server (``--store-url``, and ``--keep`` if the run kept its
  namespace) is named by its URL **without its password**: the password
  becomes ``${KNELL_STORE_PASSWORD}``, which the shell fills in, and the
  line ends with a comment saying so (the line is printed, written into
  report.md and index.html, and pasted into tickets; see
  :mod:`knell.redact`);
* a private store with only its kind's defaults, which is what ``--store
  KIND`` makes, is named by ``--store KIND``: the scenario file may name
  another;
* a store the scenario file describes in full (options, a password, a
  compose stack) needs no flag: the file says it, and no flag could.

Each word is shell-quoted: a bus spec or a path may hold spaces or quotes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from knell.redact import redact_url

__all__ = ["PASSWORD_ENV", "replay_command"]

PASSWORD_ENV = "KNELL_STORE_PASSWORD"
"""The shell variable a replay line names in place of a store password."""

_SLOT = "KNELLPASSWORDSLOT"
"""Marks the password's place in a URL until the word is shell-quoted."""

_COMMON = ("kind", "provider")
"""Store keys that a bare ``--store KIND`` sets."""


def replay_command(scenario: dict[str, Any], run_dir: Any, source: str | None = None) -> str:
    """One shell line that runs this experiment again: the scenario, its
    seed, duration and bus, the saved fault plan, and its store."""
    name = source or str(scenario.get("name") or "SCENARIO")
    parts = ["knell", "run", name]
    if scenario.get("seed") is not None:
        parts += ["--seed", str(scenario["seed"])]
    duration = scenario.get("duration")
    if isinstance(duration, (int, float)):
        parts += ["--duration", f"{duration:g}s"]
    if scenario.get("bus"):
        parts += ["--bus", redact_url(str(scenario["bus"]))]
    parts += ["--schedule", f"{run_dir}/schedule.json"]
    words = [shlex.quote(p) for p in parts]
    store, hidden = _store_words(scenario.get("store"))
    line = " ".join(words + store)
    if hidden:
        line += (
            f"  # the store password is not written down: set {PASSWORD_ENV} "
            "to it (URL-encoded) first"
        )
    return line


def _store_words(store: object) -> tuple[list[str], bool]:
    """The store's flags, shell-quoted, and whether a password was left out."""
    if isinstance(store, str):  # ``store = "redis"`` as given, not yet a table
        return ["--store", shlex.quote(store)], False
    if not isinstance(store, Mapping) or not store.get("kind"):
        return [], False  # an old run directory, or a history without a scenario
    url = store.get("url")
    if isinstance(url, str) and url:
        word, hidden = _url_word(url)
        return ["--store-url", word, *(["--keep"] if store.get("keep") else [])], hidden
    if store.get("provider", "private") != "private":
        return [], False
    if any(value not in (None, {}, "", []) for key, value in store.items() if key not in _COMMON):
        return [], False  # the scenario file's own store table: it says it all
    return ["--store", shlex.quote(str(store["kind"]))], False


def _url_word(url: str) -> tuple[str, bool]:
    """The URL as one shell word, its secrets replaced by the shell
    variable (double quotes, so the shell expands it and nothing else)."""
    shown = redact_url(url, _SLOT)
    if shown == url:
        return shlex.quote(url), False
    escaped = "".join("\\" + c if c in '\\"$`' else c for c in shown)
    return '"' + escaped.replace(_SLOT, "${" + PASSWORD_ENV + "}") + '"', True
