"""Retrieval quality of select on any BEIR-format set (Cranfield by default).

The corpus becomes a vault (one note per document, its title in the frontmatter), is indexed
with the default model, and every judged query is run three ways: lexical only, vector only
and fused. Prints nDCG@10, Recall@10/100, MRR@10 and latency per mode, the baselines measured
on this machine, and one JSON line.

`--compare` runs the same queries on three variants side by side: the model on torch with
exact float32 vectors in memory (the old path), on ONNX Runtime with float32, and on ONNX
Runtime with the int8 matrix (the default). Each backend gets its own index of the vault.

    python benchmarks/eval.py [DATASET_DIR] [--workdir DIR] [--limit N] [--compare]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, load_beir, offline_env, percentile

offline_env()

from vaultctx import Workspace  # noqa: E402
from vaultctx.pipeline.vectors import VectorStore  # noqa: E402

MODES = {"lexical": ["lexical"], "vector": ["vector"], "fused": None}
# Measured on this machine with the same model (the table), for Cranfield.
CRANFIELD_BASELINES = {
    "fts5 bm25 OR-query": 0.361,
    "exact MiniLM": 0.383,
    "plain RRF": 0.415,
    "txtai 9.14 hybrid": 0.405,
}
FUSED_TARGET = 0.43
# (embedding backend, matrix precision) per variant; the first is the baseline of --compare
VARIANTS = {
    "torch-float32": ("torch", "float32"),
    "onnx-float32": ("onnx", "float32"),
    "onnx-int8": ("onnx", "int8"),
}
SAME_QUALITY = 0.002  # fused nDCG@10 within this of the baseline


def write_vault(corpus: dict, vault: Path) -> None:
    """One note per document; unchanged files are left alone so re-runs index nothing."""
    docs = vault / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for doc_id, doc in corpus.items():
        title = " ".join(doc["title"].split()) or doc_id
        body = f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n{doc['text'].strip()}\n"
        path = docs / f"{doc_id}.md"
        if not path.exists() or path.read_text(encoding="utf-8") != body:
            path.write_text(body, encoding="utf-8")


def ndcg_at(ranked: list[str], grades: dict[str, int], k: int) -> float:
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def evaluate(ws: Workspace, queries: dict, qrels: dict, retrievers: list[str] | None) -> dict:
    ndcg, r10, r100, mrr, latency = [], [], [], [], []
    for qid, grades in qrels.items():
        selection = ws.select(queries[qid], k=100, max_per_note=1, retrievers=retrievers)
        latency.append(selection.diagnostics["select_ms"])
        ranked = [Path(n.path).stem for n in selection.notes()]
        relevant = set(grades)
        ndcg.append(ndcg_at(ranked, grades, 10))
        r10.append(len(relevant & set(ranked[:10])) / len(relevant))
        r100.append(len(relevant & set(ranked[:100])) / len(relevant))
        mrr.append(next((1 / (i + 1) for i, d in enumerate(ranked[:10]) if d in relevant), 0.0))
    n = len(ndcg)
    return {
        "ndcg@10": sum(ndcg) / n,
        "recall@10": sum(r10) / n,
        "recall@100": sum(r100) / n,
        "mrr@10": sum(mrr) / n,
        "p50_ms": percentile(latency, 50),
        "p95_ms": percentile(latency, 95),
        "queries": n,
    }


def run_variant(vault: Path, name: str, queries: dict, qrels: dict) -> dict:
    """Index the vault with the variant's backend (its own index folder) and evaluate."""
    backend, precision = VARIANTS[name]
    config = {"embedding_backend": backend}
    if backend == "torch":
        config["index_dir"] = ".vaultctx-torch"  # its own vectors, beside the default index
    with Workspace.open(vault, config) as ws:
        started = time.perf_counter()
        report = ws.index()
        print(
            f"{name}: indexed in {time.perf_counter() - started:.1f}s "
            f"({report.added} added, {report.embedded} embedded)"
        )
        ws.selector.vectors = VectorStore(precision)
        return {mode: evaluate(ws, queries, qrels, r) for mode, r in MODES.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=str(DATA / "cranfield"))
    parser.add_argument("--split", default="test")
    parser.add_argument("--workdir", help="where the vault and index are kept between runs")
    parser.add_argument("--limit", type=int, help="evaluate only the first N judged queries")
    parser.add_argument("--compare", action="store_true", help="old and new paths side by side")
    args = parser.parse_args()

    dataset = Path(args.dataset)
    corpus, queries, qrels = load_beir(dataset, args.split)
    qrels = {q: g for q, g in qrels.items() if q in queries}
    if args.limit:
        qrels = dict(list(qrels.items())[: args.limit])
    workdir = Path(args.workdir or Path(tempfile.gettempdir()) / "vaultctx-bench" / dataset.name)
    vault = workdir / "vault"
    write_vault(corpus, vault)

    print(f"{dataset.name}: {len(corpus)} documents, {len(qrels)} judged queries")
    names = list(VARIANTS) if args.compare else ["onnx-int8"]
    runs = {name: run_variant(vault, name, queries, qrels) for name in names}
    header = f"{'variant':<15}{'mode':<10}{'nDCG@10':>9}{'R@10':>8}{'R@100':>8}{'MRR@10':>8}"
    print(f"\n{header}{'p50 ms':>9}{'p95 ms':>9}")
    for name, results in runs.items():
        for mode, m in results.items():
            print(
                f"{name:<15}{mode:<10}{m['ndcg@10']:>9.3f}{m['recall@10']:>8.3f}"
                f"{m['recall@100']:>8.3f}{m['mrr@10']:>8.3f}{m['p50_ms']:>9.1f}{m['p95_ms']:>9.1f}"
            )
    results = runs[names[-1]]
    fused = results["fused"]["ndcg@10"]
    ok = fused >= max(results["lexical"]["ndcg@10"], results["vector"]["ndcg@10"])
    print(f"\nfused >= each single retriever: {'PASS' if ok else 'MISS'}")
    if args.compare:
        baseline = runs[names[0]]["fused"]["ndcg@10"]
        for name in names[1:]:
            delta = runs[name]["fused"]["ndcg@10"] - baseline
            ok &= check(
                f"{name} fused nDCG@10 - {names[0]}",
                abs(delta),
                SAME_QUALITY,
                higher_is_better=False,
            )
    if dataset.name == "cranfield":
        print("baselines measured on this machine (nDCG@10):")
        for name, value in CRANFIELD_BASELINES.items():
            print(f"  {name:<22}{value:.3f}")
        ok &= check("fused nDCG@10", fused, FUSED_TARGET, higher_is_better=True)
    figures = {"dataset": dataset.name}
    for name, variant in runs.items():
        prefix = "" if name == names[-1] else f"{name}_"  # the default variant: plain keys
        for mode, m in variant.items():
            figures.update({f"{prefix}{mode}_{key}": round(v, 4) for key, v in m.items()})
    emit_figures("eval", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
