"""Build hook: the wheel carries the shipped scenarios.

The top-level ``scenarios/`` folder is the one source of the shipped
scenarios (people read and edit them there). A wheel installed elsewhere
has no repository beside it, so the build copies the folder into the
package as ``knell/scenarios/``; :mod:`knell.shipped` finds them there, or,
in a source checkout or an editable install, in the repository itself.
Everything else about the build is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithScenarios(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "scenarios"
        target = Path(self.build_lib) / "knell" / "scenarios"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.glob("*.toml")):
            shutil.copyfile(path, target / path.name)


setup(cmdclass={"build_py": BuildWithScenarios})
