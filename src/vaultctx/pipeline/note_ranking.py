"""Note ranking: most questions ask "which note", so evidence is weighed per note. Where to
change how notes are ranked: the formula is here, and so is the table of every knob (below).

Retrievers find blocks (lexical, vector) or notes (the context's links). Each block
list becomes a note list at each note's best block — a note gets no credit for its length
or for how many of its blocks match — and the note lists are fused by a weighted mean of
their scores, each scaled by its list's best (`fuse_scores`). A best block is still the best
of many tries in a long note: its cosine is discounted for that (`length_corrected`), so a
reference page that mentions everything does not outrank the short note about the question.
Scores, not ranks: rank fusion makes the first and the twentieth hit almost equal (1/61
against 1/80), so a lift for context would drown real differences in how well notes match;
scaled scores keep them.

A long note whose best passage links to a shorter note that matches nearly as well is
pointing at the answer, not giving it: a settings reference, an overview or a glossary names a
feature in a line and links to the note about it. The two trade places (`follow_pointers`).

What the user has open then lifts the notes it links to, by a share of their own score: a
tie-breaker among notes that match about equally, never a way for a note that does not
match to win. An open note lifts only as far as it matches the question itself: by how far
its best cosine stands above the vault's median note's, as a share of the best note's
(`retrievers.on_topic`); a note opened for something else sits near the median and lifts
nothing. Candidates stay blocks: the best blocks of the best notes, each further block
of a note counting half as much as the one before, so the first candidates span notes.

## Every knob of select and refine

Each entry: `NAME = default  (file)`, then what chose it, on which data. "suite" is
`benchmarks/eval.py --suite` (both BEIR sets in both layouts and every question set; its
macro average decides); "untuned" means no value was measured against another, and the
reason it was set is all there is. Lower-case names are settings: change them in the config
(`vaultctx config weight_lexical 1.5`), never here; a constant is changed in its file.
Memory's knobs are in the same kind of table in `memory/ranking.py`. A test checks that every
entry names a real knob with this default, and that every constant of these files has one.

weight_lexical = 1.0  (config.py)
    untuned: the lexical list's weight in the fused mean
weight_vector = 2.0  (config.py)
    set with score fusion, in a change that took the suite macro 0.7327 → 0.7733; the weight
    alone untuned
weight_graph = 0.75  (config.py)
    suite, with `LENGTH_CORRECTION` 0.3: macro 0.7761 → 0.7810; 1.0 let the context beat
    clear matches (tasks controls 0.875), 0.5 lost tasks_context 0.917 → 0.899. The lift
    is gated by the open note's own match (`retrievers.on_topic`; the square, of 3 powers
    tried): `focus_eval`, a random unrelated note open against none (mean MRR@10 drop over
    the 9 plain sets, the worst) and the context sets' gain (foam / tasks): no gate 0.076
    (worst 0.145) / 0.129 / 0.240; the share of the best note's cosine, 0 at 0.6 of it, with
    the best note never passed 0.006 (fr 0.028) / 0.043 / 0.073; the share of the way from
    the vault's median note to the best, linear 0.010 (fr 0.028) / 0.090 / 0.121, squared
    0.005 (fr 0.027) / 0.087 / 0.116, square root 0.020 / 0.090 / 0.153. With the gate,
    never passing a best note first on both lists adds nothing to the drop and costs foam 0.04
weight_memory = 0.7  (config.py)
    untuned: memories count by rank (`RANK_SCALE`)
rrf_k = 60  (config.py)
    untuned (the usual 60): orders a note's blocks, picks the feedback blocks, fuses
    memory's lists
LEXICAL_DEPTH = 100  (pipeline/note_ranking.py)
    raised from 50 with the move to score fusion (a hundred notes from each side: what
    refine needs and Recall@100 measures); 100 alone untuned
VECTOR_DEPTH = 100  (pipeline/note_ranking.py)
    as `LEXICAL_DEPTH`
NOTE_DEPTH = 100  (pipeline/note_ranking.py)
    as `LEXICAL_DEPTH`
COLUMN_WEIGHTS = (3.0, 2.0, 1.0)  (pipeline/note_ranking.py)
    untuned: a word in a title or heading says more than one in passing
FEEDBACK_DOCS = 3  (pipeline/note_ranking.py)
    feedback as a whole: +0.02 nDCG@10 on Cranfield, nothing lost on the other sets (suite);
    3 untuned
FEEDBACK_WEIGHT = 1.0  (pipeline/note_ranking.py)
    as `FEEDBACK_DOCS`
FEEDBACK_POOL = 1000  (pipeline/note_ranking.py)
    speed: the rows scored again at 100k blocks (`select_bench`); quality untuned
SKETCH_CANDIDATES = 10_000  (pipeline/note_ranking.py)
    recall@10 of the exact scan's top 10, 96 directions: a million synthetic rows
    (`pg_scale`, 100 queries) 3000 → 0.992, 6000 → 1.000, 10000 → 1.000 (@100: 0.954,
    0.994, 0.9996), the pass's time alike (choosing them is most of it); real vectors, the
    best 1% of rows: SciFact 0.995, Cranfield 0.989, the 7 vaults merged 0.988 (2%: 0.998,
    0.998, 0.999). 10,000 keeps select's top 10 notes 0.994 of the scan's at 1M, where 3,000
    (64 directions) kept 0.939
SKETCH_DIMS = 96  (search/vectors.py)
    the best 1% of real rows at 64 directions: SciFact 0.963, Cranfield 0.940, vaults 0.955;
    at 96: 0.995, 0.989, 0.988 (above). At 1M, 96 costs the pass about 4 ms more than 64
    (26.8 against 22.6 ms, two threads)
SKETCH_SAMPLE = 20_000  (search/vectors.py)
    untuned: a 384-dimension PCA of 20,000 rows takes under a second
_CUT_STRIDE = 16  (search/vectors.py)
    untuned: speed only (the same scores are chosen at any stride)
STRAY_QUANTILE = 0.99  (search/vectors.py)
    real vectors: 1.0% of a corpus's own rows pass its fit's 99th percentile, 98.4-100% of
    another corpus's (the 7 vaults' fit: SciFact 0.997, Cranfield 1.000; SciFact's: the
    vaults 0.984, Cranfield 0.988)
STRAY_SHARE = 0.002  (search/vectors.py)
    recall@10 of the best 1% for a new subject's queries, SciFact's rows added to the 7
    vaults' at 0.5 / 1 / 2 / 5 / 10% of the rows, on directions fitted before them: 0.636 /
    0.652 / 0.675 / 0.758 / 0.827, fitted again: 0.851 / 0.919 / 0.955 / 0.978 / 0.988
    (Cranfield's rows: 0.795-0.955 against 0.974-0.998). Untuned below 0.5%: content like
    the fit's (a stray in 100 rows) reaches it only past 20% new rows
ann_min_vectors = 500_000  (config.py)
    speed: below it the exact scan is as fast as the sketch's pass (int8 scan p50 20.8 ms at
    300k rows, `pg_vectors`); 500k untuned
VECTOR_SHARE_OTHER_LANGUAGE = 0.25  (pipeline/note_ranking.py)
    macro MRR@10 of the es/fr/it/nl sets by share: 0 → 0.689, 0.1 → 0.702, 0.25 → 0.711, 0.4
    → 0.706, 1.0 → 0.649
FURTHER_BLOCK_FACTOR = 0.5  (pipeline/note_ranking.py)
    untuned
RANK_SCALE = 10.0  (pipeline/note_ranking.py)
    untuned
PLUGIN_WEIGHT = 1.0  (pipeline/note_ranking.py)
    untuned: the fusion weight of a plug-in retriever registered without one
LENGTH_CORRECTION = 0.3  (pipeline/note_ranking.py)
    suite, with `weight_graph` 0.75: macro 0.7761 → 0.7810; 0.4 cost foam 0.017, 0.2 gains
    less
SPREAD_SAMPLE = 4096  (pipeline/note_ranking.py)
    speed (~15 µs a query); untuned
POINTER_SHARE = 0.8  (pipeline/note_ranking.py)
    suite: every share 0.7–0.9 raises the macro and lowers no set; 0.8: 0.7810 → 0.7895
DEFAULT_MAX_PER_NOTE = 3  (pipeline/select.py)
    untuned
MAX_QUERY_CHARS = 2000  (pipeline/select.py)
    untuned: a limit, not a weight
RELATED_TERMS = 12  (pipeline/select.py)
    untuned (`related_bench` reports, no held-out judgements)
RELATED_TITLE_WEIGHT = 3  (pipeline/select.py)
    untuned
RELATED_HEADING_WEIGHT = 2  (pipeline/select.py)
    untuned
RELATED_CHARS = 20000  (pipeline/select.py)
    untuned
BACKLINK_FACTOR = 0.5  (pipeline/graphwalk.py)
    untuned
ORDER_DECAY = 0.25  (pipeline/graphwalk.py)
    set in the change that took the suite macro 0.7327 → 0.7733; alone untuned
focus_half_life_hours = 24.0  (config.py)
    set with `ORDER_DECAY` (two days → one); alone untuned
EDIT_WINDOW_S = 259200.0  (pipeline/graphwalk.py)
    untuned
EDIT_FACTOR = 0.5  (pipeline/graphwalk.py)
    untuned
MAX_ACCESS_SEEDS = 10  (pipeline/graphwalk.py)
    untuned
MAX_EDIT_SEEDS = 5  (pipeline/graphwalk.py)
    untuned
TIME_BOOST = 1.0  (pipeline/timewindow.py)
    `time_eval` (569 LoCoMo questions over its sessions as daily notes, each naming its
    session's date), Success@5 / MRR@10: words only 0.930 / 0.797, the window as a boost
    0.991 / 0.977, as a hard filter 0.982 / 0.973; 1.0 alone untuned. A boost, not a filter:
    a month without a year or a word like "May" may not mean the notes' time
LINK_KIND_WEIGHTS = {"wiki": 1.0, "markdown": 1.0, "embed": 1.5}  (storage/graph.py)
    untuned: embedding a note is a stronger tie than naming it
LINK_CHANGES_KEPT = 16  (storage/graph.py)
    untuned: a log length, not a weight; a graph held across more index runs than this is
    read whole again
COMMON_TERM_SHARE = 0.05  (search/query.py)
    set with `POSTINGS_BUDGET` when dropped common terms cost held-out Recall@100 (0.283
    against plain RRF's 0.322); alone untuned
POSTINGS_BUDGET = 10000  (search/query.py)
    as `COMMON_TERM_SHARE`; latency: an OR of common terms over 100k blocks took ~85 ms
MAX_TERMS = 16  (search/query.py)
    untuned
DF_CACHE_SIZE = 50000  (search/query.py)
    untuned: a cache size
MIN_PART = 3  (search/query.py)
    untuned
SPLIT_ROWS = 40000  (search/vectors.py)
    speed: two threads past it (100k rows 8.3 ms against 9.5 on one); the threshold untuned
MMR_LAMBDA = 0.8  (pipeline/gate.py)
    untuned; the gate as a whole keeps Cranfield nDCG@10 0.4360 of the fused list's 0.4384
VECTOR_DUPLICATE = 0.95  (pipeline/gate.py)
    untuned
LEXICAL_DUPLICATE = 0.9  (pipeline/gate.py)
    untuned
SHORT_BLOCK_TOKENS = 20  (pipeline/gate.py)
    untuned
LEXICAL_WORDS = 64  (pipeline/gate.py)
    untuned
LEXICAL_DIMENSIONS = 512  (pipeline/gate.py)
    untuned
GATE_POOL = 100  (pipeline/gate.py)
    untuned
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ..search.fusion import Fused, Hit, Provenance

# Deep enough that a hundred notes reach fusion from each side: what refine needs, and what
# Recall@100 measures.
LEXICAL_DEPTH = 100  # blocks
VECTOR_DEPTH = 100  # blocks
NOTE_DEPTH = 100  # notes, by their best block's cosine
# bm25 column weights for (title, heading_path, text): a word in a note's title or a section's
# heading says more about the block than the same word in passing.
COLUMN_WEIGHTS = (3.0, 2.0, 1.0)
# Feedback (`retrievers.feedback`): the query vector moves FEEDBACK_WEIGHT of the way to the
# mean of the FEEDBACK_DOCS blocks both lists rank best, and scores the first pass's best
# FEEDBACK_POOL rows again.
FEEDBACK_DOCS = 3
FEEDBACK_WEIGHT = 1.0
FEEDBACK_POOL = 1000
# Past `ann_min_vectors` the first pass scores the SKETCH_CANDIDATES rows the matrix's sketch
# ranks best (`search.vectors.Sketch`), not every row.
SKETCH_CANDIDATES = 10_000
# The vector list's share of its weight when the query is in a language the embedding model
# does not read well (`embedding_languages`): its neighbours there follow shared names and
# code more than meaning.
VECTOR_SHARE_OTHER_LANGUAGE = 0.25
FURTHER_BLOCK_FACTOR = 0.5  # each further block of a note counts this share of the last
RANK_SCALE = 10.0  # a list without comparable scores: rank r counts 10 / (10 + r - 1)
PLUGIN_WEIGHT = 1.0  # a plug-in retriever's fusion weight unless it is registered with one
# The share of a long note's expected lucky-maximum gain taken back from its best cosine.
LENGTH_CORRECTION = 0.3
SPREAD_SAMPLE = 4096  # rows the spread of a query's cosines is estimated from
# A note a longer note's best passage links to takes its place when its own fused score is at
# least this share of the longer note's.
POINTER_SHARE = 0.8


def note_key(note_id: int) -> str:
    return f"note:{note_id}"


def note_id(key: str) -> int:
    return int(key.split(":", 1)[1])


def roll_up(hits: Sequence[Hit], block_notes: Mapping[str, int]) -> list[Hit]:
    """A block list as a note list: each note at the rank and score of its best block."""
    seen: set[int] = set()
    notes = []
    for hit in hits:
        note = block_notes.get(hit.key)
        if note is not None and note not in seen:
            seen.add(note)
            notes.append(Hit(note_key(note), hit.score))
    return notes


def cosine_spread(scores: np.ndarray) -> float:
    """Standard deviation of a query's cosines over the vault (finite ones; an evenly strided
    sample of at most SPREAD_SAMPLE, which is as good and stays cheap at 100k blocks)."""
    step = max(1, scores.size // SPREAD_SAMPLE)
    sample = scores[::step]
    sample = sample[np.isfinite(sample)]
    return float(sample.std()) if sample.size > 1 else 0.0


def length_corrected(best: np.ndarray, blocks: np.ndarray, spread: float) -> np.ndarray:
    """Each note's best block cosine less LENGTH_CORRECTION of what the best of its `blocks`
    draws gains over one: the maximum of n draws with spread σ exceeds a single draw by about
    σ·sqrt(2 ln n), so a long note would win on length alone. A one-block note is unchanged."""
    gain = spread * np.sqrt(2.0 * np.log(np.maximum(blocks, 1)))
    return (best - LENGTH_CORRECTION * gain).astype(np.float32)


def fuse_scores(
    lists: Mapping[str, Sequence[Hit]],
    weights: Mapping[str, float],
    *,
    known: Mapping[str, Mapping[str, float]] | None = None,
    by_rank: Collection[str] = (),
) -> list[Fused]:
    """Weighted mean over lists of each key's score divided by its list's best score (all
    scores are similarities or bm25: 0 means no match). A key a list did not return scores
    0 there, unless `known[list][key]` gives its score (the vector scan scores every note).
    Lists in `by_rank` (a plug-in retriever whose scores mean something else) count by rank.
    Order is total and deterministic: score, then best rank, then key."""
    active = {name: hits for name, hits in sorted(lists.items()) if hits}  # fixed sum order
    total = sum(weights.get(name, 1.0) for name in active) or 1.0
    scores: dict[str, float] = {}
    sources: dict[str, dict[str, Provenance]] = {}
    for name, hits in active.items():
        weight = weights.get(name, 1.0) / total
        top = max(hits[0].score, 1e-9)
        for rank, hit in enumerate(hits, start=1):
            found = sources.setdefault(hit.key, {})
            if name in found:
                continue
            found[name] = Provenance(rank, float(hit.score))
            value = RANK_SCALE / (RANK_SCALE + rank - 1) if name in by_rank else hit.score / top
            scores[hit.key] = scores.get(hit.key, 0.0) + weight * max(value, 0.0)
    for name, values in sorted((known or {}).items()):
        if name not in active:
            continue
        weight = weights.get(name, 1.0) / total
        top = max(active[name][0].score, 1e-9)
        for key, found in sources.items():
            if name not in found and key in values:
                scores[key] += weight * max(values[key], 0.0) / top
    fused = [Fused(key, scores[key], sources[key]) for key in scores]
    fused.sort(key=lambda f: (-f.score, min(p.rank for p in f.sources.values()), f.key))
    return fused


def best_passages(
    block_lists: Sequence[Sequence[Hit]], owners: Mapping[str, int]
) -> dict[int, int]:
    """Each note's best block id: its first hit in the first list that has one (the lexical
    list first: the block with the query's own words)."""
    best: dict[int, int] = {}
    for hits in block_lists:
        for hit in hits:
            note = owners.get(hit.key)
            if note is not None and note not in best and hit.key.startswith("block:"):
                best[note] = int(hit.key[6:])
    return best


def follow_pointers(
    fused: Sequence[Fused], links: Mapping[str, Collection[str]], blocks: Mapping[str, int]
) -> tuple[list[Fused], list[tuple[str, str]]]:
    """Best first, each note whose best passage `links` to notes ranked below it trades places
    (and scores) with the best of them that is shorter (fewer `blocks`) and scores at least
    POINTER_SHARE of its own. A note moves at most once. Returns the new order and the pairs
    (pointing note, note pointed to) that traded."""
    out = list(fused)
    position = {f.key: i for i, f in enumerate(out)}
    moved: set[str] = set()
    traded: list[tuple[str, str]] = []
    for i, pointing in enumerate(out):
        if pointing.key in moved or not links.get(pointing.key):
            continue
        size = blocks.get(pointing.key, 0)
        below = sorted(
            position[key]
            for key in links[pointing.key]
            if position.get(key, -1) > i
            and key not in moved
            and out[position[key]].score >= POINTER_SHARE * pointing.score
            and blocks.get(key, size) < size
        )
        if not below:
            continue
        j = below[0]
        target = out[j]
        out[i] = Fused(target.key, pointing.score, target.sources)
        out[j] = Fused(pointing.key, target.score, pointing.sources)
        position[target.key], position[pointing.key] = i, j
        moved |= {pointing.key, target.key}
        traded.append((pointing.key, target.key))
    return out, traded


@dataclass(frozen=True)
class RankedNote:
    key: str  # "note:<id>", or a plug-in retriever's own key (a memory)
    score: float
    sources: dict[str, Provenance]
    lift: float = 0.0  # the context's lift, as a share of the fused score
    matched: int = 0  # its rank (from 1) before the lift: by what it matches alone


def lift(fused: Sequence[Fused], nearness: Mapping[str, float], weight: float) -> list[RankedNote]:
    """Each key's fused score raised by `weight` × its nearness to the context (in [0, 1]),
    re-sorted; ties keep the fused order. The context reaching here is already weighed by how
    well each of its notes matches the question (`retrievers.on_topic`)."""
    ranked = []
    for rank, f in enumerate(fused, start=1):
        share = weight * nearness.get(f.key, 0.0)
        ranked.append(RankedNote(f.key, f.score * (1.0 + share), f.sources, share, rank))
    if all(a.score >= b.score for a, b in pairwise(ranked)):  # the sort would keep it as is
        return ranked
    order = {f.key: i for i, f in enumerate(fused)}
    ranked.sort(key=lambda r: (-r.score, order[r.key]))
    return ranked


def block_order(
    notes: Sequence[RankedNote], blocks: Mapping[str, Sequence[str]]
) -> list[tuple[str, float, RankedNote]]:
    """(block key, score, note) for the chosen blocks of each note, best first: a note's
    first block carries its score, each further one FURTHER_BLOCK_FACTOR times the last."""
    out = []
    for position, note in enumerate(notes):
        score = note.score
        for block in blocks.get(note.key, ()):
            out.append((position, block, score, note))
            score *= FURTHER_BLOCK_FACTOR
    out.sort(key=lambda item: (-item[2], item[0]))
    return [(block, score, note) for _, block, score, note in out]
