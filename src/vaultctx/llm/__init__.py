"""The one home of model calls: every LLM request in vaultctx goes through here (litellm).

Model strings are litellm's (`openai/gpt-4o-mini`, `anthropic/…`, `ollama/qwen2.5:0.5b`, or
`openai/<name>` with an OpenAI-compatible `api_base`); provider keys come from the usual
environment variables (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, …) as litellm reads them.
"""

from .client import (
    CallRecord,
    Completion,
    ToolCall,
    complete,
    complete_structured,
    parse_json_model,
    warm_up,
)
from .settings import LLMSettings
from .tokens import count_tokens

__all__ = [
    "CallRecord",
    "Completion",
    "LLMSettings",
    "ToolCall",
    "complete",
    "complete_structured",
    "count_tokens",
    "parse_json_model",
    "warm_up",
]
