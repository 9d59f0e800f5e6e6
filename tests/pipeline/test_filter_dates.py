"""The date bounds of a filter (`--since`/`--until`, `since`/`until` over HTTP, the API's
`modified_after`/`modified_before`): whatever comes in becomes a clean bound or an
`InvalidQuery`, and any year from 1 to 9999 is a bound the index can compare."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from vaultctx import InvalidQuery, Workspace
from vaultctx.pipeline.models import Filters, moment_ns

INT64 = 2**63 - 1
EXTREMES = st.sampled_from(
    [dt.datetime.min, dt.datetime.max, dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)]
)


def _filters_or_invalid(value: object) -> Filters | None:
    try:
        return Filters(modified_after=value, modified_before=value)
    except InvalidQuery:
        return None


@given(st.text() | st.from_regex(r"\A[0-9]{1,6}-[0-9]{1,2}-[0-9]{1,2}(T[0-9:.+Z-]{0,20})?\Z"))
def test_any_text_is_a_date_bound_or_an_invalid_query(text: str) -> None:
    filters = _filters_or_invalid(text)
    if filters is not None:
        assert filters.modified_after is not None and filters.modified_after.utcoffset() is not None
        assert -INT64 - 1 <= moment_ns(filters.modified_after) <= INT64


@given(st.datetimes(timezones=st.none() | st.timezones()) | EXTREMES)
def test_any_datetime_is_a_bound_the_index_can_compare(when: dt.datetime) -> None:
    filters = Filters(modified_after=when, modified_before=when.date())
    assert filters.modified_after is not None and filters.modified_before is not None
    assert filters.modified_after.utcoffset() is not None
    for bound in (filters.modified_after, filters.modified_before):
        assert -INT64 - 1 <= moment_ns(bound) <= INT64


@given(st.datetimes(), st.datetimes())
def test_bounds_keep_the_order_of_their_datetimes(a: dt.datetime, b: dt.datetime) -> None:
    utc = dt.UTC
    first, second = sorted((a.replace(tzinfo=utc), b.replace(tzinfo=utc)))
    assert moment_ns(first) <= moment_ns(second)


def test_a_bound_is_the_exact_nanosecond_the_index_stores() -> None:
    when = dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert moment_ns(when) == int(when.timestamp()) * 10**9 + 123456 * 1000
    assert moment_ns(dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) == 0


def test_a_date_that_is_not_one_is_an_invalid_query() -> None:
    for bad in ("2025-02-30", "yesterday", "10000-01-01", "2025-01-01T25:00", 20250101, ""):
        assert _filters_or_invalid(bad) is None, bad


def test_year_1_and_year_9999_bound_nothing_or_everything(make_vault) -> None:
    vault: Path = make_vault({"A.md": "# A\n\nhives in spring\n", "B.md": "# B\n\nhives in May\n"})
    with Workspace.open(vault, {"embed": False}) as ws:
        ws.index()

        def paths(**bounds: object) -> set[str]:
            selection = ws.select("hives", filters=Filters(**bounds), use_vectors=False)
            return {c.path for c in selection.candidates}

        assert paths(modified_after="0001-01-01") == {"A.md", "B.md"}
        assert paths(modified_before="9999-12-31T23:59:59") == {"A.md", "B.md"}
        assert paths(modified_after=dt.datetime.min, modified_before=dt.datetime.max) == {
            "A.md",
            "B.md",
        }
        assert paths(modified_after="9999-12-31") == set()
        assert paths(modified_before=dt.date.min) == set()
