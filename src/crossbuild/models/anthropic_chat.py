"""Anthropic Messages API through the official `anthropic` SDK: tool_use blocks out, tool_result blocks (with
is_error) back, all results of one turn in one user message, as the API's pairing rules require."""

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
from crossbuild.tools.schemas import anthropic_tools


@dataclass
class AnthropicOptions:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    tool_choice: str = "auto"  # auto | any | none | <tool name>
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    max_output_tokens: int = 4096
    timeout_s: float = 120.0
    retry: RetryPolicy = RetryPolicy()


class AnthropicChatModel:
    def __init__(self, options: AnthropicOptions, *, on_retry=None, secrets: Iterable[str | None] = ()):
        """SECRETS: keys besides OPTIONS.api_key that no error leaving this model may show (redact.py)."""
        import anthropic

        self.options = options
        self.name = f"anthropic:{options.model}"
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(base_url=options.base_url, api_key=options.api_key or "none",
                                           max_retries=0, timeout=options.timeout_s)
        self._on_retry = on_retry
        self._redactor = Redactor([options.api_key, *secrets])

    def request(self, messages: list[Message], tools: Toolset) -> dict[str, Any]:
        o = self.options
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        body: dict[str, Any] = {"model": o.model, "max_tokens": o.max_output_tokens,
                                "messages": to_anthropic_messages(messages)}
        if system:
            body["system"] = system
        if tools.names():
            body["tools"] = anthropic_tools(tools)
            choice: dict[str, Any] = ({"type": o.tool_choice} if o.tool_choice in ("auto", "any", "none")
                                      else {"type": "tool", "name": o.tool_choice})
            if o.parallel_tool_calls is False and choice["type"] != "none":
                choice["disable_parallel_tool_use"] = True
            body["tool_choice"] = choice
        if o.temperature is not None:
            body["temperature"] = o.temperature
        return body

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        with self._redactor.guard():
            body = self.request(messages, tools)
            return timed_turn(lambda: self._create(body), parse_response, self.options.retry, cancel=cancel,
                              on_retry=self._on_retry)

    def _create(self, body: dict[str, Any]) -> Any:
        return sdk_call(self._anthropic, self.name, lambda: self._client.messages.create(**body), also_transient=(529,),
                        redactor=self._redactor)


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """User/assistant alternation; tool results of one assistant turn go together in the next user message."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user":
            add("user", [{"type": "text", "text": m.text}])
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _as_object(c.arguments)})
            add("assistant", blocks or [{"type": "text", "text": "(no text)"}])
        else:
            add("user", [{"type": "tool_result", "tool_use_id": m.call_id, "content": m.text,
                          "is_error": m.is_error}])
    return out


def _as_object(arguments: str) -> dict[str, Any]:
    """tool_use.input must be an object; broken JSON from a model is kept as a string field for the record."""
    try:
        value = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"_unparsed": arguments}
    return value if isinstance(value, dict) else {"_unparsed": arguments}


def anthropic_usage(u: Any) -> Usage:
    """Anthropic's usage buckets are separate: its input_tokens excludes cache reads and cache writes. crossbuild
    counts every input token as input (as OpenAI does) and the two cache buckets within it."""
    if u is None:
        return Usage()
    read = getattr(u, "cache_read_input_tokens", 0) or 0
    written = getattr(u, "cache_creation_input_tokens", 0) or 0
    return Usage(input_tokens=(u.input_tokens or 0) + read + written, output_tokens=u.output_tokens or 0,
                 cached_tokens=read, cache_write_tokens=written)


def parse_response(response: Any) -> Turn:
    content = getattr(response, "content", None)
    if content is None:
        raise ProviderError("the model server returned no content", fatal=True)
    text, calls = [], []
    for block in content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    usage = anthropic_usage(response.usage)
    raw = response.model_dump() if hasattr(response, "model_dump") else None
    return Turn(text="\n".join(text), tool_calls=calls, usage=usage, finish_reason=response.stop_reason or "end_turn",
                raw=raw)
