"""Select latency on synthetic vaults of 10k and 100k blocks: warm, in-process, query
embedding included, with the per-retriever breakdown and peak RSS.

    python benchmarks/select_bench.py [--sizes 10000 100000] [--queries 240] [--real-vectors]

The floor of hybrid select is one query embedding, measured here in the same run on a
separate set of queries of the same kind. By default the blocks get random unit vectors
instead of model embeddings: exact search costs the same whatever the vectors hold, and
embedding 100k blocks takes an hour on this machine. `--real-vectors` embeds them for real.
Targets (Select issue): p50 ≤ 1.5 × embedding time and p95 ≤ 40 ms at 10k blocks;
p50 ≤ 30 ms and p95 ≤ 75 ms at 100k; peak RSS ≤ 600 MB at 100k with the model loaded.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import check, emit_figures, offline_env, peak_rss_mb, percentile
from synthvault import blocks_to_notes, generate_queries, generate_vault

offline_env()

from vaultctx import Embedder, Workspace  # noqa: E402
from vaultctx.workspace.db import IndexDatabase  # noqa: E402

TARGETS = {10_000: {"p95": 40.0, "p50_x_embed": 1.5}, 100_000: {"p50": 30.0, "p95": 75.0}}


def build(root: Path, blocks: int, embedder: Embedder, real_vectors: bool) -> None:
    if not root.exists():
        generate_vault(root, blocks_to_notes(blocks), seed=0)
    with Workspace.open(root, embedder=embedder) as ws:
        if real_vectors:
            ws.index()
            return
        ws.index(embed=False)
        conn = ws.db.connect()
        missing = [
            h
            for (h,) in conn.execute(
                "SELECT DISTINCT b.embed_hash FROM blocks b WHERE NOT EXISTS"
                " (SELECT 1 FROM embeddings e WHERE e.model = ? AND e.hash = b.embed_hash)",
                (embedder.model_id,),
            )
        ]
        if missing:
            rng = np.random.default_rng(0)
            vectors = rng.standard_normal((len(missing), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with ws.db.transaction() as wconn:
                wconn.executemany(
                    "INSERT INTO embeddings(model, hash, vector) VALUES (?, ?, ?)",
                    [
                        (embedder.model_id, h, v.tobytes())
                        for h, v in zip(missing, vectors, strict=True)
                    ],
                )
                IndexDatabase.set_meta(wconn, "embedding_model", embedder.model_id)
                generation = int(ws.db.get_meta("generation", "0") or 0) + 1
                IndexDatabase.set_meta(wconn, "generation", str(generation))


def measure(root: Path, embedder: Embedder, queries: list[str], floor_queries: list[str]) -> dict:
    with Workspace.open(root, embedder=embedder) as ws:
        store = ws.status()
        for q in floor_queries[:10]:  # warm: model, vector matrix, link graph, SQLite cache
            ws.select(q, k=10)
        embed_ms = []
        for q in floor_queries:
            started = time.perf_counter()
            embedder.encode_query(q)
            embed_ms.append((time.perf_counter() - started) * 1000)
        wall, parts = [], {"lexical": [], "vector": [], "graph": []}
        for q in queries:
            started = time.perf_counter()
            selection = ws.select(q, k=10)
            wall.append((time.perf_counter() - started) * 1000)
            for name in parts:
                parts[name].append(selection.diagnostics[f"{name}_ms"])
            assert selection.diagnostics["retrieval_path"] == "hybrid_rrf"
    return {
        "blocks": store.blocks,
        "notes": store.notes,
        "embed_p50": statistics.median(embed_ms),
        "p50": percentile(wall, 50),
        "p95": percentile(wall, 95),
        "parts": {name: statistics.median(v) for name, v in parts.items()},
        "rss": peak_rss_mb(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--real-vectors", action="store_true")
    parser.add_argument("--workdir")
    parser.add_argument("--build-only", type=int, metavar="SIZE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Path(args.workdir or Path(tempfile.gettempdir()) / "vaultctx-bench" / "select")
    if args.build_only:
        build(
            work / f"{args.build_only}{'-real' if args.real_vectors else ''}",
            args.build_only,
            Embedder(),
            args.real_vectors,
        )
        return 0
    queries = generate_queries(args.queries, seed=1)
    floor_queries = generate_queries(args.queries, seed=2)
    print(
        f"{len(queries)} queries, {statistics.mean(len(q.split()) for q in queries):.1f} words"
        f" on average; vectors: {'model' if args.real_vectors else 'random unit (same cost)'}"
    )
    embedder = Embedder()
    ok = True
    figures: dict = {}
    for size in args.sizes:
        root = work / f"{size}{'-real' if args.real_vectors else ''}"
        started = time.perf_counter()
        # Built in a child process, so peak RSS below is that of a process serving selects.
        command = [sys.executable, __file__, "--build-only", str(size), "--workdir", str(work)]
        subprocess.run(command + (["--real-vectors"] if args.real_vectors else []), check=True)
        print(f"\n== {size:,} blocks (vault ready in {time.perf_counter() - started:.1f} s)")
        m = measure(root, embedder, queries, floor_queries)
        print(
            f"{m['blocks']:,} blocks in {m['notes']:,} notes: select p50 {m['p50']:.1f} ms, "
            f"p95 {m['p95']:.1f} ms; query embedding alone p50 {m['embed_p50']:.1f} ms"
        )
        print(
            "median per retriever: "
            + ", ".join(f"{k} {v:.2f} ms" for k, v in m["parts"].items())
            + f" (vector includes the embedding); peak RSS {m['rss']:.0f} MB"
        )
        target = TARGETS.get(size, {})
        if "p50_x_embed" in target:
            ok &= check(
                "p50 / embedding p50",
                m["p50"] / m["embed_p50"],
                target["p50_x_embed"],
                higher_is_better=False,
            )
        if "p50" in target:
            ok &= check("p50 ms", m["p50"], target["p50"], higher_is_better=False)
        if "p95" in target:
            ok &= check("p95 ms", m["p95"], target["p95"], higher_is_better=False)
        if size >= 100_000:
            ok &= check("peak RSS MB", m["rss"], 600, higher_is_better=False)
        figures[str(size)] = {
            "blocks": m["blocks"],
            "p50_ms": round(m["p50"], 2),
            "p95_ms": round(m["p95"], 2),
            "embed_p50_ms": round(m["embed_p50"], 2),
            **{f"{k}_p50_ms": round(v, 2) for k, v in m["parts"].items()},
            "peak_rss_mb": round(m["rss"]),
        }
    emit_figures("select", {"vectors": "model" if args.real_vectors else "random", **figures})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
