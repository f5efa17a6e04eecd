"""A claimer's dead-letter listings during the run (``dead_every``).

Messages die out of seq order, so each listing starts from a cursor that
trails the listings by :data:`~knell.workload.claimer.DEAD_TRAIL` seconds:
a message that died a little after a higher seq is still listed, and a
listing costs only what died lately. The worker here is a test double
that serves pages; the real listing runs in the queue scenarios."""

from __future__ import annotations

from typing import Any

from knell.buses import DeadLetter
from knell.workload import claimer
from knell.workload.claimer import DEAD_PAGE, _DeadLister


def test_a_listing_starts_above_what_was_listed_a_trail_ago() -> None:
    lister = _DeadLister(every=2.0, trail=6.0)
    assert lister.after(100.0) == 0
    lister.listed(100.0, 40)
    lister.listed(102.0, 55)
    assert lister.after(104.0) == 0  # nothing was listed 6 s before
    lister.listed(104.0, 0)  # an empty listing keeps the highest seq so far
    assert lister.after(106.0) == 40
    assert lister.after(108.5) == 55
    assert lister.after(110.0) == 55
    assert len(lister.marks) <= 3  # only the trail's marks are kept


def test_the_next_listing_is_due_every_seconds_after_the_last() -> None:
    lister = _DeadLister(every=2.0)
    lister.listed(50.0, 0)
    assert lister.due == 52.0


class _Worker:
    """Serves pages of dead letters above ``after`` from a fixed list."""

    def __init__(self, seqs: list[int]) -> None:
        self.seqs = seqs
        self.asked: list[int] = []

    def stopping(self) -> bool:
        return False


def test_a_listing_pages_to_the_end_and_remembers_the_highest_seq(monkeypatch: Any) -> None:
    worker = _Worker(list(range(1, 2 * DEAD_PAGE + 31)))

    def page(w: _Worker, channel: str, after: int) -> list[DeadLetter]:
        w.asked.append(after)
        above = [s for s in w.seqs if s > after][:DEAD_PAGE]
        return [DeadLetter(f"{channel}/{s}", channel, s, f"p:{s}", "p", 3, 0.0) for s in above]

    monkeypatch.setattr(claimer, "dead_page", page)
    lister = _DeadLister(every=2.0, trail=0.0)
    lister.run(worker, "jobs")  # type: ignore[arg-type]
    assert worker.asked == [0, DEAD_PAGE, 2 * DEAD_PAGE]
    assert lister.marks[-1][1] == 2 * DEAD_PAGE + 30
    worker.asked.clear()
    lister.run(worker, "jobs")  # type: ignore[arg-type]
    assert worker.asked == [2 * DEAD_PAGE + 30]
