"""``knell reap``: housekeeping for what runs leave behind."""

from __future__ import annotations

import click

from knell.cli.common import console, styled
from knell.text import clean

__all__ = ["doctor", "reap"]


@click.command()
def reap() -> None:
    """Remove what runs whose runner died left behind (processes, servers,
    containers), and nothing that a live run owns."""
    from knell.owners import reap as reap_owned
    from knell.owners import state_dir
    from knell.stores.compose.reaper import reap_labelled

    say = lambda line: console.print(clean(line), soft_wrap=True)  # noqa: E731
    removed = reap_owned(say=say)
    removed += reap_labelled(say=say)  # containers labelled with a runner that is gone
    console.print(f"reaped {len(removed)} resource(s) (registry: {state_dir()})", soft_wrap=True)


@click.command()
@click.argument("only", nargs=-1)
@click.option(
    "--require",
    help="Comma-separated capabilities that must be usable (exit 3 otherwise), e.g."
    " sqlite,network (store kinds are capabilities too); 'all' for every one.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def doctor(only: tuple[str, ...], require: str | None, as_json: bool) -> None:
    """What this machine can run: stores, servers, proxies, Docker, Node.js,
    a headless browser; versions and paths, and what to install for each
    one missing. ONLY names capabilities to check (default: all)."""
    import json
    import sys

    from knell.cli.common import UsageProblem
    from knell.doctor import CAPABILITIES, diagnose, installed_at
    from knell.errors import ExitCode

    wanted: list[str] = []
    if require:
        wanted = (
            list(CAPABILITIES)
            if require.strip() == "all"
            else [n.strip() for n in require.split(",") if n.strip()]
        )
    for where, names in (("--require", wanted), ("capability", list(only))):
        unknown = [n for n in names if n not in CAPABILITIES]
        if unknown:
            raise UsageProblem(
                f"{where}: unknown {', '.join(unknown)}; known: {', '.join(CAPABILITIES)}"
            )
    chosen = list(dict.fromkeys([*only, *wanted])) if only else None
    capabilities = diagnose(chosen)
    missing = [c.name for c in capabilities if c.name in wanted and not c.ok]
    if as_json:
        console.print_json(
            json.dumps({"capabilities": [c.as_dict() for c in capabilities], "missing": missing})
        )
    else:
        from importlib.metadata import version

        console.print(f"knell {version('knell')} at {installed_at()}", soft_wrap=True)
        for cap in capabilities:
            mark = ("yes", "green") if cap.ok else ("no", "yellow")
            console.print(
                styled("\n", (cap.name, "bold"), f" ({cap.what}): ", mark), soft_wrap=True
            )
            for f in cap.findings:
                sign = ("ok  ", "green") if f.ok else ("missing", "red")
                console.print(styled("  ", sign, f" {f.name}: {clean(f.detail)}"), soft_wrap=True)
                if f.hint and not f.ok:
                    console.print(f"          to get it: {clean(f.hint)}", soft_wrap=True)
    if missing:
        err = "required but not usable here: " + ", ".join(missing)
        if not as_json:
            console.print(styled("\n", (err, "red")), soft_wrap=True)
        sys.exit(ExitCode.USAGE)
