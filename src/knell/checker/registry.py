"""The registry: every built-in check, in report order.

``check_events`` instantiates each class with the :class:`CheckConfig` and
the run's fault windows, and feeds it exactly the events its handlers
declare. The queue, at-most-once and stream contracts' checks live in
their own packages (:mod:`knell.checker.queue`,
:mod:`knell.checker.atmostonce`, :mod:`knell.checker.stream`);
on a history without their operations they find nothing to judge. To
add a check, write one module with one :class:`~knell.checker.base.Check`
subclass and list it here.
"""

from __future__ import annotations

from knell.checker.ack_head import AckHeadCheck
from knell.checker.atmostonce import (
    AtMostOnceCheck,
    NothingVanishesCheck,
    ReadRefusalCheck,
    RoleExclusiveCheck,
    StrandedListedCheck,
)
from knell.checker.availability import AvailabilityCheck
from knell.checker.base import Check
from knell.checker.cursor import CursorCheck
from knell.checker.evidence import EvidenceCheck
from knell.checker.expiry import ExpiryCheck
from knell.checker.head import HeadCheck
from knell.checker.idempotency import IdempotencyCheck
from knell.checker.integrity import IntegrityCheck
from knell.checker.join import JoinCheck
from knell.checker.liveness import LivenessCheck
from knell.checker.loss import LossCheck
from knell.checker.ordering import OrderingCheck
from knell.checker.outcomes import OutcomeCheck
from knell.checker.queue import (
    DeadLetterCheck,
    DoneTerminalCheck,
    DuplicateWorkCheck,
    LeaseExclusiveCheck,
    LeaseExpiryCheck,
    LeaseHolderCheck,
    QueueLossCheck,
)
from knell.checker.redelivery import RedeliveryCheck
from knell.checker.seq import SeqCheck
from knell.checker.stream import RingBoundCheck, RingContentCheck, RingTailCheck, StreamKindCheck
from knell.checker.tail import TailContinuityCheck
from knell.checker.unexpected import UnexpectedCheck
from knell.checker.wake import WakeCheck

__all__ = ["CHECKS"]

CHECKS: tuple[type[Check], ...] = (
    LossCheck,
    UnexpectedCheck,
    CursorCheck,
    SeqCheck,
    IdempotencyCheck,
    JoinCheck,
    AckHeadCheck,
    HeadCheck,
    OrderingCheck,
    WakeCheck,
    TailContinuityCheck,
    LivenessCheck,
    AvailabilityCheck,
    OutcomeCheck,
    ExpiryCheck,
    # the queue contract
    LeaseExclusiveCheck,
    LeaseHolderCheck,
    DoneTerminalCheck,
    QueueLossCheck,
    LeaseExpiryCheck,
    DeadLetterCheck,
    # the at-most-once contract
    AtMostOnceCheck,
    ReadRefusalCheck,
    RoleExclusiveCheck,
    StrandedListedCheck,
    NothingVanishesCheck,
    # the stream contract
    RingTailCheck,
    RingContentCheck,
    RingBoundCheck,
    StreamKindCheck,
    # the store's own files, after the run
    IntegrityCheck,
    EvidenceCheck,
    RedeliveryCheck,
    DuplicateWorkCheck,
)
