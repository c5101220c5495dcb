"""The Model protocol and the provider-neutral conversation: given the messages and the tool specs, a model returns
a Turn (text, tool calls with id/name/raw arguments, usage, finish reason). Provider formats live in the adapters."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from crossbuild.tools.base import Toolset

FINISH_SUMMARY_MAX = 4_000  # the longest summary the finish tool takes (agent/finish.py)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw, exactly as the model produced it (may be broken JSON)


@dataclass
class Usage:
    input_tokens: int = 0  # every input token, cache reads and writes included (OpenAI's prompt_tokens)
    output_tokens: int = 0
    cached_tokens: int = 0  # of the input, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of the input, written to the prompt cache (Anthropic bills them apart)

    def __iadd__(self, other: Usage) -> Usage:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        return self


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    latency_s: float = 0.0
    raw: Any = None  # the provider's response, for the trace


@dataclass
class Message:
    """One conversation entry. role=tool answers exactly one call (call_id) of the assistant message before it."""

    role: Literal["system", "user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant
    call_id: str | None = None  # tool
    name: str | None = None  # tool
    is_error: bool = False  # tool
    data: dict[str, Any] = field(default_factory=dict)  # tool: the structured result (for the planner, not sent)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.tool_calls:
            out["tool_calls"] = [tc.__dict__ for tc in self.tool_calls]
        if self.role == "tool":
            out.update(call_id=self.call_id, name=self.name, is_error=self.is_error)
        return out


class ProviderError(Exception):
    """The model provider failed. `fatal`: retrying cannot help (401, 402, 404, a retry budget spent)."""

    def __init__(self, message: str, *, status: int | None = None, fatal: bool = True):
        super().__init__(message)
        self.status = status
        self.fatal = fatal


class Model(Protocol):
    """A model may also have `rebuilds_state = True`: its next turn follows from the results it has been shown
    (the planner), so resuming a run asks it again rather than replaying its recorded turns (agent/resume.py)."""

    name: str

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        ...
