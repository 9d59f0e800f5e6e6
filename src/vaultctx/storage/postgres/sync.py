"""Moving an index between SQLite and PostgreSQL: `publish` (what changed, or everything) and
`restore` (everything back), vectors as they are: nothing is embedded again.

One indexer writes a database at a time (`IndexerSeat`, held for as long as it runs); any
number of servers read it. A publish is one transaction: readers see the index before or after it,
never half of it, and a killed indexer leaves the database as the last publish left it.

Ids are the SQLite index's own. The database remembers which SQLite index it was published
from (`published_from`); an indexer whose local index is another one restores the database
into it first, so ids stay one sequence however many hosts have indexed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import IndexLocked, IndexUnavailable
from ..db import IndexDatabase
from ..graph import LINK_CHANGES_KEY
from ..indexer import FTS_VALUES, FULLTEXT_KEY, FULLTEXT_OFF, log_unpublished
from ..language import analyse
from ..migrations import CHANGES_LOGGED
from ..vector_models import ANSWERING_KEY
from .postings import SEGMENT_NOTES, Analyser, SegmentRows
from .schema import connect, one_line

if TYPE_CHECKING:
    from psycopg import Connection

    Database = Connection[tuple[Any, ...]]
    """A connection to a team's database (psycopg's, rows as tuples)."""

NOTE_COLUMNS = (
    "id", "path", "title", "mtime_ns", "size", "content_hash", "frontmatter", "problems",
    "indexed_at", "language",
)  # fmt: skip
BLOCK_COLUMNS = (
    "id", "note_id", "ordinal", "title", "heading_path", "heading", "level", "text",
    "start_line", "end_line", "tokens", "block_refs", "embed_hash",
)  # fmt: skip
LINK_COLUMNS = (
    "id", "source_id", "block_ordinal", "target", "kind", "heading", "block_ref", "alias",
    "line", "target_id",
)  # fmt: skip
_COPY_POSTING_LISTS = (
    "COPY posting_lists (term, segment, postings, positions) FROM STDIN (FORMAT BINARY)"
)
# Meta keys that describe one SQLite file, not the index's content.
_LOCAL_META = frozenset(
    {
        "index_id",
        "links_dirty",
        "published_generation",
        FULLTEXT_KEY,
        CHANGES_LOGGED,
        LINK_CHANGES_KEY,
    }  # this index's generations, not the database's
)
# What a note has besides its row, by the column naming the note.
_NOTE_PARTS = (("blocks", "note_id"), ("links", "source_id"), ("tags", "note_id"),
               ("aliases", "note_id"))  # fmt: skip
# The rows a note written again has: (table, columns, the column naming the note).
_NOTE_ROWS = (
    ("notes", NOTE_COLUMNS, "id"),
    ("blocks", BLOCK_COLUMNS, "note_id"),
    ("links", LINK_COLUMNS, "source_id"),
    ("tags", ("note_id", "tag"), "note_id"),
    ("aliases", ("note_id", "alias"), "note_id"),
)
_INDEXING_LOCK = 0x76617578  # held by the one indexer writing the database
# Segments under half full kept before they are merged (each is one more row to read per
# term): a vault has at most 2 * notes / SEGMENT_NOTES + MAX_SMALL_SEGMENTS + 1 segments.
MAX_SMALL_SEGMENTS = 8
_VECTOR_BATCH = 500


@dataclass
class PublishReport:
    """What one publish wrote."""

    notes_written: int = 0
    notes_deleted: int = 0
    blocks: int = 0
    postings: int = 0
    vectors: int = 0
    links_retargeted: int = 0
    accesses: int = 0
    full: bool = False
    elapsed_ms: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.notes_written or self.notes_deleted or self.vectors)


@contextlib.contextmanager
def database_errors(doing: str) -> Iterator[None]:
    """psycopg's errors as the project's `IndexUnavailable`: the database stopped, or
    dropped the connection, while `doing`. Its transaction was rolled back with it, so the
    database holds its last publish and the next run starts from there."""
    try:
        import psycopg
    except ImportError:  # `connect` says so, as IndexUnavailable
        yield
        return
    try:
        yield
    except psycopg.Error as exc:
        raise IndexUnavailable(
            f"the database failed while {doing} (nothing of it was kept; run it again"
            f" once the database is back): {one_line(exc)}"
        ) from exc


class IndexerSeat:
    """The database's one indexer seat: whoever takes it holds it on a connection of its
    own until `release` (or until its process dies, which frees it), so one host indexes
    while every other serves. A server without the seat tries again at its next run, and
    takes over when the indexer is gone."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Database | None = None
        self._held = False

    @database_errors("taking the indexer seat")
    def take(self) -> Database:
        """The connection holding the seat; IndexLocked while another indexer holds it."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn, self._held = connect(self.url), False
        if not self._held:
            (got,) = _one(self._conn, "SELECT pg_try_advisory_lock(%s)", (_INDEXING_LOCK,))
            if not got:
                raise IndexLocked("another vaultctx is indexing into this database")
            self._held = True
        return self._conn

    def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # a broken connection freed the seat already
                self._conn.close()
        self._conn, self._held = None, False


def _one(pg: Database, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
    """The one row of a statement that always has one (an aggregate, a function's value)."""
    row = pg.execute(sql, params).fetchone()
    assert row is not None
    return row


def index_id(db: IndexDatabase) -> str:
    """This SQLite index's identity, made on first use."""
    current = db.get_meta("index_id")
    if current is None:
        current = uuid.uuid4().hex
        with db.transaction() as conn:
            IndexDatabase.set_meta(conn, "index_id", current)
    return current


def published_from(pg: Database) -> str | None:
    return _pg_meta(pg, "published_from")


@database_errors("publishing the index")
def publish(db: IndexDatabase, pg: Database, language: str | None) -> PublishReport:
    """Bring the database to the SQLite index's content in one transaction: the notes whose
    row differs are written again with their blocks, terms, links, tags and aliases; the
    notes gone are deleted; vectors the database lacks are copied; links whose target moved
    are retargeted. `language` is the vault's language setting (the text's analysis).

    After a publish the SQLite index logs what changes (`m009_unpublished_changes`), and the
    next one compares only those notes, links and vectors: its work follows the change, not
    the index's size. Without that log (a first publish, an index read without the database
    since) it compares everything."""
    t0 = time.perf_counter()
    report = PublishReport()
    lite = db.connect()
    source = index_id(db)
    analyser = Analyser(lite)
    with pg.transaction():
        analysis = _pg_meta(pg, "analysis")
        report.full = published_from(pg) != source or analysis != db.get_meta("analysis")
        if report.full:
            # Touches reach the database straight from the servers: they outlive a full
            # publish (say, of a new language setting) for the notes that are still there.
            pg.execute("CREATE TEMP TABLE vx_accesses ON COMMIT DROP AS SELECT * FROM accesses")
            pg.execute(
                "TRUNCATE notes, blocks, posting_lists, segment_notes, dead_notes, term_df,"
                " links, tags, aliases, accesses, meta"
            )
        logged = not report.full and db.get_meta(CHANGES_LOGGED) is not None
        changed, deleted = _changed_notes(lite, pg, logged)
        removed = _block_totals(pg, changed + deleted)
        df = _delete_notes(pg, changed, deleted, language, analyser)
        report.notes_deleted = len(deleted)
        moved = _rebuilt_segments_notes(pg)
        rewritten = set(changed)
        notes = changed + moved
        # Each segment is read and analysed here while the one before is written from a
        # thread: the database's work overlaps this process's.
        with ThreadPoolExecutor(1, thread_name_prefix="vx-publish") as writer:
            written: Future[None] | None = None
            for start in range(0, len(notes), SEGMENT_NOTES):
                batch = _read_batch(
                    lite, notes[start : start + SEGMENT_NOTES], rewritten, language, df, analyser
                )
                if written is not None:
                    written.result()
                written = writer.submit(_write_batch, pg, batch)
                report.blocks += len(batch.rows.get("blocks", ()))
                report.postings += batch.postings.count
            if written is not None:
                written.result()
        report.notes_written = len(changed)
        if report.full:
            pg.execute(
                "INSERT INTO accesses SELECT a.* FROM vx_accesses a"
                " WHERE EXISTS (SELECT 1 FROM notes n WHERE n.id = a.note_id)"
            )
        _update_doc_freqs(pg, df)
        report.links_retargeted = _retarget_links(lite, pg, logged)
        report.vectors = _copy_vectors(lite, pg, logged)
        if _pg_meta(pg, ANSWERING_KEY) != db.get_meta(ANSWERING_KEY):  # a switch of models
            _drop_vectors(lite, pg)
        report.accesses = _copy_accesses(lite, pg)
        bumped = report.changed or report.links_retargeted > 0
        totals = _lexical_totals(pg, changed, removed)
        generation = _copy_meta(lite, pg, source, totals, bump=bumped)
        if report.full:
            pg.execute("ANALYZE notes, blocks, posting_lists, segment_notes, term_df, links")
    with db.transaction() as conn:
        IndexDatabase.set_meta(conn, "published_generation", str(generation))
        log_unpublished(conn, on=True)
    report.elapsed_ms = (time.perf_counter() - t0) * 1000
    return report


def _pg_meta(pg: Database, key: str) -> str | None:
    row = pg.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else None


def _changed_notes(
    lite: sqlite3.Connection, pg: Database, logged: bool
) -> tuple[list[int], list[int]]:
    """Ids of the notes whose row differs between the two (or is only in SQLite), and of
    those only in PostgreSQL; of the notes `logged` as changed since the last publish only,
    when asked."""
    here_sql = there_sql = f"SELECT {', '.join(NOTE_COLUMNS)} FROM notes"
    args: tuple = ()
    if logged:
        here_sql += " WHERE id IN (SELECT id FROM unpublished_notes)"
        there_sql += " WHERE id = ANY(%s)"
        args = ([i for (i,) in lite.execute("SELECT id FROM unpublished_notes")],)
    here = {row[0]: row for row in lite.execute(here_sql)}
    there = {row[0]: tuple(row) for row in pg.execute(there_sql, args)}
    changed = sorted(i for i, row in here.items() if there.get(i) != row)
    deleted = sorted(set(there) - set(here))
    return changed, deleted


def _delete_notes(
    pg: Database, changed: list[int], deleted: list[int], language: str | None, analyser: Analyser
) -> Counter[str]:
    """Clear what the changed notes had (their rows are written again; their accesses
    stay) and delete the notes gone, leaving their postings dead in their segments; what
    this takes off each term's block count (their blocks' terms, analysed again from the
    database's rows, as they were published)."""
    gone = changed + deleted
    df: Counter[str] = Counter()
    if not gone:
        return df
    old = pg.execute(
        "SELECT b.id, b.note_id, b.title, b.heading_path, b.text,"
        " coalesce(%s, nullif(n.language, '')) FROM blocks b JOIN notes n ON n.id = b.note_id"
        " WHERE b.note_id = ANY(%s)",
        (language, gone),
    ).fetchall()
    rows = [
        (block, analyse(title, lang), analyse(heading, lang), analyse(text, lang))
        for block, _, title, heading, text, lang in old
    ]
    df.subtract(analyser.analyse(rows, {row[0]: row[1] for row in old}).holding())
    pg.execute(
        "WITH gone AS (DELETE FROM segment_notes WHERE note_id = ANY(%s) RETURNING *)"
        " INSERT INTO dead_notes (segment, note_id) SELECT segment, note_id FROM gone",
        (gone,),
    )
    pg.execute("DELETE FROM notes WHERE id = ANY(%s)", (deleted,))
    for table, column in _NOTE_PARTS:
        pg.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", (changed,))
    return df


def _rebuilt_segments_notes(pg: Database) -> list[int]:
    """Drop the segments worth rebuilding: those a quarter or more dead, and those under
    half full once there are more than MAX_SMALL_SEGMENTS of them (each publish of a few
    notes makes one). The notes they still held, to be written again into new segments."""
    sizes = pg.execute(
        "SELECT segment, sum(live)::int, sum(dead)::int FROM ("
        " SELECT segment, 1 AS live, 0 AS dead FROM segment_notes"
        " UNION ALL SELECT segment, 0, 1 FROM dead_notes) s GROUP BY segment"
    ).fetchall()
    rebuilt = {segment for segment, live, dead in sizes if dead * 4 >= live + dead and dead}
    small = [s for s, live, _ in sizes if s not in rebuilt and live < SEGMENT_NOTES // 2]
    if len(small) > MAX_SMALL_SEGMENTS:
        rebuilt.update(small)
    if not rebuilt:
        return []
    segments = sorted(rebuilt)
    notes = pg.execute(
        "DELETE FROM segment_notes WHERE segment = ANY(%s) RETURNING note_id", (segments,)
    ).fetchall()
    pg.execute("DELETE FROM posting_lists WHERE segment = ANY(%s)", (segments,))
    pg.execute("DELETE FROM dead_notes WHERE segment = ANY(%s)", (segments,))
    return sorted(note for (note,) in notes)


@dataclass
class _Batch:
    """What one segment writes, read from the SQLite index: its notes' postings, and the
    rows of the notes written again (their blocks carry their token counts)."""

    notes: list[int]
    postings: SegmentRows
    rows: dict[str, list[tuple]]


def _read_batch(
    lite: sqlite3.Connection,
    notes: list[int],
    rewritten: set[int],
    language: str | None,
    df: Counter[str],
    analyser: Analyser,
) -> _Batch:
    """Read and analyse a segment's notes, adding the terms of those `rewritten` to each
    term's block count in `df` (the others' are counted already: their segment moves)."""
    marks = ",".join("?" * len(notes))
    note_of = dict(
        lite.execute(f"SELECT id, note_id FROM blocks WHERE note_id IN ({marks})", notes)
    )
    analysed = analyser.analyse(
        lite.execute(
            f"SELECT {FTS_VALUES} WHERE b.note_id IN ({marks})".replace(":language", "?"),
            (language, language, language, *notes),
        ).fetchall(),
        note_of,
    )
    written = [note for note in notes if note in rewritten]
    rows: dict[str, list[tuple]] = {}
    if written:
        df.update(analysed.holding(written) if len(written) < len(notes) else analysed.holding())
        marks = ",".join("?" * len(written))
        for table, columns, key in _NOTE_ROWS:
            rows[table] = lite.execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({marks})", written
            ).fetchall()
        rows["blocks"] = [(*row, analysed.ntok.get(row[0], 0)) for row in rows["blocks"]]
    return _Batch(notes, analysed, rows)


def _write_batch(pg: Database, batch: _Batch) -> None:
    """Write a batch as a new segment (and its notes' rows)."""
    (segment,) = _one(pg, "SELECT nextval('segment_ids')")
    with pg.cursor() as cur:
        with cur.copy(_COPY_POSTING_LISTS) as copy:
            copy.write(batch.postings.copy_data(segment))
        cur.execute(
            "INSERT INTO segment_notes (note_id, segment) SELECT unnest(%s::bigint[]), %s",
            (batch.notes, segment),
        )
    if not batch.rows:
        return
    pg.execute("CREATE TEMP TABLE IF NOT EXISTS vx_notes (LIKE notes) ON COMMIT DROP")
    pg.execute("DELETE FROM vx_notes")
    _copy(pg, "vx_notes", NOTE_COLUMNS, batch.rows["notes"])
    updates = ", ".join(f"{c} = excluded.{c}" for c in NOTE_COLUMNS[1:])
    pg.execute(f"INSERT INTO notes SELECT * FROM vx_notes ON CONFLICT (id) DO UPDATE SET {updates}")
    for table, columns, _ in _NOTE_ROWS[1:]:
        written = (*columns, "ntok") if table == "blocks" else columns
        _copy(pg, table, written, batch.rows[table])


def _update_doc_freqs(pg: Database, df: Counter[str]) -> None:
    """Each term's block count, moved by what a publish removed and added."""
    moved = {term: delta for term, delta in df.items() if delta}
    if not moved:
        return
    terms = list(moved)
    pg.execute(
        "INSERT INTO term_df (term, df) SELECT * FROM unnest(%s::text[], %s::int[])"
        " ON CONFLICT (term) DO UPDATE SET df = term_df.df + excluded.df",
        (terms, [moved[t] for t in terms]),
    )
    pg.execute("DELETE FROM term_df WHERE df <= 0 AND term = ANY(%s)", (terms,))


def _retarget_links(lite: sqlite3.Connection, pg: Database, logged: bool) -> int:
    """Links of unchanged notes whose target the indexer resolved again (a note added,
    renamed or deleted elsewhere): their target as the SQLite index has it. Of the links
    `logged` as retargeted since the last publish only, when asked."""
    here_sql = there_sql = "SELECT id, target_id FROM links"
    if logged:
        here_sql += " WHERE id IN (SELECT id FROM unpublished_links)"
        there_sql += " WHERE id = ANY(%s)"
    here = dict(lite.execute(here_sql))
    there: dict[int, int | None] = dict(
        pg.execute(there_sql, (list(here),) if logged else ()).fetchall()
    )
    moved = [
        (target, link) for link, target in here.items() if link in there and there[link] != target
    ]
    if moved:
        with pg.cursor() as cur:
            cur.executemany("UPDATE links SET target_id = %s WHERE id = %s", moved)
    return len(moved)


def _copy_vectors(lite: sqlite3.Connection, pg: Database, logged: bool) -> int:
    """The vectors the database lacks, as they are (keyed by model and content hash): of
    those `logged` as added since the last publish only, when asked."""
    if logged:
        here = lite.execute("SELECT model, hash FROM unpublished_vectors").fetchall()
        there = set(
            pg.execute(
                "SELECT model, hash FROM embeddings WHERE (model, hash) IN"
                " (SELECT * FROM unnest(%s::text[], %s::text[]))",
                ([model for model, _ in here], [digest for _, digest in here]),
            ).fetchall()
        )
    else:
        here = lite.execute("SELECT model, hash FROM embeddings").fetchall()
        there = set(pg.execute("SELECT model, hash FROM embeddings").fetchall())
    missing: dict[str, list[str]] = {}
    for model, digest in here:
        if (model, digest) not in there:
            missing.setdefault(model, []).append(digest)
    written = 0
    for model, digests in missing.items():
        for start in range(0, len(digests), _VECTOR_BATCH):
            chunk = digests[start : start + _VECTOR_BATCH]
            rows = lite.execute(
                "SELECT model, hash, vector FROM embeddings WHERE model = ?"
                f" AND hash IN ({','.join('?' * len(chunk))})",
                (model, *chunk),
            ).fetchall()
            with (
                pg.cursor() as cur,
                cur.copy(
                    "COPY embeddings (model, hash, vector) FROM STDIN (FORMAT BINARY)"
                ) as copy,
            ):
                copy.set_types(["text", "text", "vector"])
                for name, digest, blob in rows:
                    copy.write_row((name, digest, np.frombuffer(blob, dtype=np.float32)))
            written += len(rows)
    return written


def _drop_vectors(lite: sqlite3.Connection, pg: Database) -> None:
    """The vectors of models the SQLite index no longer holds, as its switch dropped them
    (`vector_models`): in the same transaction as the meta that names the new model."""
    models = [model for (model,) in lite.execute("SELECT DISTINCT model FROM embeddings")]
    pg.execute("DELETE FROM embeddings WHERE NOT (model = ANY(%s))", (models,))


def _copy_accesses(lite: sqlite3.Connection, pg: Database) -> int:
    """Touches recorded in the SQLite index since the database's last one."""
    (last,) = _one(pg, "SELECT coalesce(max(at), 0) FROM accesses")
    rows = lite.execute(
        "SELECT note_id, at, kind FROM accesses WHERE at > ? ORDER BY at", (last,)
    ).fetchall()
    _copy(pg, "accesses", ("note_id", "at", "kind"), rows)
    return len(rows)


def _block_totals(pg: Database, notes: list[int] | None = None) -> tuple[int, int]:
    """The blocks and their full-text tokens in the database: all, or of `notes`."""
    if notes is None:
        count, ntok = _one(pg, "SELECT count(*), coalesce(sum(ntok), 0) FROM blocks")
        return count, ntok
    if not notes:
        return 0, 0
    count, ntok = _one(
        pg, "SELECT count(*), coalesce(sum(ntok), 0) FROM blocks WHERE note_id = ANY(%s)", (notes,)
    )
    return count, ntok


def _lexical_totals(pg: Database, written: list[int], removed: tuple[int, int]) -> tuple[int, int]:
    """bm25's totals (blocks, tokens) once the notes `written` are in and the blocks
    `removed` are gone: the last publish's moved by the difference, not counted again over
    every block (a quarter of a second at a million)."""
    last = _pg_meta(pg, "lexical_rows"), _pg_meta(pg, "lexical_tokens")
    if last[0] is None or last[1] is None:  # after a full publish's TRUNCATE, or never made
        return _block_totals(pg)
    added = _block_totals(pg, written)
    return (
        int(last[0]) + added[0] - removed[0],
        int(last[1]) + added[1] - removed[1],
    )


def _copy_meta(
    lite: sqlite3.Connection, pg: Database, source: str, totals: tuple[int, int], *, bump: bool
) -> int:
    """The SQLite index's meta, the database's own generation (moved on when anything
    changed, and returned), where it was published from, and bm25's `totals`."""
    values = {k: v for k, v in lite.execute("SELECT key, value FROM meta") if k not in _LOCAL_META}
    generation = int(_pg_meta(pg, "generation") or 0)
    values["generation"] = str(generation + 1 if bump else generation)
    values["published_from"] = source
    values["lexical_rows"], values["lexical_tokens"] = str(totals[0]), str(totals[1])
    with pg.cursor() as cur:
        cur.executemany(
            "INSERT INTO meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            sorted(values.items()),
        )
    return int(values["generation"])


def _copy(pg: Database, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return
    with pg.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


@database_errors("catching up with the database's index")
def catch_up(db: IndexDatabase, pg: Database) -> bool:
    """Before indexing: when the database holds an index this SQLite index did not publish
    last (another host indexed since, or never this one), restore it here first, so the
    indexer goes on from the database's content and ids. True when it did."""
    generation = _pg_meta(pg, "generation")
    if generation is None:
        return False
    if published_from(pg) == db.get_meta("index_id") and generation == db.get_meta(
        "published_generation"
    ):
        return False
    restore(pg, db)
    return True


@database_errors("restoring the index from the database")
def restore(pg: Database, db: IndexDatabase) -> int:
    """Replace the SQLite index's content with the database's, vectors included, its
    full-text table left empty (made when the index is read here: `Vault`). The SQLite
    index then counts as the one the database was published from. Notes restored."""
    tables = (
        ("notes", NOTE_COLUMNS),
        ("blocks", BLOCK_COLUMNS),
        ("links", LINK_COLUMNS),
        ("tags", ("note_id", "tag")),
        ("aliases", ("note_id", "alias")),
        ("accesses", ("note_id", "at", "kind")),
    )
    with db.transaction() as lite:
        lite.execute("DELETE FROM meta")  # first: what follows is not a change to log
        lite.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('delete-all')")
        for table in ("accesses", "aliases", "tags", "links", "blocks", "notes", "embeddings"):
            lite.execute(f"DELETE FROM {table}")
        for table, columns in tables:
            with pg.cursor() as cur:
                cur.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1")
                marks = ",".join("?" * len(columns))
                while rows := cur.fetchmany(5000):
                    lite.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
                    )
        with pg.cursor(binary=True) as cur:
            cur.execute("SELECT model, hash, vector FROM embeddings")
            while rows := cur.fetchmany(5000):
                lite.executemany(
                    "INSERT INTO embeddings (model, hash, vector) VALUES (?, ?, ?)",
                    [(m, h, v.to_numpy().astype(np.float32).tobytes()) for m, h, v in rows],
                )
        meta: dict[str, str] = dict(pg.execute("SELECT key, value FROM meta").fetchall())
        IndexDatabase.set_meta(lite, FULLTEXT_KEY, FULLTEXT_OFF)
        for key, value in meta.items():
            if key not in ("published_from", "lexical_rows", "lexical_tokens"):
                IndexDatabase.set_meta(lite, key, value)
        IndexDatabase.set_meta(lite, "index_id", meta.get("published_from") or uuid.uuid4().hex)
        IndexDatabase.set_meta(lite, "published_generation", meta.get("generation", "0"))
        log_unpublished(lite, on=True)  # it holds what the database does
        (count,) = lite.execute("SELECT count(*) FROM notes").fetchone()
    return int(count)
