"""Helpers shared by the benchmark scripts: environment, percentiles, figures, BEIR data."""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def offline_env() -> None:
    """Benchmarks never touch the network: models load from site-packages."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path.insert(0, str(REPO / "src"))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty list."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def check(label: str, value: float, target: float, *, higher_is_better: bool) -> bool:
    ok = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    print(f"  [{'PASS' if ok else 'MISS'}] {label}: {value:.3f} (target {sign} {target})")
    return ok


def emit_figures(name: str, figures: dict) -> None:
    """The one JSON line at the end of every benchmark, for run-to-run comparison."""
    print(json.dumps({"benchmark": name, **figures}, sort_keys=True))


def load_beir(folder: Path, split: str = "test") -> tuple[dict, dict, dict]:
    """(corpus {id: {title, text}}, queries {id: text}, qrels {qid: {doc id: grade}})."""
    corpus = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = {"title": doc.get("title", ""), "text": doc.get("text", "")}
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, grade = line.rstrip("\n").split("\t")[:3]
            if int(grade) > 0:
                qrels.setdefault(qid, {})[did] = int(grade)
    return corpus, queries, qrels
