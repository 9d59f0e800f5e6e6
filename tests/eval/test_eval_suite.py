"""The evaluation suite's small part, as CI runs it: every question set in tests/questions at
note level with the real model, and Cranfield through the lexical retriever in both title
layouts. `benchmarks/eval.py --suite` runs the whole suite (both BEIR sets fused, with the
plain baselines); these floors only catch a broken retriever or a context that stopped
deciding, not small ranking changes.
"""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT, SHARED_DATA

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import suite

MIN_SUCCESS_AT_5 = 0.9
MIN_MRR_AT_10 = 0.7
# The translated vaults' sets were written to avoid the notes' own words, in languages the
# embedding model does not read: lower floors, still far above what English-only analysis
# gave them (Success@5 0.60-0.96, MRR@10 0.42-0.72).
MIN_OTHER_LANGUAGE_SUCCESS_AT_5 = 0.8
MIN_OTHER_LANGUAGE_MRR_AT_10 = 0.55
# With the notes opened before each question, and its gain over the same questions asked
# with nothing opened. Focus may not cost a question about something else more than ~0.01
# (benchmarks/focus_eval.py); of the gates measured (the knob table, `weight_graph`), none
# that keeps that promise lifts the context sets further than foam 0.891 (+0.087) and tasks
# 0.802 (+0.116): the floors sit just under them.
MIN_CONTEXT_MRR_AT_10 = 0.78
MIN_CONTEXT_GAIN = 0.08
MIN_CRANFIELD_LEXICAL_NDCG = 0.36


@pytest.fixture(scope="module")
def rows(tmp_path_factory, embedder):
    if not (SHARED_DATA / "vaults").is_dir():
        pytest.skip("the shared evaluation data is not available")
    return suite.run_suite(
        tmp_path_factory.mktemp("suite"), embedder, small=True, log=lambda line: None
    )


def by_variant(rows, variant):
    return {row.dataset: row for row in rows if row.variant == variant}


@pytest.mark.slow
def test_the_suite_finds_every_question_set_and_cranfield(rows):
    names = {row.dataset for row in rows}
    assert {path.stem for path in suite.QUESTIONS.glob("*.json")} <= names
    assert {"cranfield"} <= names
    print("\n" + suite.table(rows))


@pytest.mark.slow
def test_questions_find_their_notes(rows):
    for name, row in by_variant(rows, "notes").items():
        english = row.language == "en"
        assert row.metrics["success@5"] >= (
            MIN_SUCCESS_AT_5 if english else MIN_OTHER_LANGUAGE_SUCCESS_AT_5
        ), name
        assert row.metrics["mrr@10"] >= (
            MIN_MRR_AT_10 if english else MIN_OTHER_LANGUAGE_MRR_AT_10
        ), name


@pytest.mark.slow
def test_each_translated_vault_is_read_in_its_own_language(rows):
    languages = {row.dataset: row.language for row in by_variant(rows, "notes").values()}
    assert {languages[f"obsidian_help_{lang}"] for lang in ("es", "fr", "it", "nl")} == {
        "es",
        "fr",
        "it",
        "nl",
    }


@pytest.mark.slow
def test_the_open_note_decides_ambiguous_questions(rows):
    with_context = by_variant(rows, "with context")
    without = by_variant(rows, "no context")
    assert len(with_context) >= 2
    for name, row in with_context.items():
        assert row.metrics["mrr@10"] >= MIN_CONTEXT_MRR_AT_10, name
        assert row.metrics["mrr@10"] - without[name].metrics["mrr@10"] >= MIN_CONTEXT_GAIN, name
        assert row.metrics["controls_mrr@10"] >= without[name].metrics["controls_mrr@10"] - 0.2


@pytest.mark.slow
def test_cranfield_lexical_ranks_the_same_in_both_title_layouts(rows):
    layouts = {row.variant: row.metrics["ndcg@10"] for row in rows if row.dataset == "cranfield"}
    assert set(layouts) == {"frontmatter lexical", "h1 lexical"}
    assert min(layouts.values()) >= MIN_CRANFIELD_LEXICAL_NDCG
    assert abs(layouts["frontmatter lexical"] - layouts["h1 lexical"]) < 0.005
