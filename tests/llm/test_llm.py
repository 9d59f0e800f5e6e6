"""The llm package against a real HTTP server through litellm: answers, failures, records."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import time

import pytest
from pydantic import BaseModel

from llm_server import LLMServer, Reply, ToolCallReply, llm_server_fixture  # noqa: F401
from vaultctx.config import Config
from vaultctx.errors import LLMFailed, LLMNotConfigured, LLMRateLimited, LLMTimeout
from vaultctx.llm import (
    LLMSettings,
    complete,
    complete_structured,
    count_tokens,
    parse_json_model,
)
from vaultctx.llm.client import _litellm

HELLO = [{"role": "user", "content": "Say ok."}]


class Answer(BaseModel):
    keep: list[str]


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded() -> None:
    """Import litellm once up front, so no timed test pays for the import."""
    _litellm()


def settings_for(server: LLMServer, **overrides: object) -> LLMSettings:
    values = {"model": "openai/test-gate", "api_base": server.api_base, "timeout": 5.0}
    values.update(overrides)
    return LLMSettings(**values)  # type: ignore[arg-type]


def test_complete_returns_text_usage_and_an_ok_record(llm_server: LLMServer) -> None:
    llm_server.script(Reply(content="ok then", usage={"prompt_tokens": 12, "completion_tokens": 2}))
    result = complete(HELLO, settings=settings_for(llm_server))
    assert result.content == "ok then"
    assert result.tool_calls == ()
    record = result.record
    assert (record.model, record.outcome, record.error) == ("openai/test-gate", "ok", None)
    assert (record.tokens_in, record.tokens_out) == (12, 2)
    assert record.latency_ms > 0 and record.started_at <= time.time()
    body = llm_server.requests[0].body
    assert body["model"] == "test-gate"
    assert body["messages"] == HELLO
    assert llm_server.requests[0].headers["authorization"] == "Bearer sk-local"


def test_tool_calls_come_back_provider_neutral(llm_server: LLMServer) -> None:
    llm_server.script(
        Reply(tool_calls=(ToolCallReply("search_notes", {"query": "varroa"}, id="call_1"),))
    )
    tool = {
        "type": "function",
        "function": {
            "name": "search_notes",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
    result = complete(HELLO, settings=settings_for(llm_server), tools=[tool])
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_1", "search_notes", {"query": "varroa"})
    assert result.finish_reason == "tool_calls"
    assert llm_server.requests[0].body["tools"][0]["function"]["name"] == "search_notes"


def test_tool_call_arguments_that_are_not_json_keep_the_raw_text(llm_server: LLMServer) -> None:
    llm_server.script(Reply(tool_calls=(ToolCallReply("search_notes", "{not json"),)))
    tool = {"type": "function", "function": {"name": "search_notes", "parameters": {}}}
    call = complete(HELLO, settings=settings_for(llm_server), tools=[tool]).tool_calls[0]
    assert call.arguments == {}
    assert call.raw_arguments == "{not json"


@pytest.mark.parametrize(
    "content",
    [
        '{"keep": ["a", "b"]}',
        '```json\n{"keep": ["a", "b"]}\n```',
        'Here you go: {"keep": ["a", "b"]} — done.',
    ],
)
def test_structured_output_is_parsed_and_validated(llm_server: LLMServer, content: str) -> None:
    llm_server.script(Reply(content=content))
    answer, record = complete_structured(HELLO, Answer, settings=settings_for(llm_server))
    assert answer == Answer(keep=["a", "b"])
    assert record.outcome == "ok"
    assert llm_server.requests[0].body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("content", ["not json at all", '{"keep": "a"}', '{"other": 1}', ""])
def test_invalid_structured_output_is_none_with_outcome_invalid(
    llm_server: LLMServer, content: str
) -> None:
    llm_server.script(Reply(content=content))
    answer, record = complete_structured(HELLO, Answer, settings=settings_for(llm_server))
    assert answer is None
    assert record.outcome == "invalid_output"
    assert record.error


def test_a_slow_model_raises_llm_timeout_quickly(llm_server: LLMServer) -> None:
    llm_server.script(Reply(content="late", delay=3.0))
    started = time.perf_counter()
    with pytest.raises(LLMTimeout) as caught:
        complete(HELLO, settings=settings_for(llm_server, timeout=0.3))
    assert time.perf_counter() - started < 1.5
    assert caught.value.record.outcome == "timeout"
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize(("status", "error"), [(500, LLMFailed), (429, LLMRateLimited)])
def test_http_errors_map_to_llm_failed(
    llm_server: LLMServer, status: int, error: type[Exception]
) -> None:
    llm_server.script(Reply(status=status, content="scripted failure"))
    with pytest.raises(LLMFailed) as caught:
        complete(HELLO, settings=settings_for(llm_server))
    assert type(caught.value) is error
    assert caught.value.record.outcome == "error"
    assert str(status) in str(caught.value)
    assert len(llm_server.requests) == 1  # no hidden retries in litellm or the SDK


def test_retries_only_transient_failures_within_the_time_limit(llm_server: LLMServer) -> None:
    llm_server.script([Reply(status=503), Reply(content="second time lucky")])
    result = complete(HELLO, settings=settings_for(llm_server), max_retries=1)
    assert result.content == "second time lucky"
    assert result.record.attempts == 2
    llm_server.script(Reply(status=400, content="bad request"))
    with pytest.raises(LLMFailed):
        complete(HELLO, settings=settings_for(llm_server), max_retries=3)
    assert len(llm_server.requests) == 3  # the 400 was not retried


def test_no_model_raises_not_configured() -> None:
    with pytest.raises(LLMNotConfigured):
        complete(HELLO, settings=LLMSettings())


def test_settings_precedence_arguments_over_config(monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config(llm_model="openai/from-config", llm_api_base="http://x/v1", llm_timeout=2.0)
    resolved = LLMSettings.resolve(config)
    assert (resolved.model, resolved.api_base, resolved.timeout) == (
        "openai/from-config",
        "http://x/v1",
        2.0,
    )
    assert LLMSettings.resolve(config, model="openai/explicit").model == "openai/explicit"
    monkeypatch.setenv("VAULTCTX_LLM_MODEL", "ollama/qwen2.5:0.5b")
    monkeypatch.setenv("VAULTCTX_LLM_API_KEY", "sk-env")
    from_env = LLMSettings.resolve()
    assert (from_env.model, from_env.api_key, from_env.timeout) == (
        "ollama/qwen2.5:0.5b",
        "sk-env",
        1.5,
    )
    assert not LLMSettings().configured


def test_a_local_server_gets_a_dummy_key_unless_one_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    local = LLMSettings(model="openai/m", api_base="http://127.0.0.1:1/v1")
    assert local.litellm_kwargs()["api_key"] == "sk-local"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    assert "api_key" not in local.litellm_kwargs()  # litellm reads the provider's variable
    assert "api_key" not in LLMSettings(model="anthropic/claude").litellm_kwargs()


def test_count_tokens_for_text_and_messages() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens(HELLO, model="openai/gpt-4o-mini") > count_tokens("Say ok.")
    assert count_tokens("", model="openai/test-gate") == 0
    assert count_tokens("some words here", model="no-such-provider/x") > 0


def test_parse_json_model_says_why_an_answer_is_invalid() -> None:
    parsed, problem = parse_json_model('{"keep": [1]}', Answer)
    assert parsed is None and problem and "keep.0" in problem
