"""`make explore` / `make explore-short`: knell explore against mutants
that only fail under a fault, and against the reference bus, with the
acceptance checks of each.

A mutant must be found within the budget (exit 1), shrunk to no more
faults than the first failing candidate had, and its reproduction file
must fail again in at least --min-rate of the re-runs (with the check that
was shrunk). The reference bus must give nothing within its budget
(exit 0). Prints one line per explore and a table of the figures; exits 1
if any check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MUTANTS = "knell.buses.mutants"


@dataclass(frozen=True)
class Case:
    label: str
    scenario: str
    bus: str | None
    extra: tuple[str, ...] = ()


FULL = [
    Case("fetch-consumes", "examples/explore/busy-consumers.toml", f"{MUTANTS}:fetch_consumes"),
    Case(
        "resubscribe-resets-cursor",
        "examples/explore/caught-up-consumers.toml",
        f"{MUTANTS}:resubscribe_resets_cursor",
    ),
    # A pause shorter than a message's round trip lets no twin move on:
    # holds start at 300 ms, so shrinking cannot make the plan unreliable.
    Case(
        "stale-ack-regresses",
        "examples/explore/slow-twins.toml",
        f"{MUTANTS}:stale_ack_regresses",
        ("--min-hold", "300ms"),
    ),
    Case("reference", "scenarios/kill-consumers.toml", None),
]
SHORT = [
    # CI: the search narrowed to kills of the backlogged consumers, so a
    # short budget finds it on a loaded machine; then shrunk and re-run.
    Case(
        "fetch-consumes",
        "examples/explore/busy-consumers.toml",
        f"{MUTANTS}:fetch_consumes",
        ("--kinds", "kill", "--targets", "worker"),
    ),
    Case("reference", "scenarios/kill-consumers.toml", None, ("--kinds", "kill")),
]


def explore(
    case: Case, args: argparse.Namespace, out: Path
) -> tuple[int, dict[str, object], float]:
    reports = out / case.label
    command = [
        sys.executable, "-m", "knell", "explore", case.scenario,
        "--budget", args.budget, "--shrink-budget", args.shrink_budget,
        "--reproduce", str(args.repeats), "--max-duration", args.max_duration,
        "--reports", str(reports), "--no-cache",
    ]  # fmt: skip
    if case.bus:
        command += ["--bus", case.bus]
    command += case.extra
    print("$", " ".join(command), flush=True)
    started = time.monotonic()
    code = subprocess.run(command, check=False).returncode
    wall = time.monotonic() - started
    found = sorted(reports.glob("explore/*/2*/explore.json"))
    data = json.loads(found[-1].read_text()) if found else {}
    return code, data, wall


def judge(case: Case, code: int, data: dict[str, object], min_rate: float) -> list[str]:
    problems = []
    if case.bus is None:
        if code != 0:
            problems.append(f"reference bus: expected exit 0 (nothing found), got {code}")
        return problems
    if code != 1:
        problems.append(f"expected exit 1 (found), got {code}")
    first, shrunk = data.get("first"), data.get("shrunk")
    if not isinstance(first, dict) or not isinstance(shrunk, dict):
        return [*problems, "no confirmed, shrunk failure"]
    if shrunk["faults"] > first["size"]["faults"]:
        problems.append("the shrunk schedule has more faults than the first failing one")
    repro = data.get("reproduction")
    if isinstance(repro, dict) and repro["runs"] and repro["rate"] < min_rate:
        problems.append(
            f"reproduced in {repro['same_failure']}/{repro['runs']} runs, below {min_rate}"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--short", action="store_true", help="the CI form: one mutant, short")
    parser.add_argument("--out", type=Path, default=Path("reports/explore-gate"))
    parser.add_argument("--budget", help="search budget of each explore (default 5m; short 60s)")
    parser.add_argument("--shrink-budget", help="shrink budget (default 5m; short 45s)")
    parser.add_argument("--only", action="append", help="run only these cases (labels)")
    args = parser.parse_args()
    budget, shrink = args.budget, args.shrink_budget
    if args.short:
        args.budget, args.shrink_budget, args.repeats, args.max_duration = "60s", "45s", 3, "3s"
        args.min_rate = 1 / 3  # CI: reproduced at all (the 8-of-10 bar is `make explore`'s)
        cases = SHORT
    else:
        args.budget, args.shrink_budget, args.repeats, args.max_duration = "5m", "5m", 10, "4s"
        args.min_rate = 0.8
        cases = FULL
    args.budget, args.shrink_budget = budget or args.budget, shrink or args.shrink_budget
    if args.only:
        cases = [case for case in cases if case.label in args.only]
    shutil.rmtree(args.out, ignore_errors=True)
    rows, failed = [], False
    for case in cases:
        if case.bus is None:
            budget = "30s" if args.short else args.budget  # one or two candidates in CI
            args_ref = argparse.Namespace(**{**vars(args), "repeats": 0, "budget": budget})
            code, data, wall = explore(case, args_ref, args.out)
        else:
            code, data, wall = explore(case, args, args.out)
        problems = judge(case, code, data, args.min_rate)
        failed |= bool(problems)
        rows.append((case, code, data, wall, problems))
    print(
        "\n| bus | scenario | exit | first failing (faults) | shrunk (faults) "
        "| time to find | reproduced | wall |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for case, code, data, wall, problems in rows:
        first = data.get("first") or {}
        shrunk = data.get("shrunk") or {}
        repro = data.get("reproduction") or {}
        found = data.get("time_to_find_s")
        print(
            f"| {case.label} | {Path(case.scenario).stem} | {code} "
            f"| {first.get('size', {}).get('faults', '-')} | {shrunk.get('faults', '-')} "
            f"| {'-' if found is None else f'{found:.0f} s'} "
            f"| {repro.get('same_failure', '-')}/{repro.get('runs', '-')} | {wall:.0f} s |"
        )
        for problem in problems:
            print(f"  FAIL {case.label}: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
