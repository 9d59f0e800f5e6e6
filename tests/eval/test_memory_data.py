"""The memory benchmark finds conversational data sets by their layout: LoCoMo, and a copy of
LongMemEval dropped beside it (fixtures written here in each set's published shape)."""

from __future__ import annotations

import datetime as dt
import json
import sys

import pytest

from conftest import REPO_ROOT


@pytest.fixture(scope="module")
def memory_data():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import memory_data
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    return memory_data


def turn(role: str, content: str, answer: bool = False) -> dict:
    return {"role": role, "content": content, **({"has_answer": True} if answer else {})}


LONGMEMEVAL = [
    {
        "question_id": "e47becba",
        "question_type": "single-session-user",
        "question": "What degree did I graduate with?",
        "answer": "Business Administration",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["sharegpt_1", "answer_280352e9"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:05"],
        "haystack_sessions": [
            [turn("user", "Tips for a road trip?"), turn("assistant", "Pack snacks.")],
            [
                turn("user", "I graduated in Business Administration.", answer=True),
                turn("assistant", "Congratulations!"),
            ],
        ],
        "answer_session_ids": ["answer_280352e9"],
    },
    {
        "question_id": "gpt4_2655b836_abs",
        "question_type": "temporal-reasoning",
        "question": "When did I adopt a cat?",
        "answer": "You did not mention this.",
        "question_date": "2023/06/01",
        "haystack_session_ids": ["s9"],
        "haystack_dates": ["2023/05/02"],
        "haystack_sessions": [[turn("user", "My dog loves walks.")]],
        "answer_session_ids": [],
    },
]

LOCOMO = [
    {
        "qa": [
            {
                "question": "What did Jon buy?",
                "answer": "a bike",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {"question": "Is Jon an alien?", "evidence": ["D1:1"], "category": 5},
            {"question": "When?", "answer": "-", "evidence": ["D7:1"], "category": 2},
        ],
        "conversation": {
            "speaker_a": "Jon",
            "speaker_b": "Gina",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Gina", "dia_id": "D1:1", "text": "Hi Jon!"},
                {
                    "speaker": "Jon",
                    "dia_id": "D1:2",
                    "text": "I bought a bike.",
                    "blip_caption": "a photo of a red bike",
                },
            ],
        },
        "sample_id": "conv-1",
    }
]


def test_a_longmemeval_copy_is_found_by_its_layout_beside_locomo(tmp_path, memory_data):
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "part.json").write_text(json.dumps(LOCOMO), encoding="utf-8")
    (tmp_path / "longmemeval").mkdir()
    (tmp_path / "longmemeval" / "longmemeval_s.json").write_text(
        json.dumps(LONGMEMEVAL), encoding="utf-8"
    )
    (tmp_path / "other.json").write_text(json.dumps({"corpus": []}), encoding="utf-8")

    found = list(memory_data.find_datasets(tmp_path))

    assert [ds.name for ds in found] == ["locomo", "longmemeval"]
    lme = found[1]
    assert lme.skipped == 1  # the abstention question
    conv = lme.conversations[0]
    assert conv.id == "e47becba"
    assert [s.at for s in conv.sessions] == [
        dt.datetime(2023, 5, 20, 2, 21),
        dt.datetime(2023, 5, 21, 10, 5),
    ]
    assert conv.turns["answer_280352e9:0"].speaker == "user"
    (question,) = conv.questions
    assert question.evidence == {"answer_280352e9:0"}
    assert question.category == "single-session-user"
    assert question.asked_at == dt.datetime(2023, 5, 30, 23, 40)


def test_locomo_keeps_categories_one_to_four_with_known_evidence(tmp_path, memory_data):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    ds = memory_data.load(path)
    (conv,) = ds.conversations
    assert [q.text for q in conv.questions] == ["What did Jon buy?"]
    assert conv.questions[0].category == "single-hop"
    assert ds.skipped == 1  # evidence D7:1 names no turn of the conversation
    assert conv.turns["D1:2"].text == "I bought a bike. [shares a photo of a red bike]"
    assert conv.sessions[0].at == dt.datetime(2023, 5, 8, 13, 56)


def test_a_file_that_only_looks_like_a_set_is_a_clear_error(tmp_path, memory_data):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps([{"question": "q?", "haystack_sessions": []}]), encoding="utf-8")
    with pytest.raises(ValueError, match="looks like longmemeval"):
        memory_data.load(path)
