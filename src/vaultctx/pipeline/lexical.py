"""Lexical retrieval over blocks: FTS5 bm25 of a query built by `search.query`."""

from __future__ import annotations

import sqlite3

from ..search.fusion import Hit
from ..search.query import LexicalQuery

# bm25 column weights for (title, heading_path, text): a word in a note's title or a section's
# heading says more about the block than the same word in passing.
DEFAULT_COLUMN_WEIGHTS = (3.0, 2.0, 1.0)


def search(
    conn: sqlite3.Connection,
    query: LexicalQuery,
    limit: int,
    *,
    weights: tuple[float, float, float] = DEFAULT_COLUMN_WEIGHTS,
    allowed_table: str | None = None,
    hidden_table: str | None = None,
) -> list[Hit]:
    """Run the built query; `allowed_table` names a temp table of note ids to stay within,
    `hidden_table` one of note ids to leave out."""
    if query.match is None or limit <= 0:
        return []
    where = ["blocks_fts MATCH ?"]
    if allowed_table is not None:
        where.append(f"b.note_id IN (SELECT note_id FROM {allowed_table})")
    if hidden_table is not None:
        where.append(f"b.note_id NOT IN (SELECT note_id FROM {hidden_table})")
    if len(where) == 1:
        sql = (
            "SELECT rowid, bm25(blocks_fts, ?, ?, ?) AS s FROM blocks_fts"
            " WHERE blocks_fts MATCH ? ORDER BY s, rowid LIMIT ?"
        )
    else:
        sql = (
            "SELECT f.rowid, bm25(blocks_fts, ?, ?, ?) AS s FROM blocks_fts f"
            f" JOIN blocks b ON b.id = f.rowid WHERE {' AND '.join(where)}"
            " ORDER BY s, f.rowid LIMIT ?"
        )
    rows = conn.execute(sql, (*weights, query.match, limit)).fetchall()
    return [Hit(f"block:{rowid}", -score) for rowid, score in rows]
