"""Select latency on synthetic vaults of 10k and 100k blocks: warm, in-process, query
embedding included, with the per-retriever breakdown and peak RSS per component.

    python benchmarks/select_bench.py [--sizes 10000 100000] [--queries 240] [--real-vectors]
                                      [--baseline OTHER_CHECKOUT/src] [--rounds 2]

Every measurement runs in a fresh child process, so its peak RSS is that of one process
serving selects on one vault. With `--baseline`, the same measurement runs on another
checkout's code too, alternating with this one `--rounds` times: old and new side by side
in one run, under the same load. The floor of hybrid select is one query embedding, measured
in the same process on a separate set of queries of the same kind; the exact scan of the
vector matrix is measured alone as well. By default the blocks get random unit vectors
instead of model embeddings: the scan costs the same whatever the vectors hold, and
embedding 100k blocks takes an hour on this machine. `--real-vectors` embeds them for real.
Targets (Select and cold-start issues): p50 ≤ 1.5 × embedding time and p95 ≤ 40 ms at 10k
blocks; p50 ≤ 30 ms, p95 ≤ 60 ms and peak RSS ≤ 600 MB at 100k with the model loaded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    HYBRID_PATHS,
    check,
    code_env,
    emit_figures,
    offline_env,
    peak_rss_mb,
    percentile,
    resident_by_kind,
    rss_mb,
    selector_of,
    vault_of,
)
from synthvault import blocks_to_notes, generate_queries, generate_vault

TARGETS = {10_000: {"p95": 40.0, "p50_x_embed": 1.5}, 100_000: {"p50": 30.0, "p95": 60.0}}
RSS_TARGET_MB = 600
PARTS = ("lexical", "vector", "graph")


def build(root: Path, blocks: int, real_vectors: bool) -> None:
    from vaultctx import Embedder, Workspace

    try:
        from vaultctx.storage.db import IndexDatabase
    except ModuleNotFoundError:  # a baseline from before the storage layer was `storage/`
        from vaultctx.workspace.db import IndexDatabase  # type: ignore[no-redef]

    embedder = Embedder()
    if not root.exists():
        generate_vault(root, blocks_to_notes(blocks), seed=0)
    with Workspace.open(root, embedder=embedder) as ws:
        if real_vectors:
            ws.index()
            return
        ws.index(embed=False)
        conn = vault_of(ws).db.connect()
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
            with vault_of(ws).db.transaction() as wconn:
                wconn.executemany(
                    "INSERT INTO embeddings(model, hash, vector) VALUES (?, ?, ?)",
                    [
                        (embedder.model_id, h, v.tobytes())
                        for h, v in zip(missing, vectors, strict=True)
                    ],
                )
                IndexDatabase.set_meta(wconn, "embedding_model", embedder.model_id)
                generation = int(vault_of(ws).db.get_meta("generation", "0") or 0) + 1
                IndexDatabase.set_meta(wconn, "generation", str(generation))


def measure(root: Path, queries: list[str], floor_queries: list[str]) -> dict:
    """One process serving selects: latencies, the parts of each, and what memory each
    stage added (interpreter and libraries, the model, the select state)."""
    rss = {"start": rss_mb()}
    from vaultctx import Embedder, Workspace

    embedder = Embedder()
    rss["imports"] = rss_mb()
    embedder.encode_query("load the model")
    rss["model"] = rss_mb()
    with Workspace.open(root, embedder=embedder) as ws:
        store = ws.status()
        for q in floor_queries[:10]:  # warm: vector matrix, link graph, SQLite cache
            ws.select(q, k=10)
        rss["select_state"] = rss_mb()
        by_kind = resident_by_kind()
        embed_ms = []
        for q in floor_queries:
            started = time.perf_counter()
            embedder.encode_query(q)
            embed_ms.append((time.perf_counter() - started) * 1000)
        # A baseline from before `Vault.reads` loads the matrix from a connection.
        vault = vault_of(ws)
        reads = getattr(vault, "reads", None) or vault.db.connect()
        matrix = selector_of(ws).vectors.get(reads, vault.generation, embedder.model_id)
        vectors = [embedder.encode_query(q) for q in floor_queries[:60]]
        scan_ms = []
        for vector in vectors:
            started = time.perf_counter()
            matrix.search(vector, 50, pool=1000)
            scan_ms.append((time.perf_counter() - started) * 1000)
        wall, parts = [], {name: [] for name in PARTS}
        for q in queries:
            started = time.perf_counter()
            selection = ws.select(q, k=10)
            wall.append((time.perf_counter() - started) * 1000)
            for name in parts:
                parts[name].append(selection.diagnostics[f"{name}_ms"])
            assert selection.diagnostics["retrieval_path"] in HYBRID_PATHS
        matrix_mb = getattr(matrix.matrix, "nbytes", 0) / 2**20
    rss["end"] = rss_mb()
    return {
        "blocks": store.blocks,
        "notes": store.notes,
        "embed_ms": embed_ms,
        "scan_ms": scan_ms,
        "wall_ms": wall,
        "parts_ms": parts,
        "peak_rss_mb": peak_rss_mb(),
        "rss_mb": rss,
        "matrix_mb": matrix_mb,
        "resident_by_kind": by_kind,
        "backend": getattr(embedder, "loaded_backend", "torch"),
    }


def run_child(work: Path, size: int, real_vectors: bool, baseline: str | None) -> dict:
    command = [sys.executable, __file__, "--measure-only", str(size), "--workdir", str(work)]
    command += ["--real-vectors"] if real_vectors else []
    out = subprocess.run(
        command, env=code_env(baseline), check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def summarize(runs: list[dict]) -> dict:
    """Pool the rounds of one variant: percentiles over all queries, the worst peak RSS."""
    wall = [t for r in runs for t in r["wall_ms"]]
    embed = [t for r in runs for t in r["embed_ms"]]
    scan = [t for r in runs for t in r["scan_ms"]]
    rss = runs[-1]["rss_mb"]
    return {
        "blocks": runs[0]["blocks"],
        "notes": runs[0]["notes"],
        "backend": runs[0]["backend"],
        "p50_ms": percentile(wall, 50),
        "p95_ms": percentile(wall, 95),
        "embed_p50_ms": statistics.median(embed),
        "scan_p50_ms": statistics.median(scan),
        **{
            f"{name}_p50_ms": statistics.median(t for r in runs for t in r["parts_ms"][name])
            for name in PARTS
        },
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "rss_interpreter_libs_mb": rss["imports"],
        "rss_model_mb": rss["model"] - rss["imports"],
        "rss_select_state_mb": rss["select_state"] - rss["model"],
        "matrix_mb": runs[0]["matrix_mb"],
        **{f"resident_{k}_mb": v for k, v in runs[-1]["resident_by_kind"].items()},
    }


def report(size: int, variants: dict[str, dict]) -> None:
    rows = [
        ("select p50 ms", "p50_ms"),
        ("select p95 ms", "p95_ms"),
        ("query embedding p50 ms", "embed_p50_ms"),
        ("vector scan alone p50 ms", "scan_p50_ms"),
        ("lexical p50 ms", "lexical_p50_ms"),
        ("vector p50 ms (embedding incl.)", "vector_p50_ms"),
        ("graph p50 ms", "graph_p50_ms"),
        ("peak RSS MB", "peak_rss_mb"),
        ("  interpreter + libraries MB", "rss_interpreter_libs_mb"),
        ("  model loaded MB", "rss_model_mb"),
        ("  select state MB (matrix, graph, SQLite)", "rss_select_state_mb"),
        ("  of which the vector matrix MB", "matrix_mb"),
        ("resident when warm, by mapping: anonymous MB", "resident_anonymous_mb"),
        ("  SQLite's memory-mapped index MB", "resident_sqlite_mmap_mb"),
        ("  model weights file (mapped) MB", "resident_model_weights_mmap_mb"),
        ("  shared libraries MB", "resident_libraries_mb"),
    ]
    first = next(iter(variants.values()))
    print(f"\n== {first['blocks']:,} blocks in {first['notes']:,} notes ({size:,} asked)")
    print(f"{'':44}" + "".join(f"{name:>18}" for name in variants))
    for label, key in rows:
        print(f"{label:44}" + "".join(f"{v.get(key, 0.0):>18.1f}" for v in variants.values()))
    print(f"{'embedding backend':44}" + "".join(f"{v['backend']:>18}" for v in variants.values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--real-vectors", action="store_true")
    parser.add_argument("--workdir")
    parser.add_argument("--baseline", metavar="SRC", help="another checkout's src, run too")
    parser.add_argument("--rounds", type=int, default=2, help="alternations per variant")
    parser.add_argument("--build-only", type=int, metavar="SIZE", help=argparse.SUPPRESS)
    parser.add_argument("--measure-only", type=int, metavar="SIZE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Path(args.workdir or Path(tempfile.gettempdir()) / "vaultctx-bench" / "select")
    suffix = "-real" if args.real_vectors else ""
    queries = generate_queries(args.queries, seed=1)
    floor_queries = generate_queries(args.queries, seed=2)
    if args.build_only or args.measure_only:
        offline_env()
        if args.build_only:
            build(work / f"{args.build_only}{suffix}", args.build_only, args.real_vectors)
        else:
            result = measure(work / f"{args.measure_only}{suffix}", queries, floor_queries)
            print(json.dumps(result))
        return 0
    print(
        f"{len(queries)} queries, {statistics.mean(len(q.split()) for q in queries):.1f} words"
        f" on average; vectors: {'model' if args.real_vectors else 'random unit (same cost)'}"
    )
    names = (["baseline"] if args.baseline else []) + ["current"]
    ok = True
    figures: dict = {}
    for size in args.sizes:
        started = time.perf_counter()
        codes = {name: args.baseline if name == "baseline" else None for name in names}
        for name, code in codes.items():  # each indexes its own copy: schemas may differ
            command = [sys.executable, __file__, "--build-only", str(size)]
            command += ["--workdir", str(work / name)]
            command += ["--real-vectors"] if args.real_vectors else []
            subprocess.run(command, env=code_env(code), check=True)
        print(f"\nvault of {size:,} blocks ready in {time.perf_counter() - started:.1f} s")
        runs: dict[str, list[dict]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                runs[name].append(run_child(work / name, size, args.real_vectors, codes[name]))
        variants = {name: summarize(r) for name, r in runs.items()}
        report(size, variants)
        m = variants["current"]
        target = TARGETS.get(size, {})
        if "p50_x_embed" in target:
            ratio = m["p50_ms"] / m["embed_p50_ms"]
            ok &= check("p50 / embedding p50", ratio, target["p50_x_embed"], higher_is_better=False)
        if "p50" in target:
            ok &= check("p50 ms", m["p50_ms"], target["p50"], higher_is_better=False)
        if "p95" in target:
            ok &= check("p95 ms", m["p95_ms"], target["p95"], higher_is_better=False)
        if size >= 100_000:
            ok &= check("peak RSS MB", m["peak_rss_mb"], RSS_TARGET_MB, higher_is_better=False)
        figures[str(size)] = {
            name: {k: round(v, 2) if isinstance(v, float) else v for k, v in variant.items()}
            for name, variant in variants.items()
        }
    emit_figures("select", {"vectors": "model" if args.real_vectors else "random", **figures})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
