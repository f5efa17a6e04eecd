"""``knell compose``: build the stack's images, check the machine, bring a
stack up by hand, and reap what dead runners left in the engine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from knell.stores.compose.errors import ComposeError
from knell.stores.compose.links import LINKS

__all__ = ["compose"]


def _say(line: str) -> None:
    click.echo(f"  {line}")


def _fail(exc: ComposeError) -> None:
    click.echo(f"knell: error: {exc}", err=True)
    sys.exit(2)


@click.group("compose")
def compose() -> None:
    """The containerized stack (Postgres, Redis, Toxiproxy) of compose/."""


@compose.command()
@click.option("--force", is_flag=True, help="Rebuild even the images that are present.")
@click.option("--no-runner", is_flag=True, help="Skip the runner image.")
@click.option("--log", type=click.Path(path_type=Path), default=Path("reports/compose-build.log"))
def build(force: bool, no_runner: bool, log: Path) -> None:
    """Make the base image if missing, then build the air-gapped images
    (postgres, redis, knell's toxiproxy) and the runner image."""
    from knell.stores.compose import images as img
    from knell.stores.compose.files import compose_dir

    try:
        where = compose_dir()
        timings = {"base": img.ensure_base(where, log=log, say=_say)}
        timings["wheels"] = img.ensure_wheelhouse(where, log=log, say=_say)
        specs = img.airgap_images(where)
        if not no_runner:
            specs["runner"] = img.runner_image(where)
        timings.update(img.build_images(specs, log=log, force=force, say=_say))
    except ComposeError as exc:
        _fail(exc)
        return
    for name, seconds in timings.items():
        tag = specs[name].tag if name in specs else ""
        click.echo(f"{name:10} {seconds:6.1f} s  {tag}")


@compose.command()
def doctor() -> None:
    """What this machine has: engine, compose, images present or buildable."""
    from knell.stores.compose.doctor import doctor as check

    findings = check()
    for finding in findings:
        mark = "ok " if finding.ok else "MISSING"
        click.echo(f"{mark:8}{finding.name}: {finding.detail}")
        if finding.hint and not finding.ok:
            click.echo(f"        -> {finding.hint}")
    sys.exit(0 if all(f.ok for f in findings) else 1)


@compose.command()
@click.option(
    "--store",
    "stores",
    multiple=True,
    type=click.Choice(list(LINKS)),
    help="Which stores (default: every one).",
)
@click.option("--airgap", type=click.Choice(["auto", "yes", "no"]), default="auto")
def up(stores: tuple[str, ...], airgap: str) -> None:
    """Bring a stack up, print its URLs, and hold it until Ctrl-C."""
    from knell.owners import Owner
    from knell.stores.compose.options import ComposeOptions
    from knell.stores.compose.stack import STORES, ComposeStack

    owner = Owner()
    try:
        stack = ComposeStack(
            stores or STORES,
            options=ComposeOptions.model_validate({"airgap": airgap}),
            owner=owner,
            say=_say,
        )
        with stack:
            click.echo(f"project   {stack.project} ({stack.compose and stack.compose.label})")
            for service in stack.services:
                click.echo(
                    f"{service:9} {stack.url(service)}  (direct: {stack.url(service, direct=True)})"
                )
            click.echo(f"toxiproxy {stack.toxiproxy_url}")
            click.echo("Ctrl-C brings it down.")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    except ComposeError as exc:
        _fail(exc)
    finally:
        owner.close()


@compose.command()
def reap() -> None:
    """Remove what runners that are gone left behind: their recorded
    processes and containers, and every container, network and volume
    labelled with a dead owner."""
    from knell.owners import reap as reap_records
    from knell.stores.compose.reaper import reap_labelled

    try:
        removed = reap_records(say=click.echo) + reap_labelled(say=click.echo)
    except ComposeError as exc:
        _fail(exc)
        return
    click.echo(f"{len(removed)} removed")
