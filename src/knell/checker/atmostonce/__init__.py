"""The at-most-once contract's checks (role delivery with stranded listing).

One module per property: :mod:`.redelivery` (no message delivered twice
for one role), :mod:`.holds` (one run holds a role at a time),
:mod:`.refusal` (only the recipient may read), :mod:`.stranded`
(the stranded list holds exactly what departed runs left unread, in order,
capped) and :mod:`.vanish` (every message ends read, pending or listed).
:mod:`.book` is what they share: deliveries and reads read off the history.
"""

from __future__ import annotations

from knell.checker.atmostonce.holds import RoleExclusiveCheck
from knell.checker.atmostonce.redelivery import AtMostOnceCheck
from knell.checker.atmostonce.refusal import ReadRefusalCheck
from knell.checker.atmostonce.stranded import StrandedListedCheck
from knell.checker.atmostonce.vanish import NothingVanishesCheck

__all__ = [
    "AtMostOnceCheck",
    "NothingVanishesCheck",
    "ReadRefusalCheck",
    "RoleExclusiveCheck",
    "StrandedListedCheck",
]
