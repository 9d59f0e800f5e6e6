"""From a finished turn to observations worth remembering, and how important each one is.

`Extractor` is the seam: the deterministic extractor here needs no model; an LLM-backed one
(through `vaultctx.llm`) implements the same protocol and is swapped in when a model is set.
The deterministic one keeps what the user said (raw turn, with speaker and date), sentences
that state facts, and rules phrased as preferences; importance comes from simple signals.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field

from ..errors import LLMFailed
from ..search.query import STOP_WORDS
from .models import Memory, MemoryKind, Observation

if TYPE_CHECKING:
    from ..llm import LLMSettings

MAX_FACT_WORDS = 60
LLM_EXTRACT_TIMEOUT = 30.0  # seconds: extraction runs in the background writer
MAX_ARC_POINTS = 8
EXCHANGE_CONTEXT = 2  # turns said before a turn that its exchange holds
ARC_KEY = "arc:"  # a session's arc is keyed ARC_KEY + its session id
THEME_COUNT = 5

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|mine|me)\b", re.I)
_WE = re.compile(r"\b(we|our|ours|we're|we've)\b", re.I)
# A rule tells the assistant how to behave: an imperative ("Never use emoji", "From now on…")
# or a stated preference. "Pets never let us down" is a fact, not a rule.
_PREFERENCE = re.compile(
    r"^\W*(always|never|from now on|don't ever|do not ever)\b|"
    r"\b(i prefer|i'd prefer|i would prefer|i'd rather|i would rather|"
    r"please (?:answer|reply|respond|write|use|keep|avoid|format|be)|"
    r"(?:answer|reply|respond|write) (?:in|with|using))\b",
    re.I,
)
_REMEMBER = re.compile(
    r"\b(remember|don't forget|do not forget|important|note that|keep in mind)\b", re.I
)
_NUMBER = re.compile(r"\d")
_MONTHS = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|"
    r"today|last (?:week|month|year)|next (?:week|month|year))\b",
    re.I,
)


@dataclass(frozen=True)
class Turn:
    """One exchange to remember: who said what, in which session, when."""

    user: str
    session_id: str
    at: float
    assistant: str = ""
    channel: str | None = None
    turn_id: str | None = None
    user_name: str = "User"  # "": unknown (an app's turn without a speaker)
    assistant_name: str = "Assistant"
    paths: tuple[str, ...] = field(default_factory=tuple)

    @property
    def day(self) -> str:
        return _dt.datetime.fromtimestamp(self.at, _dt.UTC).strftime("%-d %B %Y")


class Extractor(Protocol):
    """Turns a finished turn into observations; may be slow (it runs in the background)."""

    name: str

    def extract(self, turn: Turn) -> list[Observation]: ...


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 1]


def themes(text: str, count: int = THEME_COUNT) -> tuple[str, ...]:
    """Top keywords: frequent, not stop-words; names count double. Deterministic."""
    words = _WORD.findall(text)
    scores: Counter[str] = Counter()
    first: dict[str, int] = {}
    for position, word in enumerate(words):
        lower = word.lower().strip("'-")
        if len(lower) < 3 or lower in STOP_WORDS:
            continue
        scores[lower] += 2 if word[0].isupper() and position > 0 else 1
        first.setdefault(lower, position)
    ranked = sorted(scores, key=lambda w: (-scores[w], first[w]))
    return tuple(ranked[:count])


def summarize(text: str, limit: int = 160) -> str:
    """The first sentence, cut at a word boundary: a deterministic one-line summary."""
    first = sentences(text)[0] if sentences(text) else text.strip()
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0] + "…"


def importance(text: str, kind: MemoryKind, *, personal: bool = False) -> float:
    """Heuristic importance in [0, 1] when no model scores it: explicit 'remember', rules,
    personal facts, numbers and dates, names, and length each add a little."""
    score = 0.3
    if _REMEMBER.search(text):
        score += 0.3
    if kind is MemoryKind.PROCEDURAL:
        score += 0.3
    if personal:
        score += 0.1
    if _NUMBER.search(text) or _MONTHS.search(text):
        score += 0.1
    if _names(text):
        score += 0.1
    score += min(0.1, len(text.split()) / 300)
    return round(min(1.0, score), 3)


def _names(text: str) -> list[str]:
    """Capitalized words that do not start a sentence: likely names of people or things."""
    found = []
    for sentence in sentences(text):
        words = _WORD.findall(sentence)
        found += [
            w for w in words[1:] if w[0].isupper() and w != "I" and w.lower() not in STOP_WORDS
        ]
    return found


def is_rule(sentence: str) -> bool:
    return bool(_PREFERENCE.search(sentence)) and not sentence.rstrip().endswith("?")


def is_fact(sentence: str) -> bool:
    words = sentence.split()
    if len(words) < 4 or len(words) > MAX_FACT_WORDS or sentence.rstrip().endswith("?"):
        return False
    return bool(
        _FIRST_PERSON.search(sentence)
        or _WE.search(sentence)
        or _NUMBER.search(sentence)
        or _MONTHS.search(sentence)
        or _names(sentence)
    )


class DeterministicExtractor:
    """No model: the raw turn, fact sentences and preference rules, by heuristics."""

    name = "deterministic"

    def extract(self, turn: Turn) -> list[Observation]:
        out: list[Observation] = []
        raw = said(turn)
        if turn.assistant.strip():
            reply = " ".join(sentences(turn.assistant)[:2]) or turn.assistant.strip()
            raw += f"\n{turn.assistant_name}: {reply}"
        if turn.user.strip():
            out.append(
                Observation(
                    kind=MemoryKind.EPISODIC,
                    text=raw,
                    summary=f"{turn.day}, {named(turn.user_name, summarize(turn.user, 120))}",
                    themes=themes(raw),
                    importance=importance(turn.user, MemoryKind.EPISODIC),
                    reach="turn",
                )
            )
        for sentence in sentences(turn.user):
            if is_rule(sentence):
                out.append(
                    Observation(
                        kind=MemoryKind.PROCEDURAL,
                        text=sentence,
                        summary=summarize(sentence),
                        themes=themes(sentence),
                        importance=importance(sentence, MemoryKind.PROCEDURAL),
                        reach="personal",
                    )
                )
            elif is_fact(sentence):
                personal = bool(_FIRST_PERSON.search(sentence))
                text = named(turn.user_name, sentence)
                out.append(
                    Observation(
                        kind=MemoryKind.SEMANTIC,
                        text=text,
                        summary=summarize(text),
                        themes=themes(sentence),
                        importance=importance(sentence, MemoryKind.SEMANTIC, personal=personal),
                        reach="personal" if personal else "shared",
                    )
                )
        return out


class ExtractedMemory(BaseModel):
    text: str = Field(min_length=1)
    importance: float = Field(0.5, ge=0.0, le=1.0)
    kind: Literal["fact", "preference"] = "fact"
    personal: bool = False


class ExtractedMemories(BaseModel):
    """The JSON the extraction prompt asks for."""

    memories: list[ExtractedMemory] = Field(default_factory=list)


class LLMExtractor:
    """A model writes the facts and preferences of a turn, resolved to names and dates and
    scored for importance; the raw turn is kept as the deterministic extractor keeps it.

    Any failure — transport, timeout, an answer that is not the asked-for JSON — raises, so
    the facade falls back to the deterministic extractor and counts it."""

    name = "llm"

    def __init__(self, settings: LLMSettings, *, timeout: float = LLM_EXTRACT_TIMEOUT) -> None:
        self.settings = settings
        self.timeout = timeout
        self._raw = DeterministicExtractor()

    def extract(self, turn: Turn) -> list[Observation]:
        from ..llm import complete_structured  # the client and prompts: only with a model
        from ..permissions import destination_of
        from ..prompts import memory_extract_messages
        from ..storage.audit import AuditNote

        text = turn.user.strip()
        if turn.assistant.strip():
            text += f"\n{turn.assistant_name}: {turn.assistant.strip()}"
        answer, record = complete_structured(
            memory_extract_messages(turn.user_name, turn.day, text),
            ExtractedMemories,
            settings=self.settings,
            timeout=self.timeout,
            audit=AuditNote(
                purpose="memory",
                destination=destination_of(self.settings.model or "", self.settings.api_base).value,
            ),
        )
        if answer is None:
            raise LLMFailed(f"memory extraction: {record.error}")
        raw = [o for o in self._raw.extract(turn) if o.reach == "turn"]
        return raw + [_observation(m, turn) for m in answer.memories if m.text.strip()]


def _observation(memory: ExtractedMemory, turn: Turn) -> Observation:
    text = " ".join(memory.text.split())
    if memory.kind == "preference":
        kind, reach = MemoryKind.PROCEDURAL, "personal"
    else:
        kind, reach = MemoryKind.SEMANTIC, "personal" if memory.personal else "shared"
        if turn.user_name.lower() not in text.lower():
            text = named(turn.user_name, text)
    return Observation(
        kind=kind,
        text=text,
        summary=summarize(text),
        themes=themes(text),
        importance=memory.importance,
        reach=reach,
    )


def named(name: str, text: str) -> str:
    """'Name: text', or the text alone when the speaker is unknown."""
    return f"{name}: {text}" if name else text


# 'Name: text', as transcripts and chat logs write who said a line: one to three capitalised
# words before the colon.
_SAID_BY = re.compile(r"([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s+\S")


def said_by(text: str) -> str | None:
    """The name a 'Name: text' line starts with, if it starts with one."""
    found = _SAID_BY.match(text)
    return found.group(1) if found else None


def unprefixed(text: str, speaker: str | None) -> str:
    """What `speaker` said, from a text that may already start with 'Speaker: '."""
    if speaker and text[: len(speaker) + 1].lower() == f"{speaker.lower()}:":
        return text[len(speaker) + 1 :].strip()
    return text


def said(turn: Turn) -> str:
    """A one-speaker turn as the raw-turn memory holds it: 'Name: text'."""
    return named(turn.user_name, turn.user.strip())


def exchange(before: Sequence[str], turn: Turn) -> Observation:
    """The turns said just before this one and this one, together: an answer rarely names
    what it answers ("I chose them because…"), and a remark's point is often in the reply
    to it. Only for one-speaker turns (a turn with its reply already holds its exchange)."""
    text = "\n".join([*before, said(turn)])
    who = f"{turn.user_name} replies".strip()
    return Observation(
        kind=MemoryKind.EPISODIC,
        text=text,
        summary=f"{turn.day}, {named(who, summarize(turn.user, 120))}",
        themes=themes(text),
        importance=importance(text, MemoryKind.EPISODIC),
        reach="turn",
        key=f"exchange:{turn.session_id}:{turn.turn_id}",
    )


def extend_arc(previous: Memory | None, turn: Turn, points: Sequence[str] = ()) -> Observation:
    """The session's episodic arc, one point longer: what a 'last time we talked…' recalls.

    Deterministic: the first thing the user raised is the summary, later turns add points
    (their first sentence), the newest kept when the arc grows past MAX_ARC_POINTS.
    """
    point = summarize(turn.user, 120)
    old_points = [] if previous is None else _arc_points(previous.text)
    new_points = [*old_points, *(p for p in (point, *points) if p and p not in old_points)]
    new_points = new_points[-MAX_ARC_POINTS:]
    opening = previous.summary if previous is not None else f"{turn.day}: {point}"
    who = f" with {turn.user_name}" if turn.user_name else ""
    text = f"Session of {opening.split(':', 1)[0]}{who}:\n" + "\n".join(
        f"- {p}" for p in new_points
    )
    return Observation(
        kind=MemoryKind.EPISODIC,
        text=text,
        summary=opening,
        themes=themes(" ".join(new_points)),
        importance=max(0.5, previous.importance if previous else 0.0),
        reach="shared",
        key=f"{ARC_KEY}{turn.session_id}",
    )


def arc_turns(previous: Memory | None, turn: Turn, arc: Observation) -> tuple[str, ...]:
    """The turns an arc's points came from: one per point, oldest dropped with its point."""
    turns = () if previous is None else previous.source.turns
    old_points = [] if previous is None else _arc_points(previous.text)
    if turn.turn_id is not None and summarize(turn.user, 120) not in old_points:
        turns = (*turns, turn.turn_id)
    return turns[-len(_arc_points(arc.text)) :]


def _arc_points(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]
