"""`MemoryRepository`: memories in their own SQLite file (WAL), FTS5 over them, and vectors.

Memories live beside the index but never in it: re-indexing a vault must not forget what
the user said. Vectors are float32 blobs keyed by memory, searched through a `VectorMirror`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..pipeline import lexical
from ..workspace.db import IndexDatabase
from .migrations import migrate_memory
from .mirror import Scope, VectorMirror
from .models import Memory, MemoryKind, MemorySource, Tier

# Facts and rules phrased this alike say the same thing: update rather than insert. Events
# are never merged by similarity: two alike things that happened are still two events.
MERGE_SIMILARITY = 0.93
# bm25 weights of (text, summary, themes).
FTS_WEIGHTS = (1.0, 0.5, 0.5)

_COLUMNS = (
    "rowid, id, tier, scope, kind, text, summary, themes, importance, created_at, updated_at,"
    " last_accessed, access_count, source, mkey, deleted_at"
)


@dataclass(frozen=True)
class MemoryDraft:
    """A memory to write: what it says, where it goes, and when it was formed."""

    tier: Tier
    scope: str
    kind: MemoryKind
    text: str
    summary: str
    themes: tuple[str, ...]
    importance: float
    created_at: float
    source: MemorySource = field(default_factory=MemorySource)
    key: str | None = None
    id: str | None = None  # keep an id (import); None: a new one
    # True: `source` is the memory's whole provenance, replacing the old one on update (an
    # arc that drops its oldest points no longer came from their turns); False: merged.
    whole_source: bool = False

    @property
    def dedupe(self) -> str:
        """Same kind, summary and themes: the same memory, whatever its wording."""
        basis = "\x1f".join(
            [self.kind.value, " ".join(self.summary.lower().split()), *sorted(self.themes)]
        )
        return hashlib.blake2b(basis.encode("utf-8"), digest_size=12).hexdigest()


@dataclass(frozen=True)
class WriteResult:
    memory: Memory
    merged: bool  # True: an existing memory was updated instead of a new one inserted


class ScoreRow(NamedTuple):
    """A memory's columns that ranking reads."""

    tier: Tier
    importance: float
    last_used: float  # formed or last accessed, whichever is later: what recency counts
    created_at: float
    speaker: str | None


class MemoryRepository:
    """One memory database: `memory.db` beside the index, or the account's own file."""

    def __init__(self, path: Path, *, model_id: str | None = None) -> None:
        self.path = path
        self.model_id = model_id  # vectors of other models are ignored
        self.db = IndexDatabase(path, migrate=migrate_memory)
        self.mirror = VectorMirror()
        self._secure = threading.local()

    # --- connections ---------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        conn = self.db.connect()
        if not getattr(self._secure, "on", False):
            # Forgotten memories are overwritten on disk, not just unlinked: privacy.
            conn.execute("PRAGMA secure_delete=ON")
            self._secure.on = True
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.connect()
        with self.db.transaction() as conn:
            yield conn

    def generation(self) -> int:
        return int(
            self.connect().execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0]
        )

    @staticmethod
    def _bump(conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            " RETURNING value"
        ).fetchone()
        return int(row[0])

    def sync_mirror(self) -> VectorMirror:
        """Reload the mirror if another process (or a lost race) moved the generation."""
        generation = self.generation()
        mirror = self.mirror
        if mirror.generation == generation:
            return mirror
        with mirror.lock:
            if mirror.generation == generation:
                return mirror
            rows = (
                self.connect()
                .execute(
                    "SELECT m.rowid, m.tier, m.scope, m.kind, v.vector,"
                    " json_extract(m.source, '$.speaker') FROM memories m"
                    " LEFT JOIN memory_vectors v ON v.memory_rowid = m.rowid AND v.model = ?"
                    " WHERE m.deleted_at IS NULL ORDER BY m.rowid",
                    (self.model_id or "",),
                )
                .fetchall()
            )
            mirror.reset(generation)
            for rowid, tier, scope, kind, blob, speaker in rows:
                vector = None if blob is None else np.frombuffer(blob, dtype=np.float32)
                mirror.put(rowid, (Tier(tier), scope), MemoryKind(kind), vector, speaker)
        return mirror

    def _after_commit(
        self,
        generation: int,
        changes: list[tuple[int, Scope, MemoryKind, np.ndarray | None, str | None] | int],
    ) -> None:
        """Apply this process's committed write to the mirror, or mark it stale."""
        mirror = self.mirror
        with mirror.lock:
            if mirror.generation is None:
                return
            if mirror.generation != generation - 1:
                mirror.generation = -1  # someone else wrote in between: reload on next read
                return
            for change in changes:
                if isinstance(change, int):
                    mirror.drop(change)
                else:
                    mirror.put(*change)
            mirror.generation = generation

    # --- writing -------------------------------------------------------------------------

    def write(
        self, drafts: Sequence[tuple[MemoryDraft, np.ndarray | None]], *, merge: bool = True
    ) -> list[WriteResult]:
        """Write drafts in one transaction: all of them or, after a crash, none.

        With `merge`, a draft with the key, or the summary and themes, of a live memory in its
        scope — or a fact or rule nearly identical by embedding — updates that memory.
        """
        if not drafts:
            return []
        if merge:
            self.sync_mirror()
        results: list[WriteResult] = []
        changes: list = []
        with self.transaction() as conn:
            for draft, vector in drafts:
                existing = self._find_existing(conn, draft, vector) if merge else None
                if existing is None:
                    memory = self._insert(conn, draft, vector)
                else:
                    memory = self._update(conn, existing, draft, vector)
                rowid = conn.execute(
                    "SELECT rowid FROM memories WHERE id = ?", (memory.id,)
                ).fetchone()[0]
                scope = (memory.tier, memory.scope)
                changes.append((rowid, scope, memory.kind, vector, memory.source.speaker))
                results.append(WriteResult(memory, existing is not None))
            generation = self._bump(conn)
        self._after_commit(generation, changes)
        return results

    def _find_existing(
        self, conn: sqlite3.Connection, draft: MemoryDraft, vector: np.ndarray | None
    ) -> Memory | None:
        where = "tier = ? AND scope = ?"
        if draft.id is not None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (draft.id,)
            ).fetchone()
            if row is not None:
                return _memory(row)
        if draft.key is not None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {where} AND mkey = ?",
                (draft.tier.value, draft.scope, draft.key),
            ).fetchone()
            return _memory(row) if row else None
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {where} AND dedupe = ?"
            " ORDER BY deleted_at IS NOT NULL, rowid LIMIT 1",
            (draft.tier.value, draft.scope, draft.dedupe),
        ).fetchone()
        if row is not None:
            return _memory(row)
        if vector is None or draft.kind is MemoryKind.EPISODIC:
            return None
        near = self.mirror.nearest(vector, [(draft.tier, draft.scope)], [draft.kind], 1)
        if near and near[0][1] >= MERGE_SIMILARITY:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE rowid = ? AND deleted_at IS NULL",
                (near[0][0],),
            ).fetchone()
            return _memory(row) if row else None
        return None

    def _insert(
        self, conn: sqlite3.Connection, draft: MemoryDraft, vector: np.ndarray | None
    ) -> Memory:
        memory_id = draft.id or uuid.uuid4().hex[:16]
        cur = conn.execute(
            "INSERT INTO memories(id, tier, scope, kind, text, summary, themes, importance,"
            " created_at, updated_at, last_accessed, access_count, source, mkey, dedupe)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            (
                memory_id,
                draft.tier.value,
                draft.scope,
                draft.kind.value,
                draft.text,
                draft.summary,
                json.dumps(list(draft.themes), ensure_ascii=False),
                draft.importance,
                draft.created_at,
                draft.created_at,
                draft.created_at,
                draft.source.model_dump_json(),
                draft.key,
                draft.dedupe,
            ),
        )
        self._put_vector(conn, int(cur.lastrowid or 0), vector)
        return self._get(conn, memory_id)

    def _update(
        self,
        conn: sqlite3.Connection,
        existing: Memory,
        draft: MemoryDraft,
        vector: np.ndarray | None,
    ) -> Memory:
        old = existing.source
        new = draft.source
        source = (
            new
            if draft.whole_source
            else MemorySource(
                session_id=new.session_id or old.session_id,
                turns=tuple(dict.fromkeys((*old.turns, *new.turns))),
                speaker=new.speaker or old.speaker,
                paths=tuple(dict.fromkeys((*old.paths, *new.paths))),
                origin=new.origin,
            )
        )
        conn.execute(
            "UPDATE memories SET text = ?, summary = ?, themes = ?, importance = ?,"
            " updated_at = ?, source = ?, dedupe = ?, deleted_at = NULL,"
            " created_at = min(created_at, ?) WHERE id = ?",
            (
                draft.text,
                draft.summary,
                json.dumps(list(draft.themes), ensure_ascii=False),
                max(existing.importance, draft.importance),
                max(existing.updated_at, draft.created_at),
                source.model_dump_json(),
                draft.dedupe,
                draft.created_at,
                existing.id,
            ),
        )
        rowid = conn.execute("SELECT rowid FROM memories WHERE id = ?", (existing.id,)).fetchone()[
            0
        ]
        self._put_vector(conn, rowid, vector)
        return self._get(conn, existing.id)

    def _put_vector(self, conn: sqlite3.Connection, rowid: int, vector: np.ndarray | None) -> None:
        if vector is None or self.model_id is None:
            return
        conn.execute(
            "INSERT INTO memory_vectors(memory_rowid, model, vector) VALUES (?, ?, ?)"
            " ON CONFLICT(memory_rowid) DO UPDATE SET model = excluded.model,"
            " vector = excluded.vector",
            (rowid, self.model_id, np.ascontiguousarray(vector, np.float32).tobytes()),
        )

    def touch(self, ids: Sequence[str], at: float) -> None:
        """Accessing memories refreshes them: recency counts from the last access."""
        if not ids:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE memories SET last_accessed = max(last_accessed, ?),"
                " access_count = access_count + 1 WHERE id = ?",
                [(at, i) for i in ids],
            )

    def derived_with(self, ids: Sequence[str]) -> list[str]:
        """`ids` and every memory derived from the same turns of the same session (its
        facts, the exchanges and the arc that hold those turns): what a turn leaves goes with
        it, or its words would stay findable."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.connect().execute(
            "WITH turns(session_id, turn) AS ("
            " SELECT json_extract(m.source, '$.session_id'), t.value"
            f" FROM memories m, json_each(m.source, '$.turns') t WHERE m.id IN ({marks}))"
            " SELECT m.id FROM memories m, json_each(m.source, '$.turns') t, turns"
            " WHERE json_extract(m.source, '$.session_id') = turns.session_id"
            " AND t.value = turns.turn",
            list(ids),
        )
        return list(dict.fromkeys([*ids, *(r[0] for r in rows)]))

    def delete(self, ids: Sequence[str], *, soft: bool = False) -> int:
        """Forget memories. Hard (default): the row, its text in FTS and its vector are
        erased and the WAL truncated, for the user's privacy. Soft: hidden, restorable."""
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self.transaction() as conn:
            rowids = [
                r[0]
                for r in conn.execute(
                    f"SELECT rowid FROM memories WHERE id IN ({marks})", list(ids)
                )
            ]
            if soft:
                conn.execute(
                    f"UPDATE memories SET deleted_at = ? WHERE id IN ({marks})"
                    " AND deleted_at IS NULL",
                    [time.time(), *ids],
                )
            else:
                conn.execute(f"DELETE FROM memories WHERE id IN ({marks})", list(ids))
            generation = self._bump(conn)
        self._after_commit(generation, list(rowids))
        if not soft and rowids:
            # FTS5 keeps a deleted row's terms in old segments until they merge: merge now,
            # then copy the WAL into the (securely overwritten) file and truncate it.
            with self.transaction() as conn:
                conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
            self.connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(rowids)

    # --- reading -------------------------------------------------------------------------

    def _get(self, conn: sqlite3.Connection, memory_id: str) -> Memory:
        row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return _memory(row)

    def get(self, memory_id: str) -> Memory | None:
        row = (
            self.connect()
            .execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
            .fetchone()
        )
        return _memory(row) if row else None

    def score_rows(self, rowids: Sequence[int]) -> dict[int, ScoreRow]:
        """What scoring needs of live memories, without building them."""
        if not rowids:
            return {}
        rows = self.connect().execute(
            "SELECT rowid, tier, importance, max(created_at, last_accessed), created_at,"
            " json_extract(source, '$.speaker') FROM memories"
            f" WHERE rowid IN ({','.join('?' * len(rowids))}) AND deleted_at IS NULL",
            list(rowids),
        )
        return {r[0]: ScoreRow(Tier(r[1]), r[2], r[3], r[4], r[5]) for r in rows}

    def latest_turns(
        self, scope: Scope, session_id: str, at: float, other_than: str | None, *, limit: int
    ) -> list[Memory]:
        """The raw-turn memories (episodic, unkeyed) of a session said last at or before `at`
        (of turns at the same time, the one written last first), other than turn
        `other_than`; newest first."""
        rows = self.connect().execute(
            f"SELECT {_COLUMNS} FROM memories WHERE tier = ? AND scope = ?"
            " AND kind = 'episodic' AND created_at <= ? AND mkey IS NULL"
            " AND deleted_at IS NULL AND json_extract(source, '$.session_id') = ?"
            " AND coalesce(json_extract(source, '$.turns[0]'), '') != ?"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (scope[0].value, scope[1], at, session_id, other_than or "", limit),
        )
        return [_memory(row) for row in rows]

    def by_rowids(self, rowids: Sequence[int]) -> dict[int, Memory]:
        if not rowids:
            return {}
        rows = self.connect().execute(
            f"SELECT {_COLUMNS} FROM memories WHERE rowid IN ({','.join('?' * len(rowids))})"
            " AND deleted_at IS NULL",
            list(rowids),
        )
        return {row[0]: _memory(row) for row in rows}

    def list(
        self,
        scopes: Sequence[Scope] | None = None,
        *,
        tier: Tier | None = None,
        kinds: Sequence[MemoryKind] = (),
        key_prefix: str | None = None,
        limit: int | None = None,
        order: str = "updated_at DESC, rowid DESC",
        include_deleted: bool = False,
    ) -> list[Memory]:
        """Memories newest first, optionally within scopes, a tier, kinds or a key prefix."""
        where, args = _scope_filter(scopes, kinds)
        if tier is not None:
            where.append("tier = ?")
            args.append(tier.value)
        if key_prefix is not None:
            where.append("substr(mkey, 1, ?) = ?")
            args += [len(key_prefix), key_prefix]
        if not include_deleted:
            where.append("deleted_at IS NULL")
        sql = f"SELECT {_COLUMNS} FROM memories"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_memory(row) for row in self.connect().execute(sql, args)]

    def token_recall(
        self,
        text: str,
        scopes: Sequence[Scope],
        kinds: Sequence[MemoryKind],
        limit: int,
        *,
        window: tuple[float, float] | None = None,
    ) -> list[tuple[int, float]]:
        """FTS5 bm25 over text, summary and themes, with the select stage's query building
        (stop-words dropped, every term quoted): (memory rowid, score), best first.
        `window` keeps memories formed in [start, end)."""
        if not scopes:
            return []
        conn = self.connect()
        tokenizer = getattr(self._secure, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._secure.tokenizer = lexical.QueryTokenizer(conn, "memories_fts")
        tokenizer.df_cache.clear()  # memories change with every turn: count afresh
        total = max(1, self.mirror.size)
        built = lexical.build_query(text, tokenizer, total)
        if built.match is None:
            return []
        where, args = _scope_filter(scopes, kinds, prefix="m.")
        if window is not None:
            where.append("m.created_at >= ? AND m.created_at < ?")
            args += list(window)
        rows = conn.execute(
            "SELECT m.rowid, bm25(memories_fts, ?, ?, ?) AS s FROM memories_fts f"
            " JOIN memories m ON m.rowid = f.rowid WHERE memories_fts MATCH ? AND "
            + " AND ".join([*where, "m.deleted_at IS NULL"])
            + " ORDER BY s, m.rowid LIMIT ?",
            (*FTS_WEIGHTS, built.match, *args, limit),
        ).fetchall()
        return [(rowid, -score) for rowid, score in rows]

    def count(self) -> int:
        return int(
            self.connect()
            .execute("SELECT count(*) FROM memories WHERE deleted_at IS NULL")
            .fetchone()[0]
        )

    def integrity_ok(self) -> bool:
        return self.connect().execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        self.db.close()
        self._secure = threading.local()


def _scope_filter(
    scopes: Sequence[Scope] | None, kinds: Sequence[MemoryKind], prefix: str = ""
) -> tuple[list[str], list[object]]:
    where: list[str] = []
    args: list[object] = []
    if scopes is not None:
        if not scopes:
            return ["0"], []
        where.append(
            f"({prefix}tier, {prefix}scope) IN (VALUES " + ", ".join("(?, ?)" for _ in scopes) + ")"
        )
        for tier, scope in scopes:
            args += [tier.value, scope]
    if kinds:
        where.append(f"{prefix}kind IN ({','.join('?' * len(kinds))})")
        args += [k.value for k in kinds]
    return where, args


def _memory(row: Sequence) -> Memory:
    (_, mid, tier, scope, kind, text, summary, themes, importance, created, updated, accessed,
     count, source, key, deleted) = row  # fmt: skip
    return Memory(
        id=mid,
        tier=Tier(tier),
        scope=scope,
        kind=MemoryKind(kind),
        text=text,
        summary=summary,
        themes=tuple(json.loads(themes)),
        importance=importance,
        created_at=created,
        updated_at=updated,
        last_accessed=accessed,
        access_count=count,
        source=MemorySource.model_validate_json(source),
        key=key,
        deleted=deleted is not None,
    )
