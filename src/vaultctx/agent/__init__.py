"""The agent turn: TurnPreparer → Orchestrator (Researcher, Worker) under a PermissionGuard,
every event in a replayable session file.

    with Workspace.open("~/notes") as ws:
        result = ws.ask("What did I decide about the hives?")
        print(result.answer, result.citations)
"""

from .handler import (
    AgentRequestHandler,
    TurnResult,
    cited_notes,
    history_from_rows,
    list_sessions,
    load_session,
    sessions_dir,
)
from .prepare import TurnPreparation, TurnPreparer, resolve_provider_model, split_model
from .registers import ContentProvider, ContextClass, Register, ToolCallRecord
from .session import SessionLog, SessionSummary, read_rows
from .tools import ORCHESTRATOR_TOOLS, VAULT_TOOLS, Tool
from .trace import CompletionTrace, CompletionTraceStep

__all__ = [
    "ORCHESTRATOR_TOOLS",
    "VAULT_TOOLS",
    "AgentRequestHandler",
    "CompletionTrace",
    "CompletionTraceStep",
    "ContentProvider",
    "ContextClass",
    "Register",
    "SessionLog",
    "SessionSummary",
    "Tool",
    "ToolCallRecord",
    "TurnPreparation",
    "TurnPreparer",
    "TurnResult",
    "cited_notes",
    "history_from_rows",
    "list_sessions",
    "load_session",
    "read_rows",
    "resolve_provider_model",
    "sessions_dir",
    "split_model",
]
