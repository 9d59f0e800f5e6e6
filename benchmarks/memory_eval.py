"""Memory recall on real multi-session conversations, through each door, side by side.

Every data set `memory_data` finds under ../shared/data (LoCoMo; LongMemEval if a copy is
dropped in) is stored once through each door, each in its own memory database:

- public: `ws.memory.add(f"{speaker}: {text}", tier="channel", scope=conversation,
  created_at=<session date>, speaker=, session=, turn=)` for every turn, as an app would;
- bare: `ws.memory.add(f"{speaker}: {text}", tier="channel", scope=conversation,
  created_at=<session date>)` — no speaker, session or turn, as the simplest app stores text;
- chat: `ws.memory.persist_turn(text, session_id=, channel=conversation, turn_id=,
  at=<session date>, user_name=speaker, tier="channel")`, then `flush()`.

Each question is then asked through the same door: `search(question, k=10, tier="channel",
scope=conversation)` and `retrieve_for_turn(question, session_id=<a new session>,
channel=conversation, k=10, refresh=False)`; `now` is the set's question date where it has
one (LongMemEval), else the real clock — as an app would call them.

Scoring: a memory counts for the turns its provenance names (`source.turns`) whose text it
really holds (a sentence of the turn, verbatim) — or, without provenance, the turns whose
'speaker: text' it is. R@k: share of a question's evidence turns found in the top k, averaged
over questions; strict R@k: the same where each memory counts for one turn at most (an
exchange or arc found covers one evidence turn, not all of its turns); all@10: every evidence
turn found. `--plain` adds plain FTS5 and RRF(FTS5, MiniLM) over the raw turns.

Built databases are cached per door and conversation under --cache, keyed by a hash of the
write path's code and settings; `--rebuild` forces a rebuild.

    python benchmarks/memory_eval.py [--doors public,chat] [--sets locomo] [--conversations
        conv-26,conv-30] [--limit N] [--plain] [--no-embed] [--rebuild] [--llm-model M ...]
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, check, emit_figures, offline_env, percentile, vault_of

offline_env()

import memory_data as md  # noqa: E402
from vaultctx import Workspace  # noqa: E402
from vaultctx.memory import (  # noqa: E402
    Memory,
    derive,
    extract,
    merging,
    models,
    places,
    service,
    store,
    writes,
)
from vaultctx.storage.embeddings import Embedder  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "vaultctx-bench" / "memory-eval"
DOORS = ("public", "chat", "bare")
AGREEING = ("public", "chat")  # the same turns with the same metadata, through two doors
TARGETS = {"r5": 0.72, "r10": 0.82, "multi-hop_r10": 0.65, "open-domain_r10": 0.55}
AGREEMENT = 0.01  # the doors' figures may differ by this much


# --- the two doors -----------------------------------------------------------------------


def add_turns(ws: Workspace, conv: md.Conversation) -> None:
    """The public door: every turn through `memory.add`, as an app stores a conversation."""
    for session in conv.sessions:
        for turn in session.turns:
            ws.memory.add(
                f"{turn.speaker}: {turn.text}",
                tier="channel",
                scope=conv.id,
                created_at=session.at,
                speaker=turn.speaker,
                session=f"{conv.id}:{session.id}",
                turn=turn.id,
            )


def add_bare(ws: Workspace, conv: md.Conversation) -> None:
    """The bare door: every turn through `memory.add(text)` with no speaker, session or turn,
    as the simplest app stores what it is told (its time and a scope to ask within aside)."""
    for session in conv.sessions:
        for turn in session.turns:
            ws.memory.add(
                f"{turn.speaker}: {turn.text}", tier="channel", scope=conv.id,
                created_at=session.at,
            )  # fmt: skip


def persist_turns(ws: Workspace, conv: md.Conversation) -> None:
    """The chat door: every turn through `persist_turn`, then wait for the writer."""
    for session in conv.sessions:
        for turn in session.turns:
            ws.memory.persist_turn(
                turn.text,
                session_id=f"{conv.id}:{session.id}",
                channel=conv.id,
                turn_id=turn.id,
                at=session.at,
                user_name=turn.speaker,
                tier="channel",
            )
    ws.memory.flush()


def search(ws: Workspace, conv: md.Conversation, q: md.Question) -> tuple[list[Memory], float]:
    started = time.perf_counter()
    found = ws.memory.search(q.text, k=10, tier="channel", scope=conv.id, now=q.asked_at)
    return found, (time.perf_counter() - started) * 1000


def retrieve(ws: Workspace, conv: md.Conversation, q: md.Question) -> tuple[list[Memory], float]:
    ctx = ws.memory.retrieve_for_turn(
        q.text, session_id=f"{conv.id}:eval", channel=conv.id, k=10, now=q.asked_at,
        refresh=False,
    )  # fmt: skip
    return ctx.entries, ctx.diagnostics["load_memory_ms"]


WRITE: dict[str, Callable[[Workspace, md.Conversation], None]] = {
    "public": add_turns,
    "chat": persist_turns,
    "bare": add_bare,
}
ASK = {"public": search, "chat": retrieve, "bare": search}


def settings_hash(embed: bool, llm_model: str | None) -> str:
    """Everything that changes what gets written: the write path's code and the settings."""
    code: list = [extract, derive, writes, models, merging, places.MemoryPlaces]
    code += [store.MemoryRepository.latest_turns]
    code += [service.MemoryService.add, service.MemoryService.persist_turn]
    code += [add_turns, persist_turns]
    parts = [inspect.getsource(c) for c in code] + [str(embed), str(llm_model)]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=6).hexdigest()


def open_workspace(folder: Path, *, embed: bool, llm: dict) -> Workspace:
    vault = folder / "vault"
    vault.mkdir(parents=True, exist_ok=True)
    ws = Workspace.open(vault, {"embed": embed, **llm})
    if vault_of(ws).db.get_meta("last_indexed") is None:
        ws.index(embed=embed)  # empty vault: instant; with embed, memory gets vectors
    return ws


# --- scoring -----------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def held_turns(memory: Memory, turns: dict[str, md.Turn]) -> list[str]:
    """The turns a memory really holds: those its provenance names whose text (one of its
    sentences, verbatim) it contains; without provenance, the turn whose line it is."""
    text = _norm(memory.text)
    if not memory.source.turns:
        return [t.id for t in turns.values() if _norm(f"{t.speaker}: {t.text}") == text]
    held = []
    for turn_id in memory.source.turns:
        turn = turns.get(turn_id)
        if turn is not None and any(
            _norm(s)[:60] in text for s in extract.sentences(turn.text) or [turn.text]
        ):
            held.append(turn_id)
    return held


@dataclass(frozen=True)
class Scored:
    dataset: str
    conversation: str
    door: str
    category: str
    r5: float
    r10: float
    strict5: float
    strict10: float
    all10: bool
    ms: float
    cached_ms: float
    signature: tuple  # what the top 10 hold, comparable across the doors' databases
    unheld: int  # provenance claims whose text the memory does not hold
    chars: int  # the top 10's text: what recall costs a prompt


def score(found: list[Memory], q: md.Question, turns: dict[str, md.Turn]) -> dict:
    loose: list[set[str]] = [set(), set()]
    strict: list[set[str]] = [set(), set()]
    unheld = 0
    for rank, memory in enumerate(found[:10]):
        held = held_turns(memory, turns)
        unheld += len(memory.source.turns) - len(held) if memory.source.turns else 0
        new = [t for t in held if t in q.evidence and t not in strict[1]]
        for i, depth in enumerate((5, 10)):
            if rank < depth:
                loose[i] |= set(held)
                if new:
                    strict[i].add(new[0])
    n = len(q.evidence)
    return {
        "r5": len(q.evidence & loose[0]) / n,
        "r10": len(q.evidence & loose[1]) / n,
        "strict5": len(strict[0]) / n,
        "strict10": len(strict[1]) / n,
        "all10": q.evidence <= loose[1],
        "signature": tuple((m.text, m.source.turns) for m in found[:10]),
        "unheld": unheld,
        "chars": sum(len(m.text) for m in found[:10]),
    }


def ask(door: str, ws: Workspace, ds: md.Dataset, conv: md.Conversation) -> Iterator[Scored]:
    """Each question twice: cold (the query embedded inside the timing), then with its
    vector already computed (select embedded it first, as in a real turn)."""
    turns = conv.turns
    for q in conv.questions:
        found, ms = ASK[door](ws, conv, q)
        _, cached_ms = ASK[door](ws, conv, q)
        yield Scored(ds.name, conv.id, door, q.category, ms=ms, cached_ms=cached_ms,
                     **score(found, q, turns))  # fmt: skip


# --- plain baselines --------------------------------------------------------------------

PLAIN_STOP = set("a an the of in on and or to for with by is are was were be as at from that this"
                 " it its not no".split())  # fmt: skip


def plain_baselines(
    embedder: Embedder | None, ds: md.Dataset, conv: md.Conversation
) -> Iterator[Scored]:
    """What the targets are stated against: plain FTS5 bm25 (an OR of the question's terms)
    and plain RRF (k=60) of it and exact MiniLM, 100 deep each, over the raw turns."""
    turns = list(conv.turns.values())
    lines = [f"{t.speaker}: {t.text}" for t in turns]
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE f USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
    )
    db.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", enumerate(lines))
    matrix = embedder.encode(lines) if embedder is not None else None
    as_memory = [
        Memory(id=str(i), tier="channel", scope=conv.id, kind="episodic", text=line,
               created_at=0, updated_at=0, last_accessed=0,
               source=models.MemorySource(turns=(turns[i].id,)))
        for i, line in enumerate(lines)
    ]  # fmt: skip
    for q in conv.questions:
        terms = [t for t in re.findall(r"\w+", q.text.lower()) if t not in PLAIN_STOP]
        match = " OR ".join(f'"{t}"' for t in terms) or '""'
        sql = "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 100"
        lex = [r[0] for r in db.execute(sql, (match,))]
        ranked = {"fts5": lex}
        if matrix is not None:
            sims = matrix @ embedder.encode_query(q.text)  # type: ignore[union-attr]
            vec = [int(i) for i in np.argsort(-sims)[:100]]
            fused: dict[int, float] = {}
            for run in (lex, vec):
                for rank, i in enumerate(run):
                    fused[i] = fused.get(i, 0.0) + 1 / (60 + rank + 1)
            ranked["rrf"] = sorted(fused, key=lambda i: -fused[i])
        for name, run in ranked.items():
            found = [as_memory[i] for i in run[:10]]
            yield Scored(ds.name, conv.id, name, q.category, ms=0.0, cached_ms=0.0,
                         **score(found, q, conv.turns))  # fmt: skip


# --- report ------------------------------------------------------------------------------

METRICS = ("r5", "r10", "strict5", "strict10", "all10")


def table(results: list[Scored], key: Callable[[Scored], str]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[Scored]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    rows = {name: _row(group) for name, group in sorted(groups.items())}
    if results:
        rows["overall"] = _row(results)
    return rows


def _row(group: list[Scored]) -> dict[str, float]:
    return {"n": len(group), **{m: sum(getattr(r, m) for r in group) / len(group) for m in METRICS}}


def side_by_side(title: str, tables: dict[str, dict[str, dict[str, float]]]) -> None:
    doors = list(tables)
    print(f"\n{title}")
    head = "".join(f" | {d:^34}" for d in doors)
    print(f"  {'':<22} {'n':>5}{head}")
    print(f"  {'':<28}" + " | R@5    R@10   sR@5   sR@10  all10" * len(doors))
    names = list(dict.fromkeys(n for t in tables.values() for n in t))
    for name in names:
        rows = [tables[d].get(name) for d in doors]
        n = next(int(r["n"]) for r in rows if r)
        cells = "".join(
            " | " + "  ".join(f"{r[m]:.3f}" for m in METRICS) if r else " | " + " " * 34
            for r in rows
        )
        print(f"  {name:<22} {n:>5}{cells}")


def agreement(results: list[Scored]) -> tuple[bool, float, float]:
    """(every category's R@5 and R@10 within AGREEMENT, the largest gap, the share of
    questions whose top 10 hold exactly the same memories through both doors)."""
    by_door = {d: [r for r in results if r.door == d] for d in AGREEING}
    if not all(by_door.values()):
        return True, 0.0, 1.0
    tables = {d: table(rs, lambda r: r.category) for d, rs in by_door.items()}
    gap = max(
        abs(tables["public"][c][m] - tables["chat"][c][m])
        for c in tables["public"]
        for m in ("r5", "r10")
    )
    same = [a.signature == b.signature for a, b in zip(*by_door.values(), strict=True)]
    return gap <= AGREEMENT, gap, sum(same) / len(same)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doors", default=",".join(DOORS))
    parser.add_argument("--sets", default=None, help="layouts to run (default: all found)")
    parser.add_argument("--conversations", default=None, help="only these ids (comma-separated)")
    parser.add_argument("--limit", type=int, default=None, help="conversations per set")
    parser.add_argument("--plain", action="store_true", help="also plain FTS5 and RRF baselines")
    parser.add_argument("--no-embed", action="store_true", help="token recall only, no model")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--llm-model", default=None, help="litellm model for fact extraction")
    parser.add_argument("--llm-api-base", default=None)
    args = parser.parse_args()
    embed = not args.no_embed
    doors = [d for d in args.doors.split(",") if d]
    wanted = set(args.conversations.split(",")) if args.conversations else None
    llm = {"llm_model": args.llm_model, "llm_api_base": args.llm_api_base}
    llm = {k: v for k, v in llm.items() if v}
    key = settings_hash(embed, args.llm_model)
    os.environ["VAULTCTX_ACCOUNT_DIR"] = account = tempfile.mkdtemp(prefix="vaultctx-eval-")
    datasets = [
        ds for ds in md.find_datasets(args.data) if args.sets is None or ds.name in args.sets
    ]
    if not datasets:
        sys.exit(f"no conversational memory data set found under {args.data}")
    results: list[Scored] = []
    plain: list[Scored] = []
    embedder = Embedder() if embed and args.plain else None
    built_s = {d: 0.0 for d in doors}
    for ds in datasets:
        convs = [c for c in ds.conversations if c.questions and (not wanted or c.id in wanted)]
        convs = convs[: args.limit]
        asked = sum(len(c.questions) for c in convs)
        print(f"{ds.name} ({ds.path.name}): {len(convs)} conversations, {asked} questions,"
              f" {ds.skipped} skipped")  # fmt: skip
        for conv in convs:
            for door in doors:
                folder = args.cache / key / door / ds.name / conv.id
                if args.rebuild or not (folder / "done").exists():
                    shutil.rmtree(folder, ignore_errors=True)
                    with open_workspace(folder, embed=embed, llm=llm) as ws:
                        started = time.perf_counter()
                        WRITE[door](ws, conv)
                        built_s[door] += time.perf_counter() - started
                        assert ws.memory.stats["errors"] == 0, ws.memory.stats
                    (folder / "done").write_text(key)
                with open_workspace(folder, embed=embed, llm=llm) as ws:
                    ws.memory.search("hello", k=1)  # warm: model, mirror
                    results += ask(door, ws, ds, conv)
            if args.plain:
                plain += plain_baselines(embedder, ds, conv)
            line = "  ".join(
                f"{door} R@5 {row['r5']:.3f} R@10 {row['r10']:.3f} sR@10 {row['strict10']:.3f}"
                for door in doors
                if (
                    row := _row(
                        [r for r in results if r.conversation == conv.id and r.door == door]
                    )
                )
            )
            print(f"  {conv.id}: {len(conv.questions)} questions  {line}", flush=True)
    shutil.rmtree(account, ignore_errors=True)
    report(results, plain, doors, datasets, built_s)


def report(
    results: list[Scored], plain: list[Scored], doors: list[str], datasets: list[md.Dataset],
    built_s: dict[str, float],
) -> None:  # fmt: skip
    figures: dict[str, float | int | str | bool] = {}
    for ds in datasets:
        mine = [r for r in results + plain if r.dataset == ds.name]
        by_door = {d: [r for r in mine if r.door == d] for d in (*doors, "fts5", "rrf")}
        by_door = {d: rs for d, rs in by_door.items() if rs}
        cats = {d: table(rs, lambda r: r.category) for d, rs in by_door.items()}
        side_by_side(f"{ds.name}: evidence recall by category", cats)
        if len({r.conversation for r in mine}) > 1:
            convs = {d: table(rs, lambda r: r.conversation) for d, rs in by_door.items()}
            side_by_side(f"{ds.name}: by conversation", convs)
        for door, rows in cats.items():
            for name, row in rows.items():
                for metric in METRICS:
                    figures[f"{ds.name}_{door}_{name}_{metric}"] = round(row[metric], 4)
    for ds in datasets:
        mine = [r for r in results + plain if r.dataset == ds.name]
        chars = {d: [r.chars for r in mine if r.door == d] for d in (*doors, "fts5", "rrf")}
        sizes = {d: sum(c) / len(c) for d, c in chars.items() if c}
        print(f"{ds.name}: characters in the top 10, mean: "
              + ", ".join(f"{d} {size:.0f}" for d, size in sizes.items()))  # fmt: skip
        figures.update({f"{ds.name}_{d}_top10_chars": round(size) for d, size in sizes.items()})
    unheld = sum(r.unheld for r in results)
    print(f"\nprovenance claims a memory's text does not hold: {unheld}")
    ok, gap, same = agreement(results)
    print(f"doors agree within {AGREEMENT}: {'yes' if ok else 'NO'} (largest gap {gap:.4f};"
          f" identical top 10 for {same:.1%} of questions)")  # fmt: skip
    for door in doors:
        mine = [r for r in results if r.door == door]
        cold = [r.ms for r in mine]
        warm = [r.cached_ms for r in mine]
        print(f"{door}: ms p50 {percentile(cold, 50):.2f} p95 {percentile(cold, 95):.2f}"
              f"  with the query vector computed p50 {percentile(warm, 50):.2f}"
              f" p95 {percentile(warm, 95):.2f}  build {built_s[door]:.0f}s")  # fmt: skip
        figures[f"{door}_ms_p50"] = round(percentile(cold, 50), 3)
        figures[f"{door}_cached_ms_p50"] = round(percentile(warm, 50), 3)
    locomo = [r for r in results if r.dataset == "locomo" and r.door == "public"]
    if locomo:
        rows = table(locomo, lambda r: r.category)
        print("targets (LoCoMo, public door):")
        check("R@5", rows["overall"]["r5"], TARGETS["r5"], higher_is_better=True)
        check("R@10", rows["overall"]["r10"], TARGETS["r10"], higher_is_better=True)
        for cat in ("multi-hop", "open-domain"):
            if cat in rows:
                check(f"{cat} R@10", rows[cat]["r10"], TARGETS[f"{cat}_r10"],
                      higher_is_better=True)  # fmt: skip
        check("doors' largest gap", gap, AGREEMENT, higher_is_better=False)
    figures |= {"doors_gap": round(gap, 4), "doors_identical_top10": round(same, 4)}
    emit_figures("memory_eval", {"unheld": unheld, **figures})


if __name__ == "__main__":
    main()
