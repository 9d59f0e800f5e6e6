"""Which notes a filtered select may return, as a set of note ids; and, when a filtered
select finds nothing, which filter matches no note at all and what it may have meant."""

from __future__ import annotations

import fnmatch
import json
from typing import TYPE_CHECKING, Any

from .models import Filters, moment_ns
from .suggest import closest

if TYPE_CHECKING:
    from datetime import datetime

    from ..storage.index_reads import IndexReads

_GLOB_CHARS = frozenset("*?[")


def path_matches(path: str, pattern: str) -> bool:
    """A pattern without wildcards names a folder (or a note); otherwise it is a glob over
    the vault-relative path, where `*` also crosses folders."""
    pattern = pattern.strip().lstrip("./") if pattern.strip() not in (".", "./") else ""
    if not pattern:
        return True
    if not _GLOB_CHARS & set(pattern):
        folder = pattern.rstrip("/")
        return path == folder or path.startswith(folder + "/") or path == folder + ".md"
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path.lower(), pattern.lower())


def _frontmatter_matches(frontmatter: dict, key: str, expected: str) -> bool:
    value = frontmatter.get(key)
    if isinstance(value, list):
        return any(str(v).lower() == expected.lower() for v in value)
    if isinstance(value, bool):
        return str(value).lower() == expected.lower()
    return value is not None and str(value).lower() == expected.lower()


def _ns(when: datetime | None) -> int | None:
    return None if when is None else moment_ns(when)


def allowed_notes(reads: IndexReads, filters: Filters) -> set[int]:
    rows = reads.notes_matching(
        _ns(filters.modified_after),
        _ns(filters.modified_before),
        [tag.lower().lstrip("#") for tag in filters.tags],
    )
    allowed: set[int] = set()
    for note_id, path, frontmatter_json in rows:
        if filters.path and not path_matches(path, filters.path):
            continue
        if filters.frontmatter:
            frontmatter = json.loads(frontmatter_json)
            if not all(
                _frontmatter_matches(frontmatter, k, v) for k, v in filters.frontmatter.items()
            ):
                continue
        allowed.add(note_id)
    return allowed


def filter_report(reads: IndexReads, filters: Filters, notes_left: int) -> dict[str, Any]:
    """What an answer that found nothing says of its filters (diagnostics `filters`): how
    many notes they left to search, and each tag, path or field that no note the reader may
    see matches on its own, with the closest names that do (`unmatched`: filter, value,
    closest)."""
    unmatched: list[dict[str, Any]] = []
    notes = reads.notes_matching(None, None, [])

    def miss(kind: str, value: str, suggested: list[str]) -> None:
        unmatched.append({"filter": kind, "value": value, "closest": suggested})

    if filters.tags:
        tags = sorted({tag for _, tag in reads.note_tags()})
        for tag in filters.tags:
            wanted = tag.lower().lstrip("#")
            if not any(t == wanted or t.startswith(wanted + "/") for t in tags):
                miss("tag", tag, closest(wanted, tags))
    if filters.path and not any(path_matches(path, filters.path) for _, path, _ in notes):
        places = {path.removesuffix(".md") for _, path, _ in notes}
        places |= {path.rsplit("/", 1)[0] for _, path, _ in notes if "/" in path}
        wanted = filters.path.strip().strip("/").removesuffix(".md")
        miss("path", filters.path, closest(wanted, sorted(places)))
    fields = [json.loads(frontmatter) for _, _, frontmatter in notes] if filters.frontmatter else []
    for key, value in filters.frontmatter.items():
        if any(_frontmatter_matches(f, key, value) for f in fields):
            continue
        values = sorted({str(v) for f in fields for v in _listed(f.get(key)) if v is not None})
        if values:  # the field is there, with other values
            miss("field", f"{key}={value}", [f"{key}={v}" for v in closest(value, values)])
        else:
            keys = sorted({k for f in fields for k in f})
            miss("field", f"{key}={value}", [f"{k}={value}" for k in closest(key, keys)])
    return {"notes_left": notes_left, "unmatched": unmatched}


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]
