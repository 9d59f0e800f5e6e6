"""vaultctx's own WordPiece gives the ids `tokenizers` gives on the bundled tokenizer.json:
for every code point, arbitrary Unicode text, and every note of the real vaults, truncation
included; the model's vectors are the same through either; another shape of tokenizer.json
goes to `tokenizers` itself."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from conftest import SHARED_DATA
from vaultctx.errors import EmbeddingUnavailable
from vaultctx.storage.embeddings import BUNDLED_FOLDER
from vaultctx.storage.encoders import LibraryTokenizer, OnnxEncoder, open_tokenizer
from vaultctx.storage.onnx_export import read_spec
from vaultctx.storage.wordpiece import WordPieceTokenizer

TOKENIZER_JSON = BUNDLED_FOLDER / "tokenizer.json"
SPEC = read_spec(BUNDLED_FOLDER)
VAULTS = SHARED_DATA / "vaults"


def library(max_length: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(TOKENIZER_JSON))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    return tokenizer


def ours(max_length: int) -> WordPieceTokenizer:
    tokenizer = WordPieceTokenizer.from_file(TOKENIZER_JSON, max_length)
    assert tokenizer is not None
    return tokenizer


def assert_same_ids(texts: list[str], max_length: int) -> None:
    expected = [e.ids for e in library(max_length).encode_batch(texts)]
    found = ours(max_length).encode_batch(texts)
    for text, want, got in zip(texts, expected, found, strict=True):
        assert got == want, text[:200]


def real_notes() -> list[str]:
    notes = sorted(VAULTS.glob("*/**/*.md"))
    if not notes:
        pytest.skip("the shared evaluation data is not available")
    return [p.read_text(encoding="utf-8", errors="replace") for p in notes]


def test_the_bundled_model_gets_vaultctxs_own_tokenizer() -> None:
    assert isinstance(open_tokenizer(TOKENIZER_JSON, SPEC.max_seq_length), WordPieceTokenizer)


@pytest.mark.slow
def test_every_code_point_tokenizes_as_tokenizers_does() -> None:
    """Alone, inside a word, after a word and before a combining accent: the character
    classes (control, accent, punctuation, CJK, whitespace) and the case and NFD maps."""
    codes = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{chr(c)}b {chr(c)} x{chr(c)}\u0301{chr(c)}É" for c in codes]
    for start in range(0, len(texts), 50_000):
        assert_same_ids(texts[start : start + 50_000], 512)


UNICODE = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.characters(categories=["Mn", "Mc", "Me", "Cf", "Co", "Zs", "Po", "So", "Lo"]),
        st.sampled_from("é\u0301\u0308\u200b\u200d\ufeff\x00\ufffd\x85\xa0\u3000\t\n\r\x0b"),
        st.sampled_from("日本語中文한국어🙂👩\u200d💻ΣσςİIıß"),
        st.sampled_from(["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "##ing", "un", "##"]),
    ),
    max_size=300,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(UNICODE, min_size=1, max_size=4), max_length=st.sampled_from([8, 256, 512]))
def test_arbitrary_text_gives_the_same_ids(texts: list[str], max_length: int) -> None:
    assert_same_ids(texts, max_length)


@settings(max_examples=100, deadline=None)
@given(
    word=st.text(st.sampled_from("abcdeéxyz\u0301日"), min_size=80, max_size=140),
    sep=st.sampled_from(["", " ", "-"]),
)
def test_long_words_become_unknown_past_the_files_limit(word: str, sep: str) -> None:
    assert_same_ids([word, word + sep + word, word.upper()], 512)


def test_every_real_note_gives_the_same_ids_truncated_or_not() -> None:
    notes = real_notes()
    assert len(notes) > 800
    assert_same_ids(notes, SPEC.max_seq_length)
    assert_same_ids(notes, 100_000)  # whole notes: every word, not only the first 256 ids
    assert_same_ids([n.lower() for n in notes], SPEC.max_seq_length)  # OnnxEncoder's lowercase


@pytest.mark.slow
def test_the_models_vectors_are_the_same_through_either_tokenizer() -> None:
    texts = [n for note in real_notes() for n in note.split("\n\n") if n.strip()]
    texts = random.Random(0).sample(texts, 600)
    encoder = OnnxEncoder(SPEC, BUNDLED_FOLDER, workers=1)
    assert isinstance(encoder.tokenizer, WordPieceTokenizer)
    mine = encoder.encode(texts)
    encoder.tokenizer = LibraryTokenizer(TOKENIZER_JSON, SPEC.max_seq_length)
    np.testing.assert_array_equal(encoder.encode(texts), mine)


def other_shape(tmp_path: Path, change: str) -> Path:
    spec = json.loads(TOKENIZER_JSON.read_text(encoding="utf-8"))
    if change == "pre_tokenizer":
        spec["pre_tokenizer"] = {"type": "Whitespace"}
    elif change == "model":
        spec["model"]["type"] = "WordLevel"
        spec["model"].pop("max_input_chars_per_word")
        spec["model"].pop("continuing_subword_prefix")
    elif change == "normalizer":
        spec["normalizer"] = {"type": "Lowercase"}
    elif change == "added token":
        spec["added_tokens"][2]["lstrip"] = True
    else:
        spec["post_processor"] = {
            "type": "BertProcessing",
            "sep": ["[SEP]", 102],
            "cls": ["[CLS]", 101],
            "trim_offsets": True,
            "add_prefix_space": False,
        }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "change", ["pre_tokenizer", "model", "normalizer", "added token", "post_processor"]
)
def test_another_shape_of_tokenizer_json_goes_to_tokenizers(tmp_path: Path, change: str) -> None:
    path = other_shape(tmp_path, change)
    assert WordPieceTokenizer.from_file(path) is None
    chosen = open_tokenizer(path, 256)
    assert isinstance(chosen, LibraryTokenizer)
    reference = Tokenizer.from_file(str(path))
    reference.no_padding()
    reference.enable_truncation(256)
    text = "Hello, [CLS] wörld! 日本"
    assert chosen.encode_batch([text]) == [reference.encode(text).ids]


def test_the_files_own_parameters_are_the_ones_used(tmp_path: Path) -> None:
    spec = json.loads(TOKENIZER_JSON.read_text(encoding="utf-8"))
    spec["model"]["max_input_chars_per_word"] = 5
    spec["model"]["continuing_subword_prefix"] = "@@"
    spec["model"]["vocab"] = {
        k.replace("##", "@@", 1) if k.startswith("##") else k: v
        for k, v in spec["model"]["vocab"].items()
    }
    spec["normalizer"].update(lowercase=False, strip_accents=True, handle_chinese_chars=False)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    texts = ["Tokenizing Éclairs in 東京 quickly", "short words only", "ALL CAPS Ünïcödé"]
    mine = WordPieceTokenizer.from_file(path, 64)
    assert mine is not None
    reference = Tokenizer.from_file(str(path))
    reference.no_padding()
    reference.enable_truncation(64)
    assert mine.encode_batch(texts) == [e.ids for e in reference.encode_batch(texts)]
    assert mine.encode_batch(texts) != ours(64).encode_batch(texts)


def test_without_tokenizers_the_bundled_model_runs_and_another_shape_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # the default install
    encoder = OnnxEncoder(SPEC, BUNDLED_FOLDER, workers=1)
    assert encoder.encode(["varroa mites in the hive"]).shape == (1, SPEC.dim)
    with pytest.raises(EmbeddingUnavailable) as caught:
        open_tokenizer(other_shape(tmp_path, "pre_tokenizer"), 256)
    assert "tokenizers" in str(caught.value) and "vaultctx[export]" in str(caught.value)
    assert "\n" not in str(caught.value)
