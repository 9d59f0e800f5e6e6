"""The index schema's whole history: numbered migrations, applied in order and recorded.

Any older index upgrades itself on open; an index from a newer vaultctx is refused. This is
the one place that owns the index schema.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Migration = Callable[[], str]
"""A migration returns its SQL script; `migrate` runs it and the version bump atomically."""


def m001_initial() -> str:
    return """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE notes (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,           -- POSIX path relative to the vault root
            title TEXT NOT NULL,
            mtime_ns INTEGER NOT NULL,
            size INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            frontmatter TEXT NOT NULL DEFAULT '{}',   -- JSON object
            problems TEXT NOT NULL DEFAULT '[]',      -- JSON list of warnings
            indexed_at REAL NOT NULL
        );
        CREATE INDEX notes_content_hash ON notes(content_hash);

        CREATE TABLE blocks (
            id INTEGER PRIMARY KEY,
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            title TEXT NOT NULL,                 -- the note's title, searched as its own column
            heading_path TEXT NOT NULL,          -- headings joined with ' > '
            heading TEXT NOT NULL,
            level INTEGER NOT NULL,
            text TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            block_refs TEXT NOT NULL DEFAULT '', -- space-separated ^ids in this block
            embed_hash TEXT NOT NULL             -- hash of the text the model embeds
        );
        CREATE INDEX blocks_note ON blocks(note_id, ordinal);
        CREATE INDEX blocks_embed_hash ON blocks(embed_hash);

        CREATE VIRTUAL TABLE blocks_fts USING fts5(
            title, heading_path, text,
            content='blocks', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER blocks_fts_insert AFTER INSERT ON blocks BEGIN
            INSERT INTO blocks_fts(rowid, title, heading_path, text)
            VALUES (new.id, new.title, new.heading_path, new.text);
        END;
        CREATE TRIGGER blocks_fts_delete AFTER DELETE ON blocks BEGIN
            INSERT INTO blocks_fts(blocks_fts, rowid, title, heading_path, text)
            VALUES ('delete', old.id, old.title, old.heading_path, old.text);
        END;

        -- Vectors keyed by content, not by block: unchanged or moved text is never re-embedded.
        CREATE TABLE embeddings (
            model TEXT NOT NULL,
            hash TEXT NOT NULL,
            vector BLOB NOT NULL,                -- float32, L2-normalized
            PRIMARY KEY (model, hash)
        ) WITHOUT ROWID;

        CREATE TABLE links (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            block_ordinal INTEGER NOT NULL,
            target TEXT NOT NULL,                -- as written: name, path, or '' for this note
            kind TEXT NOT NULL,                  -- wiki | embed | markdown
            heading TEXT,
            block_ref TEXT,
            alias TEXT,
            line INTEGER NOT NULL,
            target_id INTEGER REFERENCES notes(id) ON DELETE SET NULL  -- NULL: dangling
        );
        CREATE INDEX links_source ON links(source_id);
        CREATE INDEX links_target ON links(target_id);

        CREATE TABLE tags (
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,                   -- lower case, without '#'
            PRIMARY KEY (note_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX tags_tag ON tags(tag);

        CREATE TABLE aliases (
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            alias TEXT NOT NULL,
            PRIMARY KEY (note_id, alias)
        ) WITHOUT ROWID;
        CREATE INDEX aliases_lower ON aliases(lower(alias));

        -- Notes the user opened or touched: seeds for graph retrieval.
        CREATE TABLE accesses (
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            at REAL NOT NULL,
            kind TEXT NOT NULL DEFAULT 'touch'
        );
        CREATE INDEX accesses_at ON accesses(at);
    """


def m002_notes_mtime_index() -> str:
    """Graph seeds ask for recently edited notes on every select."""
    return "CREATE INDEX notes_mtime ON notes(mtime_ns);"


def m003_fts_written_in_batches() -> str:
    """The indexer writes blocks_fts itself, a batch at a time.

    A trigger makes every block insert a statement with a savepoint, and FTS5 flushes its
    pending terms at each savepoint: one tiny segment per block, then merging them all cost
    2.5x the rest of the write. Leaf pages of 4,000 bytes instead of 1,000 cut the cost of
    writing the index by a further ~10 %, with the same query latency, and an 8 MB buffer
    for pending terms (1 MB by default) makes one segment per batch: ~8 % less again.
    """
    return """
        DROP TRIGGER blocks_fts_insert;
        DROP TRIGGER blocks_fts_delete;
        INSERT INTO blocks_fts(blocks_fts, rank) VALUES ('pgsz', 4000);
        INSERT INTO blocks_fts(blocks_fts, rank) VALUES ('hashsize', 8388608);
    """


def m004_titles_from_h1() -> str:
    """A note's title now also comes from an opening `# H1` (after the frontmatter's, before
    the file name's), so every note is parsed again on the next run; the vectors of text
    that did not change are kept."""
    return "UPDATE notes SET size = -1, content_hash = '';"


def m005_aliases_searched() -> str:
    """A note's aliases are now searched and embedded with its first block (that block's
    title column holds the note's names: `reader.searched_names`), so every note with
    aliases is parsed again on the next run."""
    return (
        "UPDATE notes SET size = -1, content_hash = '' WHERE id IN (SELECT note_id FROM aliases);"
    )


def m006_meta_of_interrupted_runs() -> str:
    """`embedding_model` is now written with each batch of vectors, not at the end of a
    run: an index whose first embedding run was killed names the model of the vectors it
    holds (the most common one), so `status` counts them and select uses them."""
    return """
        INSERT OR IGNORE INTO meta(key, value)
            SELECT 'embedding_model', model FROM embeddings
            GROUP BY model ORDER BY count(*) DESC LIMIT 1;
    """


def m007_links_with_code_or_extension_names() -> str:
    """Links to notes named like an attachment extension (`[[Canvas]]`) and links holding
    inline code (`[[#`move`]]`) were dropped: notes that hold a wiki link are parsed again on
    the next run (their vectors are kept)."""
    return """
        UPDATE notes SET size = -1, content_hash = ''
        WHERE id IN (SELECT note_id FROM blocks WHERE text LIKE '%[[%')
           OR id IN (SELECT source_id FROM links);
    """


def m008_note_languages() -> str:
    """Each note carries the language it is written in (NULL: not read yet; '': too short
    or unsure), and the full-text index holds text analysed for it (`language.py`): the
    indexer reads the language of every note from the index and analyses the full-text index
    again on its next run (no file is parsed again, no vector recomputed)."""
    return """
        ALTER TABLE notes ADD COLUMN language TEXT;
        DELETE FROM meta WHERE key = 'analysis';
    """


def m010_code_in_headings() -> str:
    """A heading's inline code is its text (`` ### `ob publish` `` reads `ob publish`, not
    nothing; `### Run `sync`` is not cut to `Run`): the notes with an empty heading or with
    inline code anywhere (where code in headings comes from) are parsed again on the next
    run; the vectors of blocks whose heading did not change are kept."""
    return """
        UPDATE notes SET size = -1, content_hash = ''
        WHERE id IN (SELECT note_id FROM blocks WHERE (level > 0 AND heading = '')
                                                   OR instr(text, '`') > 0);
    """


# Meta key of an index published to a database whose changes since that publish are all in
# the `unpublished_*` tables (set by each publish and by a restore from the database).
CHANGES_LOGGED = "changes_logged"
UNPUBLISHED_TABLES = ("unpublished_notes", "unpublished_links", "unpublished_vectors")


def m009_unpublished_changes() -> str:
    """What changed since the index was last published to a database (`database_url`): the
    notes written, touched or deleted, the links that point elsewhere and the vectors added.
    The next publish reads these, not the whole index (a million blocks' vectors alone took
    2 s to compare). Logged only while `CHANGES_LOGGED` is in meta: never without a
    database."""
    logging = f"WHEN EXISTS (SELECT 1 FROM meta WHERE key = '{CHANGES_LOGGED}')"
    return f"""
        CREATE TABLE unpublished_notes (id INTEGER PRIMARY KEY);
        CREATE TABLE unpublished_links (id INTEGER PRIMARY KEY);
        CREATE TABLE unpublished_vectors (
            model TEXT NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (model, hash)
        ) WITHOUT ROWID;
        CREATE TRIGGER notes_unpublished_insert AFTER INSERT ON notes {logging} BEGIN
            INSERT OR IGNORE INTO unpublished_notes VALUES (new.id);
        END;
        CREATE TRIGGER notes_unpublished_update AFTER UPDATE ON notes {logging} BEGIN
            INSERT OR IGNORE INTO unpublished_notes VALUES (old.id), (new.id);
        END;
        CREATE TRIGGER notes_unpublished_delete AFTER DELETE ON notes {logging} BEGIN
            INSERT OR IGNORE INTO unpublished_notes VALUES (old.id);
        END;
        CREATE TRIGGER links_unpublished_target AFTER UPDATE OF target_id ON links {logging}
        BEGIN
            INSERT OR IGNORE INTO unpublished_links VALUES (new.id);
        END;
        CREATE TRIGGER embeddings_unpublished_insert AFTER INSERT ON embeddings {logging} BEGIN
            INSERT OR IGNORE INTO unpublished_vectors VALUES (new.model, new.hash);
        END;
    """


MIGRATIONS: tuple[Migration, ...] = (
    m001_initial,
    m002_notes_mtime_index,
    m003_fts_written_in_batches,
    m004_titles_from_h1,
    m005_aliases_searched,
    m006_meta_of_interrupted_runs,
    m007_links_with_code_or_extension_names,
    m008_note_languages,
    m009_unpublished_changes,
    m010_code_in_headings,
)
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply pending migrations, each in its own transaction; return the number applied.

    The version is re-read inside the write transaction, so two processes opening a new
    index at once do not both create it. `migrations` lets another database (memory.db)
    keep its own numbered history with the same machinery.
    """
    schema_version = len(migrations)
    applied = 0
    for number, migration in enumerate(migrations, start=1):
        if current_version(db) >= number:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            version = current_version(db)
            if version > schema_version:
                raise RuntimeError(
                    f"index schema version {version} is newer than this vaultctx ({schema_version})"
                )
            if version < number:
                for statement in _statements(migration()):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")
                applied += 1
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    if current_version(db) > schema_version:
        raise RuntimeError(
            f"index schema version {current_version(db)} is newer than this vaultctx"
            f" ({schema_version})"
        )
    return applied


def _statements(script: str) -> list[str]:
    """Split a script into statements; triggers keep their inner semicolons."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer)
            buffer = ""
    return statements
