"""Refine: gate latency, LLM gate overhead, end-to-end `context`, and whether trimming hurts.

1. Deterministic gate latency at 50/100/500 real candidates (Cranfield blocks, with and
   without embeddings): target <= 5 ms at 100.
2. LLM gate overhead: our code plus litellm against a local OpenAI-compatible server that
   answers at once (so its think time is ~0): target <= 30 ms per call.
3. End-to-end `Workspace.context` p50 on a synthetic vault of ~10k blocks (cached under
   /tmp/vaultctx-bench/; `--no-vectors` skips the minutes of embedding).
4. Cranfield nDCG@10 of the deterministic gate's kept notes vs select's fused notes, at the
   default budget: trimming should not hurt quality.

    python benchmarks/refine_bench.py [--no-vectors] [--blocks N] [--queries N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, REPO, check, emit_figures, load_beir, offline_env, percentile

offline_env()
sys.path.insert(0, str(REPO / "tests"))

from llm_server import LLMServer, Reply, Request  # noqa: E402
from suite import ndcg_at, write_beir_vault  # noqa: E402
from synthvault import blocks_to_notes, generate_queries, generate_vault  # noqa: E402
from vaultctx import Workspace  # noqa: E402
from vaultctx.config import Config  # noqa: E402
from vaultctx.llm import LLMSettings  # noqa: E402
from vaultctx.pipeline.gate import deterministic_gate  # noqa: E402
from vaultctx.pipeline.refine import GateCache  # noqa: E402

WORKDIR = Path(tempfile.gettempdir()) / "vaultctx-bench"
GATE_TARGET_MS = 5.0
LLM_OVERHEAD_TARGET_MS = 30.0


def gate_latency(ws: Workspace, queries: list[str], sizes: list[int]) -> dict[str, float]:
    """p50/p95 of the deterministic gate alone on `n` real candidates. Select returns at
    most ~120 per query, so larger lists are the union of several queries' candidates."""
    figures: dict[str, float] = {}
    refiner = ws._refiner
    view = refiner.selector.scope.view()
    pool = list(
        {c.id: c for q in queries for c in ws.select(q, k=200, max_per_note=0).candidates}.values()
    )
    for use_vectors in (True, False):
        for n in sizes:
            times = []
            for start in range(0, len(queries) * 37, 37):
                offset = start % max(1, len(pool) - n)
                candidates = pool[offset : offset + n]
                vectors, has = refiner._vectors(candidates, view) if use_vectors else (None, None)
                for _ in range(3):
                    t0 = time.perf_counter()
                    deterministic_gate(
                        candidates,
                        Config().budget_tokens,
                        vectors=vectors,
                        has_vector=has,
                        neighbours=partial(refiner._neighbours, view),
                    )
                    times.append((time.perf_counter() - t0) * 1000)
            label = f"gate_{'vec' if use_vectors else 'lex'}_{n}"
            figures[f"{label}_p50_ms"] = round(percentile(times, 50), 3)
            figures[f"{label}_p95_ms"] = round(percentile(times, 95), 3)
            print(
                f"  deterministic gate, {n:>3} candidates, "
                f"{'embeddings' if use_vectors else 'words     '}: "
                f"p50 {percentile(times, 50):.2f} ms, p95 {percentile(times, 95):.2f} ms"
            )
    return figures


def llm_overhead(ws: Workspace, queries: list[str], calls: int) -> dict[str, float]:
    """Refine through the LLM gate against a server with no think time, cache bypassed."""
    server = LLMServer()

    def answer(request: Request) -> Reply:
        return Reply(content=json.dumps({"keep": [{"id": "c2", "reason": "r"}, {"id": "c1"}]}))

    server.script(answer)
    settings = LLMSettings(model="openai/bench-gate", api_base=server.api_base, timeout=5.0)
    refiner = ws._refiner
    selections = [ws.select(q, k=30) for q in queries]
    refiner.refine(selections[0], budget=2000, settings=settings)  # imports and connects
    total, deterministic = [], []
    try:
        for i in range(calls):
            selection = selections[i % len(selections)]
            refiner.cache = GateCache()
            t0 = time.perf_counter()
            session = refiner.refine(selection, budget=2000, settings=settings)
            total.append((time.perf_counter() - t0) * 1000)
            assert session.gate == "llm", session.gate_reason
            t0 = time.perf_counter()
            refiner.refine(selection, budget=2000, settings=LLMSettings())
            deterministic.append((time.perf_counter() - t0) * 1000)
    finally:
        server.close()
    p50 = percentile(total, 50)
    print(
        f"  LLM gate refine (30 candidates): p50 {p50:.1f} ms, p95 {percentile(total, 95):.1f}"
        f" ms; deterministic refine p50 {percentile(deterministic, 50):.2f} ms"
    )
    return {
        "llm_gate_p50_ms": round(p50, 2),
        "llm_gate_p95_ms": round(percentile(total, 95), 2),
        "deterministic_refine_p50_ms": round(percentile(deterministic, 50), 3),
    }


def end_to_end(n_blocks: int, use_vectors: bool, n_queries: int) -> dict[str, float]:
    vault = WORKDIR / f"synth-{n_blocks}" / "vault"
    if not vault.exists():
        generate_vault(vault, blocks_to_notes(n_blocks), seed=0)
    with Workspace.open(vault) as ws:
        started = time.perf_counter()
        report = ws.index(embed=use_vectors)
        print(
            f"  synthetic vault: {ws.status().blocks} blocks, indexed/checked in "
            f"{time.perf_counter() - started:.1f}s ({report.embedded} embedded)"
        )
        queries = generate_queries(n_queries, seed=1)
        ws.context(queries[0], use_vectors=use_vectors)  # warm: model, matrix, graph
        times, refine = [], []
        for query in queries:
            t0 = time.perf_counter()
            session = ws.context(query, use_vectors=use_vectors)
            times.append((time.perf_counter() - t0) * 1000)
            refine.append(session.diagnostics["refine_ms"])
            assert session.token_count <= session.budget
    p50 = percentile(times, 50)
    print(
        f"  context end to end ({'hybrid' if use_vectors else 'lexical+graph'}): p50 {p50:.1f}"
        f" ms, p95 {percentile(times, 95):.1f} ms; refine p50 {percentile(refine, 50):.2f} ms"
    )
    return {
        "context_blocks": n_blocks,
        "context_vectors": use_vectors,
        "context_p50_ms": round(p50, 2),
        "context_p95_ms": round(percentile(times, 95), 2),
        "context_refine_p50_ms": round(percentile(refine, 50), 3),
    }


def cranfield_quality(ws: Workspace, queries: dict, qrels: dict) -> dict[str, float]:
    """nDCG@10 over notes: select's fused list vs the deterministic gate's kept list."""
    fused, kept, kept_items, tokens = [], [], [], []
    for qid, grades in qrels.items():
        query = queries[qid]
        selection = ws.select(query, k=30)
        fused_ranked = [Path(n.path).stem for n in selection.notes()]
        session = ws.context(query, k=30)
        kept_ranked: list[str] = []
        for item in session.items:
            stem = Path(item.path or "").stem
            if stem not in kept_ranked:
                kept_ranked.append(stem)
        fused.append(ndcg_at(fused_ranked, grades, 10))
        kept.append(ndcg_at(kept_ranked, grades, 10))
        kept_items.append(len(session.items))
        tokens.append(session.token_count)
    n = len(fused)
    figures = {
        "cranfield_queries": n,
        "cranfield_fused_ndcg10": round(sum(fused) / n, 4),
        "cranfield_kept_ndcg10": round(sum(kept) / n, 4),
        "cranfield_kept_items_mean": round(sum(kept_items) / n, 2),
        "cranfield_kept_tokens_mean": round(sum(tokens) / n, 1),
    }
    print(
        f"  Cranfield ({n} queries, budget {Config().budget_tokens}): fused nDCG@10"
        f" {figures['cranfield_fused_ndcg10']:.4f}, kept {figures['cranfield_kept_ndcg10']:.4f}"
        f" ({figures['cranfield_kept_items_mean']} items,"
        f" {figures['cranfield_kept_tokens_mean']} tokens on average)"
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-vectors", action="store_true", help="end-to-end without vectors")
    parser.add_argument("--blocks", type=int, default=10_000, help="synthetic vault size")
    parser.add_argument("--queries", type=int, default=50, help="queries per measurement")
    parser.add_argument("--skip-e2e", action="store_true", help="skip the synthetic vault")
    args = parser.parse_args()

    corpus, queries, qrels = load_beir(DATA / "cranfield")
    qrels = {q: g for q, g in qrels.items() if q in queries}
    vault = WORKDIR / "cranfield" / "vault"
    write_beir_vault(corpus, vault, "frontmatter")
    figures: dict = {}
    ok = True
    with Workspace.open(vault) as ws:
        ws.index()
        sample = [queries[q] for q in list(qrels)[: args.queries]]
        print("deterministic gate")
        figures.update(gate_latency(ws, sample[:20], [50, 100, 500]))
        ok &= check(
            "gate p50 at 100 candidates (ms)",
            figures["gate_vec_100_p50_ms"],
            GATE_TARGET_MS,
            higher_is_better=False,
        )
        print("LLM gate")
        figures.update(llm_overhead(ws, sample, args.queries))
        ok &= check(
            "LLM gate overhead p50 (ms)",
            figures["llm_gate_p50_ms"],
            LLM_OVERHEAD_TARGET_MS,
            higher_is_better=False,
        )
        print("quality")
        figures.update(cranfield_quality(ws, queries, qrels))
        ok &= check(
            "kept nDCG@10 - fused nDCG@10",
            figures["cranfield_kept_ndcg10"] - figures["cranfield_fused_ndcg10"],
            -0.01,
            higher_is_better=True,
        )
    if not args.skip_e2e:
        print("end to end")
        figures.update(end_to_end(args.blocks, not args.no_vectors, args.queries))
    emit_figures("refine", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
