"""Indexing speed on synthetic vaults: text throughput, incremental re-index, embedding.

    python benchmarks/index_bench.py [--notes N] [--workdir DIR]

Figures (targets from the Foundation issue, on this 2-core machine):
- text+links indexing without embeddings, notes/s (≥ 2,000 for typical notes);
- re-index of an unchanged 1,000-note vault (≤ 1 s);
- re-index after editing one note of 1,000, its embedding included, model warm (≤ 300 ms);
- embedding throughput while indexing vs calling model.encode directly on the same blocks,
  side by side in one run (≥ 90 %).
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
from vaultctx.workspace.reader import auto_workers, embed_input  # noqa: E402

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


def embedding_side_by_side(root: Path, embedder: Embedder, rounds: int = 2) -> dict:
    """Embed the same blocks through `index()` and with model.encode directly, alternating
    the two and keeping each one's best round, so a busy neighbour cannot favour either."""
    shutil.rmtree(root / ".vaultctx", ignore_errors=True)
    with Workspace.open(root, embedder=embedder) as ws:
        ws.index(embed=False)
        rows = (
            ws.db.connect()
            .execute("SELECT title, heading_path, text FROM blocks GROUP BY embed_hash")
            .fetchall()
        )
        texts = [embed_input(*row) for row in rows]
        model = embedder._load()  # the raw SentenceTransformer, as a user would call it
        model.encode(texts[:32], normalize_embeddings=True)  # warm up
        direct, indexed = 0.0, 0.0
        for _ in range(rounds):
            started = time.perf_counter()
            model.encode(texts, normalize_embeddings=True, show_progress_bar=False)
            direct = max(direct, len(texts) / (time.perf_counter() - started))
            with ws.db.transaction() as conn:
                conn.execute("DELETE FROM embeddings")
            started = time.perf_counter()
            report = ws.index()  # text is unchanged: this run only embeds
            indexed = max(indexed, report.embedded / (time.perf_counter() - started))
    ratio = indexed / direct
    print(
        f"embedding {len(texts)} blocks (best of {rounds}): model.encode {direct:.1f} blocks/s,"
        f" while indexing {indexed:.1f} blocks/s ({ratio:.0%})"
    )
    return {"direct_blocks_per_s": direct, "indexing_blocks_per_s": indexed, "ratio": ratio}


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

    embedder = Embedder()
    print("\n== embedding throughput, side by side")
    embedding = embedding_side_by_side(fresh_vault(work / "embed", 80, TYPICAL, seed=3), embedder)

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
            "embed_direct_per_s": round(embedding["direct_blocks_per_s"], 1),
            "embed_indexing_per_s": round(embedding["indexing_blocks_per_s"], 1),
            "embed_ratio": round(embedding["ratio"], 3),
            "reindex_unchanged_ms": round(inc["unchanged_s"] * 1000, 1),
            "reindex_edit_one_ms": round(inc["edit_one_ms"], 1),
            "peak_rss_mb": round(peak_rss_mb()),
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
