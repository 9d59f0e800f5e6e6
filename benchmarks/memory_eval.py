"""Memory recall on real multi-session conversations: LoCoMo evidence recall.

Every session of every conversation goes through the path a real chat takes: each turn is
persisted with `persist_turn` (background writer, then flush) as a memory of the
conversation's channel, dated with its session's date, and the memory layer derives what it
derives on its own (facts, exchanges, session arcs). Each question of categories 1-4 is then
asked through `retrieve_for_turn`, the TurnPreparer's per-turn retrieval. A memory counts for
every turn in its provenance (`source.turns`).

Figures: evidence recall of the top 5 and top 10 memories (share of evidence turns found,
averaged over questions), all-evidence@10, per category, and `load_memory_ms` p50/p95 (wall
clock, as the diagnostics report it; CPU time beside it, robust on a loaded machine).

Built memory databases are cached per conversation under /tmp/vaultctx-bench/locomo/, keyed
by a hash of the write path's code and settings; `--rebuild` forces a rebuild.

    python benchmarks/memory_eval.py [--limit-conversations N] [--no-embed] [--rebuild]
                                     [--llm-model M --llm-api-base URL]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, offline_env, percentile

offline_env()

from vaultctx import Workspace  # noqa: E402
from vaultctx.memory import extract, facade, models, store  # noqa: E402

LOCOMO = DATA / "locomo" / "locomo-dev7.json"
CACHE = Path("/tmp/vaultctx-bench/locomo")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TARGETS = {"r5": 0.65, "r10": 0.75, "p50_ms": 15.0}
TURN_SECONDS = 30.0  # turns of a session are this far apart, from the session's date-time
_DIA = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Session:
    id: str
    at: dt.datetime
    turns: list[dict]


def parse_date(text: str) -> dt.datetime:
    """LoCoMo's '1:56 pm on 8 May, 2023' as a naive (UTC) datetime."""
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def sessions(conversation: dict) -> list[Session]:
    out = []
    numbers = sorted(
        int(k.split("_")[1])
        for k, v in conversation.items()
        if k.startswith("session_") and isinstance(v, list)
    )
    for n in numbers:
        at = parse_date(conversation[f"session_{n}_date_time"])
        out.append(Session(f"S{n}", at, conversation[f"session_{n}"]))
    return out


def turn_text(turn: dict) -> str:
    """What was said, and the photo shared with it as the chat shows it (its caption)."""
    text = turn["text"].strip()
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption'].strip()}]"
    return text


def questions(sample: dict, turn_ids: set[str]) -> list[Question]:
    """Answerable questions of categories 1-4; evidence ids normalized ('D:11:26', 'D8:6;
    D9:17'), unknown ids dropped, questions left without evidence skipped."""
    out = []
    for qa in sample["qa"]:
        if qa["category"] not in CATEGORIES:
            continue
        ids = {f"D{a}:{b}" for e in qa["evidence"] for a, b in _DIA.findall(e)}
        ids &= turn_ids
        if ids:
            out.append(Question(qa["question"], qa["category"], frozenset(ids)))
    return out


def settings_hash(embed: bool, llm_model: str | None) -> str:
    """Everything that changes what gets written: the write path's code and the settings."""
    repo, memory = store.MemoryRepository, facade.AgentMemoryFacade
    code = [extract, models.MemorySource, models.Observation, store.MemoryDraft]
    code += [repo.write, repo._find_existing, repo._insert, repo._update, repo.latest_turn]
    code += [memory.persist_turn, memory._prepare, memory._drafts, memory._said_before]
    code += [memory._draft, memory._place]
    parts = [inspect.getsource(c) for c in code]
    parts += [inspect.getsource(turn_text), str(TURN_SECONDS), str(embed), str(llm_model)]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=6).hexdigest()


def open_workspace(folder: Path, *, embed: bool, llm: dict) -> Workspace:
    vault = folder / "vault"
    vault.mkdir(parents=True, exist_ok=True)
    ws = Workspace.open(vault, {"embed": embed, **llm})
    if ws.db.get_meta("last_indexed") is None:
        ws.index(embed=embed)  # empty vault: instant; with embed, memory gets vectors
    return ws


def build(ws: Workspace, channel: str, conv: list[Session]) -> float:
    """Persist every turn as a chat would, then wait for the background writer."""
    started = time.perf_counter()
    for session in conv:
        for i, turn in enumerate(session.turns):
            ws.memory.persist_turn(
                turn_text(turn),
                session_id=f"{channel}:{session.id}",
                channel=channel,
                turn_id=turn["dia_id"],
                at=session.at + dt.timedelta(seconds=i * TURN_SECONDS),
                user_name=turn["speaker"],
                tier="channel",
            )
    ws.memory.flush()
    return time.perf_counter() - started


@dataclass
class Scored:
    category: int
    r5: float
    r10: float
    all10: bool
    wall_ms: float
    cpu_ms: float
    cached_ms: float


def ask(ws: Workspace, channel: str, qs: list[Question], now: dt.datetime) -> Iterator[Scored]:
    """Each question twice: cold (the query is embedded inside the timing), then as in a
    real turn, where the TurnPreparer's select has already embedded the same question."""
    for q in qs:
        cpu = time.process_time()
        ctx = ws.memory.retrieve_for_turn(
            q.text, session_id=f"{channel}:eval", channel=channel, k=10, now=now, refresh=False
        )
        cpu_ms = (time.process_time() - cpu) * 1000
        cached = ws.memory.retrieve_for_turn(
            q.text, session_id=f"{channel}:eval", channel=channel, k=10, now=now, refresh=False
        )
        found5: set[str] = set()
        found10: set[str] = set()
        for rank, memory in enumerate(ctx.entries[:10]):
            turns = set(memory.source.turns)
            found10 |= turns
            if rank < 5:
                found5 |= turns
        n = len(q.evidence)
        yield Scored(
            q.category,
            len(q.evidence & found5) / n,
            len(q.evidence & found10) / n,
            q.evidence <= found10,
            ctx.diagnostics["load_memory_ms"],
            cpu_ms,
            cached.diagnostics["load_memory_ms"],
        )


def table(results: list[Scored]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    groups = [(CATEGORIES[c], [r for r in results if r.category == c]) for c in CATEGORIES]
    for name, group in [*groups, ("overall", results)]:
        if group:
            rows[name] = {
                "n": len(group),
                "r5": sum(r.r5 for r in group) / len(group),
                "r10": sum(r.r10 for r in group) / len(group),
                "all10": sum(r.all10 for r in group) / len(group),
            }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--no-embed", action="store_true", help="token recall only, no model")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--llm-model", default=None, help="litellm model for fact extraction")
    parser.add_argument("--llm-api-base", default=None)
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads for the query embedding (0: torch's default). One query at a"
        " time gains nothing from two; on a shared 2-core machine a 2-thread pool stalls"
        " behind other processes (150-500 ms per query instead of ~20 ms)",
    )
    args = parser.parse_args()
    if args.torch_threads and not args.no_embed:
        import torch

        torch.set_num_threads(args.torch_threads)
    if not LOCOMO.exists():
        sys.exit(f"LoCoMo data not found at {LOCOMO}")
    embed = not args.no_embed
    llm = {"llm_model": args.llm_model, "llm_api_base": args.llm_api_base}
    llm = {k: v for k, v in llm.items() if v}
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))[: args.limit_conversations]
    key = settings_hash(embed, args.llm_model)
    account = Path(tempfile.mkdtemp(prefix="vaultctx-locomo-account-"))
    os.environ["VAULTCTX_ACCOUNT_DIR"] = str(account)
    results: list[Scored] = []
    built_s = 0.0
    memories = 0
    for sample in data:
        channel = sample["sample_id"]
        conv = sessions(sample["conversation"])
        turn_ids = {t["dia_id"] for s in conv for t in s.turns}
        folder = CACHE / key / channel
        if args.rebuild or not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            with open_workspace(folder, embed=embed, llm=llm) as ws:
                seconds = build(ws, channel, conv)
                errors = ws.memory.stats["errors"]
            built_s += seconds
            print(f"  built {channel}: {len(turn_ids)} turns in {seconds:.0f}s, errors {errors}")
            (folder / "done").write_text(key)
        with open_workspace(folder, embed=embed, llm=llm) as ws:
            memories += ws.memory.repo.count()
            now = conv[-1].at + dt.timedelta(days=1)
            ws.memory.retrieve_for_turn("hello", session_id="warm", channel=channel, now=now)
            scored = list(ask(ws, channel, questions(sample, turn_ids), now))
            path = ws.memory.retrieve_for_turn(
                "hello", session_id="warm", channel=channel, now=now, refresh=False
            ).diagnostics["retrieval_path"]
        results += scored
        row = table(scored)["overall"]
        print(
            f"  {channel}: {int(row['n'])} questions  R@5 {row['r5']:.3f}  R@10 {row['r10']:.3f}"
            f"  all@10 {row['all10']:.3f}"
        )
    shutil.rmtree(account, ignore_errors=True)

    rows = table(results)
    wall = [r.wall_ms for r in results]
    cpu = [r.cpu_ms for r in results]
    print(f"\nLoCoMo evidence recall ({len(data)} conversations, {memories} memories, {path}):")
    print(f"  {'category':<12} {'n':>5} {'R@5':>7} {'R@10':>7} {'all@10':>7}")
    for name, row in rows.items():
        print(
            f"  {name:<12} {int(row['n']):>5} {row['r5']:>7.3f} {row['r10']:>7.3f}"
            f" {row['all10']:>7.3f}"
        )
    warm = [r.cached_ms for r in results]
    p50, p95 = percentile(wall, 50), percentile(wall, 95)
    print(f"  load_memory_ms p50 {p50:.2f}  p95 {p95:.2f}  (query embedded inside)")
    print(f"  cpu ms per turn p50 {percentile(cpu, 50):.2f}  p95 {percentile(cpu, 95):.2f}")
    print(
        f"  load_memory_ms with the query vector from select p50 {percentile(warm, 50):.2f}"
        f"  p95 {percentile(warm, 95):.2f}"
    )
    overall = rows["overall"]
    if embed and not args.llm_model:
        print("targets (deterministic path):")
        check("evidence R@5", overall["r5"], TARGETS["r5"], higher_is_better=True)
        check("evidence R@10", overall["r10"], TARGETS["r10"], higher_is_better=True)
        check("load_memory_ms p50", p50, TARGETS["p50_ms"], higher_is_better=False)
    emit_figures(
        "memory_eval",
        {
            "conversations": len(data),
            "questions": len(results),
            "memories": memories,
            "retrieval_path": path,
            "extractor": args.llm_model or "deterministic",
            "build_s": round(built_s, 1),
            **{
                f"{name}_{metric}": round(row[metric], 4)
                for name, row in rows.items()
                for metric in ("r5", "r10", "all10")
            },
            "load_memory_ms_p50": round(p50, 3),
            "load_memory_ms_p95": round(p95, 3),
            "load_memory_ms_cached_p50": round(percentile(warm, 50), 3),
            "load_memory_ms_cached_p95": round(percentile(warm, 95), 3),
            "cpu_ms_p50": round(percentile(cpu, 50), 3),
            "cpu_ms_p95": round(percentile(cpu, 95), 3),
        },
    )


if __name__ == "__main__":
    main()
