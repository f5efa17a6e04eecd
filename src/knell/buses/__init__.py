"""Buses under test, reached only through a driver URL.

Workers never import a concrete bus: they call :func:`open_bus` with the
URL the runner hands them, so the reference bus, a deliberately broken
mutant and a user's own bus all run the same scenarios and checks.

Driver URLs:

* ``sqlite:///abs/path/file.db?poll_interval=0.1`` -- the reference bus.
* ``exec:COMMAND ARGS`` -- a bus in any language behind a stdio adapter
  (:mod:`knell.buses.stdio`, ``docs/stdio-protocol.md``); as a URL the
  adapter brings its own store, as a *driver* it gets the run's.
* ``http://HOST:PORT?token=..&timeout=..`` (or ``https://``) -- a bus over
  HTTP: a knell bridge (``knell bridge``) in front of any bus, or a server
  of the user's that speaks the same protocol (:mod:`knell.buses.http`).
* ``postgresql://user@host:port/db?schema=knell`` (or ``postgres://``) --
  the Postgres bus (:mod:`knell.stores.postgres.bus`).
* ``redis://host:port/0?prefix=knell:`` -- the Redis bus
  (:mod:`knell.stores.redis.bus`).
* Schemes registered under the ``knell.buses`` entry-point group: the
  entry point's name is the URL scheme, its object a ``factory(url)``.

A *driver* ``module.path:factory`` overrides the scheme lookup: knell
provisions the store as usual (a fresh SQLite file per run, say) and calls
``factory(store_url)``, so a user's bus, or a mutant of the reference bus,
runs against the run's own store. The factory must return an object
satisfying :class:`~knell.buses.contract.Bus`, or, for a bus that declares
other contracts (``contracts = {"queue"}``), the Protocols of those
(:data:`~knell.buses.contract.CONTRACT_METHODS`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from knell.buses.contract import (
    CONTRACT_METHODS,
    CONTRACTS,
    STRANDED_CAP,
    STREAM,
    AckBeyondHead,
    Bus,
    BusError,
    Claim,
    DeadLetter,
    DefiniteError,
    Delivery,
    DriverFault,
    IndeterminateError,
    JoinAt,
    LeaseLost,
    Message,
    NotDeliveredTo,
    NotHolder,
    NotSubscribed,
    QueueBus,
    QueueInfo,
    Refused,
    RoleBus,
    RoleHeld,
    RoleHold,
    Stranded,
    StreamBus,
    StreamInfo,
    StreamPage,
    Wake,
    WrongChannelKind,
    contracts_of,
    features_of,
)
from knell.errors import KnellError
from knell.redact import scrub
from knell.text import clean

__all__ = [
    "BUS_METHODS",
    "CONTRACTS",
    "CONTRACT_METHODS",
    "EXEC_CWD_VAR",
    "STRANDED_CAP",
    "STREAM",
    "AckBeyondHead",
    "Bus",
    "BusError",
    "Claim",
    "ContractMissing",
    "DeadLetter",
    "DefiniteError",
    "Delivery",
    "DriverError",
    "DriverExited",
    "DriverFault",
    "IndeterminateError",
    "JoinAt",
    "LeaseLost",
    "Message",
    "NotDeliveredTo",
    "NotHolder",
    "NotSubscribed",
    "QueueBus",
    "QueueInfo",
    "Refused",
    "RoleBus",
    "RoleHeld",
    "RoleHold",
    "Stranded",
    "StreamBus",
    "StreamInfo",
    "StreamPage",
    "Wake",
    "WrongChannelKind",
    "contracts_of",
    "driver_call",
    "driver_raised",
    "open_bus",
    "reference_bus",
    "require_contract",
    "require_feature",
    "resolve_driver",
]

Factory = Callable[[str], Bus]

EXEC_CWD_VAR = "KNELL_EXEC_CWD"
"""Where ``knell run`` was started: an ``exec:`` adapter's relative command
is found there (:mod:`knell.buses.stdio`, which reads it). Named here so
the runner sets it without importing the stdio driver, which a run of a
built-in bus never loads."""

_MODULE_FACTORY = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


class DriverError(KnellError):
    """A driver URL names no usable bus (unknown scheme, missing module...)."""


class ContractMissing(DriverError):
    """The bus does not implement the contract a scenario tests."""


class DriverExited(DriverError):
    """A driver called ``sys.exit`` (raised ``SystemExit``) inside a call
    knell made in its own process: importing it, its factory, ``close``, the
    runner's reads. Left alone, the ``SystemExit`` would end ``knell run``
    with the driver's code (``sys.exit(0)``: exit 0, "valid", with no
    verdict), so it is the driver's error instead: exit 3, naming it."""


@contextmanager
def driver_call(name: str, call: str) -> Iterator[None]:
    """Run a call into driver ``name``'s code; its ``SystemExit`` becomes
    :class:`DriverExited` naming the driver and ``call``. Ctrl-C
    (``KeyboardInterrupt``) passes through: it keeps its meaning (exit 130,
    every process stopped)."""
    try:
        yield
    except SystemExit as exc:
        raise DriverExited(
            f"bus driver {name!r} called sys.exit({exc.code!r}) in {call}; a driver reports "
            "failure by raising an exception, never by ending knell"
        ) from None


def driver_raised(name: str, doing: str, exc: Exception, url: str = "") -> DriverError:
    """The error for driver ``name``'s code raising ``exc`` while ``doing``
    something knell asked of it in its own process (opening the bus,
    closing it): the driver's error (exit 3), never a bug in knell, and
    never the bus's verdict. Its text is the exception's, cleaned for a
    terminal and without the password of the store ``url`` (a driver's
    message often quotes the URL it could not reach)."""
    shown = scrub(clean(exc), url)
    return DriverError(f"bus driver {name!r}: {doing} raised {type(exc).__name__}: {shown}")


_PROTOCOL_BUSES = {
    "exec": "knell.buses.stdio:open_exec",
    # Imported only when asked for: a SQLite-only run never loads httpx.
    "http": "knell.buses.http:open_http",
    "https": "knell.buses.http:open_http",
}
"""The reference bus of each protocol's scheme, as ``module:factory``."""


def _scheme(url: str) -> str:
    if url.startswith("exec:"):
        return "exec"  # exec:COMMAND, no "//"
    return url.split("://", 1)[0] if "://" in url else ""


def _load(target: str) -> Factory:
    """The factory a built-in ``module:factory`` names."""
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def reference_bus(url: str) -> str | None:
    """The built-in bus that opens ``url`` (a store kind's, or a
    protocol's), as ``module:factory``; None when no built-in one does.
    The runner hands it to each worker (:func:`open_bus`'s ``reference``),
    which then imports that module alone: finding it by scheme reads the
    store kinds' registry, whose option models are pydantic's, and that was
    the larger part of every worker's start."""
    scheme = _scheme(url)
    if scheme in _PROTOCOL_BUSES:
        return _PROTOCOL_BUSES[scheme]
    from knell.stores import registry

    kind = registry.by_scheme(scheme)
    return None if kind is None else kind.bus


def _builtin(scheme: str) -> Factory | None:
    """The reference bus of a URL scheme: a store kind's (see
    :mod:`knell.stores.registry`), or a protocol's. Imported on demand: a
    SQLite run never loads a server's client library."""
    if scheme in _PROTOCOL_BUSES:
        return _load(_PROTOCOL_BUSES[scheme])
    from knell.stores import registry

    kind = registry.by_scheme(scheme)
    if kind is not None:
        try:
            return kind.open_bus()  # type: ignore[no-any-return]
        except KnellError as exc:  # its client library is not installed
            raise DriverError(str(exc)) from None
    return None


def _import_factory(driver: str) -> Factory:
    match = _MODULE_FACTORY.match(driver)
    if match is None:
        raise DriverError(f"bus driver {driver!r}: expected 'module.path:factory'")
    module_name, attr = match["module"], match["attr"]
    if os.getcwd() not in sys.path:
        # A console script's sys.path lacks the working directory, where a
        # user's own bus module usually is.
        sys.path.append(os.getcwd())
    try:
        with driver_call(driver, f"importing {module_name!r}"):
            module = importlib.import_module(module_name)
    except DriverError:
        raise
    except ImportError as exc:
        raise DriverError(f"bus driver {driver!r}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the module itself is broken: a usage error, not a knell bug
        raise DriverError(
            f"bus driver {driver!r}: importing {module_name!r} raised "
            f"{type(exc).__name__}: {clean(exc)}"
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise DriverError(f"bus driver {driver!r}: {module_name}.{attr} is not a callable factory")
    return factory  # type: ignore[no-any-return]


def resolve_driver(url: str, driver: str | None = None) -> Factory:
    """Find the factory for ``url`` (or the explicit ``driver``) without
    calling it, so a scenario is validated before any process starts."""
    if driver is not None:
        if driver.startswith("exec:"):
            from knell.buses.stdio import exec_driver

            return exec_driver(driver)
        return _import_factory(driver)
    scheme = _scheme(url)
    builtin = _builtin(scheme)
    if builtin is not None:
        return builtin
    from importlib.metadata import entry_points  # slow to import; only needed here

    for ep in entry_points(group="knell.buses"):
        if ep.name == scheme:
            with driver_call(f"{scheme}://", f"loading entry point knell.buses:{scheme}"):
                loaded = ep.load()
            if not callable(loaded):
                raise DriverError(f"entry point knell.buses:{scheme} is not callable")
            return loaded  # type: ignore[no-any-return]
    from knell.stores import registry

    stores = ", ".join(f"{s}://" for k in registry.kinds().values() for s in k.schemes[:1])
    raise DriverError(
        f"bus driver {_without_secrets(url)!r}: unknown scheme {scheme!r} "
        f"(built in: {stores}, http://, https://, exec:COMMAND; "
        "or give module:factory, "
        "or register a knell.buses entry point)"
    )


def _without_secrets(url: str) -> str:
    """A URL fit for a message: its password replaced by ``***``."""
    from knell.redact import redact_url

    return redact_url(url)


BUS_METHODS = ("post", "subscribe", "fetch", "ack", "cursor", "head", "wait", "close")
"""What an object must have to be driven as a bus (see :class:`Bus`)."""


def open_bus(url: str, driver: str | None = None, *, reference: str | None = None) -> Bus:
    """Open the bus at store ``url``, through ``driver`` when one is given;
    without one, ``reference`` (the ``module:factory`` of the built-in bus
    for ``url``, as :func:`reference_bus` found it) is imported directly,
    and when it cannot be (its client library is missing) the driver is
    resolved as without it, which says what to install.

    A factory that raises, or returns something that is not a bus (it lacks
    one of :data:`BUS_METHODS`), is a :class:`DriverError` naming the driver
    and what went wrong: the run cannot start, and it is not the bus's
    verdict."""
    factory: Factory | None = None
    if reference and not driver:
        with suppress(ImportError):
            factory = _load(reference)
    if factory is None:
        factory = resolve_driver(url, driver)
    name = driver or _without_secrets(url.split("?", 1)[0])
    try:
        with driver_call(name, "its factory (opening the bus)"):
            bus = factory(url)
    except DriverError:
        raise
    except Exception as exc:
        raise driver_raised(name, "opening the bus", exc, url) from exc
    declared = contracts_of(bus)
    unknown = sorted(declared - set(CONTRACTS))
    if unknown or not declared:
        raise DriverError(
            f"bus driver {name!r}: its contracts attribute names {sorted(declared)}; "
            f"known contracts: {', '.join(CONTRACTS)}"
        )
    for contract in sorted(declared):
        needed = CONTRACT_METHODS[contract]
        missing = [m for m in needed if not callable(getattr(bus, m, None))]
        if missing:
            what = "a bus" if contract == "broadcast" else f"a {contract} bus"
            raise DriverError(
                f"bus driver {name!r} returned a {type(bus).__name__}, which is not {what}: "
                f"it has no {', '.join(missing)} ({what} needs {', '.join(needed)})"
            )
    return bus


def require_feature(bus: object, feature: str, name: str, scenario: str) -> None:
    """Refuse (:class:`ContractMissing`, exit 3) a scenario that needs an
    optional bus feature (``expiry``) on a bus that does not declare it:
    knell would pass it arguments it does not take. A bus reached through a
    protocol says how *its* peers declare a feature, with a
    ``feature_hint(feature) -> str`` method."""
    declared = features_of(bus)
    if feature in declared:
        return
    hint = getattr(bus, "feature_hint", None)
    if callable(hint):
        how = str(hint(feature))
    else:
        how = (
            f"a bus that implements it declares features = {{{feature!r}}} (see"
            " knell.buses.contract.FEATURES)"
        )
    raise ContractMissing(
        f"scenario {scenario!r} needs the {feature} feature, but bus {name!r} does not declare"
        f" it; {how}"
    )


def require_contract(bus: object, contract: str, name: str, scenario: str) -> None:
    """Refuse (:class:`ContractMissing`, exit 3) to test ``contract`` on a
    bus that does not declare it: the run would only show that a bus lacks
    what it never promised. A bus reached through a protocol (the stdio
    driver) may say how *its* implementers declare a contract, with a
    ``contract_hint(contract) -> str`` method."""
    declared = contracts_of(bus)
    if contract in declared:
        return
    hint = getattr(bus, "contract_hint", None)
    if callable(hint):
        how = str(hint(contract))
    else:
        methods = ", ".join(CONTRACT_METHODS[contract])
        how = (
            "a bus that implements it declares contracts = "
            f"{{{', '.join(repr(c) for c in sorted({*declared, contract}))}}} "
            f"and has {methods} (see knell.buses.contract)"
        )
    raise ContractMissing(
        f"scenario {scenario!r} tests the {contract} contract, but bus {name!r} implements "
        f"{' and '.join(sorted(declared))} only; {how}"
    )
