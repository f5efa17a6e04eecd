"""The nemesis: the faults knell injects into a run.

Network faults go through the Toxiproxy HTTP API: :mod:`knell.nemesis.toxiproxy`
is the one client adapter knell uses, :mod:`knell.nemesis.probe` proves that a
fault took effect on a real connection, and :mod:`knell.nemesis.proxy` is
knell's own Toxiproxy-compatible server for machines without
``toxiproxy-server``.
"""
