"""LoCoMo evidence recall must not silently regress: one real conversation, token recall.

conv-30 (19 sessions, 369 turns, 81 questions of categories 1-4) goes through
`persist_turn` and `retrieve_for_turn` exactly as `benchmarks/memory_eval.py` does, without
the model (`embed=False`). Plain FTS5 bm25 over its turns (speaker-prefixed) reaches
R@5 0.592 / R@10 0.652; the memory layer reached 0.703 / 0.776 and must stay well above.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

from vaultctx import Workspace

REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev7.json"

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not available")


@pytest.fixture(scope="module")
def memory_eval():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import memory_eval
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return memory_eval


def test_locomo_conversation_recall_stays_well_above_bm25(tmp_path: Path, memory_eval) -> None:
    sample = next(
        s for s in json.loads(LOCOMO.read_text(encoding="utf-8")) if s["sample_id"] == "conv-30"
    )
    conv = memory_eval.sessions(sample["conversation"])
    turn_ids = {t["dia_id"] for s in conv for t in s.turns}
    vault = tmp_path / "vault"
    vault.mkdir()
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index(embed=False)
        memory_eval.build(ws, "conv-30", conv)
        assert ws.memory.stats["errors"] == 0
        now = conv[-1].at + dt.timedelta(days=1)
        qs = memory_eval.questions(sample, turn_ids)
        results = list(memory_eval.ask(ws, "conv-30", qs, now))
    overall = memory_eval.table(results)["overall"]
    assert overall["n"] == 81
    assert overall["r5"] >= 0.66, overall
    assert overall["r10"] >= 0.72, overall
