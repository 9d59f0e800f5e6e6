"""Focus: what the user has open, as select sees it — shown, explained and forgotten.

The notes opened or touched (and, at half weight, edited lately) lift the notes they link to
(`graphwalk.py`, `note_ranking.lift`). Every answer names them in its diagnostics (`focus`:
each note with its weight, and the results they moved up, from which rank to which), each
fades by half every `focus_half_life_hours`, and `Workspace.clear_focus` forgets every open
and touch at once. One home for the three, so every door (CLI, HTTP, MCP, the plugin)
shows and clears the same thing.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from .graphwalk import focus_seeds
from .note_ranking import note_id

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads
    from .note_ranking import RankedNote


class FocusNote(BaseModel):
    """One note of the focus: how much it counts now, and since when."""

    model_config = ConfigDict(frozen=True)

    path: str
    weight: float  # 1 for the note opened last, just now; halves every half-life
    how: Literal["opened", "edited"]
    at: str  # ISO 8601 (UTC): when it was last opened or edited


class Focus(BaseModel):
    """What the next selects lean towards, heaviest first."""

    model_config = ConfigDict(frozen=True)

    notes: list[FocusNote]
    half_life_hours: float
    cleared: int | None = None  # after `clear_focus`: how many opened notes were forgotten

    def contract(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def _iso(at: float) -> str:
    return _dt.datetime.fromtimestamp(at, _dt.UTC).isoformat(timespec="seconds")


def current_focus(
    reads: IndexReads, note_count: int, half_life_hours: float, cleared: int | None = None
) -> Focus:
    """The focus as select would weigh it now, through the reader's view."""
    seeds = focus_seeds(reads, note_count, half_life_hours)
    paths = reads.note_paths(list(seeds))
    notes = [
        FocusNote(path=paths[n], weight=round(s.weight, 4), how=s.how, at=_iso(s.at))
        for n, s in sorted(seeds.items(), key=lambda kv: (-kv[1].weight, kv[0]))
        if n in paths
    ]
    return Focus(notes=notes, half_life_hours=half_life_hours, cleared=cleared)


def focus_diagnostics(
    reads: IndexReads,
    context: Mapping[int, float],
    ranked: Sequence[RankedNote],
    depth: int,
    asked: int | None = None,
) -> dict[str, Any] | None:
    """The `focus` entry of an answer's diagnostics: the notes in focus (path, weight) and
    the notes they lifted into the first `depth` above where their match alone ranked them
    (path, from rank, to rank, lift as a share of the score). None: nothing in focus.

    The note `related` was asked about (`asked`) is in focus for that answer alone, and
    says so (`"asked": true`): it is not the stored focus that `Workspace.focus` shows and
    `clear_focus` forgets, unless it was also opened or touched."""
    if not context:
        return None
    moved = [
        (r.key, r.matched, rank, r.lift)
        for rank, r in enumerate(ranked[:depth], start=1)
        if r.lift > 0 and r.key.startswith("note:") and r.matched > rank
    ]
    paths = reads.note_paths([*context, *(note_id(key) for key, *_ in moved)])
    return {
        "notes": [
            {"path": paths[n], "weight": round(w, 4)} | ({"asked": True} if n == asked else {})
            for n, w in sorted(context.items(), key=lambda kv: (-kv[1], kv[0]))
            if n in paths
        ],
        "lifted": [
            {"path": paths[note_id(key)], "from": a, "to": b, "lift": round(share, 4)}
            for key, a, b, share in moved
            if note_id(key) in paths
        ],
    }
