"""LoCoMo evidence recall must not silently regress: one real conversation, token recall.

conv-30 (19 sessions, 369 turns, 81 questions of categories 1-4) goes through both doors
exactly as `benchmarks/memory_eval.py` runs them, without the model (`embed=False`): every
turn through `memory.add` with its speaker, session and turn, then `memory.search`; and
every turn through `persist_turn`, then `retrieve_for_turn`. Plain FTS5 bm25 over its turns
(speaker-prefixed) reaches R@5 0.592 / R@10 0.652; the memory layer must stay well above,
and both doors must give the same figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from vaultctx import Workspace

DATA = REPO_ROOT.parent / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo-dev7.json"

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not available")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import memory_data
        import memory_eval
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    return memory_data, memory_eval


def test_locomo_conversation_recall_stays_well_above_bm25_through_both_doors(
    tmp_path: Path, bench
) -> None:
    memory_data, memory_eval = bench
    dataset = memory_data.load(LOCOMO)
    conv = next(c for c in dataset.conversations if c.id == "conv-30")
    results = []
    for door in memory_eval.DOORS:
        vault = tmp_path / door
        vault.mkdir()
        with Workspace.open(vault, {"embed": False}) as ws:
            ws.index(embed=False)
            memory_eval.WRITE[door](ws, conv)
            assert ws.memory.stats["errors"] == 0
            results += memory_eval.ask(door, ws, dataset, conv)
    by_door = {
        door: memory_eval.table([r for r in results if r.door == door], lambda r: r.category)
        for door in memory_eval.DOORS
    }
    overall = by_door["public"]["overall"]
    assert overall["n"] == 81
    assert overall["r5"] >= 0.66, overall
    assert overall["r10"] >= 0.72, overall
    assert sum(r.unheld for r in results) == 0
    agree, gap, _ = memory_eval.agreement(results)
    assert agree, (gap, by_door)
