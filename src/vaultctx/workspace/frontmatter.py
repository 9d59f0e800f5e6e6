"""YAML frontmatter: split it from the body, read it as JSON, and its tag and alias lists.

Malformed YAML never raises: it becomes a warning and the text stays searchable.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import yaml

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    _YamlLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _YamlLoader = yaml.SafeLoader

_FRONTMATTER_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str | None, str, int]:
    """Return (frontmatter, error, body, first line number of body).

    Malformed YAML is reported and the whole text stays in the body, so its words remain
    searchable and nothing the user wrote is lost.
    """
    opening = _FRONTMATTER_OPEN.match(text)
    if not opening:
        return {}, None, text, 1
    close = _FRONTMATTER_CLOSE.search(text, opening.end())
    if not close:
        return {}, "opening '---' is never closed", text, 1
    raw = text[opening.end() : close.start()]
    body_start = close.end() + 1 if close.end() < len(text) else close.end()
    body_line = text.count("\n", 0, body_start) + 1
    # libyaml recurses in C and overflows the stack on absurdly deep nesting: text with that
    # many nesting characters goes to the pure-Python loader, which raises RecursionError.
    loader = _YamlLoader if sum(map(raw.count, "[{-?:")) < 2000 else yaml.SafeLoader
    try:
        data = yaml.load(raw, Loader=loader) if raw.strip() else {}
        if data is None:
            data = {}
        if not isinstance(data, dict):
            return {}, f"expected a mapping, got {type(data).__name__}", text, 1
        data = _jsonable(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return {}, f"invalid YAML{where}: {problem}", text, 1
    except RecursionError:  # a self-referencing anchor (`&a [*a]`) or absurd nesting
        return {}, "YAML nested too deeply or refers to itself", text, 1
    return data, None, text[body_start:], body_line


def _jsonable(value: Any) -> Any:
    """YAML gives dates, sets and non-string keys; the index stores JSON."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, _dt.date | _dt.datetime | _dt.time):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def frontmatter_str(value: Any) -> str | None:
    if isinstance(value, str | int | float) and str(value).strip():
        return str(value).strip()
    return None


def frontmatter_list(frontmatter: dict[str, Any], *keys: str) -> list[str]:
    """Obsidian accepts a YAML list or a comma-separated string for tags and aliases."""
    out: list[str] = []
    for key in keys:
        value = frontmatter.get(key)
        if value is None:
            continue
        items = value if isinstance(value, list) else str(value).split(",")
        for item in items:
            if item is None or isinstance(item, dict | list):
                continue
            parts = [str(item)]
            if key.startswith("tag"):  # "a b" is two tags; an alias may contain spaces
                parts = str(item).split()
            out.extend(p.strip() for p in parts if p.strip())
    return out
