"""From ranked notes to candidates: the best blocks of the best notes, with provenance.

A note's blocks are shown in the order lexical and vector search rank them (fused by RRF:
both lists are block lists of one query, so ranks compare); a note that only its title or
the context found shows its block nearest the query by embedding, else its first block.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..search.fusion import Hit, rrf_order
from ..search.vectors import VectorMatrix, dot_rows
from .models import Candidate, CandidateKind, Source
from .note_ranking import RankedNote, block_order, note_id, note_key

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads

BLOCK_LISTS = ("lexical", "vector")


def build_candidates(
    reads: IndexReads,
    ranked: Sequence[RankedNote],
    hits: Mapping[str, Sequence[Hit]],
    owners: Mapping[str, int],
    *,
    k: int,
    max_per_note: int,
    kinds: Collection[CandidateKind],
    rrf_k: int,
    matrix: VectorMatrix | None,
    query_vector: np.ndarray | None,
) -> list[Candidate]:
    """The first k candidates: blocks of the ranked notes and plug-in retrievers' own
    candidates (a memory) where their keys rank. `hits` are every retriever's raw hits;
    `owners` the note of each block the block lists hold."""
    payloads: dict[str, Candidate] = {}
    for found in hits.values():
        for hit in found:
            candidate = hit.payload.get("candidate") if hit.payload else None
            if isinstance(candidate, Candidate):
                payloads.setdefault(hit.key, candidate)
    wants_blocks = not kinds or "block" in kinds
    top = [
        r
        for r in ranked
        if (r.key.startswith("note:") and wants_blocks)
        or (r.key in payloads and (not kinds or payloads[r.key].kind in kinds))
    ][:k]
    notes = [note_id(r.key) for r in top if r.key.startswith("note:")]
    block_lists = {name: hits.get(name, ()) for name in BLOCK_LISTS}
    chosen: dict[str, list[str]] = {
        note_key(n): blocks
        for n, blocks in note_blocks(
            reads, notes, block_lists, owners, max_per_note, rrf_k, matrix, query_vector
        ).items()
    }
    for r in top:
        if r.key in payloads:
            chosen[r.key] = [r.key]
    ordered = block_order(top, chosen)[:k]
    rows = reads.block_rows([_id(key) for key, *_ in ordered if key.startswith("block:")])
    block_ranks = {
        name: {hit.key: (rank, hit.score) for rank, hit in enumerate(found, 1)}
        for name, found in block_lists.items()
    }
    out: list[Candidate] = []
    for key, score, note in ordered:
        # Note-level provenance (title, graph, a memory's own list), then the block's own
        # ranks in the block lists, which say more about it than its note's.
        sources = {
            name: Source(rank=p.rank, score=p.score)
            for name, p in note.sources.items()
            if name not in block_ranks
        }
        if key.startswith("block:"):
            row = rows.get(_id(key))
            if row is None:
                continue
            for name, ranks in block_ranks.items():
                if key in ranks:
                    sources[name] = Source(rank=ranks[key][0], score=ranks[key][1])
            out.append(Candidate(**row, score=score, sources=dict(sorted(sources.items()))))
        else:
            out.append(payloads[key].model_copy(update={"score": score, "sources": sources}))
    return out


def note_blocks(
    reads: IndexReads,
    notes: list[int],
    block_lists: Mapping[str, Sequence[Hit]],
    owners: Mapping[str, int],
    per_note: int,
    rrf_k: int,
    matrix: VectorMatrix | None,
    query_vector: np.ndarray | None,
) -> dict[int, list[str]]:
    """The blocks to show for each note, best first (at most `per_note`; 0: no cap)."""
    wanted = set(notes)
    found = rrf_order(block_lists, k=rrf_k)
    chosen: dict[int, list[str]] = {}
    for key in found:
        note = owners.get(key)
        if note in wanted:
            blocks = chosen.setdefault(note, [])
            if not per_note or len(blocks) < per_note:
                blocks.append(key)
    missing = [note for note in notes if note not in chosen]
    if missing and query_vector is not None and matrix is not None:
        rows = matrix.rows_for_notes(np.asarray(sorted(missing), dtype=np.int64))
        if rows.size:
            sims = dot_rows(matrix.matrix[rows], query_vector)
            for row in rows[np.argsort(-sims, kind="stable")].tolist():
                note = int(matrix.note_ids[row])
                chosen.setdefault(note, [f"block:{int(matrix.block_ids[row])}"])
    still = [note for note in missing if note not in chosen]
    if still:
        first = reads.first_blocks(still)
        chosen.update({note: [f"block:{block}"] for note, block in first.items()})
    return chosen


def block_notes(reads: IndexReads, keys: Sequence[str]) -> dict[str, int]:
    """The note of each `block:<id>` key."""
    ids = sorted({_id(key) for key in keys if key.startswith("block:")})
    if not ids:
        return {}
    return {f"block:{block_id}": note for block_id, note in reads.block_notes(ids).items()}


def _id(key: str) -> int:
    return int(key.split(":", 1)[1])
