"""The plain baselines quality targets are stated against, computed in the same run.

BEIR sets: "plain RRF" is an FTS5 bm25 OR-query of the query's non-stop-word terms over
title + text (column weights 1, 1; porter unicode61), and exact MiniLM over "title. text",
each 100 deep, fused by reciprocal rank fusion (k = 60, equal weights) — the definition of
`shared/tools/plain_baselines.py`, which measured SciFact 0.715 and Cranfield 0.415.

Vaults: "plain note RRF" is the same at note level over an indexed vault: FTS5 over each
note's title (weight 5) and whole text, and the best cosine among the note's block vectors.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import numpy as np

DEPTH = 100
RRF_K = 60
# The baseline script's own stop list, kept as is so its figures reproduce.
STOP = frozenset(
    "a an the of in on and or to for with by is are was were be as at from that this it its"
    " not no".split()
)
TOKENIZER = "porter unicode61 remove_diacritics 2"


def _or_query(text: str) -> str:
    tokens = [t for t in re.findall(r"\w+", text.lower()) if t not in STOP]
    return " OR ".join(f'"{t}"' for t in tokens) or '""'


def rrf(runs: Iterable[list[str]], k: int = RRF_K) -> list[str]:
    scores: dict[str, float] = {}
    for run in runs:
        for rank, key in enumerate(run):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda key: -scores[key])


class PlainBEIR:
    """Plain FTS5, plain MiniLM and their RRF over a BEIR corpus (doc ids as keys)."""

    def __init__(self, corpus: dict[str, dict], embed, cache: Path | None = None) -> None:
        self.ids = list(corpus)
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE f USING fts5(title, body, tokenize='{TOKENIZER}')")
        self.db.executemany(
            "INSERT INTO f(rowid, title, body) VALUES (?, ?, ?)",
            ((i, corpus[d]["title"], corpus[d]["text"]) for i, d in enumerate(self.ids)),
        )
        if cache is not None and cache.exists():
            self.matrix = np.load(cache)
        else:
            texts = [f"{corpus[d]['title']}. {corpus[d]['text']}".strip() for d in self.ids]
            self.matrix = np.asarray(embed(texts), dtype=np.float32)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache, self.matrix)
        self._embed = embed

    def lexical(self, query: str) -> list[str]:
        rows = self.db.execute(
            "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f, 1.0, 1.0) LIMIT ?",
            (_or_query(query), DEPTH),
        )
        return [self.ids[r] for (r,) in rows]

    def vector(self, query: str) -> list[str]:
        scores = self.matrix @ np.asarray(self._embed([query])[0], dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:DEPTH]
        return [self.ids[i] for i in top]

    def fused(self, query: str) -> list[str]:
        return rrf([self.lexical(query), self.vector(query)])


class PlainNotes:
    """Plain note-level RRF over an indexed vault: note FTS5 + max-over-blocks MiniLM."""

    def __init__(self, index_db: Path, model: str, embed) -> None:
        src = sqlite3.connect(f"file:{index_db}?mode=ro", uri=True)
        notes = src.execute("SELECT id, path, title FROM notes ORDER BY id").fetchall()
        texts: dict[int, list[str]] = {}
        for note_id, text in src.execute("SELECT note_id, text FROM blocks ORDER BY id"):
            texts.setdefault(note_id, []).append(text)
        vectors = src.execute(
            "SELECT b.note_id, e.vector FROM blocks b JOIN embeddings e"
            " ON e.hash = b.embed_hash AND e.model = ? ORDER BY b.id",
            (model,),
        ).fetchall()
        src.close()
        self.paths = {note_id: path for note_id, path, _ in notes}
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE f USING fts5(title, body, tokenize='{TOKENIZER}')")
        self.db.executemany(
            "INSERT INTO f(rowid, title, body) VALUES (?, ?, ?)",
            ((i, title, "\n".join(texts.get(i, []))) for i, _, title in notes),
        )
        self.block_notes = np.array([n for n, _ in vectors], dtype=np.int64)
        self.matrix = np.stack([np.frombuffer(v, dtype=np.float32) for _, v in vectors])
        self._embed = embed

    def lexical(self, query: str) -> list[str]:
        """Plain FTS5 at note level: English stemming, title weighted, an OR of the words."""
        return [
            self.paths[r]
            for (r,) in self.db.execute(
                "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f, 5.0, 1.0) LIMIT ?",
                (_or_query(query), DEPTH),
            )
        ]

    def fused(self, query: str) -> list[str]:
        lexical = self.lexical(query)
        scores = self.matrix @ np.asarray(self._embed([query])[0], dtype=np.float32)
        best: dict[int, float] = {}
        for note, score in zip(self.block_notes.tolist(), scores.tolist(), strict=True):
            if score > best.get(note, -2.0):
                best[note] = score
        vector = [self.paths[n] for n in sorted(best, key=lambda n: -best[n])[:DEPTH]]
        return rrf([lexical, vector])
