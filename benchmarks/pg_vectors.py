"""Nearest-neighbour search in PostgreSQL at scale: exact scan vs an HNSW index (pgvector).

    python benchmarks/pg_vectors.py [--sizes 100000,300000] [--queries 300] [--sigma 0.05]
                                    [--vectors /tmp/suite-pg/scifact/vectors.db]
                                    [--workdir DIR] [--maintenance-work-mem 2GB]
                                    [--build-workers 1] [--shared-buffers 1GB]
                                    [--ef-search 40,100,200]

The facts to design ANN on PostgreSQL with (issue: "1M blocks on PostgreSQL, select p50 ≤ 60
ms and p95 ≤ 120 ms on this machine with the ANN index, recall@10 ≥ 0.98 of exact"). Vectors
are real: the SciFact corpus block vectors of the default model (the suite's cache at
`--vectors` when present, else the corpus texts embedded here), and the judged SciFact test
queries with the model's query encoding (cached in the workdir). A table of N rows holds the
real vectors, then copies of them with Gaussian noise of `--sigma` per dimension, renormalised
(a copy's cosine to its source is printed), loaded with binary COPY into
`vecs(id bigint, v vector(384))` on a throwaway server. For each size:

(a) exact top-10 by a sequential scan (`ORDER BY v <=> q LIMIT 10`, no index yet), p50/p95
    ms as the client sees them (Unix socket, prepared statement);
(b) `CREATE INDEX ... USING hnsw (v vector_cosine_ops) WITH (m = 16, ef_construction = 64)`:
    build time and size, then p50/p95 ms and recall@10 against (a) per `hnsw.ef_search`;
(c) the in-process exact scan of the same rows (int8 codes and `dot_rows`, as select does
    below `ann_min_vectors`, with its helper thread; float32 too), and select's first pass
    past it (`sketch`: the matrix's sketch, then its SKETCH_CANDIDATES best rows scored
    exactly; the sketch's fit time is printed), p50/p95 ms per query and recall@10.

maintenance_work_mem must hold the graph for a fast build (the index takes about 2 KB a row here:
1M rows want 3GB or more; pgvector prints a notice when it does not fit).

Target, at the largest size run: recall@10 ≥ 0.98 at some ef_search with p95 ≤ 120 ms.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, embedded_postgres, emit_figures, load_beir, offline_env, percentile

offline_env()

DIM = 384
K = 10
EF_SEARCH = (40, 100, 200)
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 64
RECALL_TARGET = 0.98
P95_TARGET_MS = 120.0
DEFAULT_VECTORS = Path("/tmp/suite-pg/scifact/vectors.db")


# --- vectors --------------------------------------------------------------------------------


def corpus_vectors(cache: Path, work: Path) -> tuple[np.ndarray, str]:
    """The SciFact corpus vectors of the default model: the suite's block cache when present,
    else the corpus texts (title and text) embedded now and kept in the workdir."""
    from vaultctx.storage.embeddings import Embedder

    model = Embedder().model_id
    if cache.is_file():
        conn = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT vector FROM embeddings WHERE model = ? ORDER BY hash", (model,)
            ).fetchall()
        finally:
            conn.close()
        if rows:
            matrix = np.stack([np.frombuffer(v, dtype=np.float32) for (v,) in rows])
            return _unit(matrix), f"{cache} ({len(rows)} block vectors)"
    own = work / "scifact_corpus.npy"
    if not own.is_file():
        corpus, _, _ = load_beir(DATA / "scifact")
        texts = [f"{d['title']}\n\n{d['text']}".strip() for d in corpus.values()]
        print(f"embedding {len(texts)} SciFact documents (a few minutes) ...", flush=True)
        np.save(own, Embedder().encode(texts))
    matrix = np.load(own)
    return _unit(matrix), f"{own} ({len(matrix)} document vectors, embedded here)"


def query_vectors(work: Path, limit: int) -> np.ndarray:
    """The judged SciFact test queries, embedded one at a time as select does."""
    own = work / "scifact_queries.npy"
    if not own.is_file():
        from vaultctx.storage.embeddings import Embedder

        _, queries, qrels = load_beir(DATA / "scifact")
        texts = [queries[q] for q in qrels if q in queries]
        embedder = Embedder()
        np.save(own, np.stack([embedder.encode_query(t) for t in texts]))
    return _unit(np.load(own)[:limit])


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    return np.ascontiguousarray(matrix / np.linalg.norm(matrix, axis=1, keepdims=True))


def grow(real: np.ndarray, rows: int, sigma: float, seed: int = 0) -> np.ndarray:
    """`rows` unit vectors: the real ones, then copies (round-robin over the sources) with
    N(0, sigma²) noise per dimension, renormalised. A smaller size is a prefix of a larger."""
    out = np.empty((rows, real.shape[1]), dtype=np.float32)
    take = min(rows, len(real))
    out[:take] = real[:take]
    rng = np.random.default_rng(seed)
    for start in range(take, rows, 65_536):
        stop = min(rows, start + 65_536)
        sources = real[(np.arange(start, stop) - take) % len(real)]
        noisy = sources + rng.standard_normal(sources.shape, dtype=np.float32) * sigma
        out[start:stop] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    return out


def describe_noise(real: np.ndarray, sigma: float) -> dict:
    """How close a copy is to its source, next to how close real neighbours are."""
    sample = real[np.random.default_rng(1).choice(len(real), min(1000, len(real)), False)]
    sims = sample @ real.T
    sims[sims > 0.9999] = -1.0  # itself (and exact duplicates)
    copies = grow(real, 2 * len(real), sigma)[len(real) :]
    to_source = np.einsum("ij,ij->i", copies, real)
    return {
        "real_nn_cos_p50": float(np.median(sims.max(axis=1))),
        "real_10th_nn_cos_p50": float(np.median(np.sort(sims, axis=1)[:, -10])),
        "copy_to_source_cos_p50": float(np.median(to_source)),
    }


# --- PostgreSQL -----------------------------------------------------------------------------


def load_table(url: str, matrix: np.ndarray) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        with conn.transaction():  # BEGIN: COPY FREEZE wants the table made in it
            conn.execute(f"CREATE TABLE vecs (id bigint, v vector({DIM}))")
            # FREEZE: the table is new in this transaction, so no hint bits to set later.
            with conn.cursor().copy(
                "COPY vecs (id, v) FROM STDIN WITH (FORMAT BINARY, FREEZE)"
            ) as copy:
                copy.set_types(["int8", "vector"])
                for i, row in enumerate(matrix):
                    copy.write_row((i, row))
        copied = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE vecs")
        size = conn.execute("SELECT pg_relation_size('vecs')").fetchone()[0]
    return {
        "copy_s": copied,
        "load_s": time.perf_counter() - started,
        "table_mb": size / 2**20,
    }


def timed_topk(conn, queries: np.ndarray) -> tuple[list[float], list[list[int]]]:
    sql = "SELECT id FROM vecs ORDER BY v <=> %s LIMIT 10"
    for q in queries[:5]:  # warm: the plan, the buffers
        conn.execute(sql, (q,), prepare=True).fetchall()
    times, ids = [], []
    for q in queries:
        started = time.perf_counter()
        rows = conn.execute(sql, (q,), prepare=True).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        ids.append([r[0] for r in rows])
    return times, ids


def plan_of(conn, query: np.ndarray) -> str:
    lines = conn.execute(
        "EXPLAIN (COSTS OFF) SELECT id FROM vecs ORDER BY v <=> %s LIMIT 10", (query,)
    ).fetchall()
    nodes = [line[0].strip().lstrip("-> ").split(" on ")[0] for line in lines]
    return " / ".join(n for n in nodes if n and not n.startswith(("Order By", "Sort Key")))


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    hits = [len(set(f[:K]) & set(e[:K])) / K for f, e in zip(found, exact, strict=True)]
    return sum(hits) / len(hits)


def session(url: str, settings: dict[str, str]):
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    for key, value in settings.items():
        conn.execute(f"SET {key} = '{value}'")
    return conn


def in_process(matrix: np.ndarray, queries: np.ndarray) -> dict:
    """Select's paths: the rows in memory, scored exactly per query, or only the rows their
    sketch ranks best; top-10 by argpartition."""
    from vaultctx.pipeline.note_ranking import SKETCH_CANDIDATES
    from vaultctx.search.vectors import Int8Matrix, Sketch, dot_rows, quantize_rows

    int8 = Int8Matrix(*quantize_rows(matrix))
    started = time.perf_counter()
    sketch = Sketch.fit(int8)
    print(f"  sketch of {len(matrix):,} rows fitted in {time.perf_counter() - started:.1f} s")
    out = {}
    with ThreadPoolExecutor(1) as helper:

        def best(scores: np.ndarray) -> np.ndarray:
            top = np.argpartition(-scores, K)[:K]
            return top[np.argsort(-scores[top])]

        def sketched(q: np.ndarray) -> np.ndarray:
            rows = sketch.best_rows(q, SKETCH_CANDIDATES, helper)
            return rows[best(dot_rows(Int8Matrix(int8.codes[rows], int8.scales[rows]), q))]

        searches = {
            "int8": lambda q: best(dot_rows(int8, q, helper)),
            "float32": lambda q: best(dot_rows(matrix, q, helper)),
            "sketch": sketched,
        }
        for name, search in searches.items():
            times, ids = [], []
            for q in queries[:5]:
                search(q)
            for q in queries:
                started = time.perf_counter()
                top = search(q)
                times.append((time.perf_counter() - started) * 1000)
                ids.append(top.tolist())
            out[name] = (times, ids)
    return out


def run_size(pg, n: int, matrix: np.ndarray, queries: np.ndarray, args) -> dict:
    print(f"\n== {n:,} rows", flush=True)
    url = pg.create_database(f"vecs_{n}")
    fig: dict = {"rows": n}
    loaded = load_table(url, matrix[:n])
    fig.update({k: round(v, 2) for k, v in loaded.items()})
    print(
        f"  load: COPY {loaded['copy_s']:.1f} s, with VACUUM ANALYZE {loaded['load_s']:.1f} s;"
        f" table {loaded['table_mb']:.0f} MB",
        flush=True,
    )
    query_settings = {"jit": "off"}
    with session(url, query_settings) as conn:
        fig["exact_plan"] = plan_of(conn, queries[0])
        fig["max_parallel_workers_per_gather"] = conn.execute(
            "SHOW max_parallel_workers_per_gather"
        ).fetchone()[0]
        times, exact = timed_topk(conn, queries)
    fig["exact_p50_ms"], fig["exact_p95_ms"] = percentile(times, 50), percentile(times, 95)
    print(
        f"  (a) exact seq scan in PostgreSQL: p50 {fig['exact_p50_ms']:.1f} ms,"
        f" p95 {fig['exact_p95_ms']:.1f} ms  [{fig['exact_plan']}]",
        flush=True,
    )

    for name, (times, ids) in in_process(matrix[:n], queries).items():
        fig[f"inproc_{name}_p50_ms"] = percentile(times, 50)
        fig[f"inproc_{name}_p95_ms"] = percentile(times, 95)
        fig[f"inproc_{name}_recall"] = recall(ids, exact)
        print(
            f"  (c) in-process {name}: p50 {percentile(times, 50):.1f} ms,"
            f" p95 {percentile(times, 95):.1f} ms, recall@10 vs (a) {recall(ids, exact):.4f}",
            flush=True,
        )

    build = {
        "maintenance_work_mem": args.maintenance_work_mem,
        "max_parallel_maintenance_workers": str(args.build_workers),
    }
    with session(url, build) as conn:
        # pgvector says when the graph outgrows maintenance_work_mem (the build slows down)
        conn.add_notice_handler(lambda d: print(f"      notice: {d.message_primary}"))
        started = time.perf_counter()
        conn.execute(
            "CREATE INDEX vecs_v_hnsw ON vecs USING hnsw (v vector_cosine_ops)"
            f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
        )
        fig["hnsw_build_s"] = time.perf_counter() - started
        fig["hnsw_mb"] = conn.execute("SELECT pg_relation_size('vecs_v_hnsw')").fetchone()[0]
        fig["hnsw_mb"] /= 2**20
    print(
        f"  (b) HNSW build {fig['hnsw_build_s']:.1f} s, index {fig['hnsw_mb']:.0f} MB",
        flush=True,
    )
    fig["hnsw"] = {}
    for ef in args.ef_search:
        with session(url, {**query_settings, "hnsw.ef_search": str(ef)}) as conn:
            plan = plan_of(conn, queries[0])
            times, ids = timed_topk(conn, queries)
        row = {
            "p50_ms": percentile(times, 50),
            "p95_ms": percentile(times, 95),
            "recall": recall(ids, exact),
            "plan": plan,
        }
        fig["hnsw"][str(ef)] = row
        print(
            f"      ef_search {ef:>3}: p50 {row['p50_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms,"
            f" recall@10 {row['recall']:.4f}  [{plan}]",
            flush=True,
        )
    pg.drop_database(f"vecs_{n}")
    return fig


def report(fig: dict) -> None:
    print(f"\n  {fig['rows']:,} rows                          p50 ms   p95 ms  recall@10")
    lines = [
        ("PG exact seq scan", fig["exact_p50_ms"], fig["exact_p95_ms"], 1.0),
        *(
            (f"PG HNSW ef_search={ef}", r["p50_ms"], r["p95_ms"], r["recall"])
            for ef, r in fig["hnsw"].items()
        ),
        *(
            (
                f"in-process {name}",
                fig[f"inproc_{name}_p50_ms"],
                fig[f"inproc_{name}_p95_ms"],
                fig[f"inproc_{name}_recall"],
            )
            for name in ("int8", "float32", "sketch")
        ),
    ]
    for label, p50, p95, rec in lines:
        print(f"  {label:<34}{p50:>7.1f}  {p95:>7.1f}  {rec:>9.4f}")
    print(
        f"  load {fig['load_s']:.1f} s (table {fig['table_mb']:.0f} MB);"
        f" HNSW build {fig['hnsw_build_s']:.1f} s (index {fig['hnsw_mb']:.0f} MB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,300000", help="rows per table, comma-separated")
    parser.add_argument("--queries", type=int, default=300, help="SciFact test queries to run")
    parser.add_argument("--sigma", type=float, default=0.05, help="noise per dimension of copies")
    parser.add_argument("--vectors", type=Path, default=DEFAULT_VECTORS, help="vector cache")
    parser.add_argument("--workdir", type=Path, help="where query vectors are cached")
    parser.add_argument("--maintenance-work-mem", default="2GB")
    parser.add_argument(
        "--build-workers", type=int, default=1, help="max_parallel_maintenance_workers"
    )
    parser.add_argument("--shared-buffers", default="1GB", help="the server's shared_buffers")
    parser.add_argument(
        "--ef-search",
        type=lambda text: [int(v) for v in text.split(",")],
        default=list(EF_SEARCH),
        help="hnsw.ef_search values, comma-separated",
    )
    args = parser.parse_args()
    wall = time.perf_counter()
    work = args.workdir or Path(tempfile.gettempdir()) / "vaultctx-bench" / "pg_vectors"
    work.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.sizes.split(","))

    real, source = corpus_vectors(args.vectors, work)
    queries = query_vectors(work, args.queries)
    noise = describe_noise(real, args.sigma)
    print(f"corpus vectors: {source}; queries: {len(queries)} SciFact test queries")
    print(
        f"copies: N(0, {args.sigma}²) per dimension, renormalised: copy-to-source cosine p50"
        f" {noise['copy_to_source_cos_p50']:.3f}; real vectors' nearest neighbour p50"
        f" {noise['real_nn_cos_p50']:.3f}, 10th nearest p50 {noise['real_10th_nn_cos_p50']:.3f}"
    )
    matrix = grow(real, sizes[-1], args.sigma)

    pg = embedded_postgres()  # puts tests/ on the path
    import pg_server

    pg_server.SERVER_SETTINGS["shared_buffers"] = args.shared_buffers
    results = {}
    with pg:
        import psycopg

        with psycopg.connect(pg.create_database("probe")) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
            pgvector = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()[0]
        print(
            f"PostgreSQL {server}, pgvector {pgvector}; shared_buffers {args.shared_buffers},"
            f" maintenance_work_mem {args.maintenance_work_mem},"
            f" max_parallel_maintenance_workers {args.build_workers}, jit off"
        )
        for n in sizes:
            results[n] = run_size(pg, n, matrix, queries, args)

    print("\n== figures")
    for n in sizes:
        report(results[n])

    print("\n== targets (largest size run)")
    top = results[sizes[-1]]
    reaching = [int(ef) for ef, r in top["hnsw"].items() if r["recall"] >= RECALL_TARGET]
    within = [ef for ef in reaching if top["hnsw"][str(ef)]["p95_ms"] <= P95_TARGET_MS]
    smallest = min(reaching) if reaching else None
    print(f"  smallest ef_search with recall@10 ≥ {RECALL_TARGET}: {smallest or 'none tried'}")
    best = max(args.ef_search, key=lambda e: top["hnsw"][str(e)]["recall"])
    chosen = min(within or reaching or [best])
    row = top["hnsw"][str(chosen)]
    ok = all(
        [
            check(
                f"HNSW recall@10 at {sizes[-1]:,} rows, ef_search={chosen}",
                row["recall"],
                RECALL_TARGET,
                higher_is_better=True,
            ),
            check(
                f"HNSW p95 ms at {sizes[-1]:,} rows, ef_search={chosen}",
                row["p95_ms"],
                P95_TARGET_MS,
                higher_is_better=False,
            ),
        ]
    )
    wall_s = time.perf_counter() - wall
    print(f"wall time {wall_s:.0f} s")
    emit_figures(
        "pg_vectors",
        {
            "postgres": server,
            "pgvector": pgvector,
            "sigma": args.sigma,
            "queries": len(queries),
            **{k: round(v, 4) for k, v in noise.items()},
            "shared_buffers": args.shared_buffers,
            "maintenance_work_mem": args.maintenance_work_mem,
            "max_parallel_maintenance_workers": args.build_workers,
            "hnsw_m": HNSW_M,
            "hnsw_ef_construction": HNSW_EF_CONSTRUCTION,
            "smallest_ef_search_for_recall": smallest,
            "sizes": {str(n): _rounded(results[n]) for n in sizes},
            "wall_s": round(wall_s),
        },
    )
    return 0 if ok else 1


def _rounded(value):
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return round(value, 4) if isinstance(value, float) else value


if __name__ == "__main__":
    sys.exit(main())
