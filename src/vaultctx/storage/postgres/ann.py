"""Approximate nearest neighbours in the database: an HNSW index (pgvector) over one model's
vectors, built by the publish that takes their count past `ann_min_vectors`, and asked for a
query's nearest blocks by select's first vector pass.

Past some hundreds of thousands of blocks an exact scan of every vector costs more than the
whole rest of select; the HNSW graph answers the same question in a few milliseconds, and
select scores what it returns exactly (see `pipeline.retrievers.vector_run`). The index is
partial (one model's rows) and on the vector cast to its dimension, which HNSW needs; the
query repeats both, literally, so the planner can use it.
"""

from __future__ import annotations

import hashlib
from typing import Any

# The graph's build parameters (benchmarks/pg_scale.py, 1M blocks, recall@10 of select's
# first pass against the exact scan at the widest search, 1000). With pgvector's m 16,
# ef_construction 64 keeps 0.951, 128 keeps 0.978-0.981 (two builds), for twice the build
# time. m 24 keeps 0.983 at a search of 600, in about the same time (45.9 against 49.7 ms),
# but that search returns 600 blocks where feedback rescores 1000, and it builds in 1.6x
# the time (29 minutes here, beside other work).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# A build keeps its graph in memory when it fits (pgvector builds on disk, far slower, past
# maintenance_work_mem): per vector, its floats, 2m neighbours of 16 bytes on the ground
# layer and some overhead; within these bounds, for this one build.
_BUILD_OVERHEAD_BYTES = 512
_BUILD_MEMORY_MB = (64, 4096)
# pgvector's largest hnsw.ef_search: the candidates a search keeps, and so the most it returns.
MAX_EF_SEARCH = 1000


def index_name(model: str) -> str:
    """The ANN index of one model's vectors (a model name can be any text: a digest of it)."""
    return f"embeddings_ann_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def ensure_index(pg: Any, model: str, min_vectors: int) -> bool:
    """Build the model's HNSW index when it has at least `min_vectors` vectors and no index
    yet (inside the caller's transaction: readers see it with the publish). True when built."""
    if has_index(lambda sql, params: pg.execute(sql, params).fetchall(), model):
        return False
    (count,) = pg.execute("SELECT count(*) FROM embeddings WHERE model = %s", (model,)).fetchone()
    if count == 0 or count < min_vectors:
        return False
    (dims,) = pg.execute(
        "SELECT vector_dims(vector) FROM embeddings WHERE model = %s LIMIT 1", (model,)
    ).fetchone()
    low, high = _BUILD_MEMORY_MB
    per_vector = 4 * int(dims) + 32 * HNSW_M + _BUILD_OVERHEAD_BYTES
    memory = min(max(count * per_vector >> 20, low), high)
    pg.execute(f"SET LOCAL maintenance_work_mem = '{memory}MB'")
    pg.execute(
        f"CREATE INDEX {index_name(model)} ON embeddings USING hnsw"
        f" ((vector::vector({int(dims)})) vector_cosine_ops)"
        f" WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
        f" WHERE model = {_literal(model)}"
    )
    return True


def has_index(query: Any, model: str) -> bool:
    """Whether the model's index exists (`query` runs one statement and returns its rows)."""
    return query("SELECT to_regclass(%s) IS NOT NULL", (index_name(model),))[0][0]


def nearest_sql(model: str, dims: int) -> str:
    """The blocks whose vectors are the nearest to the query's (`%s`: the vector, then how
    many vectors): the index's own expression and predicate, so the planner takes it."""
    return (
        "SELECT b.id FROM (SELECT hash FROM embeddings"
        f" WHERE model = {_literal(model)}"
        f" ORDER BY vector::vector({int(dims)}) <=> %s::vector({int(dims)}) LIMIT %s) e"
        " JOIN blocks b ON b.embed_hash = e.hash"
    )
