"""What select, related and refine read from an index, on either backend.

Everything above the storage layer reads the index through `IndexReads`: SQLite (the
default, `SqliteReads`) and PostgreSQL (`postgres.PostgresReads`) answer the same questions
with the same answers, so nothing above this layer knows which one runs. Ids are the index's
own (note ids, block ids); rows come back as plain tuples and dicts.
"""

from __future__ import annotations

import functools
import inspect
import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import IndexDatabaseError
from .lexical import AbsentRows, FtsTerms, LexicalQuery, absent_rows, bm25_seen

if TYPE_CHECKING:
    from .db import IndexDatabase

PROBLEM_NOTES_SHOWN = 20  # notes with problems that `status` names; it counts them all
ABSENT_SETS_KEPT = 16  # readers' sets of absent notes whose statistics are kept
_IDS_PER_QUERY = 500  # keys bound in one `IN (...)`, well within SQLite's variable limit
# The blocks with a vector of one model (`?`), and those vectors.
_VECTORS_OF_BLOCKS = "FROM embeddings e JOIN blocks b ON b.embed_hash = e.hash WHERE e.model = ?"


class IndexReads(Protocol):
    """A failed read raises `IndexDatabaseError` (`maps_database_errors`): a retriever that
    reads alone (the lexical run) fails alone on it, never select."""

    # --- the index as a whole
    def meta(self, key: str) -> str | None:
        """A value of the index's meta table (generation, embedding_model, ...)."""

    def block_count(self) -> int: ...

    def note_ids(self) -> list[int]:
        """Every note id, ascending."""

    def all_note_paths(self) -> list[tuple[int, str]]:
        """(id, path) of every note: what a read policy is checked against."""

    def language_counts(self, hidden: Collection[int] = ()) -> dict[str, int]:
        """Notes per detected language (notes with none left out), `hidden` notes left out."""

    def notes_matching(
        self,
        modified_after_ns: int | None,
        modified_before_ns: int | None,
        tags: Sequence[str],
    ) -> list[tuple[int, str, str]]:
        """(id, path, frontmatter JSON) of the notes modified in the window and carrying
        every tag of `tags` (lower case, no '#'; a tag also matches its nested tags)."""

    # --- lexical
    def stems(self, text: str) -> list[str]:
        """The index terms of `text`, one per token, in order (the index's tokenizer)."""

    def doc_freqs(self, terms: Sequence[str], hidden: Collection[int] = ()) -> dict[str, int]:
        """Blocks holding each term (0 when none), the blocks of `hidden` notes left out."""

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
        """(block id, bm25 score, higher is better) of the blocks matching `query`, best
        first, ties to the lower id; `weights` weigh title, heading path and text; only
        blocks of `allowed` notes (None: any) and of no `hidden` note. `absent` notes are
        not there for the reader: out of the results and of bm25's statistics (row count,
        average length, each phrase's IDF), so the scores are an index's without them."""

    # --- blocks and notes by id
    def block_notes(self, block_ids: Collection[int]) -> dict[int, int]:
        """{block id: its note id}."""

    def block_rows(self, block_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """A candidate's fields for each block, keyed by block id."""

    def note_paths(self, note_ids: Sequence[int]) -> dict[int, str]: ...

    def note_block_counts(self, note_ids: Sequence[int]) -> dict[int, int]: ...

    def first_blocks(self, note_ids: Sequence[int]) -> dict[int, int]:
        """{note id: the id of its first block}."""

    def note_title_language(self, note_id: int) -> tuple[str, str | None] | None:
        """The note's title and detected language (None when undetected); None: no note."""

    def note_sections(self, note_id: int) -> list[tuple[str, str]]:
        """(heading path, text) of each of the note's blocks, in order."""

    def neighbours(self, block_id: int) -> list[tuple[int, int, str, int, int, int]]:
        """The blocks just before and after one: (id, ordinal offset, text, tokens,
        start line, end line)."""

    # --- the link graph and what the user works on
    def resolved_links(self, sources: Sequence[int] | None = None) -> list[tuple[int, int, str]]:
        """(source, target, kind) of every link that resolves to another note; with
        `sources`, of the links of those notes only."""

    def passage_links(self, block_ids: Sequence[int]) -> list[tuple[int, int]]:
        """(block id, note id) for each non-embed link in a block to another note."""

    def recent_accesses(self, limit: int) -> list[tuple[int, float]]:
        """(note id, last access time) of the most recently touched notes, latest first."""

    def count_edited_since(self, mtime_ns: int, at_most: int) -> int:
        """How many notes were edited since, counted up to `at_most` (after a sync or an
        import every note may be recent: counting them all cost a select 6 ms at 100k notes,
        for an answer known long before)."""

    def edited_since(self, mtime_ns: int, limit: int) -> list[tuple[int, int]]:
        """(note id, mtime_ns) of the notes edited since, latest first."""

    # --- notes by name, and what status and the agent's tools show
    def find_note(
        self, by: str, name: str, any_case: bool, *, hidden: Collection[int] = ()
    ) -> tuple[str, int] | None:
        """(path, id) of the note whose `by` — "path", "file" (the path's end, e.g.
        "/Note.md"), "title" or "alias" (any case, always) — is `name`, ignoring case with
        `any_case`; of several, the shortest path, then the first; never a `hidden` note."""

    def has_notes(self) -> bool: ...

    def index_counts(
        self, model: str | None, language: str | None, *, hidden: Collection[int] = ()
    ) -> dict[str, Any]:
        """What `status` shows: notes, blocks, links, dangling_links, tags, aliases, vectors
        (of `model`), notes_with_problems and the first `PROBLEM_NOTES_SHOWN` of them by
        path (`problem_notes`: path and problems), and notes per language (`language`: the
        vault's setting, which every note then counts as; 'unread' for a note not read yet).
        The `hidden` notes are not counted, and a link to one counts as dangling."""

    def link_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, bool]]]:
        """The link graph by path: (path, title) of every note, and (source, target, kind,
        to a heading or block?) of every link between two notes."""

    def notes_under(self, folder: str) -> list[str]:
        """Paths of the notes in `folder` (ending with '/') and below, sorted."""

    def tagged(self, tag: str) -> list[tuple[str, str]]:
        """(path, title) of the notes carrying `tag`, by path."""

    def note_tags(self) -> list[tuple[int, str]]:
        """(note id, tag) of every tag of every note."""

    # --- vectors
    def vector_count(self, model: str) -> int:
        """Blocks with a vector of `model`."""

    def vector_rows(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str, bytes]]]:
        """(block id, note id, content hash, float32 vector bytes) of those blocks, `chunk`
        rows at a time, in any order."""

    def vector_keys(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str]]]:
        """The same rows without their vectors: what a matrix already in memory needs to
        follow a new index generation (`vectors_of` then reads only the new content)."""

    def vectors_of(self, model: str, hashes: Sequence[str]) -> list[tuple[str, bytes]]:
        """(content hash, float32 vector bytes) of those of `hashes` the model has a vector
        of."""

    def record_access(self, note_id: int, at: float, kind: str) -> None:
        """The one write at query time: the user opened or touched a note (graph context)."""

    def clear_accesses(self, hidden: Collection[int] = ()) -> int:
        """Forget every open and touch but those of the `hidden` notes (the focus cleared);
        returns how many notes were forgotten."""

    def close(self) -> None:
        """Release the connections it opened itself."""


# What `block_rows` reads of a block (after its id), as the candidate's fields.
BLOCK_FIELDS = (
    "note_id", "path", "title", "heading", "heading_path", "text", "start_line", "end_line",
    "tokens",
)  # fmt: skip


def candidate_fields(row: Sequence[Any]) -> dict[str, Any]:
    """A block's row (its id, then BLOCK_FIELDS) as a candidate's fields."""
    return {"id": f"block:{row[0]}", "kind": "block", "block_id": row[0]} | dict(
        zip(BLOCK_FIELDS, row[1:], strict=True)
    )


Reads = TypeVar("Reads", bound=type)


def maps_database_errors(cls: Reads) -> Reads:
    """`cls`'s public reads, and the iterators they return, raise `IndexDatabaseError` for
    the backend's database errors (the instance's `errors`): the seam where sqlite3's and
    psycopg's errors become the project's."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _mapped(member))
    return cls


def _mapped(read: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(read)
    def mapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = read(self, *args, **kwargs)
        except self.errors as exc:
            raise IndexDatabaseError(str(exc)) from exc
        return _mapped_rows(self.errors, result) if inspect.isgenerator(result) else result

    return mapped


def _mapped_rows(errors: tuple[type[Exception], ...], rows: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from rows
    except errors as exc:
        raise IndexDatabaseError(str(exc)) from exc


# `find_note`'s names: what each is compared with.
_NAME_COLUMNS = {"path": "path", "title": "title", "file": "substr(path, -length(?))"}


@maps_database_errors
class SqliteReads:
    """`IndexReads` over the SQLite index: each call reads on the calling thread's own
    connection (`IndexDatabase.connect`), so any thread may call."""

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)  # what `maps_database_errors` maps

    def __init__(self, db: IndexDatabase) -> None:
        self.db = db
        self._local = threading.local()
        self._absent: dict[frozenset[int], tuple[str | None, AbsentRows]] = {}
        self._absent_lock = threading.Lock()

    def _terms(self) -> FtsTerms:
        """This thread's tokenizer tables, made once per connection."""
        conn = self.db.connect()
        terms = getattr(self._local, "terms", None)
        if terms is None or terms.conn is not conn:
            terms = self._local.terms = FtsTerms(conn)
        return terms

    # --- the index as a whole

    def meta(self, key: str) -> str | None:
        return self.db.get_meta(key)

    def close(self) -> None:
        """Nothing of its own: the connections are the `IndexDatabase`'s, closed with it."""

    def record_access(self, note_id: int, at: float, kind: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO accesses(note_id, at, kind) VALUES (?, ?, ?)", (note_id, at, kind)
            )

    def clear_accesses(self, hidden: Collection[int] = ()) -> int:
        kept = sorted(hidden)
        marks = ",".join("?" * len(kept))
        where = f" WHERE note_id NOT IN ({marks})" if kept else ""
        with self.db.transaction() as conn:
            (count,) = conn.execute(
                f"SELECT count(DISTINCT note_id) FROM accesses{where}", kept
            ).fetchone()
            conn.execute(f"DELETE FROM accesses{where}", kept)
        return int(count)

    def block_count(self) -> int:
        return int(self.db.connect().execute("SELECT count(*) FROM blocks").fetchone()[0])

    def note_ids(self) -> list[int]:
        return [r[0] for r in self.db.connect().execute("SELECT id FROM notes ORDER BY id")]

    def all_note_paths(self) -> list[tuple[int, str]]:
        return self.db.connect().execute("SELECT id, path FROM notes").fetchall()

    def language_counts(self, hidden: Collection[int] = ()) -> dict[str, int]:
        conn = self.db.connect()
        if hidden:
            rows = conn.execute("SELECT id, language FROM notes WHERE language != ''")
            return dict(Counter(language for note, language in rows if note not in hidden))
        return dict(
            conn.execute(
                "SELECT language, count(*) FROM notes WHERE language != '' GROUP BY language"
            ).fetchall()
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
            clauses.append("mtime_ns >= ?")
            params.append(modified_after_ns)
        if modified_before_ns is not None:
            clauses.append("mtime_ns < ?")
            params.append(modified_before_ns)
        for tag in tags:
            # a tag filter also matches nested tags: 'pests' matches 'pests/varroa'
            clauses.append(
                "id IN (SELECT note_id FROM tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\')"
            )
            params.extend(
                [tag, tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"]
            )
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        sql = f"SELECT id, path, frontmatter FROM notes{where}"
        return self.db.connect().execute(sql, params).fetchall()

    # --- lexical

    def stems(self, text: str) -> list[str]:
        return self._terms().stems(text)

    def doc_freqs(self, terms: Sequence[str], hidden: Collection[int] = ()) -> dict[str, int]:
        counts = self._terms().doc_freqs(terms)
        if not hidden or not counts:
            return counts
        table = _note_table(self.db.connect(), "vx_hidden", hidden)
        among = self._terms().doc_freqs_among(
            list(counts), f"SELECT id FROM blocks WHERE note_id IN (SELECT note_id FROM {table})"
        )
        counts = {term: count - among.get(term, 0) for term, count in counts.items()}
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
        conn = self.db.connect()
        where = []
        left_out = set(hidden) | set(absent)
        for table, test in (
            (_note_table(conn, "vx_allowed", allowed), "IN"),
            (_note_table(conn, "vx_hidden", left_out or None), "NOT IN"),
        ):
            if table is not None:
                where.append(f"b.note_id {test} (SELECT note_id FROM {table})")
        return bm25_seen(
            conn,
            "blocks_fts",
            query,
            weights,
            limit,
            (lambda: self._absent_rows(conn, frozenset(absent))) if absent else None,
            join="blocks b ON b.id = f.rowid" if where else None,
            where=where,
        )

    def _absent_rows(self, conn: sqlite3.Connection, absent: frozenset[int]) -> AbsentRows:
        """The absent notes' blocks and tokens, kept per index generation and set of notes
        (a reader's view asks with the same set until the index or the policy changes)."""
        generation = self.meta("generation")
        with self._absent_lock:
            kept = self._absent.get(absent)
        if kept is not None and kept[0] == generation:
            return kept[1]
        table = _note_table(conn, "vx_absent", absent)
        blocks = f"SELECT id FROM blocks WHERE note_id IN (SELECT note_id FROM {table})"
        rows = absent_rows(conn, "blocks_fts", blocks)
        with self._absent_lock:
            if len(self._absent) >= ABSENT_SETS_KEPT:
                self._absent.clear()
            self._absent[absent] = (generation, rows)
        return rows

    # --- blocks and notes by id

    def block_notes(self, block_ids: Collection[int]) -> dict[int, int]:
        ids = sorted(block_ids)
        if not ids:
            return {}
        rows = self.db.connect().execute(
            f"SELECT id, note_id FROM blocks WHERE id IN ({','.join('?' * len(ids))})", ids
        )
        return dict(rows)

    def block_rows(self, block_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        ids = list(block_ids)
        if not ids:
            return {}
        rows = self.db.connect().execute(
            "SELECT b.id, b.note_id, n.path, n.title, b.heading, b.heading_path, b.text,"
            " b.start_line, b.end_line, b.tokens FROM blocks b JOIN notes n ON n.id = b.note_id"
            f" WHERE b.id IN ({','.join('?' * len(ids))})",
            ids,
        )
        return {r[0]: candidate_fields(r) for r in rows}

    def note_paths(self, note_ids: Sequence[int]) -> dict[int, str]:
        if not note_ids:
            return {}
        marks = ",".join("?" * len(note_ids))
        return dict(
            self.db.connect().execute(
                f"SELECT id, path FROM notes WHERE id IN ({marks})", list(note_ids)
            )
        )

    def note_block_counts(self, note_ids: Sequence[int]) -> dict[int, int]:
        if not note_ids:
            return {}
        marks = ",".join("?" * len(note_ids))
        return dict(
            self.db.connect().execute(
                f"SELECT note_id, count(*) FROM blocks WHERE note_id IN ({marks}) GROUP BY note_id",
                list(note_ids),
            )
        )

    def first_blocks(self, note_ids: Sequence[int]) -> dict[int, int]:
        if not note_ids:
            return {}
        rows = self.db.connect().execute(
            "SELECT note_id, min(id) FROM blocks WHERE ordinal = 0 AND note_id IN"
            f" ({','.join('?' * len(note_ids))}) GROUP BY note_id",
            list(note_ids),
        )
        return dict(rows)

    def note_title_language(self, note_id: int) -> tuple[str, str | None] | None:
        return (
            self.db.connect()
            .execute("SELECT title, NULLIF(language, '') FROM notes WHERE id = ?", (note_id,))
            .fetchone()
        )

    def note_sections(self, note_id: int) -> list[tuple[str, str]]:
        return (
            self.db.connect()
            .execute(
                "SELECT heading_path, text FROM blocks WHERE note_id = ? ORDER BY ordinal",
                (note_id,),
            )
            .fetchall()
        )

    def neighbours(self, block_id: int) -> list[tuple[int, int, str, int, int, int]]:
        return (
            self.db.connect()
            .execute(
                "SELECT n.id, n.ordinal - b.ordinal, n.text, n.tokens, n.start_line, n.end_line"
                " FROM blocks b JOIN blocks n ON n.note_id = b.note_id"
                " AND n.ordinal IN (b.ordinal - 1, b.ordinal + 1) WHERE b.id = ?",
                (block_id,),
            )
            .fetchall()
        )

    # --- the link graph and what the user works on

    def resolved_links(self, sources: Sequence[int] | None = None) -> list[tuple[int, int, str]]:
        sql = (
            "SELECT source_id, target_id, kind FROM links"
            " WHERE target_id IS NOT NULL AND target_id != source_id"
        )
        conn = self.db.connect()
        if sources is None:
            return conn.execute(sql).fetchall()
        wanted = sorted(set(sources))
        rows: list[tuple[int, int, str]] = []
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows += conn.execute(f"{sql} AND source_id IN ({marks})", chunk).fetchall()
        return rows

    def passage_links(self, block_ids: Sequence[int]) -> list[tuple[int, int]]:
        if not block_ids:
            return []
        marks = ",".join("?" * len(block_ids))
        return (
            self.db.connect()
            .execute(
                "SELECT b.id, l.target_id FROM blocks b"
                " JOIN links l ON l.source_id = b.note_id AND l.block_ordinal = b.ordinal"
                f" WHERE b.id IN ({marks}) AND l.kind != 'embed'"
                " AND l.target_id IS NOT NULL AND l.target_id != b.note_id",
                list(block_ids),
            )
            .fetchall()
        )

    def recent_accesses(self, limit: int) -> list[tuple[int, float]]:
        return (
            self.db.connect()
            .execute(
                "SELECT note_id, max(at) AS last FROM accesses GROUP BY note_id"
                " ORDER BY last DESC, note_id LIMIT ?",
                (limit,),
            )
            .fetchall()
        )

    def count_edited_since(self, mtime_ns: int, at_most: int) -> int:
        (count,) = (
            self.db.connect()
            .execute(
                "SELECT count(*) FROM (SELECT 1 FROM notes WHERE mtime_ns >= ? LIMIT ?)",
                (mtime_ns, at_most),
            )
            .fetchone()
        )
        return int(count)

    def edited_since(self, mtime_ns: int, limit: int) -> list[tuple[int, int]]:
        return (
            self.db.connect()
            .execute(
                "SELECT id, mtime_ns FROM notes WHERE mtime_ns >= ?"
                " ORDER BY mtime_ns DESC, id LIMIT ?",
                (mtime_ns, limit),
            )
            .fetchall()
        )

    # --- notes by name, and what status and the agent's tools show

    def find_note(
        self, by: str, name: str, any_case: bool, *, hidden: Collection[int] = ()
    ) -> tuple[str, int] | None:
        if by == "alias":
            sql = "FROM aliases a JOIN notes ON notes.id = a.note_id"
            sql += " WHERE lower(a.alias) = lower(?)"
            params: tuple[str, ...] = (name,)
        else:
            column = _NAME_COLUMNS[by]
            test = f"lower({column}) = lower(?)" if any_case else f"{column} = ?"
            sql, params = f"FROM notes WHERE {test}", (name, name) if by == "file" else (name,)
        conn = self.db.connect()
        if table := _note_table(conn, "vx_hidden", hidden or None):
            sql += f" AND notes.id NOT IN (SELECT note_id FROM {table})"
        row = conn.execute(
            f"SELECT notes.path, notes.id {sql} ORDER BY length(notes.path), notes.path",
            params,
        ).fetchone()
        return (row[0], row[1]) if row else None

    def has_notes(self) -> bool:
        return self.db.connect().execute("SELECT 1 FROM notes LIMIT 1").fetchone() is not None

    def index_counts(
        self, model: str | None, language: str | None, *, hidden: Collection[int] = ()
    ) -> dict[str, Any]:
        conn = self.db.connect()
        table = _note_table(conn, "vx_hidden", hidden or None)

        def shown(column: str) -> str:
            """SQL true for the rows whose note (`column`) is not hidden."""
            return "1" if table is None else f"{column} NOT IN (SELECT note_id FROM {table})"

        target_shown = "target_id IS NOT NULL" if table is None else f"({shown('target_id')})"

        def count(sql: str, *args: Any) -> int:
            return int(conn.execute(sql, args).fetchone()[0])

        links = f"FROM links WHERE {shown('source_id')}"
        return {
            "notes": count(f"SELECT count(*) FROM notes WHERE {shown('id')}"),
            "blocks": count(f"SELECT count(*) FROM blocks WHERE {shown('note_id')}"),
            "links": count(f"SELECT count(*) {links} AND target_id IS NOT NULL AND {target_shown}"),
            "dangling_links": count(
                f"SELECT count(*) {links} AND (target_id IS NULL OR NOT {target_shown})"
            ),
            "tags": count(f"SELECT count(DISTINCT tag) FROM tags WHERE {shown('note_id')}"),
            "aliases": count(f"SELECT count(*) FROM aliases WHERE {shown('note_id')}"),
            "vectors": count(
                "SELECT count(*) FROM blocks b JOIN embeddings e"
                f" ON e.hash = b.embed_hash AND e.model = ? WHERE {shown('b.note_id')}",
                model or "",
            ),
            "notes_with_problems": count(
                f"SELECT count(*) FROM notes WHERE problems != '[]' AND {shown('id')}"
            ),
            "problem_notes": problem_notes(
                conn.execute(
                    f"SELECT path, problems FROM notes WHERE problems != '[]' AND {shown('id')}"
                    " ORDER BY path LIMIT ?",
                    (PROBLEM_NOTES_SHOWN,),
                ).fetchall()
            ),
            "languages": dict(
                conn.execute(
                    "SELECT COALESCE(:setting, language, 'unread'), count(*) FROM notes"
                    f" WHERE {shown('id')} GROUP BY 1 ORDER BY 2 DESC, 1",
                    {"setting": language},
                ).fetchall()
            ),
        }

    def link_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, bool]]]:
        conn = self.db.connect()
        notes = conn.execute("SELECT path, title FROM notes").fetchall()
        links = conn.execute(
            "SELECT s.path, t.path, l.kind, l.heading IS NOT NULL OR l.block_ref IS NOT NULL"
            " FROM links l JOIN notes s ON s.id = l.source_id JOIN notes t ON t.id = l.target_id"
            " WHERE l.source_id != l.target_id"
        ).fetchall()
        return notes, [(s, t, kind, bool(precise)) for s, t, kind, precise in links]

    def notes_under(self, folder: str) -> list[str]:
        rows = self.db.connect().execute(
            "SELECT path FROM notes WHERE substr(path, 1, length(?)) = ? ORDER BY path",
            (folder, folder),
        )
        return [path for (path,) in rows]

    def note_tags(self) -> list[tuple[int, str]]:
        return self.db.connect().execute("SELECT note_id, tag FROM tags").fetchall()

    def tagged(self, tag: str) -> list[tuple[str, str]]:
        return (
            self.db.connect()
            .execute(
                "SELECT n.path, n.title FROM tags t JOIN notes n ON n.id = t.note_id"
                " WHERE t.tag = ? ORDER BY n.path",
                (tag,),
            )
            .fetchall()
        )

    # --- vectors

    def vector_count(self, model: str) -> int:
        return int(
            self.db.connect()
            .execute(
                "SELECT count(*) FROM blocks b JOIN embeddings e"
                " ON e.model = ? AND e.hash = b.embed_hash",
                (model,),
            )
            .fetchone()[0]
        )

    def vector_rows(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str, bytes]]]:
        """In the embeddings' own key order: asked for in block order, SQLite sorts every
        vector in a temporary b-tree first (160 MB at 100k blocks, which the allocator then
        keeps)."""
        return self._chunks(
            f"SELECT b.id, b.note_id, e.hash, e.vector {_VECTORS_OF_BLOCKS}", model, chunk
        )

    def vector_keys(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str]]]:
        return self._chunks(f"SELECT b.id, b.note_id, e.hash {_VECTORS_OF_BLOCKS}", model, chunk)

    def vectors_of(self, model: str, hashes: Sequence[str]) -> list[tuple[str, bytes]]:
        conn = self.db.connect()
        found: list[tuple[str, bytes]] = []
        for start in range(0, len(hashes), _IDS_PER_QUERY):
            part = list(hashes[start : start + _IDS_PER_QUERY])
            found += conn.execute(
                "SELECT hash, vector FROM embeddings WHERE model = ?"
                f" AND hash IN ({','.join('?' * len(part))})",
                (model, *part),
            ).fetchall()
        return found

    def _chunks(self, sql: str, model: str, chunk: int) -> Iterator[list[Any]]:
        cursor = self.db.connect().execute(sql, (model,))
        try:
            while rows := cursor.fetchmany(chunk):
                yield rows
        finally:
            cursor.close()


def _note_table(conn: sqlite3.Connection, name: str, notes: Collection[int] | None) -> str | None:
    """`notes` in the connection's temp table `name`, for the lexical SQL to join; None
    without a set."""
    if notes is None:
        return None
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} (note_id INTEGER PRIMARY KEY)")
    conn.execute(f"DELETE FROM temp.{name}")
    conn.executemany(f"INSERT INTO temp.{name}(note_id) VALUES (?)", ((i,) for i in notes))
    return f"temp.{name}"


def problem_notes(rows: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """(path, problems as the index keeps them: a JSON list) rows as `status` names them."""
    return [{"path": path, "problems": json.loads(problems)} for path, problems in rows]
