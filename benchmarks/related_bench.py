"""Related notes (`Workspace.related`, what the editor's panel shows for the open note): do
they make sense on real vaults, and how fast do they come?

    python benchmarks/related_bench.py [--workdir DIR] [--notes N] [--no-latency]

Sense, on every real vault under shared/data/vaults (indexed with the default model): for
each note (the first N by path, all by default), its top 10 — how many are notes it links to
or that link to it, how many were found by vectors alone (no word and no link in common),
and how many by a link alone; beside it the same counts for select with the note's title as
the query, the obvious cheap alternative. Three examples from the largest vault are printed.

Speed, on the 10k-block synthetic vault of select_bench.py (random vectors: the scan costs
the same): `related` in process, and the panel's round trip over HTTP to a warm server
(`POST /related` with `touch`), beside a search-as-you-type request (`POST /select`).
Targets (issue 25): panel ≤ 100 ms p50, search ≤ 50 ms p50.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, offline_env, percentile, vault_of

offline_env()

PANEL_P50_MS = 100.0
SEARCH_P50_MS = 50.0
TOP = 10


def vault_folders() -> list[Path]:
    """Every vault under shared/data/vaults: a folder holding Markdown notes."""
    root = DATA / "vaults"
    return sorted(p for p in root.iterdir() if p.is_dir() and any(p.rglob("*.md")))


def sense(folder: Path, work: Path, embedder: object, limit: int | None) -> dict:
    from vaultctx import Workspace

    vault = work / folder.name
    if not vault.exists():
        shutil.copytree(folder, vault, ignore=shutil.ignore_patterns(".vaultctx"))
    counts = {"related": [0, 0, 0], "title": [0, 0, 0]}  # linked, vector only, link only
    examples = []
    with Workspace.open(vault, embedder=embedder) as ws:
        ws.index()
        graph = ws.graph()
        notes = sorted(graph)[:limit]
        for path in notes:
            neighbours = set(graph.successors(path)) | set(graph.predecessors(path))
            related = ws.related(path, k=TOP).candidates
            title = graph.titles.get(path) or Path(path).stem
            by_title = [c for c in ws.select(title, k=TOP + 1, max_per_note=1).candidates
                        if c.path != path][:TOP]  # fmt: skip
            for name, found in (("related", related), ("title", by_title)):
                counts[name][0] += sum(c.path in neighbours for c in found)
                counts[name][1] += sum(set(c.sources) == {"vector"} for c in found)
                counts[name][2] += sum(set(c.sources) == {"graph"} for c in found)
            examples.append((len(neighbours), path, [(c.path, sorted(c.sources)) for c in related]))
    n = max(1, len(notes))
    per_note = {name: [round(v / n, 2) for v in values] for name, values in counts.items()}
    return {"notes": len(notes), "per_note": per_note, "examples": examples}


def latency(work: Path, queries: int) -> dict:
    """In-process `related`, and the plugin's two requests over HTTP, on the 10k vault."""
    from select_bench import build
    from synthvault import generate_queries
    from vaultctx import Embedder, Workspace
    from vaultctx.server.run import LocalServer

    root = Path(tempfile.gettempdir()) / "vaultctx-bench" / "select" / "10000"
    build(root, 10_000, real_vectors=False)
    embedder = Embedder()
    with Workspace.open(root, embedder=embedder) as ws, LocalServer(ws, watch=False) as server:
        notes = [
            row[0]
            for row in vault_of(ws).db.connect().execute("SELECT path FROM notes ORDER BY id")
        ]
        notes = notes[:: max(1, len(notes) // queries)][:queries]
        words = generate_queries(queries, seed=1)
        for path in notes[:10]:
            ws.related(path)
        in_process = []
        for path in notes:
            started = time.perf_counter()
            ws.related(path, k=TOP)
            in_process.append((time.perf_counter() - started) * 1000)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}

        def round_trip(route: str, body: dict) -> float:
            started = time.perf_counter()
            conn.request("POST", route, body=json.dumps(body), headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
            return (time.perf_counter() - started) * 1000

        panel = [round_trip("/related", {"note": p, "k": TOP, "touch": True}) for p in notes]
        typed = [q[: max(3, len(q) * (i % 4 + 1) // 4)] for i, q in enumerate(words)]  # prefixes
        search = [round_trip("/select", {"query": q, "k": 20}) for q in typed]
        conn.close()
        blocks = ws.status().blocks
    return {
        "blocks": blocks,
        "related_p50_ms": round(statistics.median(in_process), 2),
        "related_p95_ms": round(percentile(in_process, 95), 2),
        "panel_http_p50_ms": round(statistics.median(panel), 2),
        "panel_http_p95_ms": round(percentile(panel, 95), 2),
        "search_http_p50_ms": round(statistics.median(search), 2),
        "search_http_p95_ms": round(percentile(search, 95), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "vaultctx-related"))
    parser.add_argument("--notes", type=int, help="at most this many notes per vault")
    parser.add_argument("--queries", type=int, default=200, help="latency: requests of each kind")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    from vaultctx import Embedder

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    embedder = Embedder()
    figures: dict = {}
    print(f"top {TOP} per note: linked / vector only / link only (related, then select by title)")
    largest = None
    for folder in vault_folders():
        result = sense(folder, work, embedder, args.notes)
        related, title = result["per_note"]["related"], result["per_note"]["title"]
        print(f"{folder.name:<22} {result['notes']:>4} notes   related {related}   title {title}")
        figures[folder.name] = {"notes": result["notes"], "related": related, "title": title}
        if largest is None or result["notes"] > largest["notes"]:
            largest = {**result, "name": folder.name}
    if largest:
        print(f"\nexamples from {largest['name']} (notes with most links, then fewest):")
        ranked = sorted(largest["examples"], key=lambda e: (-e[0], e[1]))
        for degree, path, found in [ranked[0], ranked[len(ranked) // 2], ranked[-1]]:
            print(f"  {path} ({degree} linked notes)")
            for other, sources in found[:5]:
                print(f"    {other}  [{' '.join(sources)}]")
    ok = True
    if not args.no_latency:
        speed = latency(work, args.queries)
        print(f"\nspeed on {speed['blocks']:,} blocks: {json.dumps(speed)}")
        ok &= check("panel /related p50 ms", speed["panel_http_p50_ms"], PANEL_P50_MS,
                    higher_is_better=False)  # fmt: skip
        ok &= check("search /select p50 ms", speed["search_http_p50_ms"], SEARCH_P50_MS,
                    higher_is_better=False)  # fmt: skip
        figures["speed"] = speed
    emit_figures("related", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
