"""Forgetting the messages a role's recipients read: a long role-inbox
history checked at a flat cost, judged the same (knell.checker.atmostonce.settle).

A message settles once a read by its recipient returned ok, and is
forgotten ``forget_after`` seconds later. A second delivery of it, or a
stranded listing naming it, is still named, by its seq; a stranded
message is never forgotten."""

from __future__ import annotations

from typing import Any

from knell.checker import CheckConfig

from .builder import check_keeping, indices, only
from .contracts import RoleHistory

R = "reviewer"
ROLES = ("producer", "holder")
FORGET = CheckConfig(contracts=("at-most-once",), roles=ROLES, forget_after=1.0)
KEEP = CheckConfig(contracts=("at-most-once",), roles=ROLES)


def _check(h: RoleHistory, config: CheckConfig) -> Any:
    return check_keeping(h, config)


def _turns(h: RoleHistory, first_run: int, runs: int, *, seq: int = 1) -> int:
    """``runs`` turns of holder-1, each posting two messages and reading
    them; the next seq."""
    for n in range(first_run, first_run + runs):
        run = f"run-{n}"
        h.post("sender-1", R, f"p:{seq}", seq)
        h.post("sender-1", R, f"p:{seq + 1}", seq + 1)
        h.claim_role("holder-1", R, run, 1.0)
        h.receive("holder-1", R, run, [(f"p:{seq}", seq), (f"p:{seq + 1}", seq + 1)])
        h.read("holder-1", R, run, f"p:{seq}", seq=seq)
        h.read("holder-1", R, run, f"p:{seq + 1}", seq=seq + 1)
        h.release_role("holder-1", R, run)
        h.sleep(0.05)
        seq += 2
    return seq


def _final(h: RoleHistory, stranded: list[tuple[str, int, str, float]]) -> None:
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.claim_role("role-drain-1", R, "run-final", 1.0)
    h.receive("role-drain-1", R, "run-final", [])
    h.stranded("role-drain-1", R, "run-final", stranded)
    h.release_role("role-drain-1", R, "run-final")
    h.final_ok(R, "at-most-once", "role-drain-1")


def _kept(checks: dict[str, Any]) -> int:
    return (
        len(checks["at-most-once"].delivered)
        + sum(map(len, checks["nothing-vanishes"]._posts.values()))
        + len(checks["nothing-vanishes"]._was_read)
    )


def test_forgetting_gives_the_same_verdict_and_counts() -> None:
    h = RoleHistory()
    seq = _turns(h, 1, 80)
    h.post("sender-1", R, f"p:{seq}", seq)
    h.claim_role("holder-1", R, "run-left", 1.0)
    h.receive("holder-1", R, "run-left", [(f"p:{seq}", seq)])
    h.release_role("holder-1", R, "run-left")  # left unread: stranded
    _final(h, [(f"p:{seq}", seq, "run-left", h.seconds())])
    kept, whole = _check(h, KEEP)
    verdict, checks = _check(h, FORGET)
    assert verdict.valid is True and kept.valid is True, verdict.to_json()
    for name, result in verdict.checks.items():
        assert result.counts == kept.checks[name].counts, name
    assert verdict.forgetting["messages"] > 100
    # what is kept is the last second's messages (the horizon), not all 161
    assert _kept(whole) > 3 * 160 and _kept(checks) < 120
    # the stranded message is never forgotten: the final listing found it
    assert verdict.checks["nothing-vanishes"].counts["listed"] == 1


def test_a_forgotten_message_delivered_again_is_still_redelivered() -> None:
    h = RoleHistory()
    _turns(h, 1, 40)
    again = h.receive("holder-1", R, "run-99", [("p:3", 3)])  # read long ago, forgotten
    verdict, checks = _check(h, FORGET)
    assert ("reviewer", "p:3") not in checks["at-most-once"].delivered
    assert only(verdict.checks["at-most-once"], "redelivered") == indices(again)


def test_a_forgotten_message_listed_as_stranded_is_still_listed_read() -> None:
    h = RoleHistory()
    _turns(h, 1, 40)
    h.claim_role("holder-2", R, "run-99", 1.0)
    listing = h.stranded("holder-2", R, "run-99", [("p:3", 3, "run-2", 0.0)])
    verdict, _ = _check(h, FORGET)
    assert only(verdict.checks["stranded-listed"], "listed-read") == indices(listing)


def test_a_read_of_a_forgotten_message_is_counted_not_judged() -> None:
    h = RoleHistory()
    _turns(h, 1, 40)
    h.read("holder-2", R, "run-99", "p:3", seq=3)
    verdict, _ = _check(h, FORGET)
    kept, _ = _check(h, KEEP)
    assert only(kept.checks["read-refusal"], "read-by-other")  # judged while it is known
    refusal = verdict.checks["read-refusal"]
    assert (
        refusal.valid is True
        and refusal.counts["reads-ok"] == kept.checks["read-refusal"].counts["reads-ok"]
    )


def test_an_unread_message_is_never_forgotten() -> None:
    h = RoleHistory()
    h.post("sender-1", R, "p:0", 1000)
    h.claim_role("holder-1", R, "run-0", 1.0)
    h.receive("holder-1", R, "run-0", [("p:0", 1000)])
    h.release_role("holder-1", R, "run-0")
    _turns(h, 1, 40)
    _, checks = _check(h, FORGET)
    assert ("reviewer", "p:0") in checks["at-most-once"].delivered
