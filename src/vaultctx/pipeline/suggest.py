"""Did you mean: the names closest to one that matched nothing, for every door to offer."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

CLOSE_ENOUGH = 0.6  # difflib's similarity ratio below which a name is no suggestion


def fold(text: str) -> str:
    """`text` in lower case without accents: how a name is compared to what was typed."""
    return "".join(
        c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c)
    )


def closest(wanted: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `names` most like `wanted` (any case, any accent), the closest first;
    of names that fold alike, the first given."""
    by_fold: dict[str, str] = {}
    for name in names:
        by_fold.setdefault(fold(name), name)
    found = difflib.get_close_matches(fold(wanted), list(by_fold), n=n, cutoff=CLOSE_ENOUGH)
    return [by_fold[name] for name in found]
