"""The mutant registry: one declaration per seeded bug, on the class itself.

A mutant is a bus with one seeded bug (see :mod:`knell.buses.mutants`).
Everything the matrix needs to know about it is declared once, by the
:func:`mutant` decorator on its class:

* ``name``: what the matrix and ``--bus`` call it (``stale-ack-regresses``);
* ``failure_mode``: the naive design it reproduces, in a person's words;
* ``killed_by``: the check(s) that must catch it, as mutation testing says
  a mutant is *killed by* the test that detects it (``"no-loss"``, or a
  check and one anomaly kind, ``"wake:own-post-ring"``);
* ``scenarios``: the shipped scenarios that exercise the bug (the CI form of
  the matrix runs each mutant only there);
* ``rule``: what the reference bus does instead, the design rule that
  kills this failure mode;
* ``store``: the store kind whose reference bus it mutates.

The class must offer ``from_url(url)``, so it is opened exactly like any
bus: ``--bus knell.buses.mutants:stale_ack_regresses`` resolves the
snake-case name through :mod:`knell.buses.mutants`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from knell.buses.contract import DefiniteError

__all__ = ["MUTANTS", "Mutant", "mutant", "no_expiry"]

MODULE = "knell.buses.mutants"


class _FromUrl(Protocol):
    @classmethod
    def from_url(cls, url: str) -> Any: ...


C = TypeVar("C", bound=type[Any])


@dataclass(frozen=True)
class Mutant:
    """One seeded bug, as declared on its class."""

    name: str
    failure_mode: str
    killed_by: tuple[str, ...]
    scenarios: tuple[str, ...]
    rule: str
    store: str
    cls: type[Any]

    @property
    def attr(self) -> str:
        """The snake-case factory name (``stale_ack_regresses``)."""
        return self.name.replace("-", "_")

    @property
    def factory(self) -> str:
        """The driver string for ``knell run --bus``."""
        return f"{MODULE}:{self.attr}"

    def open(self, url: str) -> Any:
        return self.cls.from_url(url)

    def unavailable(self) -> str | None:
        """Why this mutant cannot run on this machine (a bus in another
        language needs its runtime), ``None`` when it can."""
        check = getattr(self.cls, "unavailable", None)
        return None if check is None else check()


MUTANTS: dict[str, Mutant] = {}
"""Every registered mutant by name, in registration order."""


def mutant(
    name: str,
    *,
    failure_mode: str,
    killed_by: tuple[str, ...],
    scenarios: tuple[str, ...],
    rule: str,
    store: str = "sqlite",
) -> Callable[[C], C]:
    """Register the decorated bus class as the mutant ``name``."""

    def register(cls: C) -> C:
        if name in MUTANTS:
            raise ValueError(f"mutant {name!r} is registered twice")
        if not callable(getattr(cls, "from_url", None)):
            raise TypeError(f"mutant {name!r}: {cls.__name__} has no from_url(url)")
        if not killed_by or not scenarios:
            raise ValueError(f"mutant {name!r} must name the checks and scenarios that catch it")
        MUTANTS[name] = Mutant(name, failure_mode, killed_by, scenarios, rule, store, cls)
        return cls

    return register


def no_expiry(expires_at: float | None) -> None:
    """Refuse ``expires_at`` on a mutant that writes messages its own way
    (it declares no features, so knell never passes one)."""
    if expires_at is not None:
        raise DefiniteError("this mutant does not store expires_at (it declares no features)")
