"""LangChain chat models behind crossbuild's Model protocol, and the conversion of conversations both ways.

A LangChain AIMessage splits the model's calls in two: `tool_calls` (arguments that parsed as JSON) and
`invalid_tool_calls` (arguments that did not). Both are calls the API expects an answer to, so both become
crossbuild ToolCalls with their raw arguments, and the dispatcher answers a broken one with its structured
`invalid_json` error. Needs the `langgraph` extra (langchain-core and the provider packages)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import Any

from crossbuild.models.base import Message, ProviderError, ToolCall, Turn, Usage
from crossbuild.models.redact import Redactor
from crossbuild.tools.base import Toolset
from crossbuild.tools.schemas import openai_tools

FATAL_STATUS = (400, 401, 402, 403, 404)


class LangChainUnavailable(RuntimeError):
    """The LangChain packages are not installed."""


def _messages_module():
    try:
        from langchain_core import messages
    except ImportError:
        raise LangChainUnavailable("the LangGraph engine needs the langgraph extra: "
                                   "pip install 'crossbuild[langgraph]'") from None
    return messages


def ai_message(turn: Turn) -> Any:
    """A crossbuild turn as LangChain's AIMessage: calls whose arguments parse go to tool_calls, the others to
    invalid_tool_calls with their raw text."""
    lc = _messages_module()
    valid, invalid = [], []
    for c in turn.tool_calls:
        try:
            args = json.loads(c.arguments or "{}")
        except (json.JSONDecodeError, RecursionError):
            args = None
        if isinstance(args, dict):
            valid.append({"id": c.id, "name": c.name, "args": args, "type": "tool_call"})
        else:
            invalid.append({"id": c.id, "name": c.name, "args": c.arguments, "error": "arguments are not a JSON "
                            "object", "type": "invalid_tool_call"})
    return lc.AIMessage(content=turn.text, tool_calls=valid, invalid_tool_calls=invalid,
                        additional_kwargs={"crossbuild_call_order": [c.id for c in turn.tool_calls]})


def calls_of(ai: Any) -> list[ToolCall]:
    """Every call of an AIMessage, the invalid ones included, in the order the model made them where the message
    says it (crossbuild's own order, or the provider's raw tool_calls), else valid ones first."""
    calls = [ToolCall(id=tc.get("id") or f"call-{i}", name=tc.get("name") or "", arguments=json.dumps(tc["args"]))
             for i, tc in enumerate(ai.tool_calls)]
    calls += [ToolCall(id=ic.get("id") or f"invalid-{i}", name=ic.get("name") or "", arguments=ic.get("args") or "")
              for i, ic in enumerate(ai.invalid_tool_calls)]
    order = ai.additional_kwargs.get("crossbuild_call_order") or \
        [c.get("id") for c in ai.additional_kwargs.get("tool_calls") or []]
    if order and {c.id for c in calls} <= set(order):
        calls.sort(key=lambda c: order.index(c.id))
    return calls


def to_langchain(messages: list[Message]) -> list[Any]:
    lc = _messages_module()
    out: list[Any] = []
    for m in messages:
        if m.role == "system":
            out.append(lc.SystemMessage(content=m.text))
        elif m.role == "user":
            out.append(lc.HumanMessage(content=m.text))
        elif m.role == "assistant":
            out.append(ai_message(Turn(text=m.text, tool_calls=m.tool_calls)))
        else:
            out.append(lc.ToolMessage(content=m.text, tool_call_id=m.call_id or "", name=m.name,
                                      status="error" if m.is_error else "success", artifact=m.data))
    return out


def turn_of(ai: Any, latency_s: float = 0.0) -> Turn:
    meta = ai.usage_metadata or {}
    details = meta.get("input_token_details") or {}
    usage = Usage(input_tokens=meta.get("input_tokens") or 0, output_tokens=meta.get("output_tokens") or 0,
                  cached_tokens=details.get("cache_read") or 0, cache_write_tokens=details.get("cache_creation") or 0)
    text = ai.content if isinstance(ai.content, str) else "".join(
        b.get("text", "") for b in ai.content if isinstance(b, dict) and b.get("type") == "text")
    calls = calls_of(ai)
    reason = ai.response_metadata.get("finish_reason") or ai.response_metadata.get("stop_reason") or \
        ("tool_calls" if calls else "stop")
    return Turn(text=text, tool_calls=calls, usage=usage, finish_reason=reason, latency_s=latency_s,
                raw=ai.model_dump(mode="json"))


class LangChainModel:
    """A LangChain chat model (ChatOpenAI for any OpenAI-compatible server, ChatAnthropic) as a crossbuild Model."""

    def __init__(self, chat: Any, name: str, *, secrets: Iterable[str | None] = (), **bind: Any):
        self.chat = chat
        self.name = name
        self.bind = bind  # bind_tools options: parallel_tool_calls, tool_choice, strict
        self._redactor = Redactor(secrets)  # the chat model's key and the configured ones (redact.py)
        self._bound: tuple[int, Any] | None = None

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        with self._redactor.guard():
            if self._bound is None or self._bound[0] != id(tools):
                self._bound = (id(tools), self.chat.bind_tools(openai_tools(tools), **self.bind))
            start = time.monotonic()
            try:
                ai = self._bound[1].invoke(to_langchain(messages))
            except LangChainUnavailable:
                raise
            except Exception as e:  # the providers' SDK errors, after LangChain's own retries
                status = getattr(e, "status_code", None)
                raise ProviderError(self._redactor.text(f"{type(e).__name__}: {e}")[:500], status=status,
                                    fatal=status in FATAL_STATUS or status is None) from None
            return turn_of(ai, time.monotonic() - start)


def chat_model(provider: str, model: str, *, base_url: str | None, api_key: str | None, timeout_s: float,
               temperature: float | None, seed: int | None, max_retries: int = 4) -> Any:
    """LangChain's chat model for PROVIDER (openai: any OpenAI-compatible server; anthropic)."""
    _messages_module()
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        extra = {"seed": seed} if seed is not None else {}
        return ChatOpenAI(model=model, base_url=base_url, api_key=api_key or "unused", timeout=timeout_s,
                          max_retries=max_retries, temperature=temperature, **extra)
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model=model, base_url=base_url, api_key=api_key or "unused", timeout=timeout_s,
                         max_retries=max_retries, temperature=temperature)
