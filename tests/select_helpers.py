"""The small vaults and the stand-in embedder the select, vector, embedding, warm-up, graph
walk and focus tests share: hashed bag-of-words vectors, so the vector path runs for real on
numpy without loading a model."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np

from vaultctx.storage.embeddings import Embedder


class HashEmbedder(Embedder):
    """Bag-of-words vectors from hashed words: cheap, deterministic, no model to load."""

    def __init__(self) -> None:
        super().__init__("hash-test-model")

    @property
    def dim(self) -> int:
        return 64

    def encode(self, texts, *, batch_size=None):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


NOTES = {
    "Projects/Apiary.md": "---\ntags: [bees, project]\nstatus: active\n---\n# Apiary\n"
    "Plan for the apiary: hives, frames and [[Smoker]] maintenance.\n",
    "Projects/Garden.md": "---\ntags: [garden]\nstatus: done\n---\n# Garden\n"
    "Planting lavender and borage for pollinators. See [[Apiary]].\n",
    "Equipment/Smoker.md": "# Smoker\nBurn pine needles; keep the smoke cool.\n",
    "Journal/2025-05-01.md": "Inspected both hives. Queen seen in hive one. #bees/inspection\n",
    "Work/Draft.md": "Today I am drafting the newsletter. Linked: [[Quokka Facts]].\n",
    "Reference/Quokka Facts.md": "Marsupials of Rottnest island, smiling often.\n",
    "Reference/Unrelated.md": "Nothing to see here about anything.\n",
}


SECURITY = "Security and privacy\nEnd-to-end encryption protects what you store; keys stay local.\n"
TWINS = {
    # Two products, each with a "Security and privacy" page worded the same.
    "Sync/Introduction.md": "# Introduction to Sync\nSync keeps your devices in step. "
    "Read [[Sync/Security and privacy]] before you start.\n",
    "Sync/Security and privacy.md": f"# {SECURITY}",
    "Publish/Introduction.md": "# Introduction to Publish\nPublish puts notes on the web. "
    "Read [[Publish/Security and privacy]] first.\n",
    "Publish/Security and privacy.md": f"# {SECURITY}",
    "Notes/Unrelated.md": "# Gardening\nBorage and lavender feed the bees.\n",
}


def written_long_ago(vault: Path) -> Path:
    """Notes last edited a month ago: recent edits are context too, and a test of what the
    user opens wants only what it opens in focus."""
    month_ago = time.time() - 30 * 86400
    for path in vault.rglob("*.md"):
        os.utime(path, (month_ago, month_ago))
    return vault
