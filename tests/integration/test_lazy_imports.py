"""A SQLite-only run never imports a server's client library: psycopg and
redis-py load only when a Postgres or Redis bus, store or mutant is used,
the Docker SDK only for a compose stack, toxiproxy-python only for links.
Each is an optional extra; a run that needs a missing one is refused with
exit 3 and one line naming the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KNELL = Path(sys.executable).with_name("knell")
OPTIONAL = ("psycopg", "redis", "docker", "toxiproxy")

PROBE = """
import sys
import knell, knell.buses, knell.stores, knell.bench.bus, knell.owners
from knell.buses import open_bus, resolve_driver
from knell.stores import StoreSpec, create_store
from knell.buses.mutants import all_mutants
resolve_driver("sqlite:///x.db", "knell.buses.mutants:stale_ack_regresses")
all_mutants("sqlite")
store = create_store(StoreSpec(kind="sqlite"), __import__("pathlib").Path(sys.argv[1]))
store.start()
bus = open_bus(store.url)
bus.post("a", "m", "p")
bus.close()
loaded = sorted(
    m for m in sys.modules if m.split(".")[0] in ("psycopg", "redis", "docker", "toxiproxy")
)
print(",".join(loaded))
"""


def test_sqlite_runs_never_import_psycopg_or_redis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", out.stdout


def test_the_schemes_resolve_to_their_buses() -> None:
    from knell.buses import resolve_driver
    from knell.stores.postgres.bus import open_postgres
    from knell.stores.redis.bus import open_redis

    assert resolve_driver("postgresql://u@h/db") is open_postgres
    assert resolve_driver("postgres://u@h/db") is open_postgres
    assert resolve_driver("redis://h:1/0") is open_redis


def _absent(folder: Path) -> dict[str, str]:
    """An environment in which the optional libraries cannot be imported: a
    folder first on PYTHONPATH with a stand-in package for each that raises
    ImportError, as an absent one does."""
    import os

    for name in OPTIONAL:
        package = folder / name
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(
            f'raise ImportError("No module named {name}", name="{name}")\n', encoding="utf-8"
        )
    return {**os.environ, "PYTHONPATH": str(folder)}


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["run", str(REPO / "scenarios" / "postgres-store-crash.toml")], "postgres"),
        (["run", str(REPO / "scenarios" / "quickstart.toml"), "--store", "redis"], "redis"),
        (
            ["run", str(REPO / "scenarios" / "quickstart.toml"), "--store-url",
             "postgresql://knell@127.0.0.1:1/knell"],
            "postgres",
        ),
        (["run", str(REPO / "scenarios" / "sqlite-bridge-kill.toml")], "network"),
        (["doctor", "redis", "--require", "redis"], "redis"),
    ],
    ids=["scenario", "store-flag", "store-url", "bridge-links", "doctor"],
)  # fmt: skip
def test_a_missing_extra_is_refused_by_name(tmp_path: Path, argv: list[str], extra: str) -> None:
    if argv[0] == "run":
        argv = [*argv, "--duration", "2s", "--reports", str(tmp_path / "reports")]
    done = subprocess.run(
        [str(KNELL), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_absent(tmp_path / "absent"),
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert f"pip install 'knell[{extra}]'" in out, out
    assert "Traceback" not in out, out


def test_the_embedded_store_needs_no_extra(tmp_path: Path) -> None:
    """The core install lists the scenarios and checks the machine with
    every optional library absent."""
    for argv in (["list"], ["doctor", "sqlite", "--require", "sqlite"]):
        done = subprocess.run(
            [str(KNELL), *argv],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=_absent(tmp_path / "absent"),
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_worker_start_imports_no_pydantic() -> None:
    """Every worker start and every restart after a kill pays its imports;
    pydantic and the history models were most of them (the worker checks
    its oks against generated shapes, :mod:`knell.history_shapes`)."""
    probe = (
        "import sys, knell.workload.__main__;"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


def test_knell_run_imports_no_other_command() -> None:
    """Each ``knell run`` is a new interpreter, and its start is part of the
    fixed cost of every short run: the other commands' modules (campaign
    dashboard, compose stacks, bridges, proxy) stay unimported."""
    probe = (
        "import sys\n"
        "from knell.cli import cli, main\n"
        "import knell.cli.run\n"
        "others = ('knell.campaign', 'knell.cli.campaign', 'knell.stores.compose.cli',\n"
        "          'knell.bridge.cli', 'knell.proxy.cli', 'knell.cli.bench', 'knell.cli.explore')\n"
        "print(','.join(m for m in others if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


KILL_ONLY = """\
name = "kill-only"
description = "one fault kind"
duration = "2s"
[[process]]
role = "producer"
[[process]]
role = "consumer"
[[nemesis]]
fault = "kill"
target = "consumer"
every = "0.5s"
"""


def test_a_run_imports_only_the_fault_kinds_its_scenario_names(tmp_path: Path) -> None:
    """A scenario that names ``kill`` is loaded, planned and checked (the
    fault windows, the well-formedness pass, the run's figures) without
    importing any other fault kind's module, nor the compose package (its
    ``[store]`` table has no compose key)."""
    scenario = tmp_path / "kill-only.toml"
    scenario.write_text(KILL_ONLY, encoding="utf-8")
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "import knell.cli.run\n"
        "from knell.scenario import load_scenario\n"
        "from knell.schedule import expand\n"
        "from knell.checker.windows import FaultWindows\n"
        "from knell.checker.wellformed import nemesis_fs\n"
        "from knell.report.stats import RunStats\n"
        "from knell.nemesis.registry import BUILTIN\n"
        "scenario = load_scenario(Path(sys.argv[1]))\n"
        "assert expand(scenario).actions\n"
        "FaultWindows(); RunStats()\n"
        "assert 'partition-end' in nemesis_fs()\n"
        "kinds = {BUILTIN[n].module for n in BUILTIN}\n"
        "print(','.join(sorted(m for m in sys.modules if m in kinds)))\n"
        "print('knell.stores.compose' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(scenario)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["knell.nemesis.kill", "False"], out.stdout


def test_a_worker_opens_its_bus_without_the_store_kinds(tmp_path: Path) -> None:
    """The runner tells each worker which built-in bus opens its URL, so a
    worker (and the zygote that forks it) imports that bus alone: finding
    it by scheme read the store kinds' registry, pydantic and all."""
    from knell.buses import reference_bus

    url = f"sqlite:///{tmp_path / 'bus.db'}"
    probe = (
        "import sys\n"
        "import knell.workload.__main__\n"
        "from knell.buses import open_bus\n"
        "open_bus(sys.argv[1], None, reference=sys.argv[2]).close()\n"
        "print(','.join(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('pydantic', 'httpx') or m == 'knell.stores.registry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, url, str(reference_bus(url))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "", out.stdout
