"""Lexical queries: a user's words as an FTS5 MATCH expression, built so latency stays flat.

Shared by select (over blocks) and memory recall (over memories): both tables use
`storage.lexical.FTS_TOKENIZER`, so the same query building serves both; running the query
is the storage layer's (`IndexReads.bm25_blocks`, `storage.lexical.run_bm25`).

A user's words become an OR of terms: tokenized by the index's own tokenizer (porter,
unicode61, diacritics removed), stop-words dropped, quoted phrases kept as phrases, `term*`
as a prefix. Every term is quoted in the MATCH expression, so no user input is ever FTS5
syntax. Common terms cost the most to score and say the least, but a dropped term is a lost
candidate: they are dropped, most common first, only while the query would read more than
POSTINGS_BUDGET postings — which happens in large vaults only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol

from ..storage.language import CJK_RUN, in_stop_list, word_terms
from ..storage.lexical import LexicalQuery, quote

# A term in at most this share of blocks is always kept; more common ones are kept while the
# query's postings (the sum of its terms' block counts) stay within the budget.
COMMON_TERM_SHARE = 0.05
POSTINGS_BUDGET = 10_000
MAX_TERMS = 16
DF_CACHE_SIZE = 50_000

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can cannot could did do does doing don't down
    during each few for from further get got had has have having he her here hers herself him
    himself his how i i'm if in into is it it's its itself just let me more most my myself no
    nor not now of off on once only or other ought our ours ourselves out over own please same
    she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up upon us very via was we were what when where which
    while who whom why will with within without would you your yours yourself yourselves""".split()
)

# The shortest part a compound is split into (letters).
MIN_PART = 3

_PHRASE = re.compile(r'"([^"]+)"')
_TOKEN = re.compile(r"[^\W_]+(\*?)")


class TermSource(Protocol):
    """What a `QueryTokenizer` reads: an index's terms and their document frequencies
    (`storage.index_reads.IndexReads`, or `storage.lexical.FtsTerms` over another table)."""

    def stems(self, text: str) -> list[str]: ...

    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]: ...


class QueryTokenizer:
    """Tokenizes text exactly as the index does (its `source` asked), and counts the blocks
    holding each term, remembering the counts in `df_cache`."""

    def __init__(self, source: TermSource, df_cache: dict[str, int] | None = None) -> None:
        self.source = source
        self.df_cache = df_cache if df_cache is not None else {}

    def stems(self, text: str) -> list[str]:
        """Index terms of `text` in order (one per token)."""
        return self.source.stems(text)

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """Blocks containing each term. Counting reads the term's whole doclist
        (milliseconds for a common term in 100k blocks), so counts are kept in `df_cache`,
        which the caller empties whenever the index changes."""
        counts = {t: self.df_cache.get(t) for t in terms}
        missing = [t for t, count in counts.items() if count is None]
        if missing:
            found = self.source.doc_freqs(missing)
            counts.update({t: found.get(t, 0) for t in missing})
            if len(self.df_cache) > DF_CACHE_SIZE:
                self.df_cache.clear()  # selects share the cache: never read back from it
            self.df_cache.update({t: found.get(t, 0) for t in missing})
        return {t: count for t, count in counts.items() if count}


def _single_letter(token: str) -> bool:
    """A lone letter says nothing, but a lone digit or CJK character (a whole word) does."""
    return len(token) == 1 and not token.isdigit() and not CJK_RUN.match(token)


def is_stop_word(word: str, languages: Sequence[str]) -> bool:
    """A word that says nothing in any of `languages` (English's list lives here)."""
    return any(
        word.lower() in STOP_WORDS if lang == "en" else in_stop_list(word, lang)
        for lang in languages
    )


def query_words(word: str, languages: Sequence[str]) -> list[str]:
    """What to look for in the index for one word of a query read in `languages`: as written
    for English (the index's porter tokenizer stems it), its Snowball stem in another
    language, the character pairs of a CJK run; once each."""
    return list(dict.fromkeys(t for lang in languages for t in word_terms(word, lang, query=True)))


def split_compound(
    word: str, language: str, tokenizer: QueryTokenizer
) -> list[tuple[str, str, int]]:
    """A compound as two words the index holds (`Speicherplatz`: speicher, platz), each as
    (index term, form to search, blocks holding it); [] when no split has both. Of several
    splits, the most even; Snowball's stemming of each part drops linking letters (-s-, -en-)."""
    lower = word.lower()
    splits = [(lower[:i], lower[i:]) for i in range(MIN_PART, len(lower) - MIN_PART + 1)]
    if not splits or CJK_RUN.search(lower):
        return []
    pieces = sorted({piece for split in splits for piece in split})
    forms = [query_words(piece, (language,))[0] for piece in pieces]
    stems = tokenizer.stems(" ".join(forms))
    if len(stems) != len(pieces):
        return []
    found = dict(zip(pieces, zip(stems, forms, strict=True), strict=True))
    freqs = tokenizer.doc_freqs(stems)
    held = [
        (head, tail)
        for head, tail in splits
        if freqs.get(found[head][0]) and freqs.get(found[tail][0])
    ]
    if not held:
        return []
    head, tail = max(held, key=lambda split: (min(map(len, split)), split))
    return [(*found[part], freqs[found[part][0]]) for part in (head, tail)]


def _add_compound_parts(
    candidates: list[tuple[str, str, str]],
    freqs: dict[str, int],
    seen: set[str],
    language: str,
    tokenizer: QueryTokenizer,
) -> None:
    """A word the index lacks may join two it holds: add those parts to `candidates` (as
    (index term, form, the word as written)), their block counts to `freqs`."""
    for stem, _, token in list(candidates):
        if freqs.get(stem, 0) == 0:
            for part_stem, part_form, count in split_compound(token, language, tokenizer):
                if part_stem not in seen:
                    seen.add(part_stem)
                    candidates.append((part_stem, part_form, token))
                    freqs[part_stem] = count


def build_query(
    text: str,
    tokenizer: QueryTokenizer,
    total_blocks: int,
    languages: Sequence[str] = ("en",),
) -> LexicalQuery:
    """`languages`: what the query is read in (`language.query_languages`); English reads
    every word as written. Quoted phrases are taken out first; the other words become terms,
    of which those the index holds are kept, rarest first, within the postings budget."""
    dropped: dict[str, str] = {}
    rest, phrases = _take_phrases(text, tokenizer, languages)
    candidates, prefixes, seen = _candidate_terms(rest, tokenizer, languages, dropped)
    freqs = tokenizer.doc_freqs([stem for stem, _, _ in candidates])
    if languages[0] != "en":
        _add_compound_parts(candidates, freqs, seen, languages[0], tokenizer)
    kept = _within_budget(candidates, freqs, total_blocks, dropped)
    required, terms = _clauses(kept, prefixes, phrases)
    return LexicalQuery(
        match=_match_expression(required, terms),
        clauses=(*required, *terms),
        terms=tuple(stem for stem, _, _ in kept),
        languages=tuple(languages),
        phrases=tuple(phrases),
        prefixes=tuple(prefixes),
        dropped=dropped,
    )


def _take_phrases(
    text: str, tokenizer: QueryTokenizer, languages: Sequence[str]
) -> tuple[str, list[str]]:
    """The text without its quoted phrases, and the phrases (read in the query's language);
    a quoted single word stays in the text as a word."""
    phrases: list[str] = []

    def take_phrase(m: re.Match[str]) -> str:
        inner = m.group(1)
        words = [w for t in _TOKEN.finditer(inner) for w in query_words(t.group(0), languages[:1])]
        if words != [t.group(0) for t in _TOKEN.finditer(inner)]:  # analysed: its terms
            inner = " ".join(words)
        if len(tokenizer.stems(inner)) > 1:
            phrases.append(" ".join(inner.split()))
            return " "
        return f" {inner} "

    return _PHRASE.sub(take_phrase, text).replace('"', " "), phrases


def _candidate_terms(
    rest: str, tokenizer: QueryTokenizer, languages: Sequence[str], dropped: dict[str, str]
) -> tuple[list[tuple[str, str, str]], list[str], set[str]]:
    """Each distinct term of the words as (stem, form asked for, as written), the `word*`
    prefixes, and the stems seen; stop-words and single letters go to `dropped`."""
    # (what the index is asked for, as the user wrote it, prefix?)
    raw_tokens = [
        (form, m.group(0).rstrip("*"), bool(m.group(1)))
        for m in _TOKEN.finditer(rest)
        for form in ([m.group(0).rstrip("*")] if m.group(1) else query_words(m.group(0), languages))
    ]
    stems = tokenizer.stems(" ".join(form for form, _, _ in raw_tokens))
    if len(stems) != len(raw_tokens):  # tokenizer disagreement: trust the index's terms
        raw_tokens = [(stem, stem, False) for stem in stems]
    prefixes: list[str] = []
    candidates: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for (form, token, is_prefix), stem in zip(raw_tokens, stems, strict=False):
        if is_prefix and len(token) >= 2:
            if token.lower() not in prefixes:
                prefixes.append(token.lower())
            continue
        if stem in seen:
            continue
        seen.add(stem)
        if is_stop_word(token, languages) or _single_letter(token):
            dropped[token.lower()] = "stop-word"
            continue
        candidates.append((stem, form, token))
    return candidates, prefixes, seen


def _within_budget(
    candidates: list[tuple[str, str, str]],
    freqs: dict[str, int],
    total_blocks: int,
    dropped: dict[str, str],
) -> list[tuple[str, str, str]]:
    """The candidates the index holds, rarest first: at most MAX_TERMS, and a common term
    only while the query's postings stay within POSTINGS_BUDGET. The rest go to `dropped`."""
    present = [c for c in candidates if freqs.get(c[0], 0) > 0]
    found = {token.lower() for _, _, token in present}
    for _, _, token in candidates:
        if token.lower() not in found:
            dropped[token.lower()] = "not in the index"
    present.sort(key=lambda c: (freqs[c[0]], c[0]))
    for _, _, token in present[MAX_TERMS:]:
        dropped[token.lower()] = "query too long"
    kept: list[tuple[str, str, str]] = []
    postings = 0
    for stem, form, token in present[:MAX_TERMS]:
        common = freqs[stem] > COMMON_TERM_SHARE * total_blocks
        if common and kept and postings + freqs[stem] > POSTINGS_BUDGET:
            dropped[token.lower()] = f"too common ({freqs[stem]} of {total_blocks} blocks)"
            continue
        kept.append((stem, form, token))
        postings += freqs[stem]
    return kept


def _clauses(
    kept: list[tuple[str, str, str]], prefixes: list[str], phrases: list[str]
) -> tuple[list[str], list[str]]:
    """The FTS5 phrases of the query: the quoted phrases, and the terms and prefixes."""
    terms = [quote(form) for _, form, _ in kept] + [f"{quote(p)}*" for p in prefixes]
    return [quote(p) for p in phrases], terms


def _match_expression(required: list[str], terms: list[str]) -> str | None:
    """The FTS5 MATCH: every phrase required, the terms and prefixes OR'ed to rank what has
    them; None when nothing is left to match."""
    if required and terms:
        return " AND ".join(required) + " AND (" + " OR ".join(terms) + ")"
    if required:
        return " AND ".join(required)
    if terms:
        return " OR ".join(terms)
    return None


def key_terms(
    text: str,
    tokenizer: QueryTokenizer,
    total_blocks: int,
    limit: int,
    language: str = "en",
) -> list[str]:
    """The words that say what a longer text (a note in `language`) is about, best first:
    its terms by tf·idf over the index, as the text wrote them; stop-words and terms no other
    block holds (they find nothing but the text itself) left out."""
    raw = [
        (form, m.group(0).rstrip("*"))
        for m in _TOKEN.finditer(text)
        for form in query_words(m.group(0).rstrip("*"), (language,))
    ]
    stems = tokenizer.stems(" ".join(form for form, _ in raw))
    if len(stems) != len(raw):
        raw = [(stem, stem) for stem in stems]
    counts: dict[str, int] = {}
    written: dict[str, str] = {}
    for (_, token), stem in zip(raw, stems, strict=False):
        if is_stop_word(token, (language,)) or len(token) < 2:
            continue
        counts[stem] = counts.get(stem, 0) + 1
        written.setdefault(stem, token)
    freqs = tokenizer.doc_freqs(list(counts))
    weight = {
        stem: tf * math.log(total_blocks / freqs[stem])
        for stem, tf in counts.items()
        if freqs.get(stem, 0) > 1
    }
    best = sorted(weight, key=lambda stem: (-weight[stem], stem))[:limit]
    return [written[stem] for stem in best]
