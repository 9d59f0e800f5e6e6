"""The agent turn: TurnPreparer → Orchestrator (Researcher, Worker, skills) under a
PermissionGuard, every event in a replayable session log (a file, or a team's database).

    with Workspace.open("~/notes") as ws:
        result = ws.ask("What did I decide about the hives?")
        print(result.answer, result.citations)

Exports load on first use (PEP 562): a delegation's child process imports a few modules of
this package and must not pay for the pipeline, numpy or the index.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..storage.sessions import SessionLog, SessionSummary, read_rows
    from .compaction import Compaction, history_from_rows
    from .prepare import TurnPreparation, TurnPreparer, resolve_provider_model, split_model
    from .skills import Skill, SkillCatalog, SkillInput, SkillRun, discover, find_skill
    from .tools import VAULT_TOOLS, Tool
    from .trace import CompletionTrace, CompletionTraceStep
    from .transcript import ToolCallRecord, Transcript
    from .turns import (
        AgentRequestHandler,
        TurnResult,
        cited_notes,
        list_sessions,
        load_session,
        move_sessions,
        sessions_dir,
    )

_LAZY = {
    "Compaction": ".compaction",
    "history_from_rows": ".compaction",
    "AgentRequestHandler": ".turns",
    "TurnResult": ".turns",
    "cited_notes": ".turns",
    "list_sessions": ".turns",
    "load_session": ".turns",
    "move_sessions": ".turns",
    "sessions_dir": ".turns",
    "TurnPreparation": ".prepare",
    "TurnPreparer": ".prepare",
    "resolve_provider_model": ".prepare",
    "split_model": ".prepare",
    "ToolCallRecord": ".transcript",
    "Transcript": ".transcript",
    "SessionLog": "vaultctx.storage.sessions",
    "SessionSummary": "vaultctx.storage.sessions",
    "read_rows": "vaultctx.storage.sessions",
    "Skill": ".skills",
    "SkillCatalog": ".skills",
    "SkillInput": ".skills",
    "SkillRun": ".skills",
    "discover": ".skills",
    "find_skill": ".skills",
    "VAULT_TOOLS": ".tools",
    "Tool": ".tools",
    "CompletionTrace": ".trace",
    "CompletionTraceStep": ".trace",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "VAULT_TOOLS",
    "AgentRequestHandler",
    "Compaction",
    "CompletionTrace",
    "CompletionTraceStep",
    "SessionLog",
    "SessionSummary",
    "Skill",
    "SkillCatalog",
    "SkillInput",
    "SkillRun",
    "Tool",
    "ToolCallRecord",
    "Transcript",
    "TurnPreparation",
    "TurnPreparer",
    "TurnResult",
    "cited_notes",
    "discover",
    "find_skill",
    "history_from_rows",
    "list_sessions",
    "load_session",
    "move_sessions",
    "read_rows",
    "resolve_provider_model",
    "sessions_dir",
    "split_model",
]
