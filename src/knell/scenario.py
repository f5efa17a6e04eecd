"""Scenarios: a workload plus a fault schedule, declared in TOML.

A scenario names the store, the processes (producers, consumers, waiters,
joiners; claimers of queue channels; holders of role inboxes) and the
nemesis specs. Its roles decide which delivery contract it tests
(:mod:`knell.role_contracts`). The seed turns those specs into exact timed
faults (see :mod:`knell.schedule`), so a scenario file plus a seed is a
complete, replayable experiment.

Validation is pydantic with ``extra="forbid"`` and role/fault-tagged unions:
a typo'd key, a wrong type, a negative duration, an unknown role or fault,
or a target that names no process all fail *before* anything starts, with
the file, the field path (and its line when it can be found) and the bad
value -- never a traceback.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from knell.buses.contract import EXPIRY
from knell.durations import Duration, parse_duration
from knell.errors import KnellError
from knell.limits import MAX_PROCESSES, MAX_SCHEDULE_ACTIONS
from knell.nemesis import registry as fault_kinds
from knell.nemesis.kind import FaultSpec
from knell.role_contracts import contracts_of_roles
from knell.workload.params import (
    ClaimerParams,
    ConsumerParams,
    HolderParams,
    JoinerParams,
    ProducerParams,
    ReaderParams,
    StreamerParams,
    TailerParams,
    WaiterParams,
    WorkerParams,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "AnySpec",
    "BridgeSpec",
    "ClaimerSpec",
    "ConsumerSpec",
    "Expectation",
    "HolderSpec",
    "JoinerSpec",
    "ProcessSpec",
    "ProducerSpec",
    "Scenario",
    "ScenarioError",
    "StoreTable",
    "StreamTable",
    "StreamerSpec",
    "TailerSpec",
    "WaiterSpec",
    "load_scenario",
    "parse_duration",
]


class ScenarioError(KnellError):
    """A scenario file is unusable; the message names file, field and value."""


Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$", max_length=64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ProcessBase(_Strict):
    PARAMS: ClassVar[type[WorkerParams]]
    """The worker's parameter class: the defaults below come from it, and
    :meth:`params` converts this spec into it."""

    name: Name | None = Field(
        default=None, description="Group name; instances are NAME-1..NAME-count (default: role)"
    )
    count: int = Field(default=1, ge=1, le=64)
    channel: Name = ReaderParams.channel
    via: Literal["store", "bridge"] = Field(
        default="store",
        description="reach the bus directly, or through the scenario's bridges (role bridge)",
    )
    failover: bool = Field(
        default=False,
        description="with via = bridge: move to another bridge while its own is down",
    )

    @property
    def group(self) -> str:
        return self.name or self.role  # type: ignore[attr-defined]

    def params(self) -> WorkerParams:
        """What a worker of this spec is told (see :mod:`knell.workload.params`)."""
        names = {f.name for f in fields(self.PARAMS)} & set(type(self).model_fields)
        return self.PARAMS(**{name: getattr(self, name) for name in names})


class ProducerSpec(_ProcessBase):
    """Posts unique ids at a steady rate."""

    PARAMS = ProducerParams
    role: Literal["producer"]
    rate: float = Field(
        default=ProducerParams.rate, gt=0, le=100_000, description="posts per second each"
    )
    idempotency: bool = Field(
        default=ProducerParams.idempotency,
        description="send idempotency keys; retry indeterminate posts with them",
    )
    retry_every: int = Field(
        default=ProducerParams.retry_every,
        ge=0,
        description="with idempotency: resend every Nth post with its key, as a client "
        "whose reply was lost would (0 = never)",
    )
    retry_after: Duration = Field(
        default=ProducerParams.retry_after,
        description="with retry_every: send the resend this long after the original "
        "(0 = at once), as a client that retries late would (past a bus's dedup window)",
    )
    hostile: bool = Field(
        default=ProducerParams.hostile,
        description="message ids carry hostile text after their unique prefix (script tags, "
        "ANSI escapes, lines imitating a report, very long strings): every report must show "
        "them as text",
    )
    ttl: Duration = Field(
        default=ProducerParams.ttl,
        description="how long each post lives: it is posted with expires_at = now + ttl and "
        "must vanish from every liveness read after that (0 = never expires; needs a bus with "
        "the expiry feature)",
    )
    ttl_every: int = Field(
        default=ProducerParams.ttl_every,
        ge=1,
        description="with ttl: only every Nth post expires, the rest never do",
    )


class _ReaderBase(_ProcessBase):
    batch: int = Field(default=ReaderParams.batch, ge=1, le=10_000, description="fetch page size")
    handle_time: Duration = Field(
        default=ReaderParams.handle_time, description="simulated work per message"
    )
    ack_probe_every: int = Field(
        default=ReaderParams.ack_probe_every,
        ge=0,
        description="every N pages, try an ack beyond head (must be refused)",
    )
    idle: Duration = Field(default=ReaderParams.idle, description="sleep when caught up")
    ack_each: bool = Field(
        default=ReaderParams.ack_each,
        description="ack after every message instead of every page (racing acks)",
    )
    read_head_every: int = Field(
        default=ReaderParams.read_head_every,
        ge=0,
        description="every N rounds, read the channel's head (0 = never)",
    )
    forensic_every: int = Field(
        default=ReaderParams.forensic_every,
        ge=0,
        description="every N pages, also read that stretch of the log with include_expired "
        "(recorded as 'forensic': expired messages must still be there; 0 = never)",
    )
    paging: Literal["after", "cursor"] = Field(
        default=ReaderParams.paging,
        description="how later pages of a catch-up are read: 'after' passes the last seq "
        "seen; 'cursor' re-reads from the durable cursor after each ack",
    )


class ConsumerSpec(_ReaderBase):
    """Catches up to the true head, handles, then acks. Instances share a handle."""

    PARAMS = ConsumerParams
    role: Literal["consumer"]
    handle: Name = ConsumerParams.handle
    at: Literal["head", "start"] = ConsumerParams.at
    resubscribe_every: int = Field(
        default=ConsumerParams.resubscribe_every,
        ge=0,
        description="every N rounds, subscribe again: it must not move the cursor (0 = never)",
    )


class WaiterSpec(_ReaderBase):
    """The doorbell loop: arm, ring, catch up, ack, reply, re-arm."""

    PARAMS = WaiterParams
    role: Literal["waiter"]
    handle: Name | None = Field(
        default=WaiterParams.handle, description="default: the instance name"
    )
    wait_timeout: Duration = Field(default=WaiterParams.wait_timeout, gt=0)
    reply_every: int = Field(
        default=WaiterParams.reply_every,
        ge=0,
        description="post an own message after every N rings (0 = never)",
    )


class JoinerSpec(_ReaderBase):
    """A fresh handle per incarnation that joins at head mid-run, then consumes."""

    PARAMS = JoinerParams
    role: Literal["joiner"]
    handle: Name = Field(default=JoinerParams.handle, description="prefix of the fresh handles")
    join_after: Duration = Field(
        default=JoinerParams.join_after, description="delay before the first join"
    )
    at: Literal["head", "start"] = Field(
        default=JoinerParams.at,
        description="join at the head, or at the start (the whole history must follow)",
    )


class TailerSpec(_ProcessBase):
    """Follows a channel's SSE tail through a bridge, reconnecting with
    ``Last-Event-ID`` after every drop (tails are served by bridges only)."""

    PARAMS = TailerParams
    role: Literal["tailer"]
    via: Literal["store", "bridge"] = Field(
        default="bridge", description="always 'bridge': a tail is served by a bridge"
    )
    ping: Duration = Field(
        default=TailerParams.ping,
        ge=0.05,
        le=60,
        description="the bridge's ping interval while idle; 4 without a byte is a dead stream",
    )

    @model_validator(mode="after")
    def _through_a_bridge(self) -> TailerSpec:
        if self.via != "bridge":
            raise ValueError(
                "via: a tailer reads a channel's SSE tail, which only a bridge serves, "
                f"so it cannot have via = {self.via!r}"
            )
        return self


class StreamerSpec(_ProcessBase):
    """Tails a stream channel's ring directly through the bus, page after
    page (the stream contract; its ring is the scenario's ``[streams.NAME]``)."""

    PARAMS = StreamerParams
    role: Literal["streamer"]
    channel: Name = StreamerParams.channel
    batch: int = Field(
        default=StreamerParams.batch, ge=1, le=1000, description="tail page size (limit)"
    )
    read_time: Duration = Field(
        default=StreamerParams.read_time,
        description="simulated work per page: a reader slower than the ring falls behind it",
    )
    idle: Duration = Field(default=StreamerParams.idle, description="sleep after an empty page")
    kind_probe_every: int = Field(
        default=StreamerParams.kind_probe_every,
        ge=0,
        description="every N pages, read the stream as a broadcast channel and tail a channel "
        "that is no stream (both must be refused; 0 = never)",
    )
    forensic_every: int = Field(
        default=StreamerParams.forensic_every,
        ge=0,
        description="every N pages, also tail the same stretch with include_expired (a forensic "
        "look at what the ring keeps; needs a bus with the expiry feature; 0 = never)",
    )


class StreamTable(_Strict):
    """A stream channel's ring, declared by every producer and streamer of
    the channel before anything else (``[streams.NAME]``)."""

    max_len: int | None = Field(
        default=None, ge=1, le=1_000_000, description="the ring holds at most this many messages"
    )
    max_age_s: Duration | None = Field(
        default=None, gt=0, description="the ring drops messages older than this"
    )

    @model_validator(mode="after")
    def _bounded(self) -> StreamTable:
        if self.max_len is None and self.max_age_s is None:
            raise ValueError("a ring needs a bound: set max_len, max_age_s or both")
        return self


class ClaimerSpec(_ProcessBase):
    """Claims work from a queue channel under a lease (the queue contract)."""

    PARAMS = ClaimerParams
    role: Literal["claimer"]
    channel: Name = ClaimerParams.channel
    lease: Duration = Field(
        default=ClaimerParams.lease, gt=0, description="lease asked for on every claim and renew"
    )
    max_deliveries: int = Field(
        default=ClaimerParams.max_deliveries,
        ge=1,
        le=1000,
        description="deliveries before a message is dead (declared for the channel)",
    )
    work_time: Duration = Field(
        default=ClaimerParams.work_time, description="simulated work per message"
    )
    renew: bool = Field(
        default=ClaimerParams.renew,
        description="renew the lease while working; off: work longer than the lease lapses",
    )
    finish: Literal["done", "rotate"] = Field(
        default=ClaimerParams.finish,
        description="'done', or 'rotate' through done, renew-then-done and release",
    )
    poison_every: int = Field(
        default=ClaimerParams.poison_every,
        ge=0,
        description="one message in N is abandoned until it is dead (0 = none)",
    )
    release_every: int = Field(
        default=ClaimerParams.release_every,
        ge=0,
        description="every Nth claim is released instead of worked (0 = never)",
    )
    kind_probe_every: int = Field(
        default=ClaimerParams.kind_probe_every,
        ge=0,
        description="every N rounds, read the queue as a broadcast channel (must be refused)",
    )
    idle: Duration = Field(default=ClaimerParams.idle, description="sleep when nothing to claim")
    dead_every: Duration = Field(
        default=ClaimerParams.dead_every,
        ge=0,
        description="list the dead letters this often during the run (0 = only at the end)",
    )


class HolderSpec(_ProcessBase):
    """Takes turns holding a role, receives and reads (the at-most-once contract)."""

    PARAMS = HolderParams
    role: Literal["holder"]
    channel: Name = Field(
        default=HolderParams.channel, description="the role (producers post to it by this name)"
    )
    hold: Duration = Field(default=HolderParams.hold, gt=0, description="lease on the role")
    tenure: Duration = Field(
        default=HolderParams.tenure, gt=0, description="how long a run holds the role"
    )
    batch: int = Field(default=HolderParams.batch, ge=1, le=1000, description="receive limit")
    read_after: Duration = Field(
        default=HolderParams.read_after, description="delay between receiving and reading"
    )
    leave_unread_every: int = Field(
        default=HolderParams.leave_unread_every,
        ge=0,
        description="every Nth run releases without reading its last receive (0 = never)",
    )
    probe: bool = Field(
        default=HolderParams.probe,
        description="on taking the role, try to read a stranded message (must be refused)",
    )
    idle: Duration = Field(default=HolderParams.idle, description="sleep when idle or waiting")
    together: bool = Field(
        default=False,
        description="the group's processes hold the role as one run and receive at once "
        "(competing receivers of one inbox) instead of taking turns",
    )

    def params(self) -> WorkerParams:
        """``together``: every process of the group holds the role as the
        run named after the group, so their receives compete."""
        params = super().params()
        assert isinstance(params, HolderParams)
        return replace(params, together=f"{self.group}.together" if self.together else None)


class BridgeSpec(_Strict):
    """An HTTP bridge in front of the bus (``knell bridge``): a server
    process that workers with ``via = "bridge"`` reach the bus through, and
    that faults kill, pause and partition like any other process. Worker
    instance N uses bridge ((N - 1) mod count) + 1, unless it may fail over."""

    role: Literal["bridge"]
    name: Name | None = Field(default=None, description="group name (default: bridge)")
    count: int = Field(default=1, ge=1, le=16)
    bus: str | None = Field(
        default=None, description="the driver this bridge serves (default: the run's bus)"
    )

    @property
    def group(self) -> str:
        return self.name or self.role


AnySpec = (
    ProducerSpec
    | ConsumerSpec
    | WaiterSpec
    | JoinerSpec
    | TailerSpec
    | StreamerSpec
    | ClaimerSpec
    | HolderSpec
    | BridgeSpec
)
WorkerSpecT = (
    ProducerSpec
    | ConsumerSpec
    | WaiterSpec
    | JoinerSpec
    | TailerSpec
    | StreamerSpec
    | ClaimerSpec
    | HolderSpec
)

ProcessSpec = Annotated[AnySpec, Field(discriminator="role")]


def _nemesis_union() -> Any:
    """The ``[[nemesis]]`` table type: one spec model per registered fault
    kind, told apart by ``fault``. Only the kinds imported so far: a
    scenario is validated once the kinds it names are
    (:func:`_load_named_kinds`), so a run imports no other."""
    specs = tuple(kind.spec for kind in fault_kinds.loaded().values())
    if not specs:
        return FaultSpec  # no kind yet: no scenario with a fault is validated against it
    if len(specs) == 1:
        return specs[0]
    return Annotated[Union[specs], Field(discriminator="fault")]  # noqa: UP007


def _load_named_kinds(data: Any) -> None:
    """Import the fault kinds that ``data``'s ``[[nemesis]]`` tables name,
    before it is validated (each one imported rebuilds :class:`Scenario`
    with its table). A table that names no kind, or a name no built-in
    kind has, imports every kind and the plug-ins: the error then lists
    every known tag, as it always has."""
    tables = data.get("nemesis") if isinstance(data, Mapping) else None
    if not isinstance(tables, (list, tuple)) or not tables:
        return
    named: list[str] = []
    for table in tables:
        fault = table.get("fault") if isinstance(table, Mapping) else getattr(table, "fault", None)
        if not isinstance(fault, str):
            fault_kinds.kinds()
            return
        named.append(fault)
    if not fault_kinds.load(named):
        fault_kinds.kinds()


if TYPE_CHECKING:
    NemesisSpec = FaultSpec
else:
    NemesisSpec = _nemesis_union()


class StoreTable(_Strict):
    """The ``[store]`` table: what the bus lives on, and how it is kept.

    ``store = "postgres"`` is shorthand for ``[store] kind = "postgres"``;
    ``kind`` is any registered store kind (:mod:`knell.stores.registry`).
    Without ``url`` knell starts a private store for the run (a SQLite
    file, or a server on a free port); with ``url`` (or the top-level
    ``store_url``, or ``--store-url``) it uses that server, in a fresh
    namespace per run. ``provider = "compose"`` runs the store in
    containers (see ``compose/``). The keys below are common to every
    kind; the kind's own keys (``fsync``, ``persistence``, ...) are its
    typed options table (:attr:`~knell.stores.kind.StoreKind.options`),
    checked here against that table, naming the key."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str = "sqlite"
    provider: Literal["private", "compose"] = "private"
    url: str | None = Field(default=None, description="an existing server (bring your own)")
    # private servers
    port: int | None = Field(default=None, ge=1, le=65535)
    bin: str | None = Field(default=None, description="server binaries (a folder, or a path)")
    data_dir: str | None = None
    password: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    # an existing server
    keep: bool | None = Field(default=None, description="keep the run's schema / key prefix")
    crash_command: str | None = Field(default=None, description="how store-crash crashes it")
    restart_command: str | None = Field(default=None, description="how it is restarted")

    @property
    def disk(self) -> str:
        """What the store's data lives on: ``plain`` or ``faulty`` (its kind's
        ``disk`` option, see :mod:`knell.stores.disk`)."""
        return str((self.model_extra or {}).get("disk") or "plain")

    def _compose_keys(self) -> tuple[str, ...]:
        """The compose keys, which only a table with keys beyond its own
        fields can hold (none is one of them: ``tests/unit/test_scenario.py``):
        without such keys none is asked for, and the compose package (its
        stacks, images, links and their HTTP client) is not imported by a
        run that uses no container."""
        if not self.model_extra:
            return ()
        from knell.stores.compose.options import compose_keys

        return compose_keys()

    def compose_options(self) -> dict[str, Any]:
        """The options of ``provider = "compose"`` (see knell.stores.compose)."""
        extra = self.model_extra or {}
        return {k: extra[k] for k in self._compose_keys() if extra.get(k) is not None}

    def private_options(self) -> dict[str, Any]:
        """Every option set, but the compose ones (for knell.stores.StoreSpec)."""
        skip = {"kind", "provider", *self._compose_keys()}
        return {
            name: value
            for name, value in self.model_dump().items()
            if name not in skip and value not in (None, {})
        }

    @model_validator(mode="after")
    def _kind_options(self) -> StoreTable:
        from pydantic import ValidationError

        from knell.stores import registry

        kind = registry.kinds().get(self.kind)
        if kind is None:
            raise ValueError(
                f"store kind {self.kind!r} is not one of {', '.join(registry.names())}"
            )
        if self.url is not None:
            try:
                urlsplit(self.url)
            except ValueError as exc:  # its text is not repeated: it may hold a password
                raise ValueError(f"url: not a URL ({exc})") from None
        extra = self.model_extra or {}
        compose = set(self._compose_keys())
        own = {k: v for k, v in extra.items() if k not in compose}
        for key in own:
            if key not in kind.options.model_fields:
                fits = ", ".join(kind.options.model_fields) or "none"
                raise ValueError(
                    f"store option {key!r} does not apply to a {self.kind} store "
                    f"(its own options: {fits})"
                )
        try:
            kind.options.model_validate(own)
        except ValidationError as exc:
            raise ValueError(_first_error(exc)) from None
        guarded = {_setting_key(key) for key in kind.guarded_settings}
        for key, value in self.settings.items():
            if _setting_key(key) in guarded:
                raise ValueError(
                    f"settings.{key} = {value!r}: knell keeps a private {self.kind} server to "
                    f"this machine, so {', '.join(sorted(kind.guarded_settings))} cannot be set "
                    "(for a server of your own, give its url)"
                )
        used = [k for k in extra if k in compose]
        if self.provider != "compose":
            if used:
                raise ValueError(f'{used[0]} is a compose option (set provider = "compose")')
        elif self.url is not None:
            raise ValueError('provider = "compose" starts its own servers: drop url')
        elif "compose" not in kind.provisions:
            able = " or ".join(
                k.name for k in registry.kinds().values() if "compose" in k.provisions
            )
            raise ValueError(f'provider = "compose" runs {able}, not {self.kind}')
        else:
            from knell.stores.compose.options import ComposeOptions

            try:
                ComposeOptions.model_validate({k: extra[k] for k in used})
            except ValidationError as exc:
                raise ValueError(_first_error(exc)) from None
            _compose_replicas(kind, extra.get("replicas"))
        return self


def _compose_replicas(kind: Any, replicas: object) -> None:
    """Refuse more replicas than the compose files run for ``kind``
    (:attr:`~knell.stores.kind.ComposeService.replicas`)."""
    if not replicas:
        return
    most = kind.compose.replicas if kind.compose is not None else 0
    if most == 0:
        raise ValueError(
            f"store option 'replicas' = {replicas}: provider = \"compose\" runs no {kind.name} "
            f"replicas (a private {kind.name} store has them: drop provider)"
        )
    if int(str(replicas)) > most:
        raise ValueError(
            f"store option 'replicas' = {replicas}: provider = \"compose\" runs at most {most} "
            f"{kind.name} replicas (compose/docker-compose.replicated.yml)"
        )


def _setting_key(key: str) -> str:
    """A server setting's name as Postgres and Redis compare them."""
    return key.strip().lower().replace("-", "_")


def _first_error(exc: Any) -> str:
    """A store option's validation error as one line naming the key."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"store option {where!r}: {message}" if where else f"store option {message}"


def _store_table(value: Any) -> Any:
    return {"kind": value} if isinstance(value, str) else value


def _kind_of_url(url: str, table: dict[str, Any]) -> dict[str, Any]:
    """The ``[store]`` table of an embedded-store scenario re-targeted at
    ``url``: the kind its scheme names (see knell.stores.registry), without
    the embedded store's own options. An unknown scheme is left for the
    store to refuse by name."""
    from knell.stores import registry

    found = registry.by_scheme(url.split("://", 1)[0])
    if found is None or "existing" not in found.provisions:
        return table
    old = registry.get(str(table.get("kind", "sqlite"))).options.model_fields
    return {**{k: v for k, v in table.items() if k not in old}, "kind": found.name}


class Expectation(_Strict):
    """A finding a scenario exists to make: ``expect = { verdict = "invalid",
    checks = ["no-loss"] }``. ``knell run`` still exits 1 for it (the bus
    did break a promise); the matrix, the pytest plugin and CI count a run
    that makes the expected finding as a pass, and a VALID one as a
    failure (knell would have missed what it is there to show).

    A finding against a real system is often a race the fault must land
    in (a crash between an ack and the write that makes it durable), so a
    short run on a loaded machine can miss it by luck. ``seeds = N`` says
    so honestly: the pytest plugin gives the scenario up to N consecutive
    seeds and passes on the first that makes the finding, failing only
    when all N were VALID, and the matrix gives its reference cell the
    same (:func:`knell.matrix.run.run_matrix`). A run that is INVALID for
    another reason, or UNKNOWN, is not retried."""

    verdict: Literal["invalid", "unknown"] = "invalid"
    checks: list[str] = Field(
        default_factory=list,
        description="checks (or check:kind) of which at least one must fire",
    )
    seeds: int = Field(
        default=1,
        ge=1,
        le=20,
        description=(
            "the finding must be made in at least one of this many consecutive seeds"
            " (the scenario's seed onward): for findings that need a fault to land in"
            " a narrow window, which a short or loaded run can miss"
        ),
    )

    def met_by(self, valid: object, fired: dict[str, list[str]]) -> bool:
        """Whether a run with verdict ``valid`` and checks ``fired`` (check
        -> anomaly kinds) made the expected finding."""
        if self.verdict == "unknown":
            return valid == "unknown"
        if valid is not False:
            return False
        if not self.checks:
            return True
        for entry in self.checks:
            check, _, kind = entry.partition(":")
            if check in fired and (not kind or kind in fired[check]):
                return True
        return False

    def describe(self) -> str:
        what = ", ".join(self.checks) or "any check"
        within = f" within {self.seeds} seeds" if self.seeds > 1 else ""
        return f"expects {self.verdict.upper()} ({what}){within}"


class Scenario(_Strict):
    name: Name
    description: str = Field(min_length=1, max_length=200)
    store: Annotated[StoreTable, BeforeValidator(_store_table)] = Field(
        default_factory=StoreTable,
        description='the [store] table, or just its kind: store = "<kind>"',
    )
    bus: str | None = Field(
        default=None, description="driver 'module:factory' (default: the store's reference bus)"
    )
    duration: Duration = Field(gt=0)
    seed: int = Field(default=0, ge=-(2**63), lt=2**63, description="fault plan seed (64-bit)")
    poll_interval: Duration = Field(default=0.1, gt=0, description="doorbell poll interval")
    wake_bound: Duration = Field(default=1.0, gt=0, description="a ring must come within this")
    op_timeout: Duration = Field(
        default=5.0,
        gt=0,
        description="an operation no fault touches must complete within this (liveness)",
    )
    max_error_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="share of operations of one kind that may fail outside fault windows",
    )
    drain_timeout: Duration = Field(default=60.0, gt=0)
    links: Literal["group", "instance"] = Field(
        default="group",
        description="one proxied link per process group, or per instance (network faults on "
        "one instance or a share of a group need per-instance links; knell picks them then)",
    )
    expect: Expectation | None = Field(
        default=None, description="a finding this scenario exists to make (see Expectation)"
    )
    streams: dict[Name, StreamTable] = Field(
        default_factory=dict,
        description="stream channels by name ([streams.NAME]): their producers and streamers "
        "declare the ring before anything else",
    )
    process: list[ProcessSpec] = Field(min_length=1)
    nemesis: list[NemesisSpec] = Field(default_factory=list)

    # The two ways in to validation: each first imports the fault kinds
    # the data names, whose tables the model then knows.

    def __init__(self, /, **data: Any) -> None:
        _load_named_kinds(data)
        super().__init__(**data)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Scenario:
        _load_named_kinds(obj)
        return super().model_validate(obj, *args, **kwargs)

    @field_validator("process")
    @classmethod
    def _processes_within_limit(cls, value: list[AnySpec]) -> list[AnySpec]:
        """Every instance is an OS process: at most :data:`~knell.limits.MAX_PROCESSES`."""
        total = sum(spec.count for spec in value)
        if total > MAX_PROCESSES:
            raise ValueError(
                f"{total} process instances (the counts of all {len(value)} process "
                f"blocks together); a run starts at most {MAX_PROCESSES} "
                "(knell.limits.MAX_PROCESSES)"
            )
        return value

    @field_validator("nemesis")
    @classmethod
    def _plan_within_limit(cls, value: list[FaultSpec], info: ValidationInfo) -> list[FaultSpec]:
        """The fault plan's expected size (an apply and a heal per ``every``
        between ``start`` and ``stop``) within
        :data:`~knell.limits.MAX_SCHEDULE_ACTIONS`, checked before the
        expansion starts: a fault interval far too short for the duration
        is refused by name, not expanded for hours."""
        duration = info.data.get("duration")
        if not isinstance(duration, float):
            return value  # the duration's own error is reported
        planned = 0.0
        for index, spec in enumerate(value):
            stop = duration if spec.stop is None else min(spec.stop, duration)
            steps = 2 * max(0.0, stop - spec.start) / spec.every
            planned += steps
            if planned > MAX_SCHEDULE_ACTIONS:
                raise ValueError(
                    f"nemesis[{index}].every = {spec.every:g} s over a {duration:g} s run "
                    f"plans about {planned:,.0f} fault steps (an apply and a heal each); "
                    f"a run has at most {MAX_SCHEDULE_ACTIONS:,} "
                    "(knell.limits.MAX_SCHEDULE_ACTIONS)"
                )
        return value

    @model_validator(mode="before")
    @classmethod
    def _store_url(cls, data: Any) -> Any:
        """``store_url = "..."`` at the top level is ``[store] url``."""
        if isinstance(data, dict) and data.get("store_url") is not None:
            data = dict(data)
            url = data.pop("store_url")
            table = _store_table(data.get("store", {}))
            if isinstance(table, dict):
                table = {**table, "url": url}
                # A URL re-targets a scenario written for the embedded store:
                # its scheme says the kind (a mismatch with a server kind the
                # scenario names is refused when the store is made).
                if table.get("kind", "sqlite") == "sqlite" and isinstance(url, str):
                    table = {**_kind_of_url(url, table), "url": url}
            data["store"] = table
        elif isinstance(data, dict) and "store_url" in data:
            data = {k: v for k, v in data.items() if k != "store_url"}
        return data

    @model_validator(mode="after")
    def _names_resolve(self) -> Scenario:
        groups: dict[str, str] = {}
        for index, spec in enumerate(self.process):
            if spec.group in groups:
                raise ValueError(
                    f"process[{index}]: group name {spec.group!r} is used twice; "
                    "give one of them a distinct 'name'"
                )
            groups[spec.group] = spec.role
        has_bridge = any(isinstance(spec, BridgeSpec) for spec in self.process)
        for index, spec in enumerate(self.process):
            if isinstance(spec, TailerSpec) and not has_bridge:
                raise ValueError(
                    f"process[{index}]: a tailer reads a channel's SSE tail, which only a "
                    "bridge serves, but the scenario has no bridge (add a [[process]] with "
                    'role = "bridge")'
                )
            if not isinstance(spec, BridgeSpec) and spec.via == "bridge" and not has_bridge:
                raise ValueError(
                    f"process[{index}].via: 'bridge', but the scenario has no bridge "
                    '(add a [[process]] with role = "bridge")'
                )
        for index, fault in enumerate(self.nemesis):
            kind = fault_kinds.kind(fault.fault)
            known = kind.known_targets(self)
            if fault.target not in known:
                raise ValueError(
                    f"nemesis[{index}].target: {fault.target!r} names no process "
                    f"(known: {', '.join(sorted(known))})"
                )
            refused = kind.refusal(fault, self)
            if refused is not None:
                raise ValueError(f"nemesis[{index}].target: {fault.target!r}: {refused}")
        return self

    @model_validator(mode="after")
    def _channel_kinds_agree(self) -> Scenario:
        """A channel is a queue, a role inbox or a broadcast channel, never
        two of them; the claimers of one queue declare the same max_deliveries."""
        kinds: dict[str, tuple[str, int]] = {}
        depth: dict[str, int] = {}
        for index, spec in enumerate(self.process):
            if isinstance(spec, (ProducerSpec, BridgeSpec)):
                continue
            kind = {"claimer": "queue", "holder": "role inbox", "streamer": "stream"}.get(
                spec.role, "broadcast"
            )
            if spec.role == "tailer" and spec.channel in self.streams:
                kind = "stream"  # an SSE tail follows either kind of channel
            if (kind == "stream") != (spec.channel in self.streams):
                raise ValueError(
                    f"process[{index}].channel: {spec.channel!r} is a stream (streams."
                    f"{spec.channel}), so a {spec.role} cannot read it"
                    if kind != "stream"
                    else f"process[{index}].channel: a streamer tails a stream, and "
                    f"{spec.channel!r} is none (declare its ring as [streams.{spec.channel}])"
                )
            seen = kinds.setdefault(spec.channel, (kind, index))
            if seen[0] != kind:
                raise ValueError(
                    f"process[{index}].channel: {spec.channel!r} is a {seen[0]} for "
                    f"process[{seen[1]}], so it cannot be a {kind} too"
                )
            if isinstance(spec, ClaimerSpec):
                first = depth.setdefault(spec.channel, spec.max_deliveries)
                if first != spec.max_deliveries:
                    raise ValueError(
                        f"process[{index}].max_deliveries: the claimers of {spec.channel!r} "
                        f"disagree ({first} and {spec.max_deliveries}); a queue has one"
                    )
        return self

    @model_validator(mode="after")
    def _final_names_free(self) -> Scenario:
        """The final phase's workers are named ``drain-N``, ``queue-drain-N``,
        ``role-drain-N`` and ``stream-drain-N``: no process group may take
        those names."""
        for index, spec in enumerate(self.process):
            if spec.group in ("drain", "queue-drain", "role-drain", "stream-drain"):
                raise ValueError(
                    f"process[{index}].name: {spec.group!r} is reserved for the final phase"
                )
        return self

    def params_of(self, spec: WorkerSpecT) -> WorkerParams:
        """What a worker of ``spec`` is told: its own parameters, plus the
        ring of its channel when that is a stream (a producer declares it
        before its first post; a streamer before its first tail)."""
        params = spec.params()
        ring = self.streams.get(spec.channel)
        if ring is None:
            return params
        if isinstance(params, ProducerParams):
            return replace(params, stream=True, max_len=ring.max_len, max_age_s=ring.max_age_s)
        if isinstance(params, StreamerParams):
            return replace(params, max_len=ring.max_len, max_age_s=ring.max_age_s)
        return params

    @property
    def contracts(self) -> tuple[str, ...]:
        """The delivery contracts this scenario tests (by its roles; a
        declared stream channel is the stream contract's, whoever reads it)."""
        roles = [spec.role for spec in self.process if spec.role != "bridge"]
        return contracts_of_roles([*roles, *(["streamer"] if self.streams else [])])

    @property
    def features(self) -> tuple[str, ...]:
        """The optional bus features this scenario needs (``expiry`` when a
        producer posts with a ttl, or a streamer tails forensically)."""
        if any(
            (isinstance(s, ProducerSpec) and s.ttl > 0)
            or (isinstance(s, StreamerSpec) and s.forensic_every > 0)
            for s in self.process
        ):
            return (EXPIRY,)
        return ()

    def instances(self) -> dict[str, AnySpec]:
        """Every process instance by name (``consumer-1``, ``consumer-2``...)."""
        return {
            f"{spec.group}-{i}": spec for spec in self.process for i in range(1, spec.count + 1)
        }

    def workers(self) -> dict[str, WorkerSpecT]:
        """The instances that are workers (everything but bridges)."""
        return {n: s for n, s in self.instances().items() if not isinstance(s, BridgeSpec)}

    def bridges(self) -> list[str]:
        """The bridge instances, in order."""
        return [n for n, s in self.instances().items() if isinstance(s, BridgeSpec)]

    def targets(self, target: str) -> list[str]:
        """Instance names a nemesis target covers, in a stable order."""
        return [
            name
            for name, spec in self.instances().items()
            if target in (name, spec.group, spec.role)
        ]

    def with_overrides(self, **changes: Any) -> Scenario:
        """A copy with top-level fields replaced (CLI flags), re-validated.
        ``store="postgres"`` replaces the store by that kind's defaults;
        ``store_url=...`` points the store at an existing server."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return Scenario.model_validate(data)

    def with_store(self, **options: Any) -> Scenario:
        """A copy with ``[store]`` options replaced, re-validated."""
        data = self.model_dump()
        data["store"] = {**self.store.model_dump(exclude_none=True), **options}
        return Scenario.model_validate(data)


def _rebuild() -> None:
    """The set of fault kinds changed: teach the scenario model their tables
    (a forced rebuild regenerates the validator from the field's type)."""
    field = Scenario.model_fields["nemesis"]
    field.annotation = list[_nemesis_union()]  # type: ignore[misc,assignment]
    Scenario.model_rebuild(force=True)


fault_kinds.on_register(_rebuild)


def _tags() -> set[str]:
    """The union tags pydantic inserts in error paths (roles and faults)."""
    return {
        "producer",
        "consumer",
        "waiter",
        "joiner",
        "tailer",
        "streamer",
        "claimer",
        "holder",
        "bridge",
        *fault_kinds.names(),
    }


def _locate(text: str, loc: tuple[int | str, ...]) -> int | None:
    """Best-effort line number of a field path in the TOML source, so an
    error can point at the line as well as the field."""
    lines = text.splitlines()
    start = 0
    if len(loc) >= 2 and isinstance(loc[0], str) and isinstance(loc[1], int):
        header = re.compile(rf"^\s*\[\[\s*{re.escape(loc[0])}\s*\]\]")
        seen = -1
        for number, line in enumerate(lines):
            if header.match(line):
                seen += 1
                if seen == loc[1]:
                    start = number
                    break
        else:
            return None
        keys = [k for k in loc[2:] if isinstance(k, str) and k not in _tags()]
        if not keys:
            return start + 1
        in_table = True
    else:
        keys = [k for k in loc if isinstance(k, str)][:1]
        in_table = False
    if not keys:
        return None
    key = re.compile(rf"^\s*{re.escape(keys[0])}\s*=")
    for number in range(start, len(lines)):
        if lines[number].lstrip().startswith("["):
            if in_table and number > start:
                break
            if not in_table:
                break  # top-level keys come before the first table
        if key.match(lines[number]):
            return number + 1
    return None


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _tags():
            continue  # the union tag pydantic inserts; not a key the user wrote
        else:
            # A key TOML must quote ("", "a b", "[/x]") is shown quoted, so
            # an empty or odd key is still named.
            key = part if _BARE_KEY.match(part) else json.dumps(part, ensure_ascii=False)
            path += f".{key}" if path else key
    return path or "(top level)"


def _shown(loc: tuple[Any, ...], value: Any) -> str:
    """A refused value as an error message may quote it: masked when its
    field names a secret (``store.password``, a ``requirepass`` setting),
    a URL without its password (see :mod:`knell.redact`)."""
    from knell.redact import MASK, is_secret_key, redact_url

    if any(isinstance(part, str) and is_secret_key(part) for part in loc):
        return MASK
    return repr(redact_url(value) if isinstance(value, str) else value)


def load_scenario(path: Path, **overrides: Any) -> Scenario:
    """Read and validate one scenario file; raise :class:`ScenarioError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: not a scenario file: byte {exc.start} is not UTF-8 text (a binary file?)"
        ) from None
    if "\x00" in text:
        raise ScenarioError(f"{path}: not a scenario file: it contains NUL bytes (a binary file?)")
    # Nesting deep enough to exhaust Python's stack (``x = [[[[...]]]]``, a
    # hundred thousand levels) is a RecursionError in the TOML parser or in
    # validation: the file's fault, not a bug in knell.
    deep = f"{path}: not a scenario file: values nested too deeply to read"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ScenarioError(deep) from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Scenario.model_validate(data)
    except RecursionError:
        raise ScenarioError(deep) from None
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            line = _locate(text, loc)
            where = f"{path}:{line}" if line else str(path)
            field = _field_path(loc)
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            value = error.get("input")
            shown = "" if isinstance(value, (dict, list)) else f" (value: {_shown(loc, value)})"
            problems.append(f"{where}: {field}: {message}{shown}")
        raise ScenarioError("\n".join(problems)) from None
