"""What every bus's stream half shares: the ring bound's validation and
the rule that says where a ring starts.

The Postgres and Redis streams differ in where their atomicity comes
from, not in what they accept or what ``first`` means, so both keep to
the rule below, and a history reads the same whichever store wrote it.

**The ring is a suffix of the channel's seqs.** A tail's page is
consecutive seqs from ``max(after + 1, first)``, so the ring can never
have a hole: dropping one message drops every older one with it. The cut
(the highest seq dropped) is the largest of

* ``head - max_len`` (the count bound), and
* the highest seq *stamped* before ``now - max_age_s`` by the store's
  clock (the age bound). Stamps follow seqs while the store's clock runs
  forward; when it steps back, a newer message may carry an older stamp,
  and taking the highest such seq (not the first young one from the
  oldest end) keeps the promise "none older than ``max_age_s``" anyway.

Both bounds are applied twice: by ``post``, in the same atomic write as
the append (storage stays bounded), and by ``tail``, at read time, on
the store's clock (so a ring nobody posts to still ages, and ``first``
moves forward while a reader waits: it learns what aged out instead of
being handed a message older than the bound).
"""

from __future__ import annotations

import math

from knell.buses.contract import DefiniteError

__all__ = ["check_ring"]


def check_ring(max_len: object, max_age_s: object) -> tuple[int | None, float | None]:
    """A declared ring bound: ``max_len`` an int of at least one,
    ``max_age_s`` a finite number above zero, not both ``None``. Refused
    as a definite error otherwise (nothing was declared)."""
    if max_len is None and max_age_s is None:
        raise DefiniteError("declare_stream needs max_len or max_age_s (both are None)")
    if max_len is not None and (
        isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1
    ):
        raise DefiniteError(f"max_len must be an int >= 1 or None, got {max_len!r}")
    if max_age_s is not None and (
        isinstance(max_age_s, bool)
        or not isinstance(max_age_s, int | float)
        or not math.isfinite(max_age_s)
        or max_age_s <= 0
    ):
        raise DefiniteError(f"max_age_s must be a number > 0 or None, got {max_age_s!r}")
    return max_len, None if max_age_s is None else float(max_age_s)
