"""Token counting with the model's own tokenizer where litellm knows it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .client import _litellm


def count_tokens(content: str | Sequence[Mapping[str, Any]], model: str | None = None) -> int:
    """Tokens of a text or a message list for `model` (litellm's `token_counter`, offline:
    it bundles its tokenizers). Falls back to ~4 characters per token when litellm cannot
    count for that model, so callers always get a number."""
    try:
        litellm = _litellm()
        if isinstance(content, str):
            return int(litellm.token_counter(model=model or "", text=content))
        return int(litellm.token_counter(model=model or "", messages=[dict(m) for m in content]))
    except Exception:  # an unknown model or message shape must not fail a count
        if isinstance(content, str):
            text = content
        else:
            text = " ".join(str(m.get("content") or "") for m in content)
        return math.ceil(len(text) / 4)
