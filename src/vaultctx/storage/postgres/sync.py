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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import IndexLocked
from ..db import IndexDatabase
from ..indexer import FTS_VALUES
from ..lexical import FTS_TOKENIZER
from .schema import POSITION_STRIDE, POSTING_KEY_INCLUDES, connect

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
POSTING_COLUMNS = (
    "term", "block_id", "tf_title", "tf_heading", "tf_text", "positions", "ntok", "note_id",
)  # fmt: skip
_COPY_POSTINGS = f"COPY postings ({', '.join(POSTING_COLUMNS)}) FROM STDIN"
# Meta keys that describe one SQLite file, not the index's content.
_LOCAL_META = frozenset({"index_id", "links_dirty", "published_generation"})
# On a full publish the postings' key and index are built once, after the copy.
_DROP_POSTING_INDEXES = (
    "ALTER TABLE postings DROP CONSTRAINT postings_pkey; DROP INDEX postings_block"
)
_CREATE_POSTING_INDEXES = (
    f"ALTER TABLE postings ADD PRIMARY KEY (term, block_id) INCLUDE ({POSTING_KEY_INCLUDES});"
    " CREATE INDEX postings_block ON postings (block_id)"
)
# What a note has besides its row, by the column naming the note.
_NOTE_PARTS = (("blocks", "note_id"), ("links", "source_id"), ("tags", "note_id"),
               ("aliases", "note_id"))  # fmt: skip
_INDEXING_LOCK = 0x76617578  # held by the one indexer writing the database
_PUBLISH_BATCH = 500  # notes analysed and copied at a time
_COPY_LINES = 20_000  # postings sent to COPY at a time
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


class IndexerSeat:
    """The database's one indexer seat: whoever takes it holds it on a connection of its
    own until `release` (or until its process dies, which frees it), so one host indexes
    while every other serves. A server without the seat tries again at its next run, and
    takes over when the indexer is gone."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._held = False

    def take(self) -> Any:
        """The connection holding the seat; IndexLocked while another indexer holds it."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn, self._held = connect(self.url), False
        if not self._held:
            (got,) = self._conn.execute(
                "SELECT pg_try_advisory_lock(%s)", (_INDEXING_LOCK,)
            ).fetchone()
            if not got:
                raise IndexLocked("another vaultctx is indexing into this database")
            self._held = True
        return self._conn

    def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # a broken connection freed the seat already
                self._conn.close()
        self._conn, self._held = None, False


def index_id(db: IndexDatabase) -> str:
    """This SQLite index's identity, made on first use."""
    current = db.get_meta("index_id")
    if current is None:
        current = uuid.uuid4().hex
        with db.transaction() as conn:
            IndexDatabase.set_meta(conn, "index_id", current)
    return current


def published_from(pg: Any) -> str | None:
    return _pg_meta(pg, "published_from")


def publish(db: IndexDatabase, pg: Any, language: str | None) -> PublishReport:
    """Bring the database to the SQLite index's content in one transaction: the notes whose
    row differs are written again with their blocks, terms, links, tags and aliases; the
    notes gone are deleted; vectors the database lacks are copied; links whose target moved
    are retargeted. `language` is the vault's language setting (the text's analysis)."""
    t0 = time.perf_counter()
    report = PublishReport()
    lite = db.connect()
    source = index_id(db)
    with pg.transaction():
        analysis = _pg_meta(pg, "analysis")
        report.full = published_from(pg) != source or analysis != db.get_meta("analysis")
        if report.full:
            # Touches reach the database straight from the servers: they outlive a full
            # publish (say, of a new language setting) for the notes that are still there.
            pg.execute("CREATE TEMP TABLE vx_accesses ON COMMIT DROP AS SELECT * FROM accesses")
            pg.execute(
                "TRUNCATE notes, blocks, postings, term_df, links, tags, aliases, accesses, meta"
            )
            pg.execute(_DROP_POSTING_INDEXES)  # built once at the end: faster than kept
        changed, deleted = _changed_notes(lite, pg)
        df = _delete_notes(pg, changed, deleted)
        report.notes_deleted = len(deleted)
        for start in range(0, len(changed), _PUBLISH_BATCH):
            batch = changed[start : start + _PUBLISH_BATCH]
            blocks, postings = _copy_notes(lite, pg, batch, language, df)
            report.blocks += blocks
            report.postings += postings
        report.notes_written = len(changed)
        if report.full:
            pg.execute(_CREATE_POSTING_INDEXES)
            pg.execute(
                "INSERT INTO accesses SELECT a.* FROM vx_accesses a"
                " WHERE EXISTS (SELECT 1 FROM notes n WHERE n.id = a.note_id)"
            )
        _update_doc_freqs(pg, df)
        report.links_retargeted = _retarget_links(lite, pg)
        report.vectors = _copy_vectors(lite, pg)
        report.accesses = _copy_accesses(lite, pg)
        moved = report.changed or report.links_retargeted > 0
        generation = _copy_meta(lite, pg, source, bump=moved)
        if report.full:
            pg.execute("ANALYZE notes, blocks, postings, term_df, links")
    if report.notes_written or report.notes_deleted:
        # Marks the rewritten pages all-visible, so bm25's scans of the postings' key stay
        # index-only (until then each row's page is visited; autovacuum would come later).
        pg.execute("VACUUM postings")
    with db.transaction() as conn:
        IndexDatabase.set_meta(conn, "published_generation", str(generation))
    report.elapsed_ms = (time.perf_counter() - t0) * 1000
    return report


def _pg_meta(pg: Any, key: str) -> str | None:
    row = pg.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else None


def _changed_notes(lite: sqlite3.Connection, pg: Any) -> tuple[list[int], list[int]]:
    """Ids of the notes whose row differs between the two (or is only in SQLite), and of
    those only in PostgreSQL."""
    columns = ", ".join(NOTE_COLUMNS)
    here = {row[0]: row for row in lite.execute(f"SELECT {columns} FROM notes")}
    there = {row[0]: tuple(row) for row in pg.execute(f"SELECT {columns} FROM notes")}
    changed = sorted(i for i, row in here.items() if there.get(i) != row)
    deleted = sorted(set(there) - set(here))
    return changed, deleted


def _delete_notes(pg: Any, changed: list[int], deleted: list[int]) -> Counter[str]:
    """Clear what the changed notes had (their rows are written again; their accesses
    stay) and delete the notes gone; what this takes off each term's block count."""
    gone = changed + deleted
    df: Counter[str] = Counter()
    if not gone:
        return df
    removed = pg.execute(
        "DELETE FROM postings WHERE block_id IN (SELECT id FROM blocks WHERE note_id = ANY(%s))"
        " RETURNING term",
        (gone,),
    )
    df.subtract(term for (term,) in removed)
    pg.execute("DELETE FROM notes WHERE id = ANY(%s)", (deleted,))
    for table, column in _NOTE_PARTS:
        pg.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", (changed,))
    return df


def _copy_notes(
    lite: sqlite3.Connection, pg: Any, notes: Sequence[int], language: str | None, df: Counter[str]
) -> tuple[int, int]:
    """Write these notes with their blocks, terms, links, tags and aliases, adding to each
    term's block count in `df`; (blocks, postings) written."""
    marks = ",".join("?" * len(notes))
    note_rows = lite.execute(
        f"SELECT {', '.join(NOTE_COLUMNS)} FROM notes WHERE id IN ({marks})", notes
    ).fetchall()
    pg.execute("CREATE TEMP TABLE IF NOT EXISTS vx_notes (LIKE notes) ON COMMIT DROP")
    pg.execute("DELETE FROM vx_notes")
    _copy(pg, "vx_notes", NOTE_COLUMNS, note_rows)
    updates = ", ".join(f"{c} = excluded.{c}" for c in NOTE_COLUMNS[1:])
    pg.execute(f"INSERT INTO notes SELECT * FROM vx_notes ON CONFLICT (id) DO UPDATE SET {updates}")
    note_of = dict(
        lite.execute(f"SELECT id, note_id FROM blocks WHERE note_id IN ({marks})", notes)
    )
    postings, ntok, count = _analyse(lite, notes, language, df, note_of)
    block_rows = [
        (*row, ntok.get(row[0], 0))
        for row in lite.execute(
            f"SELECT {', '.join(BLOCK_COLUMNS)} FROM blocks WHERE note_id IN ({marks})", notes
        )
    ]
    _copy(pg, "blocks", (*BLOCK_COLUMNS, "ntok"), block_rows)
    with pg.cursor() as cur, cur.copy(_COPY_POSTINGS) as copy:
        for chunk in postings:
            copy.write(chunk)
    for table, columns, key in (
        ("links", LINK_COLUMNS, "source_id"),
        ("tags", ("note_id", "tag"), "note_id"),
        ("aliases", ("note_id", "alias"), "note_id"),
    ):
        rows = lite.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {key} IN ({marks})", notes
        ).fetchall()
        _copy(pg, table, columns, rows)
    return len(block_rows), count


def _analyse(
    lite: sqlite3.Connection,
    notes: Sequence[int],
    language: str | None,
    df: Counter[str],
    note_of: dict[int, int],
) -> tuple[list[str], dict[int, int], int]:
    """The notes' blocks as FTS5 indexes them (their rows analysed as the indexer does, in
    a temporary FTS5 table with the index's tokenizer): COPY text with a row per (term,
    block) — its count in each column, its positions, and its block's token count and note
    (`note_of`) — in chunks; each block's token count; and the rows made. Each term's new
    blocks are added to `df`."""
    lite.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_publish USING"
        f" fts5(title, heading_path, text, tokenize='{FTS_TOKENIZER}')"
    )
    lite.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_publish_v"
        " USING fts5vocab(temp, vx_publish, instance)"
    )
    lite.execute("DELETE FROM temp.vx_publish")
    marks = ",".join("?" * len(notes))
    lite.execute(
        "INSERT INTO temp.vx_publish(rowid, title, heading_path, text)"
        f" SELECT {FTS_VALUES} WHERE b.note_id IN ({marks})".replace(":language", "?"),
        (language, language, language, *notes),
    )
    # fts5vocab's instance table comes ordered by term, then block, column and offset: one
    # COPY line per (term, block), written as text here (psycopg's row-by-row adaptation
    # took as long as the server's work); a block's token count is known once every term is
    # read, so each line's end is written last.
    lines: list[tuple[str, int]] = []
    ntok: dict[int, int] = {}
    escaped: dict[str, str] = {}
    key: tuple[str, int] | None = None
    counts = [0, 0, 0]
    positions: list[int] = []
    stride = (0, POSITION_STRIDE, 2 * POSITION_STRIDE)
    columns = {"title": 0, "heading_path": 1, "text": 2}
    made = 0

    def line() -> None:
        term, block = key  # type: ignore[misc]
        text = escaped.get(term)
        if text is None:
            text = escaped[term] = _copy_text(term)
        df[term] += 1
        lines.append(
            (
                f"{text}\t{block}\t{counts[0]}\t{counts[1]}\t{counts[2]}"
                f"\t{{{','.join(map(str, positions))}}}\t",
                block,
            )
        )

    for term, block, column, offset in lite.execute(
        "SELECT term, doc, col, offset FROM temp.vx_publish_v"
    ):
        if key != (term, block):
            if key is not None:
                line()
                made += 1
            key, counts, positions = (term, block), [0, 0, 0], []
        col = columns[column]
        counts[col] += 1
        positions.append(stride[col] + offset)
        ntok[block] = ntok.get(block, 0) + 1
    if key is not None:
        line()
        made += 1
    ends = {block: f"{count}\t{note_of[block]}\n" for block, count in ntok.items()}
    chunks = [
        "".join(start + ends[block] for start, block in lines[at : at + _COPY_LINES])
        for at in range(0, len(lines), _COPY_LINES)
    ]
    lite.execute("DELETE FROM temp.vx_publish")
    return chunks, ntok, made


def _copy_text(value: str) -> str:
    """A value as COPY's text format writes it (terms hold no tab or newline, but may)."""
    if any(c in value for c in "\\\t\n\r"):
        for plain, written in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
            value = value.replace(plain, written)
    return value


def _update_doc_freqs(pg: Any, df: Counter[str]) -> None:
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


def _retarget_links(lite: sqlite3.Connection, pg: Any) -> int:
    """Links of unchanged notes whose target the indexer resolved again (a note added,
    renamed or deleted elsewhere): their target as the SQLite index has it."""
    here = dict(lite.execute("SELECT id, target_id FROM links"))
    there = dict(pg.execute("SELECT id, target_id FROM links").fetchall())
    moved = [
        (target, link) for link, target in here.items() if link in there and there[link] != target
    ]
    if moved:
        with pg.cursor() as cur:
            cur.executemany("UPDATE links SET target_id = %s WHERE id = %s", moved)
    return len(moved)


def _copy_vectors(lite: sqlite3.Connection, pg: Any) -> int:
    """The vectors the database lacks, as they are (keyed by model and content hash)."""
    there = set(pg.execute("SELECT model, hash FROM embeddings").fetchall())
    missing: dict[str, list[str]] = {}
    for model, digest in lite.execute("SELECT model, hash FROM embeddings"):
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


def _copy_accesses(lite: sqlite3.Connection, pg: Any) -> int:
    """Touches recorded in the SQLite index since the database's last one."""
    (last,) = pg.execute("SELECT coalesce(max(at), 0) FROM accesses").fetchone()
    rows = lite.execute(
        "SELECT note_id, at, kind FROM accesses WHERE at > ? ORDER BY at", (last,)
    ).fetchall()
    _copy(pg, "accesses", ("note_id", "at", "kind"), rows)
    return len(rows)


def _copy_meta(lite: sqlite3.Connection, pg: Any, source: str, *, bump: bool) -> int:
    """The SQLite index's meta, the database's own generation (moved on when anything
    changed, and returned), where it was published from, and bm25's totals."""
    values = {k: v for k, v in lite.execute("SELECT key, value FROM meta") if k not in _LOCAL_META}
    generation = int(_pg_meta(pg, "generation") or 0)
    values["generation"] = str(generation + 1 if bump else generation)
    values["published_from"] = source
    rows, tokens = pg.execute("SELECT count(*), coalesce(sum(ntok), 0) FROM blocks").fetchone()
    values["lexical_rows"], values["lexical_tokens"] = str(rows), str(tokens)
    with pg.cursor() as cur:
        cur.executemany(
            "INSERT INTO meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            sorted(values.items()),
        )
    return int(values["generation"])


def _copy(pg: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if not rows:
        return
    with pg.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def catch_up(db: IndexDatabase, pg: Any, language: str | None) -> bool:
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
    restore(pg, db, language)
    return True


def restore(pg: Any, db: IndexDatabase, language: str | None) -> int:
    """Replace the SQLite index's content with the database's, vectors included; the
    full-text index is rebuilt from the blocks as the indexer builds it (`language`: the
    vault's language setting). The SQLite index then counts as the one the database was
    published from. Notes restored."""
    tables = (
        ("notes", NOTE_COLUMNS),
        ("blocks", BLOCK_COLUMNS),
        ("links", LINK_COLUMNS),
        ("tags", ("note_id", "tag")),
        ("aliases", ("note_id", "alias")),
        ("accesses", ("note_id", "at", "kind")),
    )
    with db.transaction() as lite:
        lite.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('delete-all')")
        for table in ("accesses", "aliases", "tags", "links", "blocks", "notes", "embeddings"):
            lite.execute(f"DELETE FROM {table}")
        lite.execute("DELETE FROM meta")
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
        meta = dict(pg.execute("SELECT key, value FROM meta").fetchall())
        lite.execute(
            f"INSERT INTO blocks_fts(rowid, title, heading_path, text) SELECT {FTS_VALUES}".replace(
                ":language", "?"
            ),
            (language, language, language),
        )
        for key, value in meta.items():
            if key not in ("published_from", "lexical_rows", "lexical_tokens"):
                IndexDatabase.set_meta(lite, key, value)
        IndexDatabase.set_meta(lite, "index_id", meta.get("published_from") or uuid.uuid4().hex)
        IndexDatabase.set_meta(lite, "published_generation", meta.get("generation", "0"))
        (count,) = lite.execute("SELECT count(*) FROM notes").fetchone()
    return int(count)
