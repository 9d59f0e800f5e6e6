"""Memories through a team's database (issue 29): written on one host, recalled on another.

Each LoCoMo conversation `memory_data` finds is written through each door of
`memory_eval.py` twice: into a plain SQLite memory (the baseline), and on "host A" of a team
whose `database_url` is a throwaway PostgreSQL. Its questions are then asked on "host B": a
second folder, index and memory file of its own that starts empty and catches up from the
database (`memory.share()`), vectors included. Printed side by side: recall (R@5, R@10,
strict R@10, all@10) on SQLite and on host B, the share of questions whose top 10 are the
same memories in the same order, the write time per turn on each (a write on the database
takes the book's lock and sends its rows), host B's catch-up time, and the ask latency.

    python benchmarks/pg_memory.py [--doors public,chat] [--limit N] [--conversations ids]
        [--no-embed]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, embedded_postgres, emit_figures, offline_env, percentile, vault_of

offline_env()

import memory_data as md  # noqa: E402
from memory_eval import ASK, DOORS, METRICS, WRITE, Scored, _row, ask  # noqa: E402
from vaultctx import Workspace  # noqa: E402


def open_host(root: Path, embed: bool, url: str | None) -> Workspace:
    vault = root / "vault"
    vault.mkdir(parents=True, exist_ok=True)
    settings: dict[str, object] = {"embed": embed, "index_dir": str(root / "index")}
    if url is not None:
        settings["database_url"] = url
    ws = Workspace.open(vault, settings)
    if (
        vault_of(ws).reads.meta("last_indexed") is None
    ):  # host B reads host A's index: no index here
        ws.index(embed=embed)  # empty vault: instant; with embed, memory gets vectors
    return ws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doors", default=",".join(DOORS))
    parser.add_argument("--conversations", default=None, help="only these ids (comma-separated)")
    parser.add_argument("--limit", type=int, default=None, help="conversations per set")
    parser.add_argument("--no-embed", action="store_true", help="token recall only, no model")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    embed = not args.no_embed
    doors = [d for d in args.doors.split(",") if d]
    wanted = set(args.conversations.split(",")) if args.conversations else None
    work = Path(tempfile.mkdtemp(prefix="vaultctx-pg-memory-"))
    os.environ["VAULTCTX_ACCOUNT_DIR"] = str(work / "account")
    results: dict[str, list[Scored]] = {"sqlite": [], "postgres": []}
    write_s = {"sqlite": 0.0, "postgres": 0.0}
    turns_written = 0
    catch_up_s: list[float] = []
    memories_moved = 0
    with embedded_postgres() as pg:
        for ds in md.find_datasets(args.data):
            convs = [c for c in ds.conversations if c.questions and (not wanted or c.id in wanted)]
            for conv in convs[: args.limit]:
                turns = sum(len(s.turns) for s in conv.sessions)
                for door in doors:
                    name = f"m_{door}_{conv.id}".replace("-", "_").lower()
                    url = pg.create_database(name)
                    for backend, host_url in (("sqlite", None), ("postgres", url)):
                        with open_host(work / backend / name / "a", embed, host_url) as ws:
                            started = time.perf_counter()
                            WRITE[door](ws, conv)
                            write_s[backend] += time.perf_counter() - started
                            assert ws.memory.stats["errors"] == 0, ws.memory.stats
                    turns_written += turns
                    asked_on = {"sqlite": work / "sqlite" / name / "a",
                                "postgres": work / "postgres" / name / "b"}  # fmt: skip
                    for backend, folder in asked_on.items():
                        with open_host(folder, embed, url if backend == "postgres" else None) as ws:
                            if backend == "postgres":
                                started = time.perf_counter()
                                memories_moved += ws.memory.share()
                                catch_up_s.append(time.perf_counter() - started)
                            ASK[door](ws, conv, conv.questions[0])  # warm: model, mirror
                            results[backend] += ask(door, ws, ds, conv)
                    pg.drop_database(name)
                    line = "  ".join(
                        f"{b} R@10 {_row([r for r in rs if r.conversation == conv.id])['r10']:.3f}"
                        for b, rs in results.items()
                    )
                    print(
                        f"  {conv.id} {door}: {len(conv.questions)} questions  {line}", flush=True
                    )
    shutil.rmtree(work, ignore_errors=True)
    report(results, write_s, turns_written, catch_up_s, memories_moved, doors)


def report(
    results: dict[str, list[Scored]], write_s: dict[str, float], turns: int,
    catch_up_s: list[float], moved: int, doors: list[str],
) -> None:  # fmt: skip
    figures: dict[str, float | int] = {}
    print(f"\n  {'':<16} {'n':>5}  " + "  ".join(f"{m:>8}" for m in METRICS))
    for door in doors:
        for backend, rs in results.items():
            row = _row([r for r in rs if r.door == door])
            cells = "  ".join(f"{row[m]:8.4f}" for m in METRICS)
            print(f"  {door + ' ' + backend:<16} {int(row['n']):>5}  {cells}")
            for metric in METRICS:
                figures[f"{door}_{backend}_{metric}"] = round(row[metric], 4)
    pairs = list(zip(results["sqlite"], results["postgres"], strict=True))
    same = sum(a.signature == b.signature for a, b in pairs) / len(pairs)
    print(f"\n  same top 10 (memories and order), SQLite vs host B: {same:.4f} of {len(pairs)}")
    for backend, seconds in write_s.items():
        print(f"  write, {backend}: {seconds:.1f} s for {turns} turns"
              f" ({seconds / turns * 1000:.2f} ms a turn)")  # fmt: skip
        figures[f"write_ms_per_turn_{backend}"] = round(seconds / turns * 1000, 3)
    print(f"  host B's catch-up: {sum(catch_up_s):.1f} s for {moved} memories"
          f" (p50 {percentile(catch_up_s, 50):.2f} s a book)")  # fmt: skip
    for backend, rs in results.items():
        ms = [r.cached_ms for r in rs]
        print(f"  ask, {backend} (query vector warm): p50 {percentile(ms, 50):.1f} ms,"
              f" p95 {percentile(ms, 95):.1f} ms")  # fmt: skip
        figures[f"ask_p50_ms_{backend}"] = round(percentile(ms, 50), 2)
        figures[f"ask_p95_ms_{backend}"] = round(percentile(ms, 95), 2)
    gap = max(abs(figures[f"{d}_sqlite_{m}"] - figures[f"{d}_postgres_{m}"])
              for d in doors for m in METRICS)  # fmt: skip
    check("largest recall gap, SQLite vs host B", gap, 0.005, higher_is_better=False)
    figures |= {"same_top10": round(same, 4), "recall_gap": round(gap, 4),
                "catch_up_s": round(sum(catch_up_s), 2), "memories_moved": moved}  # fmt: skip
    emit_figures("pg_memory", figures)


if __name__ == "__main__":
    main()
