"""Time in a question: the window of days it is about, so memories formed then can be found.

"What did Jon do in May 2023?", "on 16 March 2022", "in 2022", "last week": a memory's
`created_at` is when it was said, so a question that names a time is about memories formed
in that window. Deterministic, English only; a question naming no time gets no window.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import re

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|" \
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"  # fmt: skip
_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I
)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I)
_MONTH_ALONE = re.compile(rf"\b(?:in|during|since|early|late|mid|of)\s+{_MONTH}\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b", re.I)
_RELATIVE = re.compile(
    r"\b(yesterday|today|last (?:week|weekend|month|year)|this (?:week|month|year)|"
    r"(\d+|a|one|two|three|few) (day|week|month|year)s? ago)\b",
    re.I,
)
_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "few": 3}
DAY = 86400.0

Window = tuple[float, float]
"""[start, end) in epoch seconds (UTC)."""


def _month_number(name: str) -> int:
    name = name.lower()
    return MONTHS.get(name, MONTHS.get(name[:3], 0))


def _span(start: _dt.date, end: _dt.date) -> Window:
    first = _dt.datetime(start.year, start.month, start.day, tzinfo=_dt.UTC).timestamp()
    last = _dt.datetime(end.year, end.month, end.day, tzinfo=_dt.UTC).timestamp()
    return first, last


def _month(year: int, month: int) -> Window:
    start = _dt.date(year, month, 1)
    end = _dt.date(year + (month == 12), month % 12 + 1, 1)
    return _span(start, end)


def time_window(query: str, now: float) -> Window | None:
    """The span of time `query` is about, or None. A named day widens to the days around
    it (what happened then is often told a day or two later); a month or year is itself;
    a month with no year is its latest occurrence before `now`."""
    today = _dt.datetime.fromtimestamp(now, _dt.UTC).date()
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        m = pattern.search(query)
        if m:
            groups = dict(zip(order, m.groups(), strict=True))
            try:
                day = _dt.date(int(groups["y"]), _month_number(groups["m"]), int(groups["d"]))
            except ValueError:
                continue
            return _span(day - _dt.timedelta(days=1), day + _dt.timedelta(days=3))
    m = _MONTH_YEAR.search(query)
    if m:
        return _month(int(m.group(2)), _month_number(m.group(1)))
    m = _YEAR.search(query)
    if m:
        year = int(m.group(1))
        return _span(_dt.date(year, 1, 1), _dt.date(year + 1, 1, 1))
    m = _MONTH_ALONE.search(query)
    if m:
        month = _month_number(m.group(1))
        year = today.year if month <= today.month else today.year - 1
        return _month(year, month)
    m = _RELATIVE.search(query)
    if m:
        return _relative(m, today)
    return None


def _relative(m: re.Match[str], today: _dt.date) -> Window:
    phrase = m.group(1).lower()
    end = today + _dt.timedelta(days=1)
    if phrase == "today":
        return _span(today, end)
    if phrase == "yesterday":
        return _span(today - _dt.timedelta(days=1), today)
    unit = (m.group(3) or phrase.split()[-1]).lower().rstrip("s")
    days = {"day": 1, "week": 7, "weekend": 7, "month": 31, "year": 366}[unit]
    if phrase.startswith("this"):
        return _span(today - _dt.timedelta(days=days), end)
    count = (
        1 if phrase.startswith("last") else _COUNTS.get(m.group(2).lower(), 0) or int(m.group(2))
    )
    centre = today - _dt.timedelta(days=days * count)
    return _span(centre - _dt.timedelta(days=days), centre + _dt.timedelta(days=days))
