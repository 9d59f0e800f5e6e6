"""Time in a question: "notes from last week", "what did I decide in March", "since Monday",
"2025-08-16", "août 2025" become a window over note dates, and the words that named the time
are not searched as words.

- Finding dates is `dateparser`'s (`search_dates`, in the question's languages), imported on
  the first question that may name one: a question with no digit and none of the words the
  library's own language data lists for months, weekdays and relative days ("yesterday",
  "last week", "ayer") is never handed to it, and costs nothing.
- What the library finds is kept only when it holds such a word or a date-like number (it
  also reads "do", "set" or "now" as dates), trimmed to the words it needs, and only when
  it is not in the future ("tomorrow", "next week" name no note's date).
- The window is the named period: a day, the week, the month or the year (dateparser's
  `period`); after "since"/"depuis"/"desde"… it runs from there to now, after
  "before"/"until"… from the beginning of time to there.
- A note's date (`note_dates`): a date in its file name (daily notes), else a frontmatter
  `date`/`created`/`day`, else a year its name starts with (that whole year), else its
  modification time.
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import importlib.util
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads
    from .note_ranking import RankedNote

# How a window is used: "boost" lifts the notes dated in it by TIME_BOOST of their score (a
# soft preference: "May" may be a month or a verb, a month without a year may be last
# year's); "filter" returns only them, as --since/--until do.
TIME_MODE = "boost"
TIME_BOOST = 1.0

# Words before a date that turn it into a bound (the library reads the date, not these).
SINCE_WORDS = {
    "en": ("since", "after"),
    "de": ("seit", "nach"),
    "es": ("desde",),
    "fr": ("depuis",),
    "it": ("dal", "dalla", "dallo", "dopo"),
    "nl": ("sinds", "na"),
}
UNTIL_WORDS = {
    "en": ("before", "until", "till"),
    "de": ("vor", "bis"),
    "es": ("antes", "hasta"),
    "fr": ("avant", "jusqu'à"),
    "it": ("prima", "fino"),
    "nl": ("voor", "tot"),
}
FRONTMATTER_DATES = ("date", "created", "day")
_YEAR_IN_NAME = re.compile(r"((?:19|20)\d{2})(?![\d-])")  # a name that starts with a year
_DATE_IN_NAME = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# A year (1900-2099) or a day written with a year ("16/08/2025", "2025-08-16"): not "1.5",
# not "1/2000".
_DATE_NUMBER = re.compile(
    r"(?<![\d/.,-])(?:19|20)\d{2}(?![\d/.,%-])|\b(?:19|20)\d{2}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\b"
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
# dateparser's relative expressions that name no period of notes: this very moment.
_NOT_A_PERIOD = ("0 second ago", "0 minute ago", "0 hour ago")
_PERIOD_KEYS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday",
)  # fmt: skip


@dataclass(frozen=True)
class TimeWindow:
    """The time a question names: [start, end) in local time, the words that named it, and
    the question without them."""

    start: _dt.datetime
    end: _dt.datetime
    words: tuple[str, ...]
    text: str

    def diagnostics(self) -> dict[str, Any]:
        return {
            "from": self.start.isoformat(timespec="seconds"),
            "until": self.end.isoformat(timespec="seconds"),
            "words": list(self.words),
        }


@functools.cache
def _library_words(language: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """(single words, phrases) that name a month, a weekday or a relative day in
    dateparser's data for `language`, read from its data file without importing it."""
    spec = importlib.util.find_spec("dateparser")
    if spec is None or not spec.submodule_search_locations:
        return frozenset(), ()
    base = Path(next(iter(spec.submodule_search_locations)))
    path = base / "data" / "date_translation_data" / f"{language}.py"
    if not path.is_file():
        return frozenset(), ()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    info: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            info = ast.literal_eval(node.value)
    # Names, not abbreviations: "sat", "sun", "mar" are words too.
    names = [n for key in _PERIOD_KEYS for n in info.get(key, []) if len(n) > 3]
    relative = [
        n
        for key, names_ in info.get("relative-type", {}).items()
        if key not in _NOT_A_PERIOD and not key.startswith("in ")  # no "now", no future
        for n in names_
    ]
    bounds = {w for table in (SINCE_WORDS, UNTIL_WORDS) for w in table.get(language, ())}
    relative += [n for n in info.get("ago", []) if n.lower() not in bounds]  # not "before"
    single = {n.lower() for n in names + relative if " " not in n and len(n) > 2}
    single |= {n.lower() for key in ("may",) for n in info.get(key, []) if " " not in n}
    phrases = tuple(n.lower() for n in relative if " " in n)
    return frozenset(single), phrases


def _bare_words(languages: Sequence[str]) -> frozenset[str]:
    """Words that name a time only with a year or day beside them (a month that is also a
    common word: English 'may', 'march'), or never alone ('now', 'this')."""
    out = {"now", "this", "today"} if "en" in languages else set()
    return frozenset(out | ({"may", "march"} if "en" in languages else set()))


def may_name_time(text: str, languages: Sequence[str]) -> bool:
    """Whether the question could name a time: a date-like number, or a word or phrase the
    date library's data lists for one of its languages. Cheap: no import."""
    if _DATE_NUMBER.search(text):
        return True
    lowered = text.lower()
    words = set(_WORD.findall(lowered))
    for language in languages:
        single, phrases = _library_words(language)
        if words & single or any(p in lowered for p in phrases):
            return True
    return False


def _meaningful(span: str, languages: Sequence[str], text: str) -> bool:
    """A span the library read as a date that does name one: a date-like number, or a
    library word that is not a bare ambiguous one — 'may', 'march' count only written as a
    name ('in May', not 'may I'), 'now' and 'this' never alone."""
    if _DATE_NUMBER.search(span):
        return True
    lowered = span.lower()
    words = set(_WORD.findall(lowered))
    bare = _bare_words(languages)
    first = (_WORD.findall(text) or [""])[0]
    for language in languages:
        single, phrases = _library_words(language)
        if any(p in lowered for p in phrases):
            return True
        named = words & single
        if named - bare:
            return True
        for word in named:
            written = re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE)
            if written and written[0][:1].isupper() and written[0] != first:
                return True
    return False


def _trim(span: str, parse: Any, keep: frozenset[str]) -> str:
    """The shortest run of the span's words that the library still reads as the same date,
    never dropping a number or a word of `keep` (the library's time words)."""
    words = span.split()
    target = parse(span)
    if target is None:
        return span

    def removable(word: str) -> bool:
        return not any(c.isdigit() for c in word) and word.lower().strip(",.") not in keep

    changed = True
    while changed and len(words) > 1:
        changed = False
        for cut, dropped in ((words[1:], words[0]), (words[:-1], words[-1])):
            if removable(dropped) and parse(" ".join(cut)) == target:
                words, changed = cut, True
                break
    return " ".join(words)


_FINER = {"year": 3, "month": 2, "week": 1, "day": 0}


def _widen(span: str, text: str, parse: Any, keep: frozenset[str]) -> str:
    """The span with the words before or after it, one at a time, while the library still
    reads a date of the same year, as fine or finer ("2000" → "January 2000" → "1 January
    2000"; "13, 2000" → "January 13, 2000"); only numbers and the library's time words."""
    read = parse(span)
    while read is not None and (at := text.find(span)) >= 0:
        left, right = text[:at].split(), text[at + len(span) :].split()
        options = [f"{left[-1]} {span}" if left else "", f"{span} {right[0]}" if right else ""]
        added = [left[-1] if left else "", right[0] if right else ""]
        for wider, word in zip(options, added, strict=True):
            if not word or not (any(c.isdigit() for c in word) or word.lower().strip(",.") in keep):
                continue
            found = parse(wider)
            if (
                found is not None
                and found[0].year == read[0].year
                and _FINER.get(found[1], 0) <= _FINER.get(read[1], 0)
            ):
                span, read = wider, found
                break
        else:
            return span
    return span


def _agrees(span: str, day: _dt.datetime) -> bool:
    """A year written in the span is the year read."""
    years = re.findall(r"(?<!\d)(?:19|20)\d{2}(?!\d)", span)
    return not years or str(day.year) in years


def _period_window(day: _dt.datetime, period: str) -> tuple[_dt.datetime, _dt.datetime]:
    start = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "year":
        start = start.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    if period == "month":
        start = start.replace(day=1)
        nxt = (start + _dt.timedelta(days=32)).replace(day=1)
        return start, nxt
    if period == "week":
        start -= _dt.timedelta(days=start.weekday())
        return start, start + _dt.timedelta(days=7)
    return start, start + _dt.timedelta(days=1)


def read_time(
    text: str, languages: Sequence[str], now: _dt.datetime | None = None
) -> TimeWindow | None:
    """The window the question names, or None when it names no time."""
    languages = [lang for lang in languages if lang] or ["en"]
    if not may_name_time(text, languages):
        return None
    from dateparser.date import DateDataParser  # ~0.6 s: only for a question naming a time
    from dateparser.search import search_dates

    now = now or _dt.datetime.now()
    settings = {
        "PREFER_DATES_FROM": "past",
        "RELATIVE_BASE": now,
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    try:
        found = search_dates(text, languages=list(languages), settings=settings) or []
    except Exception:  # the library's own failures on odd input: no window, as before
        return None
    parser = DateDataParser(languages=list(languages), settings=settings)

    def parse(piece: str) -> tuple[_dt.datetime, str] | None:
        data = parser.get_date_data(piece)
        if data is None or data.date_obj is None:
            return None
        return data.date_obj.replace(tzinfo=None), data.period or "day"

    windows: list[tuple[_dt.datetime, _dt.datetime]] = []
    words: list[str] = []
    rest = text
    keep = frozenset().union(*(_library_words(lang)[0] for lang in languages))
    # Date-like numbers first, each with the words around it that make it a finer date
    # ("2000" → "1 January 2000"): the search splits runs badly ("1 January" and "2000
    # may"), stops on some ("… may now") and misreads others ("2000-01-01 second" as a time
    # today). Then what the search found in the words left.
    numbers = [_widen(m[0], text, parse, keep) for m in _DATE_NUMBER.finditer(text)]
    for span in [*numbers, *(_trim(span, parse, keep) for span, _ in found)]:
        if span not in rest or not _meaningful(span, languages, text):
            continue
        read = parse(span)
        if read is None or not _agrees(span, read[0]):
            continue
        day, period = read
        start, end = _period_window(day, period)
        named = span
        before = rest[: rest.find(span)].split() if span in rest else []
        if before and before[-1].lower() in _bound_words(SINCE_WORDS, languages):
            end, named = max(now, end), f"{before[-1]} {span}"
        elif before and before[-1].lower() in _bound_words(UNTIL_WORDS, languages):
            start, end, named = _dt.datetime.min, start, f"{before[-1]} {span}"
        if start > now:  # a note is written in the past: "tomorrow", "next week" name none
            continue
        windows.append((start, end))
        words.append(named)
        rest = rest.replace(named, " ", 1)
    if not windows:
        return None
    start = max(w[0] for w in windows)
    end = min(w[1] for w in windows)
    if start >= end:  # two times that do not overlap: the first one named
        start, end = windows[0]
    return TimeWindow(start, end, tuple(words), " ".join(rest.split()))


def _bound_words(table: dict[str, tuple[str, ...]], languages: Iterable[str]) -> set[str]:
    return {w for lang in languages for w in table.get(lang, ())}


def note_dates(reads: IndexReads) -> dict[int, _dt.datetime]:
    """Each note's date: one in its file name (a daily note), else its frontmatter's
    `date`/`created`/`day`, else none (the caller falls back to the modification time)."""
    out: dict[int, _dt.datetime] = {}
    for note_id, path, frontmatter_json in reads.notes_matching(None, None, []):
        name = path.rsplit("/", 1)[-1]
        m = _DATE_IN_NAME.search(name)
        if m is None and frontmatter_json:
            frontmatter = json.loads(frontmatter_json)
            for key in FRONTMATTER_DATES:
                value = frontmatter.get(key) if isinstance(frontmatter, dict) else None
                if value is not None:
                    m = _DATE_IN_NAME.search(str(value))
                    if m is not None:
                        break
        if m is not None:
            try:
                out[note_id] = _dt.datetime(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                continue
    return out


def notes_in_window(reads: IndexReads, window: TimeWindow) -> set[int]:
    """The notes whose date falls in the window: a dated note by its own date, a note named
    for a year ("2024 Season Summary") by that year, another by its modification time."""
    dated = note_dates(reads)
    inside = {n for n, day in dated.items() if window.start <= day < window.end}
    for note_id, path in reads.all_note_paths():
        m = _YEAR_IN_NAME.match(path.rsplit("/", 1)[-1])
        if note_id not in dated and m is not None:
            dated[note_id] = year = _dt.datetime(int(m[1]), 1, 1)
            if window.start < year.replace(year=year.year + 1) and year < window.end:
                inside.add(note_id)
    start_ns = _ns(window.start)
    end_ns = _ns(window.end)
    for note_id, _, _ in reads.notes_matching(start_ns, end_ns, []):
        if note_id not in dated:
            inside.add(note_id)
    return inside


def _ns(moment: _dt.datetime) -> int | None:
    if moment <= _dt.datetime.min + _dt.timedelta(days=2):
        return None
    return int(moment.timestamp() * 1e9)


def find_window(
    text: str, languages: Sequence[str], now: _dt.datetime | None = None
) -> TimeWindow | None:
    """`read_time`, or None when the date library is not installed."""
    try:
        return read_time(text, languages, now)
    except ImportError:
        return None


def prefer_dated(
    ranked: Sequence[RankedNote], inside: Collection[int], boost: float
) -> list[RankedNote]:
    """The notes dated in the window raised by `boost` of their score, re-sorted (ties keep
    the order they had)."""
    from dataclasses import replace

    from .note_ranking import note_key

    keys = {note_key(n) for n in inside}
    order = {r.key: i for i, r in enumerate(ranked)}
    out = [replace(r, score=r.score * (1.0 + boost)) if r.key in keys else r for r in ranked]
    out.sort(key=lambda r: (-r.score, order[r.key]))
    return out
