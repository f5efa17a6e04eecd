"""Each bridge mutant really has its bug, shown with real bridge processes:
the fault that exposes it (a SIGKILL of the bridge, a retried post) is
applied, and the store and the client disagree exactly as the mutant's
failure mode says, while a sound bridge under the same fault does not."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from knell.buses import Bus, open_bus
from knell.buses.contract import Claim, QueueBus, RoleBus, RoleHeld, contracts_of
from knell.buses.mutants import all_mutants
from knell.buses.mutants.bridge import state_file
from tests.integration.bridges import Bridge, Bridges, sqlite_url

pytestmark = pytest.mark.integration

ROUNDS = 3
"""A write-behind flush (every second) can land between the last answer
and the kill; then the round proves nothing and is run again."""


def store(tmp_path: Path, n: int) -> tuple[Path, str]:
    db = tmp_path / f"bus-{n}.db"
    url = sqlite_url(db)
    open_bus(url).close()
    return db, url


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute(sql).fetchall())


def drain(bus: Bus, handle: str, channel: str) -> list[int]:
    """Read like a consumer's final drain: page until an empty page."""
    seqs: list[int] = []
    after = 0
    while page := bus.fetch(handle, channel, after=after, limit=2):
        seqs += [m.seq for m in page]
        after = page[-1].seq
    return seqs


def rounds(attempt: Callable[[int], bool]) -> None:
    for n in range(ROUNDS):
        if attempt(n):
            return
    pytest.fail(f"the bug did not show in {ROUNDS} rounds")


def test_bridge_mutants_are_registered_for_the_bridge() -> None:
    bridge_mutants = {n: m for n, m in all_mutants().items() if m.store == "bridge"}
    assert set(bridge_mutants) == {
        "bridge-ack-before-commit",
        "bridge-stale-head",
        "bridge-cursor-write-behind",
        "bridge-drops-idempotency-key",
        "bridge-claim-retry-second-lease",
        "bridge-tail-resume-inclusive",
        "bridge-tail-resume-at-head",
        "bridge-stream-own-buffer",
        "bridge-caches-hold",
    }
    for m in bridge_mutants.values():
        assert (m.cls.__doc__ or "").startswith("Failure mode:")
        assert set(m.scenarios) <= {
            "sqlite-bridge-kill",
            "postgres-bridge-pause",
            "bridge-queue-kill",
            "bridge-sse-tail-kill",
            "bridge-sse-stream-kill",
            "bridge-roles-kill",
        }


def _two_claims(bridges: Bridges, tmp_path: Path, *mutant: str) -> tuple[Claim, Claim | None]:
    """Two consumers claim from one queue holding two messages, one right
    after the other, through one bridge: their leases, as answered."""
    _, url = store(tmp_path, 0)
    bridge = bridges.start("--bus", url, *mutant)
    client = open_bus(bridge.url)
    assert isinstance(client, QueueBus) and "queue" in contracts_of(client)
    client.declare_queue("jobs", 3)
    for i in range(2):
        client.post("jobs", f"work{i}", "sender")
    first = client.claim("jobs", "a", 30.0)
    second = client.claim("jobs", "b", 30.0)
    assert first is not None
    client.close()
    return first, second


def test_claim_retry_hands_one_message_to_two_consumers(bridges: Bridges, tmp_path: Path) -> None:
    first, second = _two_claims(bridges, tmp_path, "--mutant", "bridge-claim-retry-second-lease")
    # b's claim, taken for a retry of a's, gets the message a still holds.
    assert second is not None and second.id == first.id and second.consumer == "b"


def test_a_sound_bridge_hands_the_second_consumer_the_next_message(
    bridges: Bridges, tmp_path: Path
) -> None:
    first, second = _two_claims(bridges, tmp_path)
    assert second is not None and second.id != first.id and second.seq == first.seq + 1


def test_ack_before_commit_loses_confirmed_posts_on_a_kill(
    bridges: Bridges, tmp_path: Path
) -> None:
    def attempt(n: int) -> bool:
        db, url = store(tmp_path, n)
        bridge = bridges.start("--bus", url, "--mutant", "bridge-ack-before-commit")
        client = open_bus(bridge.url)
        confirmed = [client.post("a", f"m{i}", "p", f"k{i}").seq for i in range(10)]
        bridge.kill()
        assert confirmed == list(range(1, 11))  # every post was answered ok...
        stored = [seq for (seq,) in rows(db, "SELECT seq FROM messages ORDER BY seq")]
        if len(stored) == 10:
            client.close()
            return False  # a flush landed just before the kill
        assert len(stored) < 10  # ...but the store never got them all: lost
        # The restarted bridge hands the lost seqs out again, to other messages.
        again = bridges.restart(bridge)
        retry = open_bus(again.url)
        reused = retry.post("a", "new", "p2").seq
        assert reused == len(stored) + 1 and reused in confirmed
        retry.close()
        client.close()
        return True

    rounds(attempt)


def test_a_sound_bridge_killed_the_same_way_loses_nothing(bridges: Bridges, tmp_path: Path) -> None:
    db, url = store(tmp_path, 0)
    bridge = bridges.start("--bus", url)
    client = open_bus(bridge.url)
    confirmed = [client.post("a", f"m{i}", "p", f"k{i}").seq for i in range(10)]
    bridge.kill()
    assert [s for (s,) in rows(db, "SELECT seq FROM messages ORDER BY seq")] == confirmed
    client.close()


def test_stale_head_serves_short_pages_after_a_restart(bridges: Bridges, tmp_path: Path) -> None:
    def attempt(n: int) -> bool:
        db, url = store(tmp_path, n)
        heads = state_file(url, "bridge-heads")
        bridge = bridges.start("--bus", url, "--mutant", "bridge-stale-head")
        client = open_bus(bridge.url)
        client.subscribe("reader", "a", at="start")
        for i in range(3):
            client.post("a", f"early{i}", "p")
        deadline = time.monotonic() + 5
        while not heads.exists() or json.loads(heads.read_text()) != {"a": 3}:
            assert time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.02)
        confirmed = [client.post("a", f"late{i}", "p").seq for i in range(4)]
        bridge.kill()
        if json.loads(heads.read_text()) != {"a": 3}:
            client.close()
            return False  # a checkpoint landed just before the kill
        assert confirmed == [4, 5, 6, 7]
        assert rows(db, "SELECT MAX(seq) FROM messages") == [(7,)]  # all in the store...
        bridges.restart(bridge)
        assert client.head("a") == 7  # the head route asks the store...
        assert drain(client, "reader", "a") == [1, 2, 3]  # ...but pages stop at 3: 4..7 lost
        client.ack("reader", "a", 3)
        assert client.wait("reader", 0.3) is None  # backlog above the cached head: no ring
        client.close()
        return True

    rounds(attempt)


def test_cursor_write_behind_regresses_after_a_kill(bridges: Bridges, tmp_path: Path) -> None:
    def attempt(n: int) -> bool:
        db, url = store(tmp_path, n)
        bridge = bridges.start("--bus", url, "--mutant", "bridge-cursor-write-behind")
        client = open_bus(bridge.url)
        client.subscribe("w", "a")
        for i in range(5):
            client.post("a", f"m{i}", "p")
        assert client.ack("w", "a", 5) == 5  # answered ok...
        assert client.cursor("w", "a") == 5
        bridge.kill()
        if rows(db, "SELECT acked FROM cursors WHERE handle = 'w'") != [(0,)]:
            client.close()
            return False  # the flush landed just before the kill
        bridges.restart(bridge)
        assert client.cursor("w", "a") == 0  # ...and after the restart the cursor went back
        assert client.subscribe("w", "a") == 0
        assert [m.seq for m in client.fetch("w", "a")] == [1, 2, 3, 4, 5]  # handed again
        client.close()
        return True

    rounds(attempt)


def test_drops_idempotency_key_double_posts_a_retry(bridges: Bridges, tmp_path: Path) -> None:
    db, url = store(tmp_path, 0)
    factory = all_mutants()["bridge-drops-idempotency-key"].factory
    mutant = bridges.start("--bus", url, "--driver", factory)
    client = open_bus(mutant.url)
    first = client.post("a", "p1:7", "p1", idempotency_key="p1:7")
    retry = client.post("a", "p1:7", "p1", idempotency_key="p1:7")  # the answer was "lost"
    assert (first.seq, retry.seq) == (1, 2)  # two appends for one key
    assert first.idempotency_key == retry.idempotency_key == "p1:7"  # the key is echoed
    assert rows(db, "SELECT seq, body, idem_key FROM messages") == [
        (1, "p1:7", None),
        (2, "p1:7", None),
    ]
    client.close()
    _, url2 = store(tmp_path, 1)
    sound: Bridge = bridges.start("--bus", url2)
    ref = open_bus(sound.url)
    assert ref.post("a", "p1:7", "p1", "p1:7").seq == ref.post("a", "p1:7", "p1", "p1:7").seq == 1
    ref.close()


def test_a_bridge_caching_holds_lets_the_store_hold_lapse(bridges: Bridges, tmp_path: Path) -> None:
    """Run a renews through the caching bridge; the store never hears it,
    so after the first lease run b's claim is granted while a's renewal was
    answered ok: two holders. Through a sound bridge, b is refused."""

    def second_claim(*mutant: str) -> bool:
        _, url = store(tmp_path, len(mutant))
        bridge = bridges.start("--bus", url, *mutant)
        client = open_bus(bridge.url)
        assert isinstance(client, RoleBus)
        client.claim_role("reviewer", "a", 0.6)
        time.sleep(0.3)
        client.claim_role("reviewer", "a", 0.6)  # a renewal: live until ~0.9 s
        time.sleep(0.4)  # past the first lease, within the renewed one
        try:
            client.claim_role("reviewer", "b", 0.6)
        except RoleHeld:
            return False
        finally:
            client.close()
        return True

    assert not second_claim()
    assert second_claim("--mutant", "bridge-caches-hold")
