"""Select while the index switches embedding models, against select with nothing running
beside it: same process, same vault, phases alternating.

    python benchmarks/reembed_bench.py [--blocks 3000] [--queries 120] [--rounds 3]

The vault's blocks have vectors of the bundled int8 model (random unit vectors: the scan costs
the same whatever they hold) and the configuration names the full-precision model, so select
answers with the int8 vectors and the int8 query encoder while the full-precision vectors are
made for real. Each round times `--queries` selects idle, then the same selects while
`Workspace.switch_in_background()` embeds (stopped at the end of the phase, so the next round
finds the switch still under way). The figures: p50/p95 of each phase, the blocks embedded
meanwhile, and which model answered (it must be int8 in both phases).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit_figures, offline_env, percentile
from synthvault import blocks_to_notes, generate_queries, generate_vault


def build(root: Path, blocks: int) -> None:
    from vaultctx import Workspace
    from vaultctx.storage.db import IndexDatabase
    from vaultctx.storage.embeddings import BUNDLED_MODEL_ID

    generate_vault(root, blocks_to_notes(blocks), seed=0)
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        db = ws._vault.db
        hashes = [h for (h,) in db.connect().execute("SELECT DISTINCT embed_hash FROM blocks")]
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((len(hashes), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with db.transaction() as conn:
            conn.executemany(
                "INSERT INTO embeddings(model, hash, vector) VALUES (?, ?, ?)",
                [(BUNDLED_MODEL_ID, h, v.tobytes()) for h, v in zip(hashes, vectors, strict=True)],
            )
            IndexDatabase.set_meta(conn, "embedding_model", BUNDLED_MODEL_ID)
            IndexDatabase.set_meta(conn, "generation", "2")


def timed(ws, queries: list[str]) -> tuple[list[float], set[str]]:
    times, models = [], set()
    for q in queries:
        t0 = time.perf_counter()
        selection = ws.select(q, k=10)
        times.append((time.perf_counter() - t0) * 1000)
        models.add(selection.diagnostics["vector_model"])
    return times, models


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--nice", type=int, help="nice levels the switch thread takes below the process's"
    )
    args = parser.parse_args()
    offline_env()
    from vaultctx import Workspace
    from vaultctx.storage import vault as vault_module

    if args.nice is not None:
        vault_module.BACKGROUND_NICE = args.nice
    from vaultctx.storage.embeddings import FULL_PRECISION_MODEL

    queries = generate_queries(args.queries, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        build(root, args.blocks)
        with Workspace.open(root, {"embedding_model": FULL_PRECISION_MODEL}) as ws:
            ws.embedder.load()
            timed(ws, queries[:20])  # warm: both encoders, the matrix, the graph
            phases: dict[str, list[float]] = {"idle": [], "reembedding": []}
            answered: dict[str, set[str]] = {"idle": set(), "reembedding": set()}
            made = []
            for _ in range(args.rounds):
                times, models = timed(ws, queries)
                phases["idle"] += times
                answered["idle"] |= models
                before = ws.status().pending_vectors
                thread = ws.switch_in_background()
                assert thread is not None, "the switch ended before the last round"
                while ws.status().pending_vectors == before:  # the first batch stored
                    time.sleep(0.05)
                times, models = timed(ws, queries)
                phases["reembedding"] += times
                answered["reembedding"] |= models
                ws._vault.stop_watching()  # ends the switch's thread after its batch
                made.append(ws.status().pending_vectors - before)
            status = ws.status()
    figures = {
        "blocks": status.blocks,
        "nice": vault_module.BACKGROUND_NICE,
        "rounds": args.rounds,
        "queries_per_phase": args.queries,
        "blocks_embedded_per_busy_phase": made,
        "answered_by": {k: sorted(v) for k, v in answered.items()},
    }
    for phase, times in phases.items():
        figures[phase] = {
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(percentile(times, 95), 2),
        }
    ratio = figures["reembedding"]["p50_ms"] / figures["idle"]["p50_ms"]
    figures["p50_ratio"] = round(ratio, 2)
    for phase in phases:
        p50, p95 = figures[phase]["p50_ms"], figures[phase]["p95_ms"]
        print(f"{phase:12} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")
    print(f"re-embedding / idle p50: {ratio:.2f}x; blocks embedded per busy phase: {made}")
    print(f"answered by: {figures['answered_by']}")
    emit_figures("reembed_bench", figures)


if __name__ == "__main__":
    main()
