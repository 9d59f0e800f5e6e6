"""What a turn of a conversation leaves in memory, whichever door it came through.

`persist_turn` (a chat turn, in the background) and `add` with a speaker or session (an app
storing a conversation) both hand a `Turn` to `TurnDeriver`: the extractor's observations
(the raw turn, facts, rules), the exchange with the turn said before it in its session, and
the session's episodic arc. One home, so both doors remember the same things.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import extract as ex
from .merging import MemoryDraft
from .mirror import Scope
from .models import Memory, MemorySource, Observation, Tier
from .places import MemoryPlaces


@dataclass(frozen=True)
class TurnJob:
    """A turn to remember, and where: `fixed` puts every memory it leaves in one tier and
    scope; None lets the tier decision place each (`MemoryPlaces.place`). Only memories in
    `tiers` are kept (None: every tier)."""

    turn: ex.Turn
    fixed: Scope | None = None
    tiers: frozenset[Tier] | None = None


@dataclass
class Pending:
    """What earlier turns of the same batch left that is not in the database yet: the arc of
    each session and the turn said last in it."""

    arcs: dict[tuple[Scope, str], Memory] = field(default_factory=dict)
    said: dict[tuple[Scope, str], list[tuple[str, str]]] = field(default_factory=dict)


class TurnDeriver:
    """From a turn to the drafts of the memories it leaves; the turn's own memory first."""

    def __init__(
        self,
        places: MemoryPlaces,
        extractor: ex.Extractor,
        on_error: Callable[[str, Exception], None],
    ) -> None:
        self.places = places
        self.extractor = extractor
        self._fallback = ex.DeterministicExtractor()
        self._on_error = on_error

    def derive(self, job: TurnJob, pending: Pending | None = None) -> list[MemoryDraft]:
        pending = pending if pending is not None else Pending()
        turn = job.turn
        try:
            observations = self.extractor.extract(turn)
            origin = self.extractor.name
        except Exception as exc:
            self._on_error("extract_errors", exc)
            observations, origin = self._fallback.extract(turn), self._fallback.name
        source = MemorySource(
            session_id=turn.session_id,
            turns=() if turn.turn_id is None else (turn.turn_id,),
            speaker=turn.user_name or None,
            paths=turn.paths,
            origin=origin,
        )
        drafts = [self._draft(o, job, source) for o in observations]
        if not turn.assistant.strip() and turn.user.strip() and turn.turn_id is not None:
            where = self._where("turn", job)
            before = pending.said.get((where, turn.session_id))
            if before is None:
                before = self._said_before(where, turn)
            if before:
                turns = (*(t for t, _ in before), turn.turn_id)
                pair = source.model_copy(update={"turns": turns})
                drafts.append(self._draft(ex.exchange([t for _, t in before], turn), job, pair))
            said = [*before, (turn.turn_id, ex.said(turn))]
            pending.said[(where, turn.session_id)] = said[-ex.EXCHANGE_CONTEXT :]
        drafts.append(self._arc(job, source, pending))
        return [d for d in drafts if job.tiers is None or d.tier in job.tiers]

    def _arc(self, job: TurnJob, source: MemorySource, pending: Pending) -> MemoryDraft:
        """The session's arc, one point longer (see `extract.extend_arc`)."""
        turn = job.turn
        where = self._where("shared", job)
        key = f"{ex.ARC_KEY}{turn.session_id}"
        previous = pending.arcs.get((where, key))
        if previous is None:
            repo = self.places.repo_for(where[0])
            found = repo.list([where], key_prefix=key, limit=1) if repo else []
            previous = next((m for m in found if m.key == key), None)
        observation = ex.extend_arc(previous, turn)
        arc_source = source.model_copy(update={"turns": ex.arc_turns(previous, turn, observation)})
        arc = replace(self._draft(observation, job, arc_source), whole_source=True)
        pending.arcs[(where, key)] = Memory(
            id="pending", tier=arc.tier, scope=arc.scope, kind=arc.kind, text=arc.text,
            summary=arc.summary, themes=arc.themes, importance=arc.importance,
            created_at=arc.created_at, updated_at=arc.created_at,
            last_accessed=arc.created_at, source=arc_source, key=key,
        )  # fmt: skip
        return arc

    def _said_before(self, where: Scope, turn: ex.Turn) -> list[tuple[str, str]]:
        """(turn id, text) of the one-speaker turns said last before `turn` in its session,
        oldest first."""
        repo = self.places.repo_for(where[0], create=False)
        if repo is None:
            return []
        previous = repo.latest_turns(
            where, turn.session_id, turn.at, turn.turn_id, limit=ex.EXCHANGE_CONTEXT
        )
        return [(m.source.turns[0], m.text) for m in reversed(previous) if len(m.source.turns) == 1]

    def _where(self, reach: str, job: TurnJob) -> Scope:
        if job.fixed is not None:
            return job.fixed
        turn = job.turn
        return self.places.place(reach, session_id=turn.session_id, channel=turn.channel)

    def _draft(self, o: Observation, job: TurnJob, source: MemorySource) -> MemoryDraft:
        tier, scope = self._where(o.reach, job)
        return MemoryDraft(
            tier=tier,
            scope=scope,
            kind=o.kind,
            text=o.text,
            summary=o.summary or ex.summarize(o.text),
            themes=o.themes,
            importance=o.importance,
            created_at=job.turn.at,
            source=source,
            key=o.key,
        )
