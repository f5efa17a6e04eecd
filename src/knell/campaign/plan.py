"""The campaign file and its plan: every run, numbered, the same everywhere.

A campaign is the cross product scenarios x stores x buses x seeds. It is
expanded in one fixed order and each run gets its number ``k``; its seed
is derived from the campaign seed and ``k`` alone (a hash, not a random
generator's state), so a shard on any machine, any Python, computes the
same seed for run ``k`` without knowing the other runs. The plan hash is
the digest of that expansion: two folders with one hash ran pieces of one
plan; anything else is another campaign and is never merged into this one.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from knell.durations import parse_duration
from knell.errors import KnellError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "REFERENCE",
    "Campaign",
    "CampaignError",
    "PlannedRun",
    "derive_seed",
    "expand",
    "load_campaign",
    "plan_hash",
]

REFERENCE = "reference"
"""The bus axis' name for each store's own reference bus."""


class CampaignError(KnellError):
    """A campaign file that cannot be planned (exit 3): one line per
    problem, naming the file, the field and the value."""


class Campaign(BaseModel):
    """What a campaign file says (``[campaign]`` is the whole file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    """Names the default shard folders (``reports/campaign/NAME-PLAN/``), so
    it is one plain path component: never ``..`` or a slash."""
    seed: int = Field(ge=0, description="The campaign seed every run's seed derives from.")
    seeds: int = Field(ge=1, le=100_000, description="Runs per scenario x store x bus.")
    scenarios: list[str] = Field(min_length=1)
    stores: list[str] = Field(default_factory=lambda: ["sqlite"], min_length=1)
    buses: list[str] = Field(default_factory=lambda: [REFERENCE], min_length=1)
    duration: str | float | None = None
    """Each run's length (``"5s"``); None keeps each scenario's own."""

    @field_validator("stores")
    @classmethod
    def _known_stores(cls, value: list[str]) -> list[str]:
        from knell.stores import registry

        bad = [s for s in value if s not in registry.names()]
        if bad:
            raise ValueError(f"unknown store {bad[0]!r}; known: {', '.join(registry.names())}")
        return value

    @field_validator("buses")
    @classmethod
    def _bus_names(cls, value: list[str]) -> list[str]:
        bad = [b for b in value if b != REFERENCE and ":" not in b]
        if bad:
            raise ValueError(f"{bad[0]!r} is neither {REFERENCE!r} nor a 'module:factory' driver")
        return value

    @field_validator("scenarios", "stores", "buses")
    @classmethod
    def _no_repeats(cls, value: list[str]) -> list[str]:
        seen = [v for i, v in enumerate(value) if v in value[:i]]
        if seen:
            raise ValueError(f"{seen[0]!r} is listed twice")
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | float | None) -> str | float | None:
        if value is not None and (seconds := parse_duration(value)) <= 0:
            raise ValueError(f"must be positive, got {seconds:g} s")
        return value

    @property
    def seconds(self) -> float | None:
        return None if self.duration is None else parse_duration(self.duration)


@dataclass(frozen=True)
class PlannedRun:
    """Run ``k`` of a plan."""

    k: int
    scenario: str
    store: str
    bus: str
    seed: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def derive_seed(campaign_seed: int, k: int) -> int:
    """Run ``k``'s seed: a digest of (campaign seed, k), 31 bits so every
    tool that takes a seed takes it. Neighbouring runs get unrelated seeds."""
    digest = hashlib.sha256(f"knell-campaign:{campaign_seed}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def expand(campaign: Campaign) -> list[PlannedRun]:
    """Every run, in the plan's one order: scenario, store, bus, then seed."""
    runs: list[PlannedRun] = []
    for scenario in campaign.scenarios:
        for store in campaign.stores:
            for bus in campaign.buses:
                for _ in range(campaign.seeds):
                    k = len(runs)
                    runs.append(PlannedRun(k, scenario, store, bus, derive_seed(campaign.seed, k)))
    return runs


def plan_hash(campaign: Campaign) -> str:
    """The digest of the expanded plan and the run length: what every shard
    folder records and merge compares (12 hex digits, enough to tell plans
    apart by eye)."""
    body = {
        "runs": [r.to_json() for r in expand(campaign)],
        "duration": campaign.seconds,
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def load_campaign(path: Path) -> Campaign:
    """Read and validate a campaign file; raise :class:`CampaignError`
    naming the file, the field and the value of each problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read the campaign file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not a campaign file: not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("campaign")
    if not isinstance(table, dict) or set(data) != {"campaign"}:
        extra = sorted(k for k in data if k != "campaign")
        why = (
            "no [campaign] table"
            if not isinstance(table, dict)
            else (f"unknown top-level key(s) {', '.join(extra)}")
        )
        raise CampaignError(f"{path}: {why}; a campaign file is one [campaign] table")
    try:
        return Campaign.model_validate(table)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            value = error.get("input")
            shown = "" if isinstance(value, dict) else f" (value: {value!r})"
            field = _field(("campaign", *error["loc"]))
            problems.append(f"{path}: {field}: {message}{shown}")
        raise CampaignError("\n".join(problems)) from None
