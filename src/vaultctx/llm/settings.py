"""Which model to call and how: resolved once from arguments, environment and config."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Config, default

DEFAULT_TIMEOUT: float = default("llm_timeout")
LOCAL_API_KEY = "sk-local"


@dataclass(frozen=True)
class LLMSettings:
    """A litellm model string (`openai/gpt-4o-mini`, `ollama/qwen2.5:0.5b`, …), an optional
    OpenAI-compatible `api_base`, an optional key and the per-call timeout in seconds.

    `model=None` means no model is configured: callers fall back to deterministic paths.
    `audit_log`: the vault's audit log (`storage.audit`), where every call is recorded.
    """

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    audit_log: Path | None = None

    @property
    def configured(self) -> bool:
        return bool(self.model)

    @classmethod
    def resolve(
        cls,
        config: Config | None = None,
        *,
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        audit_log: Path | None = None,
    ) -> LLMSettings:
        """Explicit arguments > `VAULTCTX_LLM_*` environment > the vault's config file.

        `load_config` already layers the environment over the file, so a `Config` carries
        both; without one (library use outside a vault) the environment is read here. The
        key is never stored in the config file: `VAULTCTX_LLM_API_KEY`, or the provider's
        own variable (`OPENAI_API_KEY`, …) which litellm reads itself.
        """
        if config is None:
            env_timeout = os.environ.get("VAULTCTX_LLM_TIMEOUT")
            base = cls(
                model=os.environ.get("VAULTCTX_LLM_MODEL") or None,
                api_base=os.environ.get("VAULTCTX_LLM_API_BASE") or None,
                timeout=float(env_timeout) if env_timeout else DEFAULT_TIMEOUT,
            )
        else:
            base = cls(
                model=config.llm_model, api_base=config.llm_api_base, timeout=config.llm_timeout
            )
        return replace(
            base,
            model=model or base.model,
            api_base=api_base or base.api_base,
            api_key=api_key or os.environ.get("VAULTCTX_LLM_API_KEY") or None,
            timeout=timeout if timeout is not None else base.timeout,
            audit_log=audit_log,
        )

    def litellm_kwargs(self) -> dict[str, str]:
        """Connection arguments for litellm. An OpenAI-compatible local server still needs
        some key, so a dummy one is sent when none is set anywhere."""
        kwargs: dict[str, str] = {}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        key = self.api_key
        if (
            key is None
            and self.api_base
            and (self.model or "").startswith("openai/")
            and not os.environ.get("OPENAI_API_KEY")
        ):
            key = LOCAL_API_KEY
        if key:
            kwargs["api_key"] = key
        return kwargs
