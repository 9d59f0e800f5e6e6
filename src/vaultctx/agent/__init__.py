"""The agent turn: TurnPreparer → Orchestrator (Researcher, Worker) under a PermissionGuard,
every event in a replayable session file.

    with Workspace.open("~/notes") as ws:
        result = ws.ask("What did I decide about the hives?")
        print(result.answer, result.citations)
"""

from .compaction import Compaction, history_from_rows
from .handler import (
    AgentRequestHandler,
    TurnResult,
    cited_notes,
    list_sessions,
    load_session,
    sessions_dir,
)
from .prepare import TurnPreparation, TurnPreparer, resolve_provider_model, split_model
from .registers import ContentProvider, ContextClass, Register, ToolCallRecord
from .session import SessionLog, SessionSummary, read_rows
from .skills import Skill, SkillCatalog, SkillInput, SkillRun, discover, find_skill
from .tools import ORCHESTRATOR_TOOLS, VAULT_TOOLS, Tool
from .trace import CompletionTrace, CompletionTraceStep

__all__ = [
    "ORCHESTRATOR_TOOLS",
    "VAULT_TOOLS",
    "AgentRequestHandler",
    "Compaction",
    "CompletionTrace",
    "CompletionTraceStep",
    "ContentProvider",
    "ContextClass",
    "Register",
    "SessionLog",
    "SessionSummary",
    "Skill",
    "SkillCatalog",
    "SkillInput",
    "SkillRun",
    "Tool",
    "ToolCallRecord",
    "TurnPreparation",
    "TurnPreparer",
    "TurnResult",
    "cited_notes",
    "discover",
    "find_skill",
    "history_from_rows",
    "list_sessions",
    "load_session",
    "read_rows",
    "resolve_provider_model",
    "sessions_dir",
    "split_model",
]
