"""Memory ranking — the one ranking every door uses (search, a turn's context, select).

Relevance fuses, by reciprocal rank, an FTS5 bm25 search ("token recall"), a nearest-
neighbour search over memory embeddings and, when the query names a time, token recall
among memories formed then; the embedding is computed in a worker thread while FTS5 searches
(`search.hybrid`). Rank fusion alone cannot tell a clear match from the best of weak ones, so
each memory's fused relevance is scaled by how close its raw scores come to each list's best.
Every list holds only the memories of the scopes and kinds asked that the reader may recall
(not forgotten, not drawn from a note the reader's view hides); bm25's statistics are those
of every memory the reader may recall, as a filter leaves the statistics of notes alone: the
others take no rank and move no score (`MemoryRepository.view`).

Why rank fusion here, when notes are fused by their shares of each list's best
(`pipeline.note_ranking`): on LoCoMo (both doors, 1,033 questions) fusing memories the notes'
way, lists weighted equally, gives R@10 0.851 against 0.852 and R@5 0.800 against 0.800 —
a tie, within ±0.008 per conversation — and weighting the embedding list twice, as select
does, loses (R@10 0.840, R@5 0.792). Notes moved to scores because a lift for what the user
has open must not drown how well notes match; memories have no such lift, and the shares
already scale their relevance (`STRENGTH`).

The query is read for who it is about: the names of people who said memories in these scopes
are taken out of the text that is matched (a name matches every line its speaker said) and
instead raise the memories those people said. A time it names ("in May 2023") raises the
memories formed then.

Importance and recency are a prior, not a filter: score = relevance × (BASE +
W_IMPORTANCE·importance + W_RECENCY·recency), where recency halves every `half_life` days
of the memory's tier since it was formed or last used. That factor lies in [BASE, 1], so it
reorders only memories whose relevance is within 1/BASE of each other: a memory a third
more relevant than another ranks above it however old, and however unimportant.

## Every knob of memory

Each entry: `NAME = default  (file)`, then what chose it, on which data. "LoCoMo" is
`benchmarks/memory_eval.py` (7 conversations, 1,033 questions, recall of the evidence
turns); "untuned" means no value was measured against another. Lower-case names are
settings: change them in the config (`vaultctx config memory_half_life_days_channel 7`
makes channel memories fade twice as fast), never here. Select's knobs are in
`pipeline/note_ranking.py`; the query building both share (`search/query.py`) is listed
there. A test checks that every entry names a real knob with this default, and that every
constant of these files has one.

memory_half_life_days_conversation = 1.0  (config.py)
    untuned: the order (a conversation fades fastest, the account slowest) is the design's;
    the days are not measured
memory_half_life_days_channel = 14.0  (config.py)
    as `memory_half_life_days_conversation`
memory_half_life_days_workspace = 90.0  (config.py)
    as `memory_half_life_days_conversation`
memory_half_life_days_account = 365.0  (config.py)
    as `memory_half_life_days_conversation`
rrf_k = 60  (config.py)
    untuned (the usual 60); shared with select
weight_memory = 0.7  (config.py)
    untuned: memories' weight among select's lists
DEPTH = 50  (memory/ranking.py)
    LoCoMo R@10 (public door): 100 gave 0.837 against 0.840
OVERFETCH = 3  (memory/ranking.py)
    LoCoMo R@10: 5 changed nothing
MIN_SIMILARITY = 0.2  (memory/ranking.py)
    untuned: a vector-only hit this far is noise
STRENGTH = 0.5  (memory/ranking.py)
    LoCoMo R@10: 0.3 gave 0.841 and 0.7 gave 0.838, against 0.840 (within noise)
BASE = 0.75  (memory/ranking.py)
    follows `W_RECENCY`: the prior stays in [BASE, 1] (BASE + W_IMPORTANCE + W_RECENCY = 1)
W_IMPORTANCE = 0.2  (memory/ranking.py)
    untuned
W_RECENCY = 0.05  (memory/ranking.py)
    LoCoMo: 0.2 cost 0.016 of R@5 against 0.05
TIME_BOOST = 0.5  (memory/ranking.py)
    untuned (came with time windows, which were measured only as a whole)
SPEAKER_BOOST = 1.0  (memory/ranking.py)
    untuned: about 95% of LoCoMo's evidence is said by the person the question names, hence
    large
FTS_WEIGHTS = (1.0, 0.5, 0.5)  (memory/store.py)
    untuned: bm25 weights of text, summary and themes
MERGE_SIMILARITY = 0.93  (memory/merging.py)
    untuned: facts and rules this alike say the same thing
MAX_RULES = 20  (memory/turn_context.py)
    untuned
DEFAULT_TURN_K = 8  (memory/service.py)
    untuned
EXCHANGE_CONTEXT = 2  (memory/extract.py)
    LoCoMo chat door R@10: two earlier turns 0.812, one 0.754
THEME_COUNT = 5  (memory/extract.py)
    untuned
MAX_ARC_POINTS = 8  (memory/extract.py)
    untuned
MAX_FACT_WORDS = 60  (memory/extract.py)
    untuned
LLM_EXTRACT_TIMEOUT = 30.0  (memory/extract.py)
    untuned: extraction runs in the background writer
MAX_BATCH = 32  (memory/background.py)
    untuned: writes the background writer commits at once
RETRY_DELAYS_S = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0)  (memory/background.py)
    untuned: waits before the writer tries an unreachable team database again, 31 s in all
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import EmbeddingUnavailable
from ..search.fusion import DEFAULT_RRF_K, Hit, rrf_fuse
from ..search.hybrid import HYBRID, after_embed_error, meanwhile, model_failure, share_of_best
from .extract import ARC_KEY
from .models import Memory, MemoryKind, Tier
from .places import Target
from .store import MemoryRepository, ScoreRow
from .temporal import Window, time_window

DEPTH = 50
# Ranked this many times k before dedupe: nearly always enough that k distinct moments remain.
OVERFETCH = 3
# A vector-only hit this dissimilar is noise, however high it ranks among few memories.
MIN_SIMILARITY = 0.2
# relevance = fused rank score × (1 - STRENGTH + STRENGTH·(mean share of each list's best
# raw score)): the order fusion gives, unless a memory's match is weak in every list.
STRENGTH = 0.5
# The prior: importance and recency reorder near-ties only. Recency weighs little: a
# channel spans months, and what was said in its first week must not sink under chit-chat
# of the last one.
BASE = 0.75
W_IMPORTANCE = 0.2
W_RECENCY = 0.05
DAY = 86400.0
# A memory formed in the window of time the query names, or said by a person the query
# names, is more likely what it asks about: its relevance is raised by this share. Nearly
# every answer about a person is in what they said themselves, hence a large share.
TIME_BOOST = 0.5
SPEAKER_BOOST = 1.0

TOKEN_RECALL = "token_recall"  # the path label of a search by FTS5 alone

_WORD = re.compile(r"\w")

Turn = tuple[str | None, str]  # (session id, turn id): what a memory holds of a conversation


@dataclass(frozen=True)
class SearchResult:
    memories: list[Memory]
    retrieval_path: str
    error: str | None = None


@dataclass(frozen=True)
class Reading:
    """What a query asks, beyond its words: the people it names among those who said the
    memories, its text without their names, and the time it names."""

    named: frozenset[str]  # lower-case
    content: str
    window: Window | None

    def boost(self, row: ScoreRow) -> float:
        factor = 1.0
        if self.window is not None and self.window[0] <= row.created_at < self.window[1]:
            factor += TIME_BOOST
        if row.speaker and row.speaker.lower() in self.named:
            factor += SPEAKER_BOOST
        return factor


def read_query(query: str, speakers: Iterable[str], now: float) -> Reading:
    """Take the names of `speakers` out of `query` (with a possessive 's): the rest is what
    is matched. A query that is only a name keeps its text."""
    named: set[str] = set()
    content = query
    for name in sorted(set(speakers), key=len, reverse=True):
        pattern = re.compile(rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", re.IGNORECASE)
        if pattern.search(content):
            named.add(name.lower())
            content = pattern.sub(" ", content)
    content = " ".join(content.split())
    if not _WORD.search(content):
        content = query
    return Reading(frozenset(named), content, time_window(query, now))


def recency(last_used: float, now: float, half_life_days: float) -> float:
    """0.5 ** (days since formed or last accessed / half-life); never above 1."""
    age = max(0.0, now - last_used) / DAY
    return float(0.5 ** (age / max(half_life_days, 1e-6)))


@dataclass(frozen=True)
class Ranking:
    """Every memory the search found, scored and best first; full memories are read from the
    store only for as many of the first as the caller asks for (`top`)."""

    targets: Sequence[Target]
    scored: list[tuple[float, str, dict[str, float]]]  # (score, "target:rowid", breakdown)
    retrieval_path: str
    error: str | None = None

    def top(self, n: int) -> list[Memory]:
        wanted: dict[int, list[int]] = {}
        for _, key, _ in self.scored[:n]:
            i, rowid = key.split(":")
            wanted.setdefault(int(i), []).append(int(rowid))
        rows = {
            f"{i}:{rowid}": memory
            for i, rowids in wanted.items()
            for rowid, memory in self.targets[i][0].by_rowids(rowids).items()
        }
        return [
            rows[key].model_copy(update={"score": score, "scores": scores})
            for score, key, scores in self.scored[:n]
            if key in rows
        ]


def hybrid_search(
    targets: Sequence[Target],
    query: str,
    *,
    kinds: Sequence[MemoryKind],
    now: float,
    half_lives: Mapping[Tier, float],
    embed: Callable[[str], np.ndarray] | None = None,
    query_vector: np.ndarray | None = None,
    pool: ThreadPoolExecutor | None = None,
    rrf_k: int = DEFAULT_RRF_K,
    min_similarity: float = MIN_SIMILARITY,
    hidden: Mapping[MemoryRepository, Collection[int]] | None = None,
) -> Ranking:
    """Rank memories of `targets` for `query`. Never raises for a failing model: it falls
    back to token recall and says so in `retrieval_path`. `query_vector` is the embedding
    of `query` when the caller has it (reused unless names are taken out of the query).
    `hidden`: the rowids, per database, of memories the reader may not see — not there for
    any list, nor for how the query is read (who said what, how rare a word is)."""
    targets = [(repo, list(scopes)) for repo, scopes in targets if scopes]
    unseen = [frozenset((hidden or {}).get(repo, ())) for repo, _ in targets]
    speakers = {
        n
        for (repo, scopes), without in zip(targets, unseen, strict=True)
        for n in repo.sync_mirror().speakers(scopes, without)
    }
    reading = read_query(query, speakers, now)
    if reading.content != query:
        query_vector = None
    with_vectors = [
        i for i, (repo, scopes) in enumerate(targets) if repo.mirror.vectors_in(scopes, unseen[i])
    ]
    use_vectors = bool(with_vectors) and (embed is not None or query_vector is not None)

    # The model encodes while FTS5 searches (`search.hybrid.meanwhile`); the nearest-neighbour
    # product itself takes well under a millisecond.
    pending: Callable[[], np.ndarray] | None = None
    if use_vectors and query_vector is None and embed is not None:
        pending = meanwhile(pool, embed, reading.content)

    ranked: dict[str, list[Hit]] = {"token_recall": [], "temporal": []}
    for i, (repo, scopes) in enumerate(targets):
        found = repo.token_recall(reading.content, scopes, kinds, DEPTH, hidden=unseen[i])
        ranked["token_recall"] += [Hit(f"{i}:{r}", s) for r, s in found]
        if reading.window is not None:  # the query's words among memories of its time
            found = repo.token_recall(
                reading.content, scopes, kinds, DEPTH, window=reading.window, hidden=unseen[i]
            )
            ranked["temporal"] += [Hit(f"{i}:{r}", s) for r, s in found]

    failure: Exception | None = None
    if use_vectors:
        try:
            if pending is not None:
                query_vector = pending()
            if query_vector is None:
                raise EmbeddingUnavailable("no query vector to search memories with")
            found_vec = [
                Hit(f"{i}:{r}", s)
                for i in with_vectors
                for r, s in targets[i][0].mirror.nearest(
                    query_vector, targets[i][1], kinds, DEPTH, unseen[i]
                )
            ]
            ranked["embedding"] = [h for h in found_vec if h.score >= min_similarity]
        except Exception as exc:  # a broken model must not take memory down with it
            failure = exc
    path = TOKEN_RECALL
    if use_vectors:
        path = after_embed_error(TOKEN_RECALL) if failure is not None else HYBRID
    ranked = {
        name: sorted(hits, key=lambda h: (-h.score, h.key))[:DEPTH]
        for name, hits in ranked.items()
        if hits
    }
    scored = _score(targets, ranked, now, half_lives, rrf_k, reading)
    error = None if failure is None else model_failure(failure)
    return Ranking(targets, scored, path, error)


def _strength(sources: Mapping[str, Any], best: Mapping[str, float]) -> float:
    """Mean share of each list's best raw score that this memory reached (0 where absent);
    `sources`: the fused candidate's provenance per list."""
    shares = [
        share_of_best(sources[name].score, top) if name in sources else 0.0
        for name, top in best.items()
    ]
    return sum(shares) / len(shares)


def _score(
    targets: Sequence[Target],
    ranked: Mapping[str, Sequence[Hit]],
    now: float,
    half_lives: Mapping[Tier, float],
    rrf_k: int,
    reading: Reading,
) -> list[tuple[float, str, dict[str, float]]]:
    """Score every fused candidate from a few columns, best first."""
    fused = rrf_fuse(ranked, k=rrf_k)
    best_of = {name: max(h.score for h in hits) for name, hits in ranked.items()}
    by_target: dict[int, list[int]] = {}
    for f in fused:
        i, rowid = f.key.split(":")
        by_target.setdefault(int(i), []).append(int(rowid))
    facts = {
        f"{i}:{rowid}": row
        for i, rowids in by_target.items()
        for rowid, row in targets[i][0].score_rows(rowids).items()
    }
    best = len(ranked) / (rrf_k + 1)
    scored = []
    for f in fused:
        row = facts.get(f.key)
        if row is None:
            continue
        boost = reading.boost(row)
        strength = _strength(f.sources, best_of)
        relevance = f.score / best * (1 - STRENGTH + STRENGTH * strength) * boost
        fresh = recency(row.last_used, now, half_lives[row.tier])
        score = relevance * (BASE + W_IMPORTANCE * row.importance + W_RECENCY * fresh)
        scores = {"relevance": relevance, "importance": row.importance, "recency": fresh}
        if boost != 1.0:
            scores["boost"] = boost
        for name, provenance in f.sources.items():
            scores[f"{name}_rank"] = float(provenance.rank)
        scored.append((score, f.key, scores))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return scored


def rank(
    targets: Sequence[Target],
    query: str,
    *,
    kinds: Sequence[MemoryKind],
    k: int,
    exclude: Collection[str] = (),
    **options: Any,
) -> SearchResult:
    """The one ranking every door uses (`search`, a turn's context, select): hybrid search,
    then each moment once — so the slots go to different moments. Memories in `exclude`
    (ids the caller shows another way) take no slot. When repeats leave fewer than k, the
    ranking is read deeper, so k memories come back whenever k distinct ones match."""
    ranking = hybrid_search(targets, query, kinds=kinds, **options)
    depth = k * OVERFETCH + len(exclude)
    while True:
        found = [m for m in ranking.top(depth) if m.id not in exclude]
        memories = dedupe_moments(dedupe_episodes(found), k)
        if len(memories) == k or depth >= len(ranking.scored):
            return SearchResult(memories, ranking.retrieval_path, ranking.error)
        depth *= 2


def dedupe_episodes(memories: Sequence[Memory]) -> list[Memory]:
    """Keep the first of episodic memories sharing (summary, themes): one arc, once."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    out = []
    for memory in memories:
        if memory.kind is MemoryKind.EPISODIC:
            key = (memory.summary, memory.themes)
            if key in seen:
                continue
            seen.add(key)
        out.append(memory)
    return out


def dedupe_moments(memories: Sequence[Memory], k: int) -> list[Memory]:
    """The top k, each moment once, the fullest way the top k holds it.

    A memory most of whose turns the better-ranked ones already hold is dropped: a fact
    extracted from a turn that is itself recalled, an exchange that repeats two of its three
    turns. A memory whose turns a lower-ranked one in the top k holds along with others (a
    turn, and the exchange that answers it) gives that one its place and its score. Either way
    a slot goes to the next moment instead of text the answer already has. A session's arc
    holds only the first sentence of its turns: it covers none of them and widens none."""
    pending = [(memory, _turns(memory)) for memory in memories]
    covered: set[Turn] = set()
    out: list[Memory] = []
    while pending and len(out) < k:
        memory, turns = pending.pop(0)
        if _repeats(turns, covered):
            continue
        if not _is_arc(memory):
            while (wider := _wider(turns, pending[: k - len(out) - 1], covered)) is not None:
                place = memory.score
                memory, turns = pending.pop(wider)
                memory = memory.model_copy(update={"score": max(place, memory.score)})
            covered |= turns
        out.append(memory)
    return out


def _turns(memory: Memory) -> frozenset[Turn]:
    return frozenset((memory.source.session_id, t) for t in memory.source.turns)


def _is_arc(memory: Memory) -> bool:
    return (memory.key or "").startswith(ARC_KEY)


def _repeats(turns: frozenset[Turn], covered: set[Turn]) -> bool:
    """Whether more than half of `turns` are already `covered`."""
    return 2 * len(turns & covered) > len(turns)


def _wider(
    turns: frozenset[Turn], rest: Sequence[tuple[Memory, frozenset[Turn]]], covered: set[Turn]
) -> int | None:
    """Index in `rest` of the first memory, not an arc, that holds all of `turns` and more,
    without mostly repeating what is `covered`."""
    if not turns:
        return None
    for i, (other, theirs) in enumerate(rest):
        if turns < theirs and not _is_arc(other) and not _repeats(theirs, covered):
            return i
    return None
