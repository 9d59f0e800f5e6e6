"""Helpers for the memory tests: a vault with an index but no model, a tiny fake embedder
(hashed bag of words) so the hybrid path runs without loading a model, and one short
conversation added turn by turn."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vaultctx import Workspace

DIM = 64


class HashEmbedder:
    """Deterministic unit vectors from word hashes: texts sharing words are near."""

    name = "hash-test"
    model_id = "hash-test"
    dim = DIM

    def __init__(self) -> None:
        self.fail = False
        self.calls = 0

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        self.calls += 1
        if self.fail:
            raise RuntimeError("model exploded")
        out = np.zeros((len(texts), DIM), np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % DIM] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def indexed_vault(root: Path) -> Workspace:
    """A two-note vault indexed without embeddings: memory then uses token recall only."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Bees.md").write_text("# Bees\nThe hives stand in the orchard.\n", encoding="utf-8")
    (root / "Garden.md").write_text("# Garden\nTomatoes and beans.\n", encoding="utf-8")
    ws = Workspace.open(root)
    ws.index(embed=False)
    return ws


TURNS = [
    ("Jon", "I finally chose an adoption agency last week."),
    ("Gina", "What made you pick that agency?"),
    ("Jon", "They support LGBTQ+ folks and their counsellors are lovely."),
    ("Gina", "I made marmalade with my grandmother on Sunday."),
    ("Jon", "The agency visits our home in June."),
]


def add_turns(mem, turns=TURNS, *, scope: str = "c") -> list:
    return [
        mem.add(f"{speaker}: {text}", tier="channel", scope=scope, created_at="2023-05-08",
                speaker=speaker, session="s1", turn=f"D1:{i}")
        for i, (speaker, text) in enumerate(turns, start=1)
    ]  # fmt: skip
