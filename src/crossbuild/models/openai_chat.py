"""Any OpenAI-compatible Chat Completions endpoint (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp server) through the
official `openai` SDK. The SDK's own retries are off: transient faults are retried by `retry.call_with_retries`."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from crossbuild.models.base import Message, ProviderError, ToolCall, Turn, Usage
from crossbuild.models.redact import Redactor
from crossbuild.models.retry import RetryPolicy, sdk_call, timed_turn
from crossbuild.tools.base import Toolset
from crossbuild.tools.schemas import openai_tools


@dataclass
class OpenAIOptions:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    strict: bool = False
    parallel_tool_calls: bool | None = None
    tool_choice: str = "auto"  # auto | required | none | <tool name>
    temperature: float | None = None
    seed: int | None = None
    max_output_tokens: int | None = 4096
    timeout_s: float = 120.0
    retry: RetryPolicy = RetryPolicy()


class OpenAIChatModel:
    def __init__(self, options: OpenAIOptions, *, on_retry=None, secrets: Iterable[str | None] = ()):
        """SECRETS: keys besides OPTIONS.api_key that no error leaving this model may show (redact.py)."""
        import openai

        self.options = options
        self.name = f"openai:{options.model}"
        self._openai = openai
        self._client = openai.OpenAI(base_url=options.base_url, api_key=options.api_key or "none", max_retries=0,
                                     timeout=options.timeout_s)
        self._on_retry = on_retry
        self._redactor = Redactor([options.api_key, *secrets])

    def request(self, messages: list[Message], tools: Toolset) -> dict[str, Any]:
        """The Chat Completions request body (also what the trace records)."""
        o = self.options
        body: dict[str, Any] = {"model": o.model, "messages": to_openai_messages(messages)}
        if tools.names():
            body["tools"] = openai_tools(tools, strict=o.strict)
            if o.tool_choice in ("auto", "required", "none"):
                body["tool_choice"] = o.tool_choice
            else:
                body["tool_choice"] = {"type": "function", "function": {"name": o.tool_choice}}
            if o.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = o.parallel_tool_calls
        for key, value in (("temperature", o.temperature), ("seed", o.seed), ("max_tokens", o.max_output_tokens)):
            if value is not None:
                body[key] = value
        return body

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        with self._redactor.guard():
            body = self.request(messages, tools)
            return timed_turn(lambda: self._create(body), parse_response, self.options.retry, cancel=cancel,
                              on_retry=self._on_retry)

    def _create(self, body: dict[str, Any]) -> Any:
        return sdk_call(self._openai, self.name, lambda: self._client.chat.completions.create(**body),
                        redactor=self._redactor)



def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": m.text})
        elif m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
            out.append(msg)
        else:
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.text})
    return out


def parse_response(response: Any) -> Turn:
    """A Turn from a ChatCompletion; a response without choices is a transient fault (garbage from the server)."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise ProviderError("the model server returned no choices", fatal=True)
    choice = choices[0]
    msg = choice.message
    calls = []
    for i, tc in enumerate(msg.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        args = fn.arguments if isinstance(fn.arguments, str) else json.dumps(fn.arguments)
        calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name or "", arguments=args or ""))
    usage = Usage()
    if response.usage:
        u = response.usage
        details = getattr(u, "prompt_tokens_details", None)
        usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0,
                      (getattr(details, "cached_tokens", 0) or 0) if details else 0)
    raw = response.model_dump() if hasattr(response, "model_dump") else None
    return Turn(text=msg.content or "", tool_calls=calls, usage=usage, finish_reason=choice.finish_reason or "stop",
                raw=raw)
