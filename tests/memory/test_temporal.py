"""The time a question names ("in May 2023", "yesterday"), read as a window of dates."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Jon do on 16 March, 2022?", "2022-03-15", "2022-03-19"),
        ("Which activity was James pursuing on March 16, 2022?", "2022-03-15", "2022-03-19"),
        ("What did Gina buy in May 2023?", "2023-05-01", "2023-06-01"),
        ("Where did they travel in 2022?", "2022-01-01", "2023-01-01"),
        ("What did we plan in December?", "2023-12-01", "2024-01-01"),
        ("What happened yesterday?", "2024-01-09", "2024-01-10"),
    ],
)
def test_the_time_a_question_names_becomes_a_window(query, start, end):
    from vaultctx.memory.models import to_timestamp
    from vaultctx.memory.temporal import time_window

    now = to_timestamp("2024-01-10T12:00:00", 0)
    assert time_window(query, now) == (to_timestamp(start, 0), to_timestamp(end, 0))
    assert time_window("What does Jon like to cook?", now) is None
