"""Which notes a filtered select may return, as a set of note ids."""

from __future__ import annotations

import fnmatch
import json
import sqlite3

from .models import Filters

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


def allowed_notes(conn: sqlite3.Connection, filters: Filters) -> set[int]:
    clauses, params = [], []
    if filters.modified_after is not None:
        clauses.append("mtime_ns >= ?")
        params.append(int(filters.modified_after.timestamp() * 1e9))
    if filters.modified_before is not None:
        clauses.append("mtime_ns < ?")
        params.append(int(filters.modified_before.timestamp() * 1e9))
    for tag in filters.tags:
        tag = tag.lower().lstrip("#")
        # a tag filter also matches nested tags: 'pests' matches 'pests/varroa'
        clauses.append("id IN (SELECT note_id FROM tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\')")
        params.extend(
            [tag, tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"]
        )
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    rows = conn.execute(f"SELECT id, path, frontmatter FROM notes{where}", params)
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
