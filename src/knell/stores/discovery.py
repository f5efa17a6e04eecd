"""What every store's binary discovery shares.

A server kind finds its binaries in its own package (what the scenario
names, then an environment variable, then PATH, then the usual places of
its installers), so the doctor and the runner find the same ones.
"""

from __future__ import annotations

import sys

__all__ = ["EXE"]

EXE = ".exe" if sys.platform == "win32" else ""
"""The suffix of an executable on this platform."""
