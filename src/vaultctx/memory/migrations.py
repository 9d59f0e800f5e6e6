"""The memory database's schema history: numbered migrations, applied in order and recorded.

Same machinery as the index (`storage.migrations.migrate`), its own history: memory.db
outlives any re-index, so it must upgrade itself rather than be rebuilt.
"""

from __future__ import annotations

import sqlite3

from ..storage.migrations import Migration, migrate


def m001_initial() -> str:
    return """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta(key, value) VALUES ('generation', '0');

        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,             -- public id, unique across databases
            tier TEXT NOT NULL,                  -- conversation | channel | workspace | account
            scope TEXT NOT NULL,                 -- session id, channel id, vault, user
            kind TEXT NOT NULL,                  -- semantic | episodic | procedural
            text TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '',
            themes TEXT NOT NULL DEFAULT '[]',   -- JSON list of keywords
            importance REAL NOT NULL,            -- [0, 1]
            created_at REAL NOT NULL,            -- epoch seconds; may lie in the past
            updated_at REAL NOT NULL,
            last_accessed REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            source TEXT NOT NULL DEFAULT '{}',   -- JSON: session_id, turns, speaker, paths
            mkey TEXT,                           -- upsert key within (tier, scope)
            dedupe TEXT NOT NULL,                -- hash of (kind, summary, themes)
            deleted_at REAL                      -- soft delete: hidden, not yet erased
        );
        CREATE INDEX memories_scope ON memories(tier, scope, kind, updated_at);
        CREATE INDEX memories_dedupe ON memories(tier, scope, dedupe);
        CREATE UNIQUE INDEX memories_key ON memories(tier, scope, mkey) WHERE mkey IS NOT NULL;

        CREATE VIRTUAL TABLE memories_fts USING fts5(
            text, summary, themes,
            content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, text, summary, themes)
            VALUES (new.rowid, new.text, new.summary, new.themes);
        END;
        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, text, summary, themes)
            VALUES ('delete', old.rowid, old.text, old.summary, old.themes);
        END;
        CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, summary, themes ON memories
        BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, text, summary, themes)
            VALUES ('delete', old.rowid, old.text, old.summary, old.themes);
            INSERT INTO memories_fts(rowid, text, summary, themes)
            VALUES (new.rowid, new.text, new.summary, new.themes);
        END;

        CREATE TABLE memory_vectors (
            memory_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
            model TEXT NOT NULL,
            vector BLOB NOT NULL                 -- float32, L2-normalized
        );

        CREATE TABLE scratchpad (
            session_id TEXT NOT NULL,
            key TEXT NOT NULL,
            text TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session_id, key)
        ) WITHOUT ROWID;
    """


def m002_turn_order() -> str:
    """Memories of a scope in the order they were formed: a new turn finds the one said
    before it in its session without a scan."""
    return "CREATE INDEX memories_formed ON memories(tier, scope, kind, created_at);"


MIGRATIONS: tuple[Migration, ...] = (m001_initial, m002_turn_order)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate_memory(db: sqlite3.Connection) -> int:
    """Bring a memory database up to this vaultctx's schema; return migrations applied."""
    return migrate(db, MIGRATIONS)
