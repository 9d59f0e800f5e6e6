"""Time in a question: a date expression becomes a window over note dates, shown in the
answer's diagnostics, its words not searched; a question without one is answered exactly as
before."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("dateparser")

from vaultctx import Workspace
from vaultctx.pipeline import timewindow
from vaultctx.pipeline.timewindow import may_name_time, read_time

NOW = dt.datetime(2025, 12, 3, 10, 0)  # a Wednesday
# Ordinary words, among them some a date parser takes for dates ("may", "do", "set", "now",
# "second", "march" as a verb, "sat", "sun", "mar").
WORDS = (
    "how", "do", "i", "set", "up", "a", "note", "may", "the", "hive", "second", "brain",
    "now", "what", "march", "sat", "sun", "mar", "links", "tags", "sync", "plugin", "queen",
    "version", "1.2", "404", "of", "in", "on", "to", "embed", "publish", "frames", "30",
)  # fmt: skip
PLAIN = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
FORMATS = ("%Y-%m-%d", "{day} %B %Y", "%B {day}, %Y", "%m/%d/%Y")  # English: month first


@settings(max_examples=80, deadline=None)
@given(PLAIN)
def test_a_question_without_a_date_gets_no_window(text):
    assert read_time(text, ["en"], NOW) is None


@settings(max_examples=60, deadline=None)
@given(
    st.dates(dt.date(1990, 1, 1), dt.date(2025, 12, 2)),
    st.sampled_from(FORMATS),
    PLAIN,
    PLAIN,
)
def test_the_window_holds_the_named_day_and_its_words_are_not_searched(day, form, before, after):
    written = day.strftime(form.replace("{day}", str(day.day)))
    window = read_time(f"{before} on {written} {after}", ["en"], NOW)
    assert window is not None, written
    assert window.start <= dt.datetime.combine(day, dt.time()) < window.end
    assert window.end - window.start == dt.timedelta(days=1)
    assert written not in window.text


def test_relative_times_are_read_from_now():
    yesterday = read_time("what did I write yesterday", ["en"], NOW)
    assert (yesterday.start, yesterday.end) == (dt.datetime(2025, 12, 2), dt.datetime(2025, 12, 3))
    assert yesterday.text == "what did I write"
    week = read_time("notes from last week about the hives", ["en"], NOW)
    assert (week.start, week.end) == (dt.datetime(2025, 11, 24), dt.datetime(2025, 12, 1))
    since = read_time("meetings since Monday", ["en"], NOW)
    assert (since.start, since.end, since.words) == (
        dt.datetime(2025, 12, 1),
        NOW,
        ("since Monday",),
    )
    month = read_time("what did I decide in March", ["en"], NOW)
    assert (month.start, month.end) == (dt.datetime(2025, 3, 1), dt.datetime(2025, 4, 1))


def test_the_vault_s_languages_are_read_too():
    assert read_time("qué escribí ayer sobre las colmenas", ["es"], NOW).start == dt.datetime(
        2025, 12, 2
    )
    assert read_time("réunions depuis lundi", ["fr"], NOW).words == ("depuis lundi",)
    assert read_time("wat schreef ik gisteren", ["nl"], NOW).text == "wat schreef ik"


def test_the_future_and_now_name_no_note_s_date():
    for text in ("snooze a task until tomorrow", "tasks due next week", "now what"):
        assert read_time(text, ["en"], NOW) is None


def test_a_question_that_cannot_name_a_time_never_loads_the_date_library():
    assert not may_name_time("how do I embed a note in another", ["en"])
    assert may_name_time("notes from last week", ["en"])
    assert may_name_time("hives in 2025", ["en"])


DATED = {
    "Journal/2025-08-16 Mite Count.md": "# Mite count\nVarroa mites: 3 per day on the board.\n",
    "Journal/2025-06-07 Mite Count.md": "# Mite count\nVarroa mites: 1 per day on the board.\n",
    "Reference/Mite counting.md": "# Mite counting\nHow to count varroa mites on a board.\n",
    "Notes/Harvest.md": "---\ndate: 2025-08-20\n---\n# Harvest\nTwenty jars of honey.\n",
}


@pytest.fixture
def dated(make_vault) -> Path:
    vault = make_vault(DATED)
    month_ago = time.time() - 30 * 86400
    for path in vault.rglob("*.md"):
        os.utime(path, (month_ago, month_ago))
    return vault


def test_an_answer_says_which_window_it_read_and_prefers_notes_dated_in_it(dated):
    with Workspace.open(dated, {"embed": False}) as ws:
        ws.index(embed=False)
        june = ws.select("mite count on 2025-06-07", use_vectors=False)
        august = ws.select("mite count in August 2025", use_vectors=False)
    assert june.notes()[0].path == "Journal/2025-06-07 Mite Count.md"
    assert june.query == "mite count on 2025-06-07"
    assert june.diagnostics["time_window"] == {
        "from": "2025-06-07T00:00:00",
        "until": "2025-06-08T00:00:00",
        "words": ["2025-06-07"],
        "searched": "mite count on",
        "notes": 1,
        "as": "boost",
    }
    assert august.notes()[0].path == "Journal/2025-08-16 Mite Count.md"
    assert august.diagnostics["time_window"]["notes"] == 2  # the daily note and the dated one


@pytest.mark.parametrize(
    ("question", "window"),
    [
        # a window no note is dated in: understood, unused
        ("varroa mites in March 2024", {"notes": 0, "as": "unused"}),
        ("how do I count varroa mites", None),  # no date at all: no window
    ],
)
def test_a_question_without_a_window_any_note_is_dated_in_ranks_as_without_time(
    dated, monkeypatch, question, window
):
    with Workspace.open(dated, {"embed": False}) as ws:
        ws.index(embed=False)
        understood = ws.select(question, use_vectors=False)
        monkeypatch.setattr(timewindow, "TIME_MODE", "off")
        words_only = ws.select(question, use_vectors=False)
    if window is None:
        assert "time_window" not in understood.diagnostics
    else:
        found = understood.diagnostics["time_window"]
        assert {key: found[key] for key in window} == window
        assert found["searched"] == question
    assert understood.candidates == words_only.candidates


def test_as_a_filter_the_window_returns_only_notes_dated_in_it(dated, monkeypatch):
    monkeypatch.setattr(timewindow, "TIME_MODE", "filter")
    with Workspace.open(dated, {"embed": False}) as ws:
        ws.index(embed=False)
        found = ws.select("varroa mites in June 2025", use_vectors=False)
    assert [n.path for n in found.notes()] == ["Journal/2025-06-07 Mite Count.md"]
