"""Indexing speed on synthetic vaults: text throughput, incremental re-index, embedding.

    python benchmarks/index_bench.py [--notes N] [--workdir DIR]

Figures (targets from the Foundation issue, on this 2-core machine):
- text+links indexing without embeddings, notes/s (≥ 2,000 for typical notes);
- re-index of an unchanged 1,000-note vault (≤ 1 s);
- re-index after editing one note of 1,000, its embedding included, model warm (≤ 300 ms);
- embedding throughput while indexing vs calling the encoder directly on the same blocks,
  side by side in one run (≥ 90 %), on ONNX Runtime and on torch (the old path): ONNX
  while indexing no slower than torch (cold-start issue: ≥ 25 blocks/s on a quiet machine).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import check, emit_figures, offline_env, peak_rss_mb
from synthvault import edit_note, generate_vault

offline_env()

from vaultctx import Embedder, Workspace  # noqa: E402
from vaultctx.storage.blocks import estimate_tokens  # noqa: E402
from vaultctx.storage.reader import auto_workers, embed_input  # noqa: E402

TYPICAL = (1, 3)  # sections per note: ~4 KB, the mean note of the real vaults in shared/data
LONG = (2, 6)  # documentation-sized pages of ~6 KB


def fresh_vault(root: Path, notes: int, sections: tuple[int, int], seed: int = 0) -> Path:
    if root.exists():
        shutil.rmtree(root)
    generate_vault(root, notes, seed=seed, sections_per_note=sections)
    return root


def vault_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.md"))


def text_throughput(root: Path, label: str, runs: int = 3) -> dict:
    """Index from scratch `runs` times and keep the median: a shared machine is noisy."""
    times = []
    for _ in range(runs):
        shutil.rmtree(root / ".vaultctx", ignore_errors=True)
        with Workspace.open(root) as ws:
            started = time.perf_counter()
            report = ws.index(embed=False)
            times.append(time.perf_counter() - started)
            workers = ws.config.index_workers
    elapsed = statistics.median(times)
    size = vault_bytes(root)
    rate = report.added / elapsed
    print(
        f"{label}: {report.added} notes, {report.blocks_written} blocks, "
        f"{size / report.added / 1024:.1f} KB/note, parse workers "
        f"{auto_workers() if workers is None else workers}: median of {runs} "
        f"{elapsed:.2f} s (runs {', '.join(f'{t:.2f}' for t in times)}) → {rate:,.0f} notes/s, "
        f"{size / elapsed / 1e6:.1f} MB/s"
    )
    return {
        "notes_per_s": rate,
        "mb_per_s": size / elapsed / 1e6,
        "kb_per_note": size / report.added / 1024,
    }


def embedding_side_by_side(root: Path, rounds: int = 2) -> dict:
    """Embed the same blocks through `index()` and with the encoder directly, on each
    backend: sentence-transformers on torch (the old path, batches of 64 on two torch
    threads) and ONNX Runtime (the default). Alternating, keeping each one's best round, so
    a busy neighbour cannot favour either."""
    shutil.rmtree(root / ".vaultctx", ignore_errors=True)
    embedders = {"torch": Embedder(backend="torch"), "onnx": Embedder(backend="onnx")}
    with Workspace.open(root, embedder=embedders["onnx"]) as ws:
        ws.index(embed=False)
        rows = (
            ws.db.connect()
            .execute("SELECT title, heading_path, text FROM blocks GROUP BY embed_hash")
            .fetchall()
        )
    texts = [embed_input(*row) for row in rows]
    tokens = statistics.mean(estimate_tokens(text) for text in texts)
    best = {f"{name}_{way}": 0.0 for name in embedders for way in ("direct", "indexing")}
    for embedder in embedders.values():
        embedder.encode(texts[:32])  # load and warm up
    for _ in range(rounds):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            embedder.encode(texts)
            rate = len(texts) / (time.perf_counter() - started)
            best[f"{name}_direct"] = max(best[f"{name}_direct"], rate)
            with Workspace.open(root, embedder=embedder) as ws:
                with ws.db.transaction() as conn:
                    conn.execute("DELETE FROM embeddings")
                started = time.perf_counter()
                report = ws.index()  # text is unchanged: this run only embeds
                rate = report.embedded / (time.perf_counter() - started)
            best[f"{name}_indexing"] = max(best[f"{name}_indexing"], rate)
    print(f"embedding {len(texts)} blocks of {tokens:.0f} tokens on average (best of {rounds}):")
    for name in embedders:
        direct, indexing = best[f"{name}_direct"], best[f"{name}_indexing"]
        print(
            f"  {name:6} encode {direct:6.1f} blocks/s, while indexing {indexing:6.1f} blocks/s"
            f" ({indexing / direct:.0%})"
        )
    return {
        **best,
        "ratio": best["onnx_indexing"] / best["onnx_direct"],
        "onnx_vs_torch": best["onnx_indexing"] / best["torch_indexing"],
    }


def incremental(root: Path, embedder: Embedder) -> dict:
    with Workspace.open(root, embedder=embedder) as ws:
        started = time.perf_counter()
        report = ws.index()  # first run embeds everything (cached between benchmark runs)
        print(
            f"1,000-note vault indexed with vectors in {time.perf_counter() - started:.1f} s "
            f"({report.embedded} embedded; 0 when the cache is warm)"
        )
        unchanged = []
        for _ in range(5):
            started = time.perf_counter()
            report = ws.index()
            unchanged.append(time.perf_counter() - started)
            assert report.unchanged == report.files and report.embedded == 0
        edited = []
        for i in range(5):
            edit_note(root, 100 + i * 37, seed=int(time.time()))
            started = time.perf_counter()
            report = ws.index()
            edited.append((time.perf_counter() - started) * 1000)
            assert report.updated == 1 and report.embedded >= 1, report
    print(
        f"re-index unchanged: median {statistics.median(unchanged) * 1000:.0f} ms; "
        f"after editing one note: median {statistics.median(edited):.0f} ms "
        f"(max {max(edited):.0f} ms)"
    )
    return {"unchanged_s": statistics.median(unchanged), "edit_one_ms": statistics.median(edited)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=5000, help="notes for the throughput run")
    parser.add_argument("--workdir", help="where vaults are kept between runs")
    args = parser.parse_args()
    work = Path(args.workdir or Path(tempfile.gettempdir()) / "vaultctx-bench" / "index")
    work.mkdir(parents=True, exist_ok=True)

    print("== text + links, no embeddings")
    typical = text_throughput(fresh_vault(work / "typical", args.notes, TYPICAL), "typical notes")
    long = text_throughput(fresh_vault(work / "long", args.notes // 2, LONG), "long notes")

    print("\n== embedding throughput, side by side")
    embedding = embedding_side_by_side(fresh_vault(work / "embed", 80, TYPICAL, seed=3))
    embedder = Embedder()

    print("\n== incremental re-index, 1,000 notes, model warm")
    k1 = work / "k1"
    if not (k1 / ".vaultctx").exists():
        fresh_vault(k1, 1000, TYPICAL, seed=1)
    inc = incremental(k1, embedder)

    print("\n== targets")
    ok = all(
        [
            check("typical notes/s", typical["notes_per_s"], 2000, higher_is_better=True),
            check("unchanged 1k re-index (s)", inc["unchanged_s"], 1.0, higher_is_better=False),
            check("edit one of 1k (ms)", inc["edit_one_ms"], 300, higher_is_better=False),
            check("embedding ratio", embedding["ratio"], 0.9, higher_is_better=True),
            check("onnx / torch indexing", embedding["onnx_vs_torch"], 1.0, higher_is_better=True),
        ]
    )
    print(f"peak RSS {peak_rss_mb():.0f} MB")
    emit_figures(
        "index",
        {
            "typical_notes_per_s": round(typical["notes_per_s"]),
            "typical_kb_per_note": round(typical["kb_per_note"], 2),
            "typical_mb_per_s": round(typical["mb_per_s"], 2),
            "long_notes_per_s": round(long["notes_per_s"]),
            "long_kb_per_note": round(long["kb_per_note"], 2),
            "long_mb_per_s": round(long["mb_per_s"], 2),
            **{f"embed_{k}": round(v, 3) for k, v in embedding.items()},
            "reindex_unchanged_ms": round(inc["unchanged_s"] * 1000, 1),
            "reindex_edit_one_ms": round(inc["edit_one_ms"], 1),
            "peak_rss_mb": round(peak_rss_mb()),
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
