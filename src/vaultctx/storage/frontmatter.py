"""YAML frontmatter: split it from the body, read it as JSON, and its tag and alias lists.

Nothing in a note's frontmatter can stop the index: malformed YAML becomes a warning, and the
body after its fence is indexed as in any note (the fence is frontmatter, read or not); a
value Python cannot hold (an impossible date, a number thousands of digits long) is kept as
the text written, with a warning; aliases that would expand into more values than the
frontmatter's own size allows (a "billion laughs") are a warning, not an hour of work and
gigabytes of memory.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import yaml

try:  # the C parser is ~10x faster; fall back where libyaml is missing
    _FastLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _FastLoader = yaml.SafeLoader

_FRONTMATTER_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONTMATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)

_INT64 = 2**63
_LONGEST_INT = 200  # characters: more than any 64-bit integer needs, even written in binary
_MAX_FLOW_DEPTH = 1000  # libyaml's own limit
_FLOW_BRACKET = re.compile(r"[\[\]{}]")
_TOO_DEEP = "YAML nested too deeply or refers to itself"
_MIN_BUDGET = 10_000
"""Values (and characters of strings) any frontmatter may expand to; beyond that, and beyond
twice its own length, only aliases can have made it that big."""


class Frontmatter(NamedTuple):
    """A note's text split at its frontmatter. `error` means none could be read (the body is
    then what follows the closing fence, or the whole text when there is none); `warnings`
    are values kept as written."""

    data: dict[str, Any]
    error: str | None
    body: str
    body_line: int  # line number of the body's first line in the note
    warnings: tuple[str, ...] = ()


def split_frontmatter(text: str) -> Frontmatter:
    """Split `text` into its frontmatter, as JSON-ready data, and its body.

    A block fenced by `---` lines at the top is frontmatter even when its YAML is malformed:
    the error is reported and the body starts after the fence, as Obsidian shows the note, so
    no passage is the broken YAML. Without a closing line there is no fence, and the whole
    text is the body.
    """
    opening = _FRONTMATTER_OPEN.match(text)
    if not opening:
        return Frontmatter({}, None, text, 1)
    close = _FRONTMATTER_CLOSE.search(text, opening.end())
    if not close:
        return Frontmatter({}, "opening '---' is never closed", text, 1)
    raw = text[opening.end() : close.start()]
    body_start = close.end() + 1 if close.end() < len(text) else close.end()
    data, error, warnings = read_yaml(raw)
    body_line = text.count("\n", 0, body_start) + 1
    return Frontmatter(data, error, text[body_start:], body_line, warnings)


def read_yaml(raw: str) -> tuple[dict[str, Any], str | None, tuple[str, ...]]:
    """(data, error, warnings) for the YAML between the `---` lines; never raises."""
    if not raw.strip():
        return {}, None, ()
    # libyaml recurses in C and overflows the stack on absurdly deep nesting: text with that
    # many nesting characters goes to the pure-Python parser, which raises RecursionError.
    nested = sum(map(raw.count, "[{-?:")) >= 2000
    if nested and _flow_depth(raw) > _MAX_FLOW_DEPTH:  # the Python scanner is quadratic in it
        return {}, _TOO_DEEP, ()
    loader = (_LenientLoader if nested else _FastLenientLoader)(raw)
    loader.warnings = []
    try:
        data = loader.get_single_data()
        if data is None:
            return {}, None, tuple(loader.warnings)
        if not isinstance(data, dict):
            return {}, f"expected a mapping, got {type(data).__name__}", ()
        data = _Json(budget=max(_MIN_BUDGET, 2 * len(raw))).convert(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return {}, f"invalid YAML{where}: {problem}", ()
    except RecursionError:  # a self-referencing anchor (`&a [*a]`) or absurd nesting
        return {}, _TOO_DEEP, ()
    except _TooBig:
        return {}, "YAML aliases expand to too much data; frontmatter not read", ()
    except Exception as exc:  # whatever else a constructor raises: the note is still indexed
        return {}, f"YAML could not be read ({type(exc).__name__}: {exc})", ()
    finally:
        loader.dispose()
    return data, None, tuple(loader.warnings)


def _flow_depth(raw: str) -> int:
    """How deep `[` and `{` nest (quotes not considered: only absurd depths matter)."""
    depth = deepest = 0
    for m in _FLOW_BRACKET.finditer(raw):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


# --- values Python cannot hold stay the text written -----------------------------------------


def _kept_as_text(loader: Any, node: yaml.Node, why: str) -> str:
    loader.warnings.append(f"frontmatter: line {node.start_mark.line + 2}: {why}; kept as text")
    return node.value


def _lenient(construct: Callable[[Any, yaml.Node], Any], what: str) -> Callable[..., Any]:
    """A scalar constructor that keeps the scalar as written when `construct` raises."""

    def constructor(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except yaml.YAMLError:
            raise
        except Exception:  # ValueError: day out of range, digit limit; and the like
            if not isinstance(node, yaml.ScalarNode):
                raise
            return _kept_as_text(loader, node, f"{node.value[:40]!r} is not a valid {what}")

    return constructor


def _int_or_text(loader: Any, node: yaml.Node) -> int | str:
    """Integers that fit in 64 bits; longer ones (or ones Python will not convert) as text."""
    if isinstance(node, yaml.ScalarNode) and len(node.value) > _LONGEST_INT:
        return _kept_as_text(loader, node, f"a {len(node.value)}-character number")
    value = yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    if not -_INT64 <= value < _INT64:
        return _kept_as_text(loader, node, f"{node.value[:40]!r} is too large a number")
    return value


def _float_or_text(loader: Any, node: yaml.Node) -> float | str:
    """`.inf` and `.nan` stay as written: JSON has no such numbers."""
    value = yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    return value if math.isfinite(value) else node.value


def _lenient_loader(base: type) -> type:
    """`base` (the C or the Python loader) with the constructors above."""
    loader: Any = type(f"Lenient{base.__name__}", (base,), {})  # yaml ships no types
    for tag, construct, what in (
        ("timestamp", yaml.constructor.SafeConstructor.construct_yaml_timestamp, "date"),
        ("int", _int_or_text, "number"),
        ("float", _float_or_text, "number"),
    ):
        loader.add_constructor(f"tag:yaml.org,2002:{tag}", _lenient(construct, what))
    return loader


_FastLenientLoader = _lenient_loader(_FastLoader)
_LenientLoader = _lenient_loader(yaml.SafeLoader)


# --- JSON, within a budget -------------------------------------------------------------------


class _TooBig(Exception):
    """The data outgrew its budget: aliases multiplied it."""


class _Json:
    """YAML gives dates, sets, non-string keys and shared (aliased) objects; the index
    stores JSON. Each value and each character of a string spends the budget, so an alias
    bomb stops after a few thousand values instead of expanding to billions."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def convert(self, value: Any) -> Any:
        self.budget -= 1 + (len(value) if isinstance(value, str) else 0)
        if self.budget < 0:
            raise _TooBig
        if isinstance(value, dict):
            return {_text(str(k)): self.convert(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set):
            return [self.convert(v) for v in value]
        if isinstance(value, _dt.date | _dt.datetime | _dt.time):
            return value.isoformat()
        if isinstance(value, str):
            return _text(value)
        if value is None or isinstance(value, int | float | bool):
            return value
        return _text(str(value))


def _text(value: str) -> str:
    """Escaped UTF-16 halves (`"\\ud83d\\ude00"`) joined; a lone one, which SQLite cannot
    store, becomes U+FFFD."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


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
