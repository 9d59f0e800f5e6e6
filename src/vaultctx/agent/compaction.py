"""Compaction: when a session's history would push a turn past the model's context budget,
its older turns become one summary entry.

The session file keeps every original row; a `compaction` row records the summary and
which rows it replaces (indices among the file's readable rows, the header being 0), so a
resumed session rebuilds exactly the history the model saw: the latest summary, then every
chat message it does not replace.

The summary always keeps the first user goal and every tool result a later turn cites (its
call id, or a note path it returned, appears in a later message). Between them sits the
cheap model's summary of the replaced turns or, without a model or when it fails, the
replaced turns' questions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from .. import prompts
from ..errors import LLMError
from ..llm import LLMSettings, complete_structured
from ..permissions import destination_of
from ..storage.audit import AuditNote

log = logging.getLogger(__name__)

QUESTION_CHARS = 200
RESULT_CHARS = 2000
PATH_KEYS = ("path", "created", "appended", "tagged")
PATH_LIST_KEYS = ("notes", "notes_read")

Row = dict[str, Any]


class CompactionSummary(BaseModel):
    summary: str = Field(min_length=1)


@dataclass(frozen=True)
class Compaction:
    """A summary standing for the chat rows `replaces`, up to turn `through_turn`."""

    summary: str
    replaces: tuple[int, ...]
    through_turn: int
    mode: Literal["llm", "deterministic"]

    def row(self, turn: int) -> Row:
        """The `compaction` row, before its token counts are known."""
        return {
            "type": "compaction",
            "turn": turn,
            "summary": self.summary,
            "replaces": list(self.replaces),
            "through_turn": self.through_turn,
            "mode": self.mode,
        }


def answered_chat(rows: Sequence[Row]) -> list[tuple[int, Row]]:
    """(row index, row) of the chat messages a history holds: question and answer pairs
    in order; a question whose turn never answered (a crash, a failed model) is left out."""
    chat = [
        (i, r)
        for i, r in enumerate(rows)
        if r.get("type") == "message"
        and r.get("role") in ("user", "assistant")
        and (r.get("metadata") or {}).get("kind") == "chat"
    ]
    return [
        (i, r)
        for n, (i, r) in enumerate(chat)
        if r["role"] == "assistant" or (n + 1 < len(chat) and chat[n + 1][1]["role"] == "assistant")
    ]


def latest_compaction(rows: Sequence[Row]) -> tuple[int, Row] | None:
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].get("type") == "compaction":
            return i, rows[i]
    return None


def history_from_rows(rows: Sequence[Row]) -> list[dict[str, str]]:
    """The chat history a (resumed) session continues from: the latest compaction summary,
    if any, then every answered chat message it does not replace, in order."""
    chat = answered_chat(rows)
    found = latest_compaction(rows)
    if found is None:
        return [{"role": r["role"], "content": r.get("content") or ""} for _, r in chat]
    replaced = set(found[1].get("replaces") or ())
    summary = {"role": "system", "content": prompts.compaction_message(found[1]["summary"])}
    return [summary] + [
        {"role": r["role"], "content": r.get("content") or ""} for i, r in chat if i not in replaced
    ]


def compact(
    rows: Sequence[Row], *, question: str, keep_turns: int, settings: LLMSettings
) -> Compaction | None:
    """Summarize all but the latest `keep_turns` turns of the current history; None when
    there is nothing left to compact. `question` (the turn being prepared) counts as a
    later turn that may cite tool results."""
    chat = answered_chat(rows)
    previous = latest_compaction(rows)
    replaced_before = set(previous[1].get("replaces") or ()) if previous else set()
    live = [(i, r) for i, r in chat if i not in replaced_before]
    turns = list(dict.fromkeys(r.get("turn", 0) for _, r in live))
    if len(turns) <= keep_turns:
        return None
    old = set(turns[: len(turns) - keep_turns])
    through = max(old)
    newly = [(i, r) for i, r in live if r.get("turn", 0) in old]
    kept = [r.get("content") or "" for _, r in live if r.get("turn", 0) not in old]
    later_text = "\n".join([*kept, question])
    replaces = replaced_before | {i for i, _ in newly}
    if previous is not None:
        replaces.add(previous[0])
    goal = next((r.get("content") or "" for _, r in chat if r["role"] == "user"), "")
    cited = cited_results(rows, through_turn=through, later_text=later_text)
    mode: Literal["llm", "deterministic"] = "llm"
    middle = _llm_summary(previous, newly, settings)
    if middle is None:
        middle, mode = _earlier_questions(chat, through), "deterministic"
    parts = [f"The user's first goal: {goal}", middle]
    if cited:
        parts.append("Tool results cited by later turns:\n" + "\n".join(cited))
    return Compaction("\n\n".join(parts), tuple(sorted(replaces)), through, mode)


def cited_results(rows: Sequence[Row], *, through_turn: int, later_text: str) -> list[str]:
    """The successful tool results of turns up to `through_turn` that `later_text` cites,
    one line each: by call id, or by a note path they returned (`path` or `[[path`
    without `.md`)."""
    lines = []
    for row in rows:
        if row.get("type") != "tool_result" or row.get("turn", 0) > through_turn:
            continue
        output = row.get("output") or {}
        if "error" in output:
            continue
        paths = set(_paths(output))
        refs = {row.get("call_id") or ""} | paths | {f"[[{p.removesuffix('.md')}" for p in paths}
        if any(ref and ref in later_text for ref in refs):
            body = json.dumps(output, ensure_ascii=False, sort_keys=True, default=str)
            if len(body) > RESULT_CHARS:
                body = body[:RESULT_CHARS] + "…"
            where = f"turn {row.get('turn')}, {row.get('name')} ({row.get('call_id')})"
            lines.append(f"- {where}: {body}")
    return lines


def _paths(value: Any) -> Iterable[str]:
    """Note paths anywhere in a tool's output."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in PATH_KEYS and isinstance(item, str):
                yield item
            elif key in PATH_LIST_KEYS and isinstance(item, list):
                yield from (x for x in item if isinstance(x, str))
            yield from _paths(item) if isinstance(item, dict | list) else ()
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item)


def _earlier_questions(chat: Sequence[tuple[int, Row]], through_turn: int) -> str:
    lines = [
        f"- turn {r.get('turn')}: {prompts.snippet(r.get('content') or '', QUESTION_CHARS)}"
        for _, r in chat
        if r["role"] == "user" and r.get("turn", 0) <= through_turn
    ]
    return "Questions of the compacted turns:\n" + "\n".join(lines)


def _llm_summary(
    previous: tuple[int, Row] | None, newly: Sequence[tuple[int, Row]], settings: LLMSettings
) -> str | None:
    """The cheap model's summary of the replaced turns (and the summary before them);
    None without a model or on any failure, so compaction never fails a turn."""
    if not settings.configured:
        return None
    turns = [{"role": r["role"], "content": r.get("content") or ""} for _, r in newly]
    earlier = previous[1].get("summary", "") if previous else ""
    try:
        parsed, record = complete_structured(
            prompts.compaction_messages(earlier, turns),
            CompactionSummary,
            settings=settings,
            audit=AuditNote(
                purpose="compaction",
                destination=destination_of(settings.model or "", settings.api_base).value,
            ),
        )
    except LLMError as exc:
        log.warning("compaction summary failed, summarizing deterministically: %s", exc)
        return None
    if parsed is None:
        log.warning("compaction summary unusable (%s); summarizing deterministically", record.error)
        return None
    return "Summary of the compacted turns: " + parsed.summary.strip()
