"""Saving drafts: each becomes a new memory, or updates the memory it repeats — the same key,
the same summary and themes, or (facts and rules) a nearly identical embedding."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import numpy as np

from .mirror import VectorMirror
from .models import Memory, MemoryKind, MemorySource, Tier
from .rows import COLUMNS, memory_from_row

# Facts and rules phrased this alike say the same thing: update rather than insert. Events
# are never merged by similarity: two alike things that happened are still two events.
MERGE_SIMILARITY = 0.93


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


class DraftMerging:
    """The write half of `MemoryRepository`: drafts in, memories out, in one transaction —
    each draft a new memory, or merged into the live memory it repeats."""

    model_id: str | None
    mirror: VectorMirror
    transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
    sync_mirror: Callable[[], VectorMirror]
    _bump: Callable[[sqlite3.Connection], int]
    _after_commit: Callable[..., None]

    def save(
        self, drafts: Sequence[tuple[MemoryDraft, np.ndarray | None]], *, merge: bool = True
    ) -> list[WriteResult]:
        """Save drafts in one transaction: all of them or, after a crash, none.

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
                f"SELECT {COLUMNS} FROM memories WHERE id = ?", (draft.id,)
            ).fetchone()
            if row is not None:
                return memory_from_row(row)
        if draft.key is not None:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE {where} AND mkey = ?",
                (draft.tier.value, draft.scope, draft.key),
            ).fetchone()
            return memory_from_row(row) if row else None
        row = conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE {where} AND dedupe = ?"
            " ORDER BY deleted_at IS NOT NULL, rowid LIMIT 1",
            (draft.tier.value, draft.scope, draft.dedupe),
        ).fetchone()
        if row is not None:
            return memory_from_row(row)
        if vector is None or draft.kind is MemoryKind.EPISODIC:
            return None
        near = self.mirror.nearest(vector, [(draft.tier, draft.scope)], [draft.kind], 1)
        if near and near[0][1] >= MERGE_SIMILARITY:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE rowid = ? AND deleted_at IS NULL",
                (near[0][0],),
            ).fetchone()
            return memory_from_row(row) if row else None
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

    def _get(self, conn: sqlite3.Connection, memory_id: str) -> Memory:
        row = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return memory_from_row(row)
