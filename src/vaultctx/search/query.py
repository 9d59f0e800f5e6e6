"""Lexical queries: a user's words as an FTS5 MATCH expression, built so latency stays flat.

Shared by select (over blocks) and memory recall (over memories): both tables use
FTS_TOKENIZER, so the same query building serves both.

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
import sqlite3
from dataclasses import dataclass, field

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
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

_PHRASE = re.compile(r'"([^"]+)"')
_TOKEN = re.compile(r"[^\W_]+(\*?)")


@dataclass(frozen=True)
class LexicalQuery:
    """The FTS5 query built from a user's text, and why each word was kept or dropped."""

    match: str | None
    terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    dropped: dict[str, str] = field(default_factory=dict)

    def explain(self) -> dict:
        return {
            "fts_query": self.match,
            "terms": list(self.terms),
            "phrases": list(self.phrases),
            "prefixes": list(self.prefixes),
            "dropped": dict(self.dropped),
        }


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


class QueryTokenizer:
    """Tokenizes text exactly as the index does, through a temporary in-memory FTS5 table
    with the same tokenizer, read back with fts5vocab. Per connection; costs ~50 µs.

    `fts_table` names the FTS5 table whose document frequencies guide the query (the
    memory store passes `memories_fts`); it must use the same tokenizer."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        fts_table: str = "blocks_fts",
        df_cache: dict[str, int] | None = None,
    ) -> None:
        self.conn = conn
        self.df_cache = df_cache if df_cache is not None else {}
        self._vocab = "vx_vocab" if fts_table == "blocks_fts" else f"vx_vocab_{fts_table}"
        tables = {
            "vx_qtok": f"fts5(x, tokenize='{FTS_TOKENIZER}')",
            "vx_qtok_v": "fts5vocab(temp, vx_qtok, instance)",
            self._vocab: f"fts5vocab(main, {fts_table}, row)",
        }
        # Even with IF NOT EXISTS, re-running CREATE VIRTUAL TABLE costs milliseconds; the
        # temp schema says in microseconds whether this connection has them already.
        existing = {name for (name,) in conn.execute("SELECT name FROM temp.sqlite_master")}
        for name, module in tables.items():
            if name not in existing:
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{name} USING {module}")

    def stems(self, text: str) -> list[str]:
        """Index terms of `text` in order (one per token)."""
        self.conn.execute("DELETE FROM temp.vx_qtok")
        self.conn.execute("INSERT INTO temp.vx_qtok(x) VALUES (?)", (text,))
        rows = self.conn.execute("SELECT term, offset FROM temp.vx_qtok_v ORDER BY offset")
        return [term for term, _ in rows]

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """Blocks containing each term. fts5vocab counts by reading the term's whole doclist
        (milliseconds for a common term in 100k blocks), so counts are kept in `df_cache`,
        which the caller empties whenever the index changes."""
        counts = {t: self.df_cache.get(t) for t in terms}
        missing = [t for t, count in counts.items() if count is None]
        if missing:
            marks = ",".join("?" * len(missing))
            rows = self.conn.execute(
                f"SELECT term, doc FROM temp.{self._vocab} WHERE term IN ({marks})", missing
            )
            found = dict(rows.fetchall())
            counts.update({t: found.get(t, 0) for t in missing})
            if len(self.df_cache) > DF_CACHE_SIZE:
                self.df_cache.clear()  # selects share the cache: never read back from it
            self.df_cache.update({t: counts[t] for t in missing})
        return {t: count for t, count in counts.items() if count}


def build_query(
    text: str,
    tokenizer: QueryTokenizer,
    total_blocks: int,
) -> LexicalQuery:
    dropped: dict[str, str] = {}
    phrases: list[str] = []

    def take_phrase(m: re.Match[str]) -> str:
        inner = m.group(1)
        if len(tokenizer.stems(inner)) > 1:
            phrases.append(" ".join(inner.split()))
            return " "
        return f" {inner} "  # a quoted single word is just a word

    rest = _PHRASE.sub(take_phrase, text).replace('"', " ")

    raw_tokens = [(m.group(0).rstrip("*"), bool(m.group(1))) for m in _TOKEN.finditer(rest)]
    stems = tokenizer.stems(" ".join(token for token, _ in raw_tokens))
    if len(stems) != len(raw_tokens):  # tokenizer disagreement: trust the index's terms
        raw_tokens = [(stem, False) for stem in stems]

    prefixes: list[str] = []
    candidates: list[tuple[str, str]] = []  # (stem, raw token)
    seen: set[str] = set()
    for (token, is_prefix), stem in zip(raw_tokens, stems, strict=False):
        if is_prefix and len(token) >= 2:
            if token.lower() not in prefixes:
                prefixes.append(token.lower())
            continue
        if stem in seen:
            continue
        seen.add(stem)
        if token.lower() in STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            dropped[token.lower()] = "stop-word"
            continue
        candidates.append((stem, token))

    freqs = tokenizer.doc_freqs([stem for stem, _ in candidates])
    present = [(stem, token) for stem, token in candidates if freqs.get(stem, 0) > 0]
    for stem, token in candidates:
        if freqs.get(stem, 0) == 0:
            dropped[token.lower()] = "not in the index"
    present.sort(key=lambda st: (freqs[st[0]], st[0]))
    for _, token in present[MAX_TERMS:]:
        dropped[token.lower()] = "query too long"
    rare: list[tuple[str, str]] = []
    postings = 0
    for stem, token in present[:MAX_TERMS]:
        common = freqs[stem] > COMMON_TERM_SHARE * total_blocks
        if common and rare and postings + freqs[stem] > POSTINGS_BUDGET:
            dropped[token.lower()] = f"too common ({freqs[stem]} of {total_blocks} blocks)"
            continue
        rare.append((stem, token))
        postings += freqs[stem]

    clauses = [_quote(token) for _, token in rare]
    clauses += [f"{_quote(p)}*" for p in prefixes]
    phrase_clauses = [_quote(p) for p in phrases]
    if phrase_clauses and clauses:
        # A phrase is a requirement; the other words rank the blocks that have it.
        match = " AND ".join(phrase_clauses) + " AND (" + " OR ".join(clauses) + ")"
    elif phrase_clauses:
        match = " AND ".join(phrase_clauses)
    elif clauses:
        match = " OR ".join(clauses)
    else:
        match = None
    return LexicalQuery(
        match=match,
        terms=tuple(stem for stem, _ in rare),
        phrases=tuple(phrases),
        prefixes=tuple(prefixes),
        dropped=dropped,
    )


def key_terms(text: str, tokenizer: QueryTokenizer, total_blocks: int, limit: int) -> list[str]:
    """The words that say what a longer text (a note) is about, best first: its terms by
    tf·idf over the index, as the text wrote them; stop-words and terms no other block holds
    (they find nothing but the text itself) left out."""
    raw = [m.group(0).rstrip("*") for m in _TOKEN.finditer(text)]
    stems = tokenizer.stems(" ".join(raw))
    if len(stems) != len(raw):
        raw = stems
    counts: dict[str, int] = {}
    written: dict[str, str] = {}
    for token, stem in zip(raw, stems, strict=False):
        if token.lower() in STOP_WORDS or len(token) < 2:
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
