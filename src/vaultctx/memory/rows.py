"""How a memory row reads back: the columns every query selects, the `Memory` they make,
and the WHERE clause that keeps a query within scopes and kinds."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .mirror import Scope
from .models import Memory, MemoryKind, MemorySource, Tier

COLUMNS = (
    "rowid, id, tier, scope, kind, text, summary, themes, importance, created_at, updated_at,"
    " last_accessed, access_count, source, mkey, deleted_at"
)


def scope_filter(
    scopes: Sequence[Scope] | None, kinds: Sequence[MemoryKind], prefix: str = ""
) -> tuple[list[str], list[object]]:
    where: list[str] = []
    args: list[object] = []
    if scopes is not None:
        if not scopes:
            return ["0"], []
        where.append(
            f"({prefix}tier, {prefix}scope) IN (VALUES " + ", ".join("(?, ?)" for _ in scopes) + ")"
        )
        for tier, scope in scopes:
            args += [tier.value, scope]
    if kinds:
        where.append(f"{prefix}kind IN ({','.join('?' * len(kinds))})")
        args += [k.value for k in kinds]
    return where, args


def memory_from_row(row: Sequence) -> Memory:
    (_, mid, tier, scope, kind, text, summary, themes, importance, created, updated, accessed,
     count, source, key, deleted) = row  # fmt: skip
    return Memory(
        id=mid,
        tier=Tier(tier),
        scope=scope,
        kind=MemoryKind(kind),
        text=text,
        summary=summary,
        themes=tuple(json.loads(themes)),
        importance=importance,
        created_at=created,
        updated_at=updated,
        last_accessed=accessed,
        access_count=count,
        source=MemorySource.model_validate_json(source),
        key=key,
        deleted=deleted is not None,
    )
