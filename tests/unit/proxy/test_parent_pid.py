"""``knell proxy --parent-pid`` names the process the proxy dies with.

A pid that is not the proxy's parent (a typo, a parent already gone) used
to leash the proxy to it anyway: the leash saw no such parent and exited
the process at once with its own code (70), silently. Found by the
command-line fuzzer, whose in-process run of the command took the
pytest-xdist worker down with it. Now it is refused, exit 3, by name.
"""

from __future__ import annotations

import pytest

from knell.cli import main


def test_a_parent_pid_that_is_not_the_parent_is_refused_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--listen", "127.0.0.1:0", "--parent-pid", "-1"])
    said = capsys.readouterr()
    assert exited.value.code == 3, said.out + said.err
    assert "--parent-pid -1 is not this process's parent" in said.err
    assert "Traceback" not in said.out + said.err
