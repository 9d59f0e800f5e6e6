"""The PostgreSQL schema and its migrations, and connections to it.

The tables mirror the SQLite index's (same ids, same columns), so an index moves between the
two as it is. What FTS5 keeps inside its own files is kept here as tables: each term's
blocks with its counts per column and positions, in segments of notes (`posting_lists`,
`segment_notes`, `dead_notes`; their format is `postings.py`'s), each term's block count
(`term_df`), and each block's token count (`blocks.ntok`); the totals bm25 needs are in
`meta` (`lexical_rows`, `lexical_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import IndexCorrupt, IndexUnavailable


def _m001_index() -> str:
    return """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
        CREATE TABLE notes (
            id bigint PRIMARY KEY,
            path text NOT NULL,
            title text NOT NULL,
            mtime_ns bigint NOT NULL,
            size bigint NOT NULL,
            content_hash text NOT NULL,
            frontmatter text NOT NULL DEFAULT '{}',
            problems text NOT NULL DEFAULT '[]',
            indexed_at double precision NOT NULL,
            language text,
            -- deferred: a publish may move a path from one note to another
            CONSTRAINT notes_path UNIQUE (path) DEFERRABLE INITIALLY DEFERRED
        );
        CREATE INDEX notes_mtime ON notes (mtime_ns);
        CREATE TABLE blocks (
            id bigint PRIMARY KEY,
            note_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
            ordinal integer NOT NULL,
            title text NOT NULL,
            heading_path text NOT NULL,
            heading text NOT NULL,
            level integer NOT NULL,
            text text NOT NULL,
            start_line integer NOT NULL,
            end_line integer NOT NULL,
            tokens integer NOT NULL,
            block_refs text NOT NULL DEFAULT '',
            embed_hash text NOT NULL,
            ntok integer NOT NULL              -- tokens in the full-text row, all columns
        );
        CREATE INDEX blocks_note ON blocks (note_id, ordinal);
        CREATE INDEX blocks_embed_hash ON blocks (embed_hash);
        CREATE TABLE postings (
            term text NOT NULL,
            block_id bigint NOT NULL REFERENCES blocks (id) ON DELETE CASCADE,
            tf_title integer NOT NULL,
            tf_heading integer NOT NULL,
            tf_text integer NOT NULL,
            positions integer[] NOT NULL,      -- column * POSITION_STRIDE + offset
            PRIMARY KEY (term, block_id)
        );
        CREATE INDEX postings_block ON postings (block_id);
        CREATE TABLE term_df (term text PRIMARY KEY, df integer NOT NULL);
        CREATE INDEX term_df_prefix ON term_df (term text_pattern_ops);
        CREATE TABLE embeddings (
            model text NOT NULL,
            hash text NOT NULL,
            vector vector NOT NULL,            -- L2-normalized
            PRIMARY KEY (model, hash)
        );
        CREATE TABLE links (
            id bigint PRIMARY KEY,
            source_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
            block_ordinal integer NOT NULL,
            target text NOT NULL,
            kind text NOT NULL,
            heading text,
            block_ref text,
            alias text,
            line integer NOT NULL,
            target_id bigint REFERENCES notes (id) ON DELETE SET NULL
        );
        CREATE INDEX links_source ON links (source_id);
        CREATE INDEX links_target ON links (target_id);
        CREATE TABLE tags (
            note_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
            tag text NOT NULL,
            PRIMARY KEY (note_id, tag)
        );
        CREATE INDEX tags_tag ON tags (tag);
        CREATE TABLE aliases (
            note_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
            alias text NOT NULL,
            PRIMARY KEY (note_id, alias)
        );
        CREATE INDEX aliases_lower ON aliases (lower(alias));
        CREATE TABLE accesses (
            note_id bigint NOT NULL REFERENCES notes (id) ON DELETE CASCADE,
            at double precision NOT NULL,
            kind text NOT NULL DEFAULT 'touch'
        );
        CREATE INDEX accesses_at ON accesses (at);
    """


def _m002_team() -> str:
    return """
        -- The people a team server answers: a token each (its SHA-256 only), the notes
        -- hidden from them on top of the vault's policy, and when they were let go.
        CREATE TABLE people (
            name text PRIMARY KEY,
            token_sha256 text NOT NULL UNIQUE,
            deny text[] NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        );
        -- Every request a server answered, and who made it.
        CREATE TABLE requests (
            id bigserial PRIMARY KEY,
            at timestamptz NOT NULL DEFAULT now(),
            person text NOT NULL,
            method text NOT NULL,
            path text NOT NULL,
            status integer NOT NULL,
            ms real NOT NULL,
            server text NOT NULL
        );
        CREATE INDEX requests_person_at ON requests (person, at);
    """


def _m003_faster_publish() -> str:
    return """
        -- A link may point to a note copied later in the same publish.
        ALTER TABLE links ALTER CONSTRAINT links_target_id_fkey DEFERRABLE INITIALLY DEFERRED;
        -- Postings go with their blocks by an explicit delete (which also says which terms
        -- lost a block): checking a key for each of millions of rows halved the copy's speed.
        ALTER TABLE postings DROP CONSTRAINT postings_block_id_fkey;
    """


def _m004_memory_books() -> str:
    return """
        -- Memories, shared by every server: each memory file (the vault's, or one person's
        -- account) is a book. A row is one memory (or a conversation's scratchpad note) as
        -- the memory layer keeps it (its columns as JSON: that layer owns them and their
        -- migrations), with its vector as float32 bytes; a hard-deleted memory leaves its
        -- id alone, so every copy forgets it too.
        -- A book's version moves on with every write; a row carries the version that
        -- wrote it, so a server reads only what changed since it last looked.
        CREATE TABLE memory_books (
            name text PRIMARY KEY,
            book_id text NOT NULL,             -- a new one when the book is made anew
            scope text NOT NULL,               -- the workspace tier's scope, the same on all hosts
            version bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE memory_rows (
            book text NOT NULL REFERENCES memory_books (name) ON DELETE CASCADE,
            kind text NOT NULL,                -- memory | scratchpad
            id text NOT NULL,
            version bigint NOT NULL,
            row json NOT NULL,                 -- json, not jsonb: a memory may hold U+0000
            model text,
            vector bytea,
            born bigint NOT NULL,              -- the version that first wrote it
            born_rowid bigint NOT NULL,        -- and its row number in its writer's file
            PRIMARY KEY (book, kind, id)
        );
        CREATE INDEX memory_rows_version ON memory_rows (book, version);
        CREATE TABLE memory_forgotten (
            book text NOT NULL REFERENCES memory_books (name) ON DELETE CASCADE,
            kind text NOT NULL,
            id text NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (book, kind, id)
        );
        CREATE INDEX memory_forgotten_version ON memory_forgotten (book, version);
    """


def _m005_sessions() -> str:
    return """
        -- Agent sessions, so that any server resumes one another started: each session's
        -- rows (header, messages, tool calls and results, traces) in the order appended.
        CREATE TABLE session_rows (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL,
            row json NOT NULL
        );
        CREATE INDEX session_rows_session ON session_rows (session_id, seq);
    """


def _m006_postings_carry_their_block() -> str:
    return """
        -- bm25 reads nothing but the postings' key: each row carries its block's token count
        -- and note, and the key includes them with the counts, so scoring is an index-only
        -- scan that visits neither blocks nor the rows' positions (6x faster at 1M blocks).
        -- (The indexes go first and come back after: updating them row by row took most of
        -- the time.)
        ALTER TABLE postings DROP CONSTRAINT postings_pkey;
        DROP INDEX postings_block;
        ALTER TABLE postings ADD COLUMN ntok integer NOT NULL DEFAULT 0,
                             ADD COLUMN note_id bigint NOT NULL DEFAULT 0;
        UPDATE postings p SET ntok = b.ntok, note_id = b.note_id
            FROM blocks b WHERE b.id = p.block_id;
        ALTER TABLE postings ADD PRIMARY KEY (term, block_id)
            INCLUDE (tf_title, tf_heading, tf_text, ntok, note_id);
        CREATE INDEX postings_block ON postings (block_id);
    """


def _m007_requests_by_arrival() -> str:
    return """
        -- The request log reads newest first by arrival (a request is written once answered).
        CREATE INDEX requests_at ON requests (at);
    """


def _m008_no_hnsw() -> str:
    return """
        -- Select's first pass over a large matrix is a sketch in each server's memory now:
        -- the HNSW indexes earlier versions built (one a model) only slowed every write.
        DO $$
        DECLARE found text;
        BEGIN
            FOR found IN SELECT indexname FROM pg_indexes
                WHERE schemaname = current_schema() AND tablename = 'embeddings'
                AND indexname LIKE 'embeddings\\_ann\\_%'
            LOOP
                EXECUTE format('DROP INDEX %I', found);
            END LOOP;
        END $$;
    """


def _m009_posting_lists() -> str:
    # The records as postings.RECORD and POSITION pack them (big-endian, as int8send and
    # int4send write); the old notes in segments of 2,000 by id (SEGMENT_NOTES when this was
    # written: a migration stays as it ran, whatever the setting becomes).
    return """
        -- A row per term and segment of notes, its postings packed, not a row per term and
        -- block: a publish writes 50 times fewer rows.
        CREATE TABLE posting_lists (
            term text NOT NULL,
            segment integer NOT NULL,
            postings bytea NOT NULL,
            positions bytea NOT NULL,
            PRIMARY KEY (term, segment)
        );
        -- Read whole and never compressed: skip pglz on the way in and out.
        ALTER TABLE posting_lists ALTER postings SET STORAGE EXTERNAL,
                                  ALTER positions SET STORAGE EXTERNAL;
        CREATE TABLE segment_notes (note_id bigint PRIMARY KEY, segment integer NOT NULL);
        CREATE INDEX segment_notes_segment ON segment_notes (segment);
        CREATE TABLE dead_notes (
            segment integer NOT NULL,
            note_id bigint NOT NULL,
            PRIMARY KEY (segment, note_id)
        );
        CREATE SEQUENCE segment_ids;
        INSERT INTO segment_notes SELECT id, id / 2000 FROM notes;
        INSERT INTO posting_lists
            SELECT p.term, p.note_id / 2000,
                   string_agg(int8send(p.block_id) || int8send(p.note_id) || int4send(p.ntok)
                              || int4send(p.tf_title) || int4send(p.tf_heading)
                              || int4send(p.tf_text), ''::bytea ORDER BY p.block_id),
                   string_agg((SELECT coalesce(string_agg(int4send(s), ''::bytea ORDER BY o),
                                               ''::bytea)
                               FROM unnest(p.positions) WITH ORDINALITY AS u (s, o)),
                              ''::bytea ORDER BY p.block_id)
            FROM postings p GROUP BY p.term, p.note_id / 2000;
        SELECT setval('segment_ids', coalesce(max(segment), 0) + 1, false) FROM segment_notes;
        DROP TABLE postings;
    """


def _m010_paths_by_hash() -> str:
    return """
        -- A path is kept unique by its hash, not in a btree: a btree key holds 2,704 bytes,
        -- and one note in a deep enough folder failed every publish. Deferred as before;
        -- the hash index finds a note by its path.
        ALTER TABLE notes DROP CONSTRAINT notes_path,
            ADD CONSTRAINT notes_path EXCLUDE USING hash (path WITH =)
                DEFERRABLE INITIALLY DEFERRED;
    """


MIGRATIONS: list[Callable[[], str]] = [
    _m001_index,
    _m002_team,
    _m003_faster_publish,
    _m004_memory_books,
    _m005_sessions,
    _m006_postings_carry_their_block,
    _m007_requests_by_arrival,
    _m008_no_hnsw,
    _m009_posting_lists,
    _m010_paths_by_hash,
]
SCHEMA_VERSION = len(MIGRATIONS)
# Every vaultctx migrating one database takes this lock first: one migrates, the others wait.
_MIGRATION_LOCK = 0x7661756C  # "vaul"


def connect(url: str, **kwargs: Any) -> Any:
    """A psycopg connection to `url` (autocommit: reads see each publish whole), with the
    `vector` type known; a clear error when psycopg is not installed or the server is down."""
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise IndexUnavailable(
            f"database_url is a PostgreSQL URL but {exc.name} is not installed:"
            " pip install 'vaultctx[postgres]'"
        ) from exc
    try:
        conn = psycopg.connect(url, autocommit=True, **kwargs)
    except psycopg.Error as exc:
        raise IndexUnavailable(f"cannot connect to the database: {one_line(exc)}") from exc
    try:
        migrate(conn)
        register_vector(conn)
    except psycopg.Error as exc:  # e.g. no right to create the `vector` extension
        conn.close()
        raise IndexUnavailable(f"cannot set up the database's schema: {one_line(exc)}") from exc
    return conn


def one_line(exc: Exception) -> str:
    """libpq's message, hints and all, as one line (errors are one line at the CLI)."""
    return " ".join(str(exc).split())


def migrate(conn: Any) -> int:
    """Bring the schema up to date, in one transaction per step; the version reached."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS vx_schema (version integer NOT NULL)")
        row = conn.execute("SELECT version FROM vx_schema").fetchone()
        version = row[0] if row else 0
        if version > SCHEMA_VERSION:
            raise IndexCorrupt(
                f"the database's schema is version {version}, newer than this vaultctx's"
                f" ({SCHEMA_VERSION}): upgrade vaultctx"
            )
        for step in MIGRATIONS[version:]:
            conn.execute(step())
        if row is None:
            conn.execute("INSERT INTO vx_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        else:
            conn.execute("UPDATE vx_schema SET version = %s", (SCHEMA_VERSION,))
    return SCHEMA_VERSION
