"""`knell explore`: bad input is one line and exit 3, before anything runs."""

from __future__ import annotations

import pytest

from knell.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-scenario"], "no-such-scenario: no such scenario file"),
        (["quickstart", "--budget", "soon"], "--budget: expected a duration"),
        (["quickstart", "--budget", "0s"], "--budget: must be positive"),
        (["quickstart", "--shrink-budget", "10m", "--seed", "1"], "--shrink-budget: at most 5m"),
        (["quickstart", "--kinds", "kill,explode"], "kinds: 'explode' is not one of"),
        (["quickstart", "--bus", "no_such_module_q:make"], "--bus: "),
        (["quickstart", "--min-duration", "9s", "--max-duration", "3s"], "min_duration=9"),
        (["quickstart", "--store", "nosuchstore"], "--store: 'nosuchstore'"),
        (["quickstart", "--max-faults", "0"], "--max-faults"),
    ],
)
def test_bad_input_is_exit_3_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["explore", *args])
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
