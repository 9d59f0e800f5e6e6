"""Which notes a filtered select may return, as a set of note ids."""

from __future__ import annotations

import fnmatch
import json
from typing import TYPE_CHECKING

from .models import Filters, moment_ns

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
