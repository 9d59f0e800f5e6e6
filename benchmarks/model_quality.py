"""The bundled int8 model against the full-precision one, side by side in one run.

    python benchmarks/model_quality.py [--abstracts N] [--ndcg] [--rounds N] [--candidate DIR]

- vectors: cosine of the int8 vector to the fp32 one (mean, 1st percentile, min) over the
  first N SciFact abstracts (long: most run past the 256-token truncation);
- `--ndcg`: dense-only nDCG@10 with each model over Cranfield and SciFact, one document a
  text (title and abstract), brute-force cosine: the model alone, without select around it;
- speed: one query embedded alone (ms, p50) and a batch of abstracts (texts/s), the two
  models alternating round by round on the same thread, so a loaded machine slows both alike.

`--candidate` measures another folder built by scripts/build_model.py (`--out`) instead of
the bundled one: how a quantization recipe is chosen. Needs the `export` extra and the
weights package (the fp32 side).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, emit_figures, load_beir, offline_env, percentile

offline_env()

from vaultctx.storage.embeddings import (  # noqa: E402
    BUNDLED_FOLDER,
    FULL_PRECISION_MODEL,
    Embedder,
)
from vaultctx.storage.encoders import OnnxEncoder  # noqa: E402
from vaultctx.storage.onnx_export import read_spec  # noqa: E402


def documents(name: str) -> tuple[list[str], list[str], dict, dict]:
    corpus, queries, qrels = load_beir(DATA / name)
    ids = list(corpus)
    texts = [f"{corpus[i]['title']}\n{corpus[i]['text']}".strip() for i in ids]
    return ids, texts, queries, qrels


def ndcg_at_10(scores: np.ndarray, ids: list[str], qids: list[str], qrels: dict) -> float:
    top = np.argsort(-scores, axis=1)[:, :10]
    total = 0.0
    for row, qid in enumerate(qids):
        grades = qrels[qid]
        dcg = sum(
            (2 ** grades.get(ids[j], 0) - 1) / math.log2(rank + 2)
            for rank, j in enumerate(top[row])
        )
        ideal = sorted(grades.values(), reverse=True)[:10]
        total += dcg / sum((2**g - 1) / math.log2(r + 2) for r, g in enumerate(ideal))
    return total / len(qids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--abstracts", type=int, default=400)
    parser.add_argument("--ndcg", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--candidate", type=Path, default=BUNDLED_FOLDER)
    args = parser.parse_args()

    fp32 = Embedder(FULL_PRECISION_MODEL, backend="onnx")
    fp32.load()
    int8 = OnnxEncoder(read_spec(args.candidate), args.candidate)
    encode = {"fp32": fp32.encode, "int8": lambda texts: int8.encode(texts, 64)}
    figures: dict[str, object] = {"candidate": str(args.candidate)}

    _, abstracts, _, _ = documents("scifact")
    abstracts = abstracts[: args.abstracts]
    vectors = {name: fn(abstracts) for name, fn in encode.items()}
    cosine = np.sum(vectors["fp32"] * vectors["int8"], axis=1)
    figures["cosine"] = {
        "mean": round(float(cosine.mean()), 5),
        "p01": round(float(np.quantile(cosine, 0.01)), 5),
        "min": round(float(cosine.min()), 5),
    }
    print(f"cosine int8 vs fp32 over {len(abstracts)} SciFact abstracts: {figures['cosine']}")

    if args.ndcg:
        for dataset in ("cranfield", "scifact"):
            ids, texts, queries, qrels = documents(dataset)
            qids = [q for q in queries if q in qrels]
            row = {}
            for name, fn in encode.items():
                scores = fn([queries[q] for q in qids]) @ fn(texts).T
                row[name] = round(ndcg_at_10(scores, ids, qids, qrels), 4)
            row["delta"] = round(row["int8"] - row["fp32"], 4)
            figures[f"ndcg10_{dataset}"] = row
            print(f"dense nDCG@10 {dataset}: {row}")

    queries = [t.split("\n", 1)[0] for t in abstracts[:50]]  # titles: query-sized texts
    batch = abstracts[:64]
    query_ms: dict[str, list[float]] = {name: [] for name in encode}
    batch_rate: dict[str, list[float]] = {name: [] for name in encode}
    for _ in range(args.rounds):
        for name, fn in encode.items():
            for text in queries:
                started = time.perf_counter()
                fn([text])
                query_ms[name].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            fn(batch)
            batch_rate[name].append(len(batch) / (time.perf_counter() - started))
    figures["query_ms_p50"] = {n: round(percentile(v, 50), 2) for n, v in query_ms.items()}
    figures["batch_texts_per_s_median"] = {
        n: round(float(np.median(v)), 1) for n, v in batch_rate.items()
    }
    print(f"one query, ms p50 (alternating): {figures['query_ms_p50']}")
    print(f"batch of {len(batch)} abstracts, texts/s: {figures['batch_texts_per_s_median']}")
    emit_figures("model_quality", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
