"""Notes in other languages: detection, Snowball analysis, stop-words, compounds, CJK, the
vault's `language` setting, and an index from before languages were read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from conftest import assert_full_text_matches_blocks, pretend_schema, query
from vaultctx import ConfigError, Workspace
from vaultctx.cli import cli
from vaultctx.config import load_config
from vaultctx.errors import IndexDatabaseError
from vaultctx.search.query import QueryTokenizer, build_query, is_stop_word
from vaultctx.storage.language import (
    CJK_LANGUAGES,
    LANGUAGES,
    STEMMERS,
    analyse,
    detect_language,
    query_languages,
    word_terms,
)
from vaultctx.storage.lexical import FtsTerms

# One sentence in every language a note can be read in, as a user of it would write it.
SENTENCES = {
    "da": "Med Obsidian Sync kan du synkronisere dine noter mellem alle dine enheder, uden at"
    " nogen andre kan læse dem.",
    "de": "Mit Obsidian Sync kannst du deine Notizen zwischen allen Geräten synchronisieren,"
    " ohne dass jemand anderes sie lesen kann.",
    "en": "With Obsidian Sync you can synchronize your notes between all of your devices"
    " without anyone else being able to read them.",
    "es": "Con Obsidian Sync puedes sincronizar tus notas entre todos tus dispositivos sin que"
    " nadie más pueda leerlas.",
    "fi": "Obsidian Syncin avulla voit synkronoida muistiinpanosi kaikkien laitteidesi välillä"
    " ilman, että kukaan muu voi lukea niitä.",
    "fr": "Avec Obsidian Sync, vous pouvez synchroniser vos notes entre tous vos appareils sans"
    " que personne d'autre ne puisse les lire.",
    "hu": "Az Obsidian Sync segítségével szinkronizálhatod a jegyzeteidet az összes eszközöd"
    " között anélkül, hogy bárki más elolvashatná őket.",
    "it": "Con Obsidian Sync puoi sincronizzare le tue note tra tutti i tuoi dispositivi senza"
    " che nessun altro possa leggerle.",
    "ja": "Obsidian Sync を使うと、すべてのデバイス間でノートを同期でき、ほかの誰もそれを"
    "読むことはできません。",
    "ko": "Obsidian Sync를 사용하면 모든 기기 간에 노트를 동기화할 수 있으며 다른 사람은 아무도"
    " 읽을 수 없습니다.",
    "nl": "Met Obsidian Sync kun je je notities tussen al je apparaten synchroniseren zonder dat"
    " iemand anders ze kan lezen.",
    "no": "Med Obsidian Sync kan du synkronisere notatene dine mellom alle enhetene dine uten at"
    " noen andre kan lese dem.",
    "pt": "Com o Obsidian Sync você pode sincronizar suas notas entre todos os seus dispositivos"
    " sem que ninguém mais possa lê-las.",
    "ru": "С Obsidian Sync вы можете синхронизировать свои заметки между всеми устройствами,"
    " и никто другой не сможет их прочитать.",
    "sv": "Med Obsidian Sync kan du synkronisera dina anteckningar mellan alla dina enheter utan"
    " att någon annan kan läsa dem.",
    "tr": "Obsidian Sync ile notlarınızı tüm cihazlarınız arasında senkronize edebilirsiniz ve"
    " başka hiç kimse onları okuyamaz.",
    "zh": "使用 Obsidian Sync，你可以在所有设备之间同步笔记，而其他任何人都无法读取它们。",
}


def test_every_language_a_note_can_be_read_in_is_detected_from_one_sentence():
    assert set(SENTENCES) == LANGUAGES
    assert {lang: detect_language(text) for lang, text in SENTENCES.items()} == {
        lang: lang for lang in SENTENCES
    }


def test_a_note_too_short_to_tell_has_no_language():
    assert detect_language("Sync") is None
    assert detect_language("| 1 | 2 |\n| 3 | 4 |") is None


@pytest.mark.parametrize(
    ("language", "forms"),
    [
        ("de", ["Notiz", "Notizen"]),
        ("es", ["sincronización", "sincronizar", "sincronizado"]),
        ("fr", ["synchroniser", "synchronisation"]),
        ("it", ["sincronizzare", "sincronizzazione"]),
        ("nl", ["notitie", "notities"]),
        ("pt", ["sincronizar", "sincronização"]),
        ("sv", ["anteckning", "anteckningar"]),
        ("da", ["enhed", "enheder"]),
        ("no", ["notat", "notatene"]),
        ("fi", ["muistiinpano", "muistiinpanot"]),
        ("hu", ["jegyzet", "jegyzetek"]),
        ("ru", ["заметка", "заметки"]),
        ("tr", ["cihaz", "cihazlar"]),
    ],
)
def test_inflections_of_a_word_share_one_index_term(language, forms):
    assert len({tuple(word_terms(form, language)) for form in forms}) == 1


def test_english_and_undetected_text_is_indexed_as_written():
    text = "Beekeepers treat hives for varroa mites in late summer."
    assert analyse(text, "en") is text
    assert analyse(text, None) is text


def test_stop_words_of_the_query_language_are_dropped_with_or_without_accents():
    assert is_stop_word("de", ["es"]) and is_stop_word("één", ["nl"])
    assert not is_stop_word("sincronizar", ["es"])
    assert not is_stop_word("de", ["en"])  # English keeps its own list


@pytest.mark.parametrize(
    ("language", "word"),
    [("zh", "同步"), ("ja", "ノート"), ("de", "Speicherplatz"), ("es", "dispositivos")],
)
def test_the_terms_of_a_word_searched_for_are_terms_it_was_indexed_under(language, word):
    assert set(word_terms(word, language, query=True)) <= set(word_terms(word, language))


_words = st.text(
    alphabet=st.characters(categories=["Lu", "Ll", "Lo", "Nd"]), min_size=1, max_size=24
)


@given(word=_words, language=st.sampled_from(sorted(LANGUAGES)))
def test_a_word_always_has_an_index_term(word, language):
    assert all(word_terms(word, language)), "an empty term"
    assert word_terms(word, language)


@given(word=_words, language=st.sampled_from(sorted(STEMMERS)))
def test_analysis_is_idempotent_an_index_term_searched_for_is_itself(word, language):
    for term in word_terms(word, language):
        assert word_terms(term, language, query=True) == [term]


@given(text=st.text(min_size=1, max_size=200), language=st.sampled_from(sorted(LANGUAGES)))
def test_analysis_gives_the_same_text_every_time(text, language):
    assert analyse(text, language) == analyse(text, language)


@given(
    words=st.lists(_words, min_size=1, max_size=6),
    language=st.sampled_from(sorted(LANGUAGES)),
)
def test_a_block_is_found_by_each_of_its_own_words_read_in_its_language(words, language):
    """Index and query analysis agree: every word of a text, as a query read in the text's
    language, matches the text as the index holds it."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE blocks_fts USING fts5(title, heading_path, text,"
        " tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute(
        "INSERT INTO blocks_fts(rowid, title, heading_path, text) VALUES (1, '', '', ?)",
        (analyse(" ".join(words), language),),
    )
    tokenizer = QueryTokenizer(FtsTerms(conn))
    for word in words:
        built = build_query(word, tokenizer, 1, (language,))
        if built.match is None:  # a stop-word, or a single letter
            continue
        rows = conn.execute("SELECT rowid FROM blocks_fts WHERE blocks_fts MATCH ?", (built.match,))
        assert rows.fetchall() == [(1,)], (word, built.match)


def test_a_query_is_read_in_the_vault_language_it_is_written_in():
    vault = ("es", "en")
    assert query_languages("¿cómo sincronizo mis notas entre dispositivos?", vault) == ("es",)
    assert query_languages("how do I sync my notes between devices", vault) == ("en",)
    assert query_languages("Obsidian Sync", vault) == ("es", "en")  # too short to tell
    assert query_languages("sync", ("nl",)) == ("nl",)


# --- vaults ---------------------------------------------------------------------------------

MIXED = {
    "es/Sincronización.md": "# Sincronización\n\nObsidian Sync sincroniza tus notas entre"
    " todos tus dispositivos. Las notas sincronizadas se cifran de extremo a extremo.\n",
    "es/Plantillas.md": "# Plantillas\n\nUna plantilla inserta texto predefinido en la nota"
    " actual. Elige la carpeta de plantillas en la configuración del complemento.\n",
    "de/Speicher.md": "# Speicherlimits\n\nJedes Konto hat Speicherlimits für angehängte Dateien"
    " und den Versionsverlauf. Der Speicher wird pro Tresor gezählt und angezeigt.\n",
    "de/Vorlagen.md": "# Vorlagen\n\nEine Vorlage fügt vordefinierten Text in die aktuelle Notiz"
    " ein. Wähle den Ordner für Vorlagen in den Einstellungen des Plugins.\n",
    "en/Hives.md": "# Hives\n\nBeekeepers inspect their hives every week in summer and treat"
    " them for varroa mites before the winter bees hatch.\n",
    "zh/同步.md": "# 同步笔记\n\n使用 Obsidian Sync，你可以在所有设备之间同步笔记，"
    "而其他任何人都无法读取它们。\n",
    "ja/ノート.md": "# ノートの同期\n\nObsidian Sync を使うと、すべてのデバイス間でノートを"
    "同期でき、ほかの誰もそれを読むことはできません。\n",
}


def notes_for(ws: Workspace, text: str) -> list[str]:
    return [note.path for note in ws.select(text, k=5, use_vectors=False).notes()]


def test_a_mixed_vault_finds_each_note_in_its_own_language(make_vault):
    root = make_vault(MIXED)
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        languages = dict(query(ws._vault.db.path, "SELECT path, language FROM notes"))
        assert notes_for(ws, "sincronizado")[0] == "es/Sincronización.md"
        assert notes_for(ws, "las plantillas del complemento")[0] == "es/Plantillas.md"
        assert notes_for(ws, "Vorlage einfügen")[0] == "de/Vorlagen.md"
        assert notes_for(ws, "treating hive")[0] == "en/Hives.md"
        selection = ws.select("¿Dónde elijo la carpeta de las plantillas?", k=3, explain=True)
    assert languages == {path: path.split("/")[0] for path in MIXED}
    assert selection.explain["lexical"]["languages"] == ["es"]
    assert selection.notes()[0].path == "es/Plantillas.md"
    assert_full_text_matches_blocks(root / ".vaultctx" / "index.db")


def test_related_notes_of_a_note_are_asked_for_in_its_language(make_vault):
    root = make_vault({k: v for k, v in MIXED.items() if k.startswith(("es/", "de/"))})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        related = ws.related("es/Plantillas.md", use_vectors=False, explain=True)
    terms = related.diagnostics["related_terms"]
    assert related.explain["lexical"]["languages"] == ["es"]
    assert terms and not {"de", "la", "en", "del"} & {t.lower() for t in terms}


def test_a_compound_the_vault_never_wrote_is_found_by_its_parts(make_vault):
    root = make_vault({k: v for k, v in MIXED.items() if k.startswith("de/")})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        selection = ws.select("Vorlagenordner", k=3, use_vectors=False, explain=True)
    assert selection.explain["lexical"]["terms"]  # vorlag, ordn: both in the index
    assert selection.notes()[0].path == "de/Vorlagen.md"


@pytest.mark.parametrize(
    ("substring", "path"),
    [
        ("同步", "zh/同步.md"),
        ("设备之间", "zh/同步.md"),
        ("笔", "zh/同步.md"),
        ("デバイス", "ja/ノート.md"),
    ],
)
def test_a_cjk_note_is_found_by_a_substring_of_it(make_vault, substring, path):
    root = make_vault({k: v for k, v in MIXED.items() if k.startswith(("zh/", "ja/", "en/"))})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        assert notes_for(ws, substring)[0] == path


def test_the_language_setting_reads_every_note_in_it_and_a_change_analyses_again(make_vault):
    root = make_vault({"a.md": "# Notas\n\nsincronizadas\n", "b.md": "# Hives\n\nvarroa\n"})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        assert notes_for(ws, "sincronizar") == []  # too short to tell: read as written
    with Workspace.open(root, {"language": "es"}) as ws:
        report = ws.index(embed=False)
        assert report.updated == 0  # nothing parsed again
        assert notes_for(ws, "sincronizar") == ["a.md"]
    db = root / ".vaultctx" / "index.db"
    conn = sqlite3.connect(db)
    conn.create_function("vx_analyse", 2, analyse, deterministic=True)
    with conn:  # what the full-text index must hold with the setting: every note in Spanish
        want = conn.execute(
            "SELECT count(*) FROM blocks_fts WHERE blocks_fts MATCH 'sincroniz'"
        ).fetchone()
    conn.close()
    assert want == (1,)
    with Workspace.open(root) as ws:  # setting removed: back to each note's own
        ws.index(embed=False)
        assert notes_for(ws, "sincronizar") == []
    assert_full_text_matches_blocks(db)


def test_a_language_vaultctx_does_not_read_is_a_config_error(make_vault):
    root = make_vault({"a.md": "# A\n"})
    with pytest.raises(ConfigError, match="language"):
        Workspace.open(root, {"language": "xx"})
    assert {"en", *STEMMERS, *CJK_LANGUAGES} == LANGUAGES  # each is analysed one way


def test_embedding_languages_are_set_as_a_list_from_the_cli_or_the_environment(
    make_vault, monkeypatch
):
    root = make_vault({"a.md": "# A\n"})
    result = CliRunner().invoke(cli, ["config", "embedding_languages", "en, de", "-V", str(root)])
    assert result.exit_code == 0, result.output
    assert load_config(root).embedding_languages == ("en", "de")
    assert 'embedding_languages = ["en", "de"]' in (root / ".vaultctx/config.toml").read_text()
    monkeypatch.setenv("VAULTCTX_EMBEDDING_LANGUAGES", "*")
    assert load_config(root).embedding_languages == ("*",)


def test_the_multilingual_model_reads_every_language_unless_told_otherwise(make_vault):
    root = make_vault({"a.md": "# A\n"})
    assert load_config(root).embedding_languages == ("en",)
    CliRunner().invoke(cli, ["config", "embedding_model", "multilingual-e5-small", "-V", str(root)])
    assert load_config(root).embedding_languages == ("*",)
    CliRunner().invoke(cli, ["config", "embedding_languages", "de", "-V", str(root)])
    assert load_config(root).embedding_languages == ("de",)


SPANISH_NOTES = {
    f"Notas/{name}.md": f"# {name}\n\n{SENTENCES['es']} {extra}\n"
    for name, extra in (
        ("Sincronizar", "Los cambios llegan a cada dispositivo en segundos."),
        ("Temas", "Un tema cambia la apariencia de la aplicación con CSS."),
        ("Plugins", "Los complementos añaden funciones que la aplicación no trae."),
    )
} | {"Notes/Sync.md": f"# Sync\n\n{SENTENCES['en']}\n"}


def test_status_and_index_suggest_the_multilingual_model_when_most_notes_are_not_english(
    make_vault,
):
    root = make_vault(SPANISH_NOTES)
    indexed = CliRunner().invoke(cli, ["index", str(root), "--no-embed"])
    assert indexed.exit_code == 0, indexed.output
    suggestion = next(line for line in indexed.stdout.splitlines() if "Suggestion" in line)
    assert "3 of 4 notes" in suggestion and "es 3" in suggestion
    assert "vaultctx config embedding_model multilingual-e5-small" in suggestion
    status = CliRunner().invoke(cli, ["status", str(root)])
    assert "multilingual-e5-small" in status.stdout
    CliRunner().invoke(cli, ["config", "embedding_model", "multilingual-e5-small", "-V", str(root)])
    status = CliRunner().invoke(cli, ["status", str(root), "--json"])
    assert json.loads(status.stdout)["model_suggestion"] is None


def test_a_vault_mostly_in_english_gets_no_model_suggestion(make_vault):
    root = make_vault(
        {f"Notes/{i}.md": f"# Note {i}\n\n{SENTENCES['en']}\n" for i in range(3)}
        | {"Notas/Uno.md": f"# Uno\n\n{SENTENCES['es']}\n"}
    )
    indexed = CliRunner().invoke(cli, ["index", str(root), "--no-embed", "--json"])
    assert json.loads(indexed.stdout)["status"]["model_suggestion"] is None
    assert "Suggestion" not in CliRunner().invoke(cli, ["index", str(root)]).stdout


def as_schema_7_left_it(root: Path) -> Path:
    """Make the vault's index as schema 7 left it: every block indexed as written, no note's
    language read; returns the index file."""
    db = root / ".vaultctx" / "index.db"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO blocks_fts(blocks_fts) VALUES ('delete-all')")
        conn.execute(
            "INSERT INTO blocks_fts(rowid, title, heading_path, text)"
            " SELECT id, title, heading_path, text FROM blocks"
        )
        conn.execute("DELETE FROM meta WHERE key = 'analysis'")
        pretend_schema(conn, 7)
    conn.close()
    return db


def test_an_index_from_before_languages_were_read_is_analysed_without_parsing_again(
    make_vault,
):
    root = make_vault({k: v for k, v in MIXED.items() if not k.startswith("ja/")})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
    db = as_schema_7_left_it(root)
    with Workspace.open(root) as ws:
        report = ws.index(embed=False)
        assert (report.updated, report.added) == (0, 0)
        assert notes_for(ws, "sincronizar")[0] == "es/Sincronización.md"
        assert notes_for(ws, "设备")[0] == "zh/同步.md"
    assert query(db, "SELECT language FROM notes WHERE path = 'de/Vorlagen.md'") == [("de",)]
    assert_full_text_matches_blocks(db)


def test_analysing_the_index_again_is_all_or_nothing(make_vault, monkeypatch):
    """A run that dies while it analyses the index again (here: the analysis fails on the
    fifth text) leaves the index as it was; the next run does the whole of it."""
    root = make_vault({k: v for k, v in MIXED.items() if k.startswith(("es/", "en/"))})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
    db = as_schema_7_left_it(root)
    calls = []

    def failing(text, language):
        calls.append(text)
        if len(calls) == 5:
            raise RuntimeError("killed")
        return analyse(text, language)

    monkeypatch.setattr("vaultctx.storage.db.analyse", failing)
    with Workspace.open(root) as ws, pytest.raises(IndexDatabaseError):
        ws.index(embed=False)
    assert query(db, "SELECT value FROM meta WHERE key = 'analysis'") == []
    assert query(db, "SELECT count(*) FROM notes WHERE language IS NOT NULL") == [(0,)]
    monkeypatch.undo()
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        assert notes_for(ws, "sincronizar")[0] == "es/Sincronización.md"
    assert_full_text_matches_blocks(db)


def test_select_trusts_the_vector_list_less_in_a_language_the_model_does_not_read(make_vault):
    root = make_vault({k: v for k, v in MIXED.items() if k.startswith("es/")})
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        spanish = ws.select("sincronizar mis notas", use_vectors=False, explain=True)
    with Workspace.open(root, {"embedding_languages": ["*"]}) as ws:
        multilingual = ws.select("sincronizar mis notas", use_vectors=False, explain=True)
    assert spanish.explain["weights"]["vector"] < multilingual.explain["weights"]["vector"]
    assert multilingual.explain["weights"]["vector"] == ws.config.weight_vector


def test_a_glossary_is_read_in_the_language_it_opens_with(example_vault: Path):
    glossary = "Reference/Foreign Beekeeping Terms.md"  # an English intro, then French tables
    with Workspace.open(example_vault) as ws:
        ws.index(embed=False)
        assert dict(query(ws._vault.db.path, "SELECT path, language FROM notes"))[glossary] == "en"
        for words in ("enfumoir", "rêverie", "Bienenstöcke"):
            assert glossary in notes_for(ws, words), words


def test_a_short_query_in_a_mixed_vault_is_read_in_each_of_its_languages(make_vault):
    files = {k: v for k, v in MIXED.items() if k.startswith(("es/", "en/"))}
    root = make_vault(files)
    with Workspace.open(root) as ws:
        ws.index(embed=False)
        selection = ws.select("plantillas", k=3, use_vectors=False, explain=True)
    assert selection.explain["lexical"]["languages"] == ["es", "en"]
    assert selection.notes()[0].path == "es/Plantillas.md"


def test_english_queries_are_read_as_they_always_were(example_vault: Path):
    with Workspace.open(example_vault) as ws:
        ws.index(embed=False)
        selection = ws.select("when should I treat the hives", use_vectors=False, explain=True)
    assert selection.explain["lexical"]["languages"] == ["en"]
    assert selection.explain["lexical"]["terms"] == ["treat", "hive"]
