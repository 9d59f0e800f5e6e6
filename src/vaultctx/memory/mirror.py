"""`VectorMirror`: the live memories of one database as numpy arrays, for nearest-neighbour
search without touching SQLite.

Each memory's tier/scope bucket, kind and vector; kept in step by the repository's own writes,
reloaded when another process wrote (see `MemoryRepository.sync_mirror`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

import numpy as np

from ..search.vectors import dot_rows
from .models import MemoryKind, Tier

KIND_CODES = {kind: code for code, kind in enumerate(MemoryKind)}
Scope = tuple[Tier, str]
"""A tier and one of its scopes: the unit memories are searched and shown in."""


class VectorMirror:
    """Live memories' tier/scope buckets, kinds and vectors as numpy arrays, and who said
    them (the speakers of each scope: the people a question may name).

    Appends amortize like a list; a deleted row keeps its slot with bucket -1.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.generation: int | None = None  # None: not loaded
        self._buckets: dict[Scope, int] = {}
        self._rows: dict[int, int] = {}  # memory rowid -> row
        self._n = 0
        self._version = 0  # bumped by every put and drop: invalidates cached masks
        self._masks: dict[tuple, np.ndarray] = {}
        self._said_by: dict[int, tuple[int, str]] = {}  # row -> (bucket, speaker)
        self._speakers: dict[int, Counter[str]] = {}  # bucket -> speakers' memory counts
        self.rowids = np.zeros(0, np.int64)
        self.bucket = np.zeros(0, np.int32)
        self.kind = np.zeros(0, np.int8)
        self.has_vec = np.zeros(0, bool)
        self.matrix = np.zeros((0, 0), np.float32)

    @property
    def size(self) -> int:
        """Live memories mirrored."""
        return len(self._rows)

    def bucket_ids(self, scopes: Iterable[Scope]) -> np.ndarray:
        return np.asarray([self._buckets[s] for s in scopes if s in self._buckets], np.int32)

    def reset(self, generation: int) -> None:
        self.__init__()  # type: ignore[misc]  # every field back to empty, from one list
        self.generation = generation

    def _grow(self, dim: int | None) -> None:
        size = len(self.rowids)
        if self._n >= size:
            new = max(64, size * 2)
            self.rowids = np.resize(self.rowids, new)
            self.bucket = np.resize(self.bucket, new)
            self.kind = np.resize(self.kind, new)
            self.has_vec = np.concatenate([self.has_vec, np.zeros(new - size, bool)])
            if self.matrix.shape[1]:
                grown = np.zeros((new, self.matrix.shape[1]), np.float32)
                grown[:size] = self.matrix
                self.matrix = grown
        if dim and self.matrix.shape[1] == 0:
            self.matrix = np.zeros((len(self.rowids), dim), np.float32)

    def put(
        self,
        rowid: int,
        scope: Scope,
        kind: MemoryKind,
        vector: np.ndarray | None,
        speaker: str | None = None,
    ) -> None:
        self._version += 1
        row = self._rows.get(rowid)
        if row is None:
            self._grow(None if vector is None else vector.shape[0])
            row = self._n
            self._n += 1
            self._rows[rowid] = row
        elif vector is not None:
            self._grow(vector.shape[0])
        self.rowids[row] = rowid
        bucket = self._buckets.setdefault(scope, len(self._buckets))
        self.bucket[row] = bucket
        self._unsay(row)
        if speaker:
            self._said_by[row] = (bucket, speaker)
            self._speakers.setdefault(bucket, Counter())[speaker] += 1
        self.kind[row] = KIND_CODES[kind]
        if vector is not None and vector.shape[0] == self.matrix.shape[1]:
            self.matrix[row] = vector
            self.has_vec[row] = True

    def drop(self, rowid: int) -> None:
        self._version += 1
        row = self._rows.pop(rowid, None)
        if row is not None:
            self._unsay(row)
            self.bucket[row] = -1
            self.has_vec[row] = False

    def _unsay(self, row: int) -> None:
        said = self._said_by.pop(row, None)
        if said is not None:
            self._speakers[said[0]][said[1]] -= 1

    def speakers(self, scopes: Sequence[Scope], without: Collection[int] = ()) -> set[str]:
        """Everyone who said a live memory of these scopes, other than those `without`
        (rowids)."""
        with self.lock:
            buckets = {int(bucket) for bucket in self.bucket_ids(scopes)}
            counts = Counter[str]()
            for bucket in buckets:
                counts.update(self._speakers.get(bucket, Counter()))
            for rowid in without:
                said = self._said_by.get(self._rows.get(rowid, -1))
                if said is not None and said[0] in buckets:
                    counts[said[1]] -= 1
            return {name for name, count in counts.items() if count > 0}

    def mask(self, scopes: Sequence[Scope], kinds: Sequence[MemoryKind]) -> np.ndarray:
        """Rows of these scopes and kinds; cached until the mirror changes (every turn asks
        the same few questions)."""
        key = (tuple(scopes), tuple(kinds), self._version)
        cached = self._masks.get(key)
        if cached is not None:
            return cached
        n = self._n
        codes = np.asarray([KIND_CODES[k] for k in kinds], np.int8)
        mask = np.isin(self.bucket[:n], self.bucket_ids(scopes)) & np.isin(self.kind[:n], codes)
        if len(self._masks) > 64:
            self._masks.clear()
        self._masks[key] = mask
        return mask

    def _shown(self, mask: np.ndarray, without: Collection[int]) -> np.ndarray:
        """`mask` less the rows of `without` (rowids)."""
        rows = [row for rowid in without if (row := self._rows.get(rowid)) is not None]
        if not rows:
            return mask
        shown = mask.copy()
        shown[rows] = False
        return shown

    def count(
        self, scopes: Sequence[Scope], kind: MemoryKind, without: Collection[int] = ()
    ) -> int:
        with self.lock:
            return int(np.count_nonzero(self._shown(self.mask(scopes, [kind]), without)))

    def vectors_in(self, scopes: Sequence[Scope], without: Collection[int] = ()) -> int:
        with self.lock:
            mask = self._shown(self.mask(scopes, list(MemoryKind)), without)
            return int(np.count_nonzero(mask & self.has_vec[: self._n]))

    def nearest(
        self,
        query: np.ndarray,
        scopes: Sequence[Scope],
        kinds: Sequence[MemoryKind],
        k: int,
        without: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """Top-k (memory rowid, cosine) among memories of these scopes and kinds, other
        than those `without` (rowids)."""
        with self.lock:
            if self._n == 0 or self.matrix.shape[1] != query.shape[0]:
                return []
            n = self._n
            mask = self._shown(self.mask(scopes, kinds), without) & self.has_vec[:n]
            rows = np.nonzero(mask)[0]
            if rows.size == 0:
                return []
            # One product over the contiguous matrix beats gathering the rows first.
            scores = dot_rows(self.matrix[:n], query)
            scores = scores[rows]
            rowids = self.rowids[rows]
        k = min(k, rows.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < rows.size else np.arange(rows.size)
        order = top[np.lexsort((rowids[top], -scores[top]))]
        return [(int(rowids[i]), float(scores[i])) for i in order]
