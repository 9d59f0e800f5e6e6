"""The language of notes and queries, and text as the lexical index holds it.

FTS5 reads every note with one tokenizer (`porter unicode61`: English stemming), and
Python's sqlite3 cannot register another. So the index holds text analysed here for its
note's language:

- English, and text whose language cannot be told, is indexed as written, as it always was;
- in the other languages with a Snowball stemmer, each word becomes its Snowball stem;
- runs of Chinese, Japanese or Korean characters, which have no spaces between words, become
  their overlapping character pairs followed by their single characters, in every language,
  so any substring of a note is a phrase of indexed terms.

The porter tokenizer then runs over every term, of the index and of the query alike.

`analyse` gives the same result for the same text and language every time: deleting a
block from the full-text index (external content) replays it. `ANALYSIS` names the analysis;
the indexer analyses the whole index again when it changes.

Pure text analysis: nothing here reads the index (a vault's languages, counted from it, are
select's: `pipeline.select.vault_languages`).
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import get_args

import Stemmer

from ..config import Language

# Snowball's stemmer for each language whose stop-words ship in stopwords.txt.
STEMMERS = {
    "da": "danish",
    "de": "german",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ru": "russian",
    "sv": "swedish",
    "tr": "turkish",
}
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})
LANGUAGES = frozenset(get_args(Language))
"""Languages a note can be given: detected, or set by the vault's `language` setting."""

# The analysis and the detector: the indexer reads every note's language and analyses the
# index again when this changes.
ANALYSIS = f"2 pystemmer {Stemmer.version()}; detector 2"

# Detection reads a note's first DETECT_CHARS characters (~90 words: 0.03 ms), and needs
# DETECT_LETTERS letters or digits in words: a shorter note stays "as written". A note is
# read in one language, the one it opens with.
DETECT_CHARS = 600
DETECT_LETTERS = 40
DETECT_CONFIDENCE = 0.5
# Told by stop-words alone: STOP_WORD_HITS distinct ones at least, STOP_WORD_MARGIN times as
# many as any other language's. Untuned: set so that, on the 7,557 notes and documents of
# ../shared/data, it tells the language py3langid tells wherever py3langid is sure (it says
# English for 4 texts py3langid is unsure of, and "unsure" for 4 ASCII templates and
# abstracts it calls English: both are read as written), and leaves it 4 notes.
STOP_WORD_HITS = 4
STOP_WORD_MARGIN = 1.3
# A query is read in one language when it has QUERY_LETTERS letters and the detector picks
# one of the vault's languages with QUERY_CONFIDENCE among them; otherwise in all of them.
QUERY_LETTERS = 12
QUERY_CONFIDENCE = 0.9
MAX_QUERY_LANGUAGES = 3

_CJK = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
CJK_RUN = re.compile(f"[{_CJK}]+")
_KANA = re.compile("[\u3040-\u30ff\uff66-\uff9f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_WORD = re.compile(r"[^\W_]+")
_LETTER = re.compile(r"[^\W\d_]")


# --- detection -------------------------------------------------------------------------------


_identifier_lock = threading.Lock()
_loaded: list = []  # py3langid's identifier, once loaded


def _identifier():
    """py3langid's model, loaded once per process (~0.4 s)."""
    if not _loaded:
        with _identifier_lock:
            if not _loaded:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _loaded.append(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True))
    return _loaded[0]


def note_language(title: str, texts: Iterable[str]) -> str:
    """A note's language as the index stores it, from its title and the start of its
    blocks' text: '' when it cannot be told."""
    sample, size = [title], len(title)
    for text in texts:
        if size >= DETECT_CHARS:
            break
        sample.append(text)
        size += len(text) + 1
    return detect_language("\n".join(sample)) or ""


def detect_language(text: str) -> str | None:
    """The language a note is written in, or None when it is too short to tell or the
    detector is unsure.

    Most notes are told by their stop-words (a few dictionary lookups): the language with
    the most distinct stop-words in the sample, STOP_WORD_MARGIN times as many as the next
    (distinct, so a name repeated in a table, `Aura`, is one word). ASCII text with fewer
    than STOP_WORD_HITS of any list (a table, code, a list of links) is not told: it is
    read as written. Only the rest (close calls such as Danish and Norwegian, languages
    with few function words such as Finnish, other scripts) pay for py3langid's model: 0.4 s
    to load once, then a byte-level walk of ~0.3 ms per note in pure Python. It reads all
    of its 97 languages, so a note in one not analysed here (Catalan, Polish, …) is not
    taken for its nearest neighbour."""
    sample = text[:DETECT_CHARS]
    words = _WORD.findall(sample.lower())
    if sum(map(len, words)) < DETECT_LETTERS:
        return None
    cjk = "" if sample.isascii() else "".join(CJK_RUN.findall(sample))
    if cjk and 2 * len(cjk) > len(_LETTER.findall(sample)):  # told by its script
        if _KANA.search(cjk):
            return "ja"
        return "ko" if _HANGUL.search(cjk) else "zh"
    listed = map(_stop_word_index().get, set(words))
    hits = Counter(itertools.chain.from_iterable(filter(None, listed))).most_common(2)
    best = hits[0][1] if hits else 0
    runner_up = hits[1][1] if len(hits) > 1 else 0
    if best >= STOP_WORD_HITS and best >= STOP_WORD_MARGIN * runner_up:
        return hits[0][0]
    if best < STOP_WORD_HITS and sample.isascii():
        return None
    language, confidence = _identifier().classify(sample)
    return language if language in LANGUAGES and confidence >= DETECT_CONFIDENCE else None


def query_languages(text: str, vault: Sequence[str]) -> tuple[str, ...]:
    """The languages to read a query in: the vault's languages (most notes first), or the
    one of them the query is written in when the detector can tell."""
    if len(vault) <= 1:
        return tuple(vault) or ("en",)
    if len(_LETTER.findall(text)) >= QUERY_LETTERS:
        ranked = {lang: p for lang, p in _identifier().rank(text) if lang in vault}
        total = sum(ranked.values())
        if total > 0:
            best = max(ranked, key=ranked.__getitem__)
            if ranked[best] / total >= QUERY_CONFIDENCE:
                return (best,)
    return tuple(vault[:MAX_QUERY_LANGUAGES])


# --- analysis --------------------------------------------------------------------------------


_stemmers = threading.local()  # a Stemmer object is not thread-safe


def _stemmer(language: str) -> Stemmer.Stemmer:
    cache = getattr(_stemmers, "by_language", None)
    if cache is None:
        cache = _stemmers.by_language = {}
    stemmer = cache.get(language)
    if stemmer is None:
        stemmer = cache[language] = Stemmer.Stemmer(STEMMERS[language])
    return stemmer


def _stem(stemmer: Stemmer.Stemmer, word: str) -> str:
    """Snowball's stem of `word`, stemmed again until it stays (`opl` for `oplossen`, not
    `oplos`), so the stem of a stem is itself: a term of the index, searched for, finds
    its notes. A step that would lengthen the word (Turkish's stemmer on other languages'
    words) is not taken; forms of equal length that stem to each other end at the least."""
    seen = [word]
    while True:
        stem = stemmer.stemWord(seen[-1])
        if not stem or stem == seen[-1] or len(stem) > len(seen[-1]):
            return seen[-1]
        if stem in seen:
            return min(seen[seen.index(stem) :])
        seen.append(stem)


def _cjk_terms(run: str, *, query: bool) -> list[str]:
    """A run's pairs, then its characters (after, so the pairs stay a phrase); a query's
    run looks for its pairs only, a single character for itself."""
    pairs = [run[i : i + 2] for i in range(len(run) - 1)]
    if not pairs:
        return [run]
    return pairs if query else [*pairs, *run]


def word_terms(word: str, language: str | None, *, query: bool = False) -> list[str]:
    """The index terms of one word (a run of letters and digits) in `language`; `query`:
    the terms a query looks for (`_cjk_terms`)."""
    if not CJK_RUN.search(word):
        if language in STEMMERS:
            return [_stem(_stemmer(language), unicodedata.normalize("NFC", word.lower()))]
        return [word]
    word = unicodedata.normalize("NFC", word)
    terms: list[str] = []
    last = 0
    for match in CJK_RUN.finditer(word):
        if match.start() > last:
            terms += word_terms(word[last : match.start()], language)
        terms += _cjk_terms(match.group(0), query=query)
        last = match.end()
    if last < len(word):
        terms += word_terms(word[last:], language)
    return terms


def analyse(text: str | None, language: str | None) -> str | None:
    """`text` as the full-text index holds it for a note in `language` (see the module)."""
    if not text or (language not in STEMMERS and (text.isascii() or not CJK_RUN.search(text))):
        return text
    return " ".join(term for word in _WORD.findall(text) for term in word_terms(word, language))


# --- stop-words ------------------------------------------------------------------------------


@functools.cache
def _stop_lists() -> dict[str, frozenset[str]]:
    lists: dict[str, frozenset[str]] = {}
    text = resources.files(__package__).joinpath("stopwords.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            language, _, words = line.partition(":")
            listed = words.split()
            lists[language.strip()] = frozenset(listed + [fold(word) for word in listed])
    return lists


@functools.cache
def _stop_word_index() -> dict[str, tuple[str, ...]]:
    """Each stop-word and the languages that list it."""
    index: dict[str, list[str]] = {}
    for language, words in _stop_lists().items():
        for word in words:
            if len(word) > 1:  # a lone letter is as often a URL's or a list's
                index.setdefault(word, []).append(language)
    return {word: tuple(languages) for word, languages in index.items()}


def fold(word: str) -> str:
    """`word` without its diacritics (één: een), as the index's tokenizer folds it."""
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def in_stop_list(word: str, language: str) -> bool:
    """Whether `word` is one of Snowball's stop-words of `language`, with or without its
    diacritics (the query builder reads English with its own list)."""
    lower = word.lower()
    listed = _stop_lists().get(language, frozenset())
    return lower in listed or fold(lower) in listed
