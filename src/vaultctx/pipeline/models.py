"""What select returns: candidates with provenance, and the filters it accepts."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InvalidQuery

CandidateKind = Literal["block", "note", "memory"]
MAX_CONDITIONS = 64  # tag and frontmatter filters of one select


class Source(BaseModel):
    """How one retriever ranked a candidate."""

    model_config = ConfigDict(frozen=True)

    rank: int
    score: float


class Candidate(BaseModel):
    """One piece of context select proposes: a block of a note, a whole note, or a memory."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: CandidateKind
    path: str | None = None
    title: str = ""
    heading: str = ""
    heading_path: str = ""
    text: str = ""
    score: float = 0.0
    sources: dict[str, Source] = Field(default_factory=dict)
    note_id: int | None = None
    block_id: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    tokens: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    # How likely this candidate answers the query, from absolute evidence (`confidence.py`).
    confidence: float = 0.0

    def contract(self) -> dict[str, Any]:
        """The stable JSON shape documented in DESIGN.md (plus a few extra fields)."""
        return {
            **item_contract(self),
            "confidence": self.confidence,
            **({"metadata": self.metadata} if self.metadata else {}),
        }


def item_contract(item: Any) -> dict[str, Any]:
    """The JSON fields a select candidate and a context item share, rounded for stable bytes."""
    return {
        "id": item.id,
        "kind": item.kind,
        "path": item.path,
        "title": item.title,
        "heading": item.heading,
        "heading_path": item.heading_path,
        "text": item.text,
        "score": round(item.score, 6),
        "sources": {
            name: {"rank": s.rank, "score": round(s.score, 6)}
            for name, s in sorted(item.sources.items())
        },
        "start_line": item.start_line,
        "end_line": item.end_line,
        "tokens": item.tokens,
    }


class NoteHit(BaseModel):
    """A note-level roll-up of its candidates."""

    model_config = ConfigDict(frozen=True)

    path: str
    title: str
    score: float
    candidates: list[str]


class Selection(BaseModel):
    """Select's result: ranked candidates, diagnostics, and (with explain) its reasoning."""

    model_config = ConfigDict(frozen=True)

    query: str
    candidates: list[Candidate]
    diagnostics: dict[str, Any]
    explain: dict[str, Any] | None = None
    # How likely the answer holds what was asked (its best candidate's evidence), and
    # whether that falls short: the candidates are then the closest, not an answer.
    confidence: float = 0.0
    no_good_match: bool = True

    def notes(self) -> list[NoteHit]:
        """Candidates rolled up to their notes, in order of each note's best candidate."""
        by_path: dict[str, NoteHit] = {}
        for candidate in self.candidates:
            if candidate.path is None:
                continue
            hit = by_path.get(candidate.path)
            if hit is None:
                by_path[candidate.path] = NoteHit(
                    path=candidate.path,
                    title=candidate.title,
                    score=candidate.score,
                    candidates=[candidate.id],
                )
            else:
                hit.candidates.append(candidate.id)
        return list(by_path.values())

    def verdict(self) -> str:
        """The answer in one line, as every door says it: a match, or only the closest."""
        if not self.candidates:
            return "no good match; nothing found"
        closest = ", ".join(dict.fromkeys(c.path or c.title or c.kind for c in self.candidates[:3]))
        if self.no_good_match:
            return f"no good match; closest: {closest}"
        return f"match (confidence {self.confidence:.2f}): {closest}"

    def contract(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "confidence": self.confidence,
            "no_good_match": self.no_good_match,
            "verdict": self.verdict(),
            "candidates": [c.contract() for c in self.candidates],
            "diagnostics": self.diagnostics,
        }
        if self.explain is not None:
            data["explain"] = self.explain
        return data


def moment(value: object) -> _dt.datetime:
    """A date filter's bound as an aware datetime: every door's dates become one here, so a
    date any door takes means the same everywhere and a bad one is an `InvalidQuery`.

    Takes a datetime, a date (its midnight) or ISO 8601 text; naive means local time. Any
    year from 1 to 9999 is a bound, however far from the notes' times."""
    if isinstance(value, str):
        text = value
        try:
            value = _dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise InvalidQuery(f"not an ISO date or datetime: {text[:40]!r}") from None
    elif isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        value = _dt.datetime.combine(value, _dt.time())
    if not isinstance(value, _dt.datetime):
        raise InvalidQuery(f"a date filter takes a date or datetime, not {type(value).__name__}")
    try:
        offset = value.utcoffset()
    except (ValueError, OverflowError, TypeError) as exc:  # a tzinfo that cannot place it
        raise InvalidQuery(f"the date {value.isoformat()} has no usable time zone") from exc
    if offset is not None:
        return value
    try:
        return value.astimezone()
    except (ValueError, OverflowError, OSError):
        # Years the C library cannot place (far before 1970 or near 9999): today's offset.
        return value.replace(tzinfo=_dt.datetime.now().astimezone().tzinfo)


_EPOCH = _dt.datetime(1970, 1, 1)
_INT64 = 2**63 - 1


def moment_ns(when: _dt.datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime, as the index stores `mtime_ns`:
    exact integer arithmetic (no float rounding, no overflow at year 1 or 9999), held to a
    signed 64-bit column's range, past whose ends no note is stamped."""
    offset = when.utcoffset() or _dt.timedelta()
    ns = ((when.replace(tzinfo=None) - _EPOCH) - offset) // _dt.timedelta(microseconds=1) * 1000
    return max(-_INT64 - 1, min(_INT64, ns))


class Filters(BaseModel):
    """Restrictions on what select may return. Empty filters allow everything."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = Field(
        None, description="folder ('Journal'), or glob over vault paths ('Journal/2025-*')"
    )
    tags: tuple[str, ...] = Field((), description="notes must carry every one of these tags")
    frontmatter: dict[str, str] = Field(
        default_factory=dict, description="frontmatter field equals value (lists: contains)"
    )
    modified_after: _dt.datetime | None = Field(
        None, description="modified on or after (ISO date or datetime; naive means local time)"
    )
    modified_before: _dt.datetime | None = Field(
        None, description="modified before (ISO date or datetime; naive means local time)"
    )
    kinds: tuple[CandidateKind, ...] = Field((), description="candidate kinds to keep")

    @field_validator("modified_after", "modified_before", mode="before")
    @classmethod
    def _moment(cls, value: object) -> _dt.datetime | None:
        return None if value is None else moment(value)

    @model_validator(mode="after")
    def _few_enough(self) -> Filters:
        """Each tag and field is one more condition of one SQL statement, whose size SQLite
        bounds: past MAX_CONDITIONS the query is refused here, with a clear reason."""
        if len(self.tags) + len(self.frontmatter) > MAX_CONDITIONS:
            raise InvalidQuery(
                f"at most {MAX_CONDITIONS} tag and field filters at once,"
                f" not {len(self.tags) + len(self.frontmatter)}"
            )
        return self

    @property
    def restricts_notes(self) -> bool:
        return bool(
            self.path
            or self.tags
            or self.frontmatter
            or self.modified_after
            or self.modified_before
        )
