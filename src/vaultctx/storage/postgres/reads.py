"""`IndexReads` over PostgreSQL: the same answers as the SQLite index's, from tables.

Lexical ranking is FTS5's bm25, computed here from the posting lists `sync.publish` wrote:
for each phrase of the query (a term, a prefix's terms, or a quoted phrase), IDF from the
number of blocks holding it, and its count in each column weighted by that column's weight;
the same constants, the same floor, the same tie-break (lower block id). The query's terms'
lists are read in one statement and scored with numpy; a phrase is matched on their
positions.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import IndexUnavailable
from ..index_reads import (
    PROBLEM_NOTES_SHOWN,
    candidate_fields,
    maps_database_errors,
    problem_notes,
)
from ..lexical import IDF_FLOOR, K1, B, FtsTerms, LexicalQuery
from .postings import (
    DEAD_KEYS,
    PLACE_BITS,
    POSITION_STRIDE,
    Postings,
    read_postings,
    stored_term,
)
from .schema import connect, one_line

# Each share of a score is rounded to a multiple of 2^-40 (under 1e-12 of a score): a sum of
# such numbers (below 2^13) is exact in whatever order it is added.
_SCORE_GRID = float(2**40)
# Query terms' posting lists and, in the same snapshot, the tombstones (a last row).
_POSTING_LISTS = (
    "SELECT term, segment, postings, {positions} FROM posting_lists WHERE term = ANY(%s)"
    " UNION ALL SELECT NULL, NULL, dead.keys, NULL FROM (" + DEAD_KEYS + ") AS dead (keys)"
)


# The blocks with a vector of one model (`%s`), and those vectors.
_VECTORS_OF_BLOCKS = "FROM embeddings e JOIN blocks b ON b.embed_hash = e.hash WHERE e.model = %s"

# `find_note`'s names: what each is compared with.
_NAME_COLUMNS = {"path": "path", "title": "title", "file": "right(path, length(%s))"}


def bm25_part(idf: Any, f: Any, ntok: Any, avgdl: float) -> Any:
    """One phrase's share of a block's score, as FTS5 computes it, on the grid (floats or
    numpy arrays)."""
    return np.rint(idf * f * (K1 + 1) / (f + K1 * (1 - B + B * ntok / avgdl)) * _SCORE_GRID) / (
        _SCORE_GRID
    )


def idf_of(rows: float, holding: int) -> float:
    return max(float(np.log((rows - holding + 0.5) / (holding + 0.5))), IDF_FLOOR)


def _item_hits(
    lists: dict[str, Postings], terms: list[str], weights: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """An item's blocks, each once, with its count (its terms' counts summed: a prefix's
    terms count together in a block, as one phrase of FTS5's), note and token count."""
    found = [lists[term] for term in terms if term in lists]
    if not found:
        return None
    block = np.concatenate([p.block for p in found])
    f = np.concatenate([p.weighted(weights) for p in found])
    note = np.concatenate([p.note for p in found])
    ntok = np.concatenate([p.ntok for p in found])
    if len(found) > 1:
        block, first, inverse = np.unique(block, return_index=True, return_inverse=True)
        f, note, ntok = np.bincount(inverse, weights=f), note[first], ntok[first]
    return block, f, note, ntok


@dataclass(frozen=True)
class _Stats:
    """bm25's statistics as a reader counts them: rows, average length, and the blocks
    (sorted ids) of notes absent for that reader, which no phrase's IDF counts."""

    rows: float
    avgdl: float
    unseen: np.ndarray

    def holding(self, blocks: np.ndarray) -> int:
        """How many of `blocks` (a phrase's) the reader's index holds."""
        if not len(self.unseen):
            return len(blocks)
        return int(len(blocks) - np.isin(blocks, self.unseen, assume_unique=True).sum())


def _kept(note: np.ndarray, allowed: Collection[int] | None, hidden: Collection[int]) -> Any:
    """Which postings' notes the filters keep."""
    keep = ~np.isin(note, np.fromiter(hidden, np.int64, len(hidden)))
    if allowed is not None:
        keep &= np.isin(note, np.fromiter(allowed, np.int64, len(allowed)))
    return keep


@maps_database_errors
class PostgresReads:
    """`IndexReads` over a PostgreSQL database: a connection per calling thread (psycopg
    connections are not shared between threads here), and a local FTS5 tokenizer so query
    terms are the index's own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.errors: tuple[type[Exception], ...] = (psycopg.Error, sqlite3.Error)
        self._operational = psycopg.OperationalError
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        self.connect()  # fails now, with a clear error, when the database cannot be reached

    def connect(self) -> Any:
        """This thread's connection; a new one when the last broke (the server restarted)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = self._local.conn = connect(self.url)
            with self._lock:
                self._connections.append(conn)
        return conn

    def record_access(self, note_id: int, at: float, kind: str) -> None:
        self.connect().execute(
            "INSERT INTO accesses (note_id, at, kind) VALUES (%s, %s, %s)", (note_id, at, kind)
        )

    def clear_accesses(self, hidden: Collection[int] = ()) -> int:
        kept, conn = sorted(hidden), self.connect()
        with conn.transaction():
            (count,) = conn.execute(
                "SELECT count(DISTINCT note_id) FROM accesses WHERE NOT (note_id = ANY(%s))",
                (kept,),
            ).fetchone()
            conn.execute("DELETE FROM accesses WHERE NOT (note_id = ANY(%s))", (kept,))
        return int(count)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    def query(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = (), *, binary: bool = False
    ) -> list[tuple]:
        """Run one statement on this thread's connection: its rows ([] for one without); a
        database down or unreachable is `IndexUnavailable`, a dropped connection is opened
        again once. Every read, and the team's statements, go through here."""
        try:
            return self._run(sql, params, binary)
        except self._operational as exc:
            if not self._local.conn.broken:
                raise IndexUnavailable(f"the index's database failed: {one_line(exc)}") from exc
        try:  # the connection broke (the server restarted, or dropped it): once more, anew
            return self._run(sql, params, binary)
        except self._operational as exc:  # down or unreachable: say so, not a 500
            message = f"the index's database cannot be reached: {one_line(exc)}"
            raise IndexUnavailable(message) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """This thread's connection inside one transaction, committed when the block ends
        without an error; a database that fails is `IndexUnavailable` here too."""
        conn = self.connect()
        try:
            with conn.transaction():
                yield conn
        except self._operational as exc:
            raise IndexUnavailable(f"the index's database failed: {one_line(exc)}") from exc

    def _run(self, sql: str, params: Sequence[Any] | dict[str, Any], binary: bool) -> list[tuple]:
        cursor = self.connect().execute(sql, params, binary=binary)
        return cursor.fetchall() if cursor.description is not None else []

    def _terms(self) -> FtsTerms:
        terms = getattr(self._local, "terms", None)
        if terms is None:
            terms = self._local.terms = FtsTerms(sqlite3.connect(":memory:"))
        return terms

    # --- the index as a whole

    def meta(self, key: str) -> str | None:
        row = self.query("SELECT value FROM meta WHERE key = %s", (key,))
        return row[0][0] if row else None

    def block_count(self) -> int:
        return int(self.query("SELECT count(*) FROM blocks")[0][0])

    def note_ids(self) -> list[int]:
        return [r[0] for r in self.query("SELECT id FROM notes ORDER BY id")]

    def all_note_paths(self) -> list[tuple[int, str]]:
        return self.query("SELECT id, path FROM notes")

    def language_counts(self, hidden: Collection[int] = ()) -> dict[str, int]:
        return dict(
            self.query(
                "SELECT language, count(*) FROM notes WHERE language != ''"
                " AND NOT (id = ANY(%s)) GROUP BY language",
                (sorted(hidden),),
            )
        )

    def notes_matching(
        self,
        modified_after_ns: int | None,
        modified_before_ns: int | None,
        tags: Sequence[str],
    ) -> list[tuple[int, str, str]]:
        clauses: list[str] = []
        params: list[object] = []
        if modified_after_ns is not None:
            clauses.append("mtime_ns >= %s")
            params.append(modified_after_ns)
        if modified_before_ns is not None:
            clauses.append("mtime_ns < %s")
            params.append(modified_before_ns)
        for tag in tags:  # a tag also matches its nested tags: 'pests', 'pests/varroa'
            clauses.append(
                "id IN (SELECT note_id FROM tags WHERE tag = %s OR starts_with(tag, %s))"
            )
            params.extend([tag, tag + "/"])
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        return self.query(f"SELECT id, path, frontmatter FROM notes{where}", params)

    # --- lexical

    def stems(self, text: str) -> list[str]:
        return self._terms().stems(text)

    def doc_freqs(self, terms: Sequence[str], hidden: Collection[int] = ()) -> dict[str, int]:
        if not terms:
            return {}
        stored = {stored_term(term): term for term in terms}
        found = self.query("SELECT term, df FROM term_df WHERE term = ANY(%s)", (list(stored),))
        counts = {stored[term]: df for term, df in found}
        if not hidden or not counts:
            return counts
        lists = self._posting_lists(set(counts))
        for term in lists:
            hits = _item_hits(lists, [term], (1.0, 1.0, 1.0))
            if hits is not None:
                counts[term] -= int((~_kept(hits[2], None, hidden)).sum())
        return {term: count for term, count in counts.items() if count > 0}

    def bm25_blocks(
        self,
        query: LexicalQuery,
        weights: Sequence[float],
        limit: int,
        *,
        allowed: Collection[int] | None = None,
        hidden: Collection[int] = (),
        absent: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        if query.match is None or limit <= 0 or allowed == set():
            return []
        items = [[term] for term in query.terms] + [self._prefix_terms(p) for p in query.prefixes]
        phrases = [self.stems(p) for p in query.phrases]
        totals = dict(
            self.query(
                "SELECT key, value FROM meta WHERE key IN ('lexical_rows', 'lexical_tokens')"
            )
        )
        rows = float(totals.get("lexical_rows") or 0)
        tokens = float(totals.get("lexical_tokens") or 0)
        unseen = np.empty(0, np.int64)
        if absent:  # the statistics of an index without the absent notes' blocks
            found = self.query(
                "SELECT id, ntok FROM blocks WHERE note_id = ANY(%s)", (sorted(absent),)
            )
            unseen = np.array(sorted(block for block, _ in found), np.int64)
            rows -= len(found)
            tokens -= sum(ntok for _, ntok in found)
        avgdl = tokens / rows if rows else 1.0
        stats = _Stats(rows, avgdl, unseen)
        left_out = set(hidden) | set(absent)
        if not phrases:
            return self._items_bm25(items, weights, limit, allowed, left_out, stats)
        return self._phrases_bm25(items, phrases, weights, limit, allowed, left_out, stats)

    def _prefix_terms(self, prefix: str) -> list[str]:
        """The index terms a `prefix*` matches (FTS5 stems the prefix as it stems a term)."""
        stems = self.stems(prefix)
        if len(stems) != 1:
            return []
        escaped = stems[0].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        found = self.query("SELECT term FROM term_df WHERE term LIKE %s", (escaped + "%",))
        return [term for (term,) in found]

    def _posting_lists(
        self, terms: Collection[str], *, places: bool = False
    ) -> dict[str, Postings]:
        """The live postings of `terms` (with their places, for phrases), read in one
        statement: every segment's row of each term, and the notes dead in them."""
        if not terms:
            return {}
        stored = {stored_term(term): term for term in terms}
        statement = _POSTING_LISTS.format(positions="positions" if places else "NULL::bytea")
        rows = self.query(statement, (sorted(stored),), binary=True)
        (dead,) = [keys for term, _, keys, _ in rows if term is None]
        return read_postings(
            [(stored[term], *rest) for term, *rest in rows if term is not None], dead
        )

    def _items_bm25(
        self,
        items: list[list[str]],
        weights: Sequence[float],
        limit: int,
        allowed: Collection[int] | None,
        hidden: Collection[int],
        stats: _Stats,
    ) -> list[tuple[int, float]]:
        """Terms and prefixes, OR'ed: each item's blocks scored, and each block's scores
        summed."""
        held = [terms for terms in items if terms]
        lists = self._posting_lists({term for terms in held for term in terms})
        blocks, scores = [], []
        for terms in held:
            hits = _item_hits(lists, terms, weights)
            if hits is None:
                continue
            block, f, note, ntok = hits
            keep = _kept(note, allowed, hidden)
            idf = idf_of(stats.rows, stats.holding(block))
            blocks.append(block[keep])
            scores.append(bm25_part(idf, f[keep], ntok[keep], stats.avgdl))
        if not blocks:
            return []
        block, inverse = np.unique(np.concatenate(blocks), return_inverse=True)
        score = np.bincount(inverse, weights=np.concatenate(scores))
        best = np.lexsort((block, -score))[:limit]
        return list(zip(block[best].tolist(), score[best].tolist(), strict=True))

    def _phrases_bm25(
        self,
        items: list[list[str]],
        phrases: list[list[str]],
        weights: Sequence[float],
        limit: int,
        allowed: Collection[int] | None,
        hidden: Collection[int],
        stats: _Stats,
    ) -> list[tuple[int, float]]:
        """Every phrase required, and one of the terms or prefixes when there are some:
        FTS5's `"a b" AND ("c" OR "d"*)`."""
        counted = [self._phrase_counts(tokens, weights) for tokens in phrases]
        candidates = set.intersection(*(set(c) for c in counted)) if counted else set()
        if not candidates:
            return []
        ids = sorted(candidates)
        found_blocks = self.query("SELECT id, ntok, note_id FROM blocks WHERE id = ANY(%s)", (ids,))
        ntok = {block: count for block, count, _ in found_blocks}
        notes = {block: note for block, _, note in found_blocks}
        idfs = [
            idf_of(stats.rows, stats.holding(np.fromiter(found, np.int64))) for found in counted
        ]
        scores = {
            block: sum(
                bm25_part(idf, found[block], ntok[block], stats.avgdl)
                for idf, found in zip(idfs, counted, strict=True)
            )
            for block in ids
        }
        held = [terms for terms in items if terms]
        if held:
            lists = self._posting_lists({term for terms in held for term in terms})
            matched: set[int] = set()
            for terms in held:
                hits = _item_hits(lists, terms, weights)
                if hits is None:
                    continue
                block, f, _, counts = hits
                among = np.isin(block, ids)
                parts = bm25_part(
                    idf_of(stats.rows, stats.holding(block)), f[among], counts[among], stats.avgdl
                )
                for b, part in zip(block[among].tolist(), parts.tolist(), strict=True):
                    matched.add(b)
                    scores[b] += part
            ids = [block for block in ids if block in matched]
        hidden_set = set(hidden)
        kept = [
            (block, float(scores[block]))
            for block in ids
            if notes[block] not in hidden_set and (allowed is None or notes[block] in allowed)
        ]
        kept.sort(key=lambda pair: (-pair[1], pair[0]))
        return kept[:limit]

    def _phrase_counts(self, tokens: list[str], weights: Sequence[float]) -> dict[int, float]:
        """{block: weighted count of the phrase's occurrences} of the blocks holding it: its
        terms at consecutive positions of one column (each occurrence weighted by its
        column)."""
        if not tokens:
            return {}
        lists = self._posting_lists(set(tokens), places=True)
        if any(token not in lists for token in tokens):
            return {}
        starts = lists[tokens[0]].places
        for k, token in enumerate(tokens[1:], start=1):
            places = lists[token].places
            if starts is None or places is None:
                return {}
            starts = np.intersect1d(starts, places - k, assume_unique=True)
        if starts is None or not len(starts):
            return {}
        column = (starts & ((1 << PLACE_BITS) - 1)) // POSITION_STRIDE
        weight = np.asarray(weights, dtype=np.float64)[np.minimum(column, 2)]
        block, inverse = np.unique(starts >> PLACE_BITS, return_inverse=True)
        counts = np.bincount(inverse, weights=weight)
        return dict(zip(block.tolist(), counts.tolist(), strict=True))

    # --- blocks and notes by id

    def block_notes(self, block_ids: Collection[int]) -> dict[int, int]:
        if not block_ids:
            return {}
        return dict(
            self.query("SELECT id, note_id FROM blocks WHERE id = ANY(%s)", (sorted(block_ids),))
        )

    def block_rows(self, block_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not block_ids:
            return {}
        found = self.query(
            "SELECT b.id, b.note_id, n.path, n.title, b.heading, b.heading_path, b.text,"
            " b.start_line, b.end_line, b.tokens FROM blocks b JOIN notes n ON n.id = b.note_id"
            " WHERE b.id = ANY(%s)",
            (list(block_ids),),
        )
        return {r[0]: candidate_fields(r) for r in found}

    def note_paths(self, note_ids: Sequence[int]) -> dict[int, str]:
        if not note_ids:
            return {}
        return dict(self.query("SELECT id, path FROM notes WHERE id = ANY(%s)", (list(note_ids),)))

    def note_block_counts(self, note_ids: Sequence[int]) -> dict[int, int]:
        if not note_ids:
            return {}
        return dict(
            self.query(
                "SELECT note_id, count(*) FROM blocks WHERE note_id = ANY(%s)"
                " GROUP BY note_id ORDER BY note_id",
                (list(note_ids),),
            )
        )

    def first_blocks(self, note_ids: Sequence[int]) -> dict[int, int]:
        if not note_ids:
            return {}
        return dict(
            self.query(
                "SELECT note_id, min(id) FROM blocks WHERE ordinal = 0 AND note_id = ANY(%s)"
                " GROUP BY note_id ORDER BY note_id",
                (list(note_ids),),
            )
        )

    def note_title_language(self, note_id: int) -> tuple[str, str | None] | None:
        found = self.query(
            "SELECT title, NULLIF(language, '') FROM notes WHERE id = %s", (note_id,)
        )
        return tuple(found[0]) if found else None

    def note_sections(self, note_id: int) -> list[tuple[str, str]]:
        return self.query(
            "SELECT heading_path, text FROM blocks WHERE note_id = %s ORDER BY ordinal", (note_id,)
        )

    def neighbours(self, block_id: int) -> list[tuple[int, int, str, int, int, int]]:
        return self.query(
            "SELECT n.id, n.ordinal - b.ordinal, n.text, n.tokens, n.start_line, n.end_line"
            " FROM blocks b JOIN blocks n ON n.note_id = b.note_id"
            " AND n.ordinal IN (b.ordinal - 1, b.ordinal + 1) WHERE b.id = %s ORDER BY n.ordinal",
            (block_id,),
        )

    # --- the link graph and what the user works on

    def resolved_links(self, sources: Sequence[int] | None = None) -> list[tuple[int, int, str]]:
        sql = (
            "SELECT source_id, target_id, kind FROM links"
            " WHERE target_id IS NOT NULL AND target_id != source_id"
        )
        if sources is None:
            return self.query(f"{sql} ORDER BY id")
        return self.query(f"{sql} AND source_id = ANY(%s) ORDER BY id", (sorted(set(sources)),))

    def passage_links(self, block_ids: Sequence[int]) -> list[tuple[int, int]]:
        if not block_ids:
            return []
        return self.query(
            "SELECT b.id, l.target_id FROM blocks b"
            " JOIN links l ON l.source_id = b.note_id AND l.block_ordinal = b.ordinal"
            " WHERE b.id = ANY(%s) AND l.kind != 'embed'"
            " AND l.target_id IS NOT NULL AND l.target_id != b.note_id",
            (list(block_ids),),
        )

    def recent_accesses(self, limit: int) -> list[tuple[int, float]]:
        return self.query(
            "SELECT note_id, max(at) AS last FROM accesses GROUP BY note_id"
            " ORDER BY last DESC, note_id LIMIT %s",
            (limit,),
        )

    def count_edited_since(self, mtime_ns: int, at_most: int) -> int:
        return int(
            self.query(
                "SELECT count(*) FROM (SELECT 1 FROM notes WHERE mtime_ns >= %s LIMIT %s) e",
                (mtime_ns, at_most),
            )[0][0]
        )

    def edited_since(self, mtime_ns: int, limit: int) -> list[tuple[int, int]]:
        return self.query(
            "SELECT id, mtime_ns FROM notes WHERE mtime_ns >= %s ORDER BY mtime_ns DESC, id"
            " LIMIT %s",
            (mtime_ns, limit),
        )

    # --- notes by name, and what status and the agent's tools show

    def find_note(
        self, by: str, name: str, any_case: bool, *, hidden: Collection[int] = ()
    ) -> tuple[str, int] | None:
        params: tuple[Any, ...]
        if by == "alias":
            sql = "FROM aliases a JOIN notes ON notes.id = a.note_id"
            sql += " WHERE lower(a.alias) = lower(%s)"
            params = (name,)
        else:
            column = _NAME_COLUMNS[by]
            test = f"lower({column}) = lower(%s)" if any_case else f"{column} = %s"
            sql, params = f"FROM notes WHERE {test}", (name, name) if by == "file" else (name,)
        if hidden:
            sql += " AND notes.id != ALL(%s)"
            params = (*params, sorted(hidden))
        found = self.query(
            f"SELECT notes.path, notes.id {sql}"
            ' ORDER BY length(notes.path), notes.path COLLATE "C" LIMIT 1',
            params,
        )
        return (found[0][0], found[0][1]) if found else None

    def has_notes(self) -> bool:
        return bool(self.query("SELECT 1 FROM notes LIMIT 1"))

    def index_counts(
        self, model: str | None, language: str | None, *, hidden: Collection[int] = ()
    ) -> dict[str, Any]:
        gone = {"hidden": sorted(hidden)}  # `x != ALL('{}')` holds for every x

        def shown(column: str) -> str:
            """SQL true for the rows whose note (`column`) is not hidden."""
            return f"{column} != ALL(%(hidden)s::bigint[])"

        target = f"target_id IS NOT NULL AND {shown('target_id')}"
        (counts,) = self.query(
            f"SELECT (SELECT count(*) FROM notes WHERE {shown('id')}),"
            f" (SELECT count(*) FROM blocks WHERE {shown('note_id')}),"
            f" (SELECT count(*) FROM links WHERE {shown('source_id')} AND {target}),"
            f" (SELECT count(*) FROM links WHERE {shown('source_id')} AND NOT ({target})),"
            f" (SELECT count(DISTINCT tag) FROM tags WHERE {shown('note_id')}),"
            f" (SELECT count(*) FROM aliases WHERE {shown('note_id')}),"
            " (SELECT count(*) FROM blocks b JOIN embeddings e"
            f"  ON e.hash = b.embed_hash AND e.model = %(model)s WHERE {shown('b.note_id')}),"
            f" (SELECT count(*) FROM notes WHERE problems != '[]' AND {shown('id')})",
            {**gone, "model": model or ""},
        )
        languages = self.query(
            "SELECT lang, n FROM (SELECT COALESCE(%(setting)s, language, 'unread') AS lang,"
            f" count(*) AS n FROM notes WHERE {shown('id')} GROUP BY 1) counted"
            ' ORDER BY n DESC, lang COLLATE "C"',
            {**gone, "setting": language},
        )
        problems = self.query(
            f"SELECT path, problems FROM notes WHERE problems != '[]' AND {shown('id')}"
            ' ORDER BY path COLLATE "C" LIMIT %(shown)s',
            {**gone, "shown": PROBLEM_NOTES_SHOWN},
        )
        names = ("notes", "blocks", "links", "dangling_links", "tags", "aliases", "vectors",
                 "notes_with_problems")  # fmt: skip
        return {
            **dict(zip(names, map(int, counts), strict=True)),
            "problem_notes": problem_notes(problems),
            "languages": dict(languages),
        }

    def link_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, bool]]]:
        notes = self.query("SELECT path, title FROM notes")
        links = self.query(
            "SELECT s.path, t.path, l.kind, l.heading IS NOT NULL OR l.block_ref IS NOT NULL"
            " FROM links l JOIN notes s ON s.id = l.source_id JOIN notes t ON t.id = l.target_id"
            " WHERE l.source_id != l.target_id ORDER BY l.id"
        )
        return notes, [(s, t, kind, bool(precise)) for s, t, kind, precise in links]

    def notes_under(self, folder: str) -> list[str]:
        found = self.query(
            'SELECT path FROM notes WHERE starts_with(path, %s) ORDER BY path COLLATE "C"',
            (folder,),
        )
        return [path for (path,) in found]

    def note_tags(self) -> list[tuple[int, str]]:
        return self.query("SELECT note_id, tag FROM tags")

    def tagged(self, tag: str) -> list[tuple[str, str]]:
        return self.query(
            "SELECT n.path, n.title FROM tags t JOIN notes n ON n.id = t.note_id"
            ' WHERE t.tag = %s ORDER BY n.path COLLATE "C"',
            (tag,),
        )

    # --- vectors

    def vector_count(self, model: str) -> int:
        return int(
            self.query(
                "SELECT count(*) FROM blocks b JOIN embeddings e"
                " ON e.model = %s AND e.hash = b.embed_hash",
                (model,),
            )[0][0]
        )

    def vector_rows(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str, bytes]]]:
        with self.connect().cursor(binary=True) as cur:
            cur.execute(f"SELECT b.id, b.note_id, e.hash, e.vector {_VECTORS_OF_BLOCKS}", (model,))
            while found := cur.fetchmany(chunk):
                yield [
                    (block, note, digest, _vector_bytes(vector))
                    for block, note, digest, vector in found
                ]

    def vector_keys(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str]]]:
        with self.connect().cursor() as cur:
            cur.execute(f"SELECT b.id, b.note_id, e.hash {_VECTORS_OF_BLOCKS}", (model,))
            while found := cur.fetchmany(chunk):
                yield found

    def vectors_of(self, model: str, hashes: Sequence[str]) -> list[tuple[str, bytes]]:
        found = self.query(
            "SELECT hash, vector FROM embeddings WHERE model = %s AND hash = ANY(%s)",
            (model, list(hashes)),
        )
        return [(digest, _vector_bytes(vector)) for digest, vector in found]


def _vector_bytes(vector: Any) -> bytes:
    """A pgvector value as the float32 bytes `IndexReads` gives (SQLite stores them so)."""
    return vector.to_numpy().astype(np.float32).tobytes()
