"""``knell reap``: housekeeping for what runs leave behind."""

from __future__ import annotations

import click

from knell.cli.common import console

__all__ = ["reap"]


@click.command()
def reap() -> None:
    """Remove what runs whose runner died left behind (processes, servers,
    containers), and nothing that a live run owns."""
    from knell.owners import reap as reap_owned
    from knell.owners import state_dir
    from knell.stores.compose.reaper import reap_labelled

    say = lambda line: console.print(line, soft_wrap=True)  # noqa: E731
    removed = reap_owned(say=say)
    removed += reap_labelled(say=say)  # containers labelled with a runner that is gone
    console.print(f"reaped {len(removed)} resource(s) (registry: {state_dir()})", soft_wrap=True)
