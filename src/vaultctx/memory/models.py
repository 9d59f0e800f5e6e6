"""What a memory is: its tier, kind, text, scores and provenance."""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Tier(StrEnum):
    """Where a memory lives and who sees it, narrowest first."""

    CONVERSATION = "conversation"  # one session; scope: the session id
    CHANNEL = "channel"  # a thread or topic spanning sessions; scope: the channel id
    WORKSPACE = "workspace"  # this vault; scope: the vault's path
    ACCOUNT = "account"  # the user, across vaults; scope: the user name


class MemoryKind(StrEnum):
    """What a memory says: a fact, what happened, or how to behave."""

    SEMANTIC = "semantic"  # a fact ("the hives are at the orchard")
    EPISODIC = "episodic"  # an event or an arc of a session ("last time we planned…")
    PROCEDURAL = "procedural"  # a rule or preference ("answer in bullet points")


class MemorySource(BaseModel):
    """Provenance: which session, turns, speaker and notes a memory came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str | None = None
    turns: tuple[str, ...] = ()
    speaker: str | None = None
    paths: tuple[str, ...] = ()
    origin: str = "api"  # api | turn | import | extractor name


class Memory(BaseModel):
    """One stored memory. `score` and `scores` are set only on search results."""

    model_config = ConfigDict(frozen=True)

    id: str
    tier: Tier
    scope: str
    kind: MemoryKind
    text: str
    summary: str = ""
    themes: tuple[str, ...] = ()
    importance: float = Field(0.5, ge=0.0, le=1.0)
    created_at: float
    updated_at: float
    last_accessed: float
    access_count: int = 0
    source: MemorySource = Field(default_factory=MemorySource)
    key: str | None = None  # upsert key: a write with the same tier, scope and key updates it
    deleted: bool = False
    score: float = 0.0
    scores: dict[str, float] = Field(default_factory=dict)

    @property
    def created(self) -> _dt.datetime:
        return _datetime(self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `memory list/search/export --json`; times as ISO 8601 UTC."""
        data = self.model_dump(mode="json", exclude={"deleted", "score", "scores"})
        for name in ("created_at", "updated_at", "last_accessed"):
            data[name] = _iso(getattr(self, name))
        if self.scores:
            data["score"] = round(self.score, 6)
            data["scores"] = {k: round(v, 6) for k, v in self.scores.items()}
        return data


class Observation(BaseModel):
    """Something worth remembering that an extractor found in a turn, before it has a tier.

    `reach` says who should see it: `turn` (this conversation), `shared` (the channel, or
    the vault without one) or `personal` (the user, everywhere).
    """

    model_config = ConfigDict(frozen=True)

    kind: MemoryKind
    text: str
    summary: str = ""
    themes: tuple[str, ...] = ()
    importance: float = Field(0.5, ge=0.0, le=1.0)
    reach: str = "shared"
    key: str | None = None


class MemoryContext(BaseModel):
    """What one turn gets from memory: ranked entries, rules, a catch-up, and diagnostics."""

    model_config = ConfigDict(frozen=True)

    entries: list[Memory] = Field(default_factory=list)
    procedural_rules: list[Memory] = Field(default_factory=list)
    catch_up: Memory | None = None
    diagnostics: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        """The memory message for the TurnPreparer: rules first, then the catch-up, then
        what was recalled, each with its date so the model can reason about time."""
        parts: list[str] = []
        if self.procedural_rules:
            parts.append("User preferences (always follow):")
            parts += [f"- {m.text}" for m in self.procedural_rules]
        if self.catch_up is not None:
            parts.append(f"Last time ({_day(self.catch_up.updated_at)}): {self.catch_up.text}")
        if self.entries:
            parts.append("Relevant memories:")
            parts += [f"- [{_day(m.created_at)}, {m.kind.value}] {m.text}" for m in self.entries]
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [m.to_dict() for m in self.entries],
            "procedural_rules": [m.to_dict() for m in self.procedural_rules],
            "catch_up": self.catch_up.to_dict() if self.catch_up else None,
            "text": self.text,
            "diagnostics": self.diagnostics,
        }


def _iso(ts: float) -> str:
    return _datetime(ts).isoformat(timespec="seconds")


def _day(ts: float) -> str:
    return _datetime(ts).date().isoformat()


def _datetime(ts: float) -> _dt.datetime:
    """The UTC time of `ts`; one an older vaultctx stored out of range (1e300, NaN) reads as
    the nearest time Python holds, so it cannot break a listing."""
    return _dt.datetime.fromtimestamp(min(max(ts, _EARLIEST), _LATEST) if ts == ts else 0, _dt.UTC)


_EARLIEST = _dt.datetime(1, 1, 2, tzinfo=_dt.UTC).timestamp()
_LATEST = _dt.datetime(9999, 12, 30, tzinfo=_dt.UTC).timestamp()


def to_timestamp(
    value: _dt.datetime | _dt.date | float | int | str | None, default: float
) -> float:
    """Accept a datetime (naive: UTC), a date, an ISO string or epoch seconds.

    A time outside the years 1 to 9999 (1e300, NaN, inf) is a ValueError: every listing,
    search and export turns times into dates, which Python holds only in those years, so
    such a time stored once would break each of them afterwards."""
    if value is None:
        return default
    if isinstance(value, int | float):
        try:
            timestamp = float(value)
        except OverflowError:  # an int past the float range
            timestamp = math.inf
    else:
        if isinstance(value, str):
            value = _dt.datetime.fromisoformat(value)
        elif not isinstance(value, _dt.date):
            raise ValueError(f"{value!r} is not a date or time")
        if not isinstance(value, _dt.datetime):
            value = _dt.datetime(value.year, value.month, value.day)
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        timestamp = value.timestamp()
    if not _EARLIEST <= timestamp <= _LATEST:  # NaN compares false too
        raise ValueError(f"{value!r} is not a time between the years 1 and 9999")
    return timestamp


class MemoryRecord(BaseModel):
    """One memory as `export` writes it, read back by `import`: validated whole, so no
    record is stored that a later list, search or export could not read."""

    model_config = ConfigDict(extra="ignore")  # updated_at, access_count…: recomputed

    tier: Tier
    scope: str | None = None
    kind: MemoryKind = MemoryKind.SEMANTIC
    text: str = Field(min_length=1)
    summary: str | None = None
    themes: tuple[str, ...] = ()
    importance: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    created_at: float | None = None  # epoch seconds; None: now
    source: MemorySource = Field(default_factory=MemorySource)
    key: str | None = None
    id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """A lone surrogate (JSON `"\\ud800"`) is text SQLite cannot store."""
        try:
            json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("holds text that is not valid Unicode (a lone surrogate)") from None
        return data

    @field_validator("created_at", mode="before")
    @classmethod
    def _time(cls, value: Any) -> float | None:
        return None if value is None else to_timestamp(value, 0.0)


@dataclass(frozen=True)
class ImportReport:
    """What `import_` did: memories written, and the records left out (position from 1, why)."""

    imported: int
    rejected: tuple[tuple[int, str], ...] = ()
