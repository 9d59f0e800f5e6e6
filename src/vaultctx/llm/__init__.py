"""The one home of model calls: every LLM request in vaultctx goes through here (litellm).

Model strings are litellm's (`openai/gpt-4o-mini`, `anthropic/…`, `ollama/qwen2.5:0.5b`, or
`openai/<name>` with an OpenAI-compatible `api_base`); provider keys come from the usual
environment variables (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, …) as litellm reads them.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .client import (
        CallRecord,
        Completion,
        ToolCall,
        complete,
        complete_structured,
        parse_json_model,
        require_client,
        warm_up,
    )
    from .settings import LLMSettings
    from .tokens import count_tokens

# Loaded on first use (PEP 562): an agent's child process needs the call types of
# `llm.client` and must not pay for pydantic and the config (`llm.settings`).
_LAZY = {
    "CallRecord": ".client",
    "Completion": ".client",
    "ToolCall": ".client",
    "complete": ".client",
    "complete_structured": ".client",
    "parse_json_model": ".client",
    "require_client": ".client",
    "warm_up": ".client",
    "LLMSettings": ".settings",
    "count_tokens": ".tokens",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "CallRecord",
    "Completion",
    "LLMSettings",
    "ToolCall",
    "complete",
    "complete_structured",
    "count_tokens",
    "parse_json_model",
    "require_client",
    "warm_up",
]
