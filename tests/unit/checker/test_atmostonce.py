"""The at-most-once checks: at-most-once, read-refusal, stranded-listed,
nothing-vanishes (each valid on a well-behaved history, and each anomaly
with its witness)."""

from __future__ import annotations

from knell.buses import STRANDED_CAP
from knell.checker.atmostonce import (
    AtMostOnceCheck,
    NothingVanishesCheck,
    ReadRefusalCheck,
    StrandedListedCheck,
)

from .builder import indices, only, run
from .contracts import RoleHistory

R = "reviewer"


def churn() -> RoleHistory:
    """run-1 reads p:1 and dies with p:2 unread; run-2 takes over, lists p:2 as
    stranded, is refused reading it, reads p:3; the final run reads p:4."""
    h = RoleHistory()
    h.post("sender-1", R, "p:1", 1)
    h.post("sender-1", R, "p:2", 2)
    h.claim_role("holder-1", R, "run-1", 0.2)
    h.receive("holder-1", R, "run-1", [("p:1", 1), ("p:2", 2)])
    h.read("holder-1", R, "run-1", "p:1")
    h.nemesis("kill", "holder-1")
    h.claim_role("holder-2", R, "run-2", 0.2, outcome="fail")  # still held
    h.sleep(0.3)
    h.post("sender-1", R, "p:3", 3)
    h.claim_role("holder-2", R, "run-2", 1.0)
    h.stranded("holder-2", R, "run-2", [("p:2", 2, "run-1", 0.0)])
    h.read("holder-2", R, "run-2", "p:2", outcome="fail", probe=True)
    h.receive("holder-2", R, "run-2", [("p:3", 3)])
    h.read("holder-2", R, "run-2", "p:3")
    h.release_role("holder-2", R, "run-2")
    h.post("sender-1", R, "p:4", 4)
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.claim_role("role-drain-1", R, "run-9", 1.0)
    h.receive("role-drain-1", R, "run-9", [("p:4", 4)])
    h.read("role-drain-1", R, "run-9", "p:4")
    h.receive("role-drain-1", R, "run-9", [])
    h.stranded("role-drain-1", R, "run-9", [("p:2", 2, "run-1", 0.0)])
    h.release_role("role-drain-1", R, "run-9")
    h.final_ok(R, "at-most-once", "role-drain-1")
    return h


def test_a_well_behaved_churn_passes_every_check() -> None:
    h = churn()
    for check in (AtMostOnceCheck, ReadRefusalCheck, StrandedListedCheck, NothingVanishesCheck):
        r = run(h, check)
        assert r.valid is True, (check.name, r.to_json())
    assert run(h, StrandedListedCheck).counts["listings-judged"] == 2
    vanish = run(h, NothingVanishesCheck).counts
    assert (vanish["messages"], vanish["read"], vanish["listed"]) == (4, 3, 1)


# -- at-most-once -----------------------------------------------------------------


def test_redelivered_to_the_next_holder() -> None:
    h = RoleHistory()
    h.claim_role("holder-1", R, "run-1")
    first = h.receive("holder-1", R, "run-1", [("p:1", 1)])
    h.release_role("holder-1", R, "run-1")
    h.claim_role("holder-2", R, "run-2")
    again = h.receive("holder-2", R, "run-2", [("p:1", 1)])
    r = run(h, AtMostOnceCheck)
    assert only(r, "redelivered") == indices([*first, *again])
    assert "run-1" in r.anomalies[0].message and "run-2" in r.anomalies[0].message


def test_two_receivers_of_one_run_handed_the_same_message() -> None:
    """Competing receivers (a group holding the role together as one run):
    overlapping receives that both return p:1 are a redelivery, though the
    run is the same."""
    h = RoleHistory()
    h.claim_role("crew-1", R, "crew.together")
    h.claim_role("crew-2", R, "crew.together")
    first = h.receive("crew-1", R, "crew.together", [("p:1", 1)])
    again = h.receive("crew-2", R, "crew.together", [("p:1", 1), ("p:2", 2)])
    r = run(h, AtMostOnceCheck)
    assert only(r, "redelivered") == indices([*first, *again])


def test_two_receivers_of_one_run_each_given_their_own_pass() -> None:
    h = RoleHistory()
    h.claim_role("crew-1", R, "crew.together")
    h.claim_role("crew-2", R, "crew.together")
    h.receive("crew-1", R, "crew.together", [("p:1", 1)])
    h.receive("crew-2", R, "crew.together", [("p:2", 2)])
    h.read("crew-2", R, "crew.together", "p:2")
    h.read("crew-1", R, "crew.together", "p:1")
    assert run(h, AtMostOnceCheck).valid is True
    assert run(h, ReadRefusalCheck).valid is True


# -- read-refusal -----------------------------------------------------------------


def test_read_by_a_run_it_was_not_delivered_to() -> None:
    h = RoleHistory()
    h.claim_role("holder-1", R, "run-1")
    _, delivered = h.receive("holder-1", R, "run-1", [("p:1", 1)])
    read = h.read("holder-2", R, "run-2", "p:1", probe=True)
    r = run(h, ReadRefusalCheck)
    assert only(r, "read-by-other") == indices([delivered, *read])


def test_read_of_a_message_never_delivered_to_the_reader() -> None:
    h = RoleHistory()
    read = h.read("holder-2", R, "run-2", "p:1")
    r = run(h, ReadRefusalCheck)
    assert only(r, "read-by-other") == indices(read)


def test_a_receive_of_unknown_outcome_may_have_delivered_it() -> None:
    h = RoleHistory()
    h.claim_role("holder-2", R, "run-2")
    h.receive_info("holder-2", R, "run-2")
    h.read("holder-2", R, "run-2", "p:1")
    assert run(h, ReadRefusalCheck).valid is True


def test_recipient_refused() -> None:
    h = RoleHistory()
    delivered = h.receive("holder-1", R, "run-1", [("p:1", 1)])
    read = h.read("holder-1", R, "run-1", "p:1", outcome="fail")
    r = run(h, ReadRefusalCheck)
    assert only(r, "wrong-refusal") == indices([*delivered, *read])


# -- stranded-listed --------------------------------------------------------------


def departed() -> RoleHistory:
    """run-1 received p:1 and p:2, read p:1, released; run-2 holds the role."""
    h = RoleHistory()
    h.claim_role("holder-1", R, "run-1")
    h.receive("holder-1", R, "run-1", [("p:1", 1), ("p:2", 2)])
    h.read("holder-1", R, "run-1", "p:1")
    h.release_role("holder-1", R, "run-1")
    h.claim_role("holder-2", R, "run-2")
    return h


def test_missing_from_the_list() -> None:
    h = departed()
    listing = h.stranded("holder-2", R, "run-2", [])
    r = run(h, StrandedListedCheck)
    witness = only(r, "missing")
    assert witness[-2:] == indices(listing) and len(witness) == 4
    assert "p:2" in r.anomalies[0].message


def test_listed_though_read() -> None:
    h = departed()
    h.stranded("holder-2", R, "run-2", [("p:1", 1, "run-1", 0.0), ("p:2", 2, "run-1", 0.0)])
    r = run(h, StrandedListedCheck)
    assert len(only(r, "listed-read")) == 4


def test_listed_though_the_lister_holds_it() -> None:
    h = departed()
    h.receive("holder-2", R, "run-2", [("p:3", 3)])
    h.stranded("holder-2", R, "run-2", [("p:2", 2, "run-1", 0.0), ("p:3", 3, "run-2", 0.1)])
    r = run(h, StrandedListedCheck)
    assert len(only(r, "listed-current")) == 3


def test_unordered_and_over_cap() -> None:
    h = departed()
    entries = [(f"x:{i}", 10 + i, "run-1", 100.0 - i) for i in range(STRANDED_CAP + 1)]
    listing = h.stranded("holder-2", R, "run-2", [("p:2", 2, "run-1", 0.0), *entries])
    r = run(h, StrandedListedCheck)
    assert only(r, "unordered") == indices(listing)
    assert only(r, "over-cap") == indices(listing)


def test_a_full_list_need_not_show_later_deliveries() -> None:
    h = RoleHistory()
    h.claim_role("holder-1", R, "run-1")
    early = [(f"p:{i}", i) for i in range(1, STRANDED_CAP + 1)]
    h.receive("holder-1", R, "run-1", early)
    at = h.seconds()
    h.sleep(0.1)
    h.receive("holder-1", R, "run-1", [("late", 99)])
    h.release_role("holder-1", R, "run-1")
    h.claim_role("holder-2", R, "run-2")
    h.stranded("holder-2", R, "run-2", [(m, s, "run-1", at) for m, s in early])
    assert run(h, StrandedListedCheck).valid is True


def test_a_listing_by_a_run_that_may_not_hold_the_role_is_not_judged() -> None:
    h = departed()
    h.sleep(2.0)  # run-2's hold may have lapsed: who is current is unknown
    h.stranded("holder-2", R, "run-2", [])
    r = run(h, StrandedListedCheck)
    assert r.valid is True and r.counts["listings-judged"] == 0


# -- nothing-vanishes -------------------------------------------------------------


def test_delivered_unread_and_not_listed_vanished() -> None:
    h = RoleHistory()
    post = h.post("sender-1", R, "p:1", 1)
    h.claim_role("holder-1", R, "run-1")
    _, delivered = h.receive("holder-1", R, "run-1", [("p:1", 1)])
    h.nemesis("kill", "holder-1")
    h.final_invoke(R, "at-most-once", "role-drain-1")
    _, listing = h.stranded("role-drain-1", R, "run-9", [])
    drained = h.final_ok(R, "at-most-once", "role-drain-1")
    r = run(h, NothingVanishesCheck)
    assert only(r, "vanished") == indices([*post, delivered, listing, drained])


def test_never_delivered_and_not_read_vanished() -> None:
    h = RoleHistory()
    post = h.post("sender-1", R, "p:1", 1)
    h.claim_role("role-drain-1", R, "run-9")
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.receive("role-drain-1", R, "run-9", [])
    h.stranded("role-drain-1", R, "run-9", [])
    h.final_ok(R, "at-most-once", "role-drain-1")
    r = run(h, NothingVanishesCheck)
    assert post[1]["index"] in only(r, "vanished")


def test_without_a_final_phase_it_is_unknown() -> None:
    h = RoleHistory()
    h.post("sender-1", R, "p:1", 1)
    h.claim_role("holder-1", R, "run-1")
    r = run(h, NothingVanishesCheck)
    assert r.valid == "unknown" and "no final phase" in (r.unknown_reason or "")


def test_a_full_final_list_leaves_later_deliveries_undecided() -> None:
    h = RoleHistory()
    h.claim_role("holder-1", R, "run-1")
    early = [(f"p:{i}", i) for i in range(1, STRANDED_CAP + 1)]
    for mid, seq in [*early, ("late", 99)]:
        h.post("sender-1", R, mid, seq)
    h.receive("holder-1", R, "run-1", early)
    at = h.seconds()
    h.sleep(0.1)
    h.receive("holder-1", R, "run-1", [("late", 99)])
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.stranded("role-drain-1", R, "run-9", [(m, s, "run-1", at) for m, s in early])
    h.final_ok(R, "at-most-once", "role-drain-1")
    r = run(h, NothingVanishesCheck)
    assert r.valid == "unknown" and "beyond its cap" in (r.unknown_reason or "")


def _cut_within_one_receive(h: RoleHistory) -> tuple[list[tuple[str, int]], float]:
    """Run-1 leaves 51 messages unread, the last two from one receive: the
    full list (50, oldest first) ends between those two, which were
    delivered at the same instant (a soak found this)."""
    h.claim_role("holder-1", R, "run-1")
    early = [(f"p:{i}", i) for i in range(1, STRANDED_CAP)]
    pair = [("p:50", 50), ("p:51", 51)]
    for mid, seq in [*early, *pair]:
        h.post("sender-1", R, mid, seq)
    h.receive("holder-1", R, "run-1", early)
    h.sleep(0.1)
    h.receive("holder-1", R, "run-1", pair)
    at = h.seconds() - 0.0005  # the bus's clock read inside that receive
    h.release_role("holder-1", R, "run-1")
    return [*early, pair[0]], at


def test_a_full_list_may_end_between_two_messages_of_one_receive() -> None:
    h = RoleHistory()
    listed, at = _cut_within_one_receive(h)
    h.claim_role("holder-2", R, "run-2")
    h.stranded("holder-2", R, "run-2", [(m, s, "run-1", at) for m, s in listed])
    assert run(h, StrandedListedCheck).valid is True


def test_a_full_final_list_ending_within_one_receive_leaves_the_rest_undecided() -> None:
    h = RoleHistory()
    listed, at = _cut_within_one_receive(h)
    h.final_invoke(R, "at-most-once", "role-drain-1")
    h.stranded("role-drain-1", R, "run-9", [(m, s, "run-1", at) for m, s in listed])
    h.final_ok(R, "at-most-once", "role-drain-1")
    r = run(h, NothingVanishesCheck)
    assert r.valid == "unknown" and "beyond its cap" in (r.unknown_reason or "")
