"""``python -m knell.bridge``: see :mod:`knell.bridge.cli`."""

from knell.bridge.cli import main

main()
