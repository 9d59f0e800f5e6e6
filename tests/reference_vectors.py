"""The reference vectors of all-MiniLM-L6-v2 (sentence-transformers on torch), kept as a
fixture so the ONNX paths are checked against them on an install without torch;
scripts/make_reference_vectors.py writes it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vaultctx.storage.parser import parse_note
from vaultctx.storage.reader import embed_input

TESTS = Path(__file__).resolve().parent
FIXTURE = TESTS / "fixtures" / "minilm_reference.npz"
EXAMPLE_VAULT = TESTS.parent / "examples" / "vault"

EDGE_CASES = [
    "",
    " ",
    "  leading and trailing whitespace  ",
    "UPPER Case and MiXeD",
    "Café naïve résumé — “quotes” and ‘apostrophes’",
    "蜜蜂的群体行为 and 日本語のテキスト",
    "emoji 🐝🍯 and symbols ∑ ≥ ∞",
    "[[Wiki link]] #tag ^block-ref `code` **bold** https://example.org/path?q=1",
    "word " * 400,  # far past 256 tokens: truncated the same way
    "\n\n".join(["A paragraph about hives."] * 60),
]


def reference_texts() -> list[str]:
    """Every block of the example vault as the indexer embeds it, every whole note, and the
    edge cases: what the fixture holds vectors for."""
    blocks, notes = [], []
    for path in sorted(EXAMPLE_VAULT.rglob("*.md")):
        source = path.read_text(encoding="utf-8")
        note = parse_note(source, path.stem)
        for block in note.blocks:
            blocks.append(embed_input(note.title, " > ".join(block.heading_path), block.text))
        notes.append(source)
    return [*blocks, *notes, *EDGE_CASES]


@dataclass(frozen=True)
class Reference:
    texts: list[str]
    vectors: np.ndarray  # float32, unit rows
    made_with: dict[str, str]


def load_reference() -> Reference:
    with np.load(FIXTURE) as data:
        vectors = data["vectors"].astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return Reference(
            [str(t) for t in data["texts"]], vectors, json.loads(str(data["made_with"]))
        )
