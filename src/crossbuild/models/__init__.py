"""Model backends behind one protocol, and `make_model(spec)` to pick one by name:
planner | openai:MODEL | anthropic:MODEL | auto | replay:DB#RUN_ID."""

from __future__ import annotations

import os
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossbuild.foundation import settings
from crossbuild.models.base import Message, Model, ProviderError, ToolCall, Turn, Usage
from crossbuild.models.planner import Planner
from crossbuild.models.scripted import ScriptedModel
from crossbuild.tools.base import Toolset

__all__ = ["Message", "Model", "ProviderError", "ToolCall", "Turn", "Usage", "Planner", "ScriptedModel",
           "ModelConfig", "make_model", "HandoverModel", "ModelConfigError"]


class ModelConfigError(ValueError):
    """The model cannot be set up as asked; the message says what to change."""


@dataclass
class ModelConfig:
    """What the CLI knows about the model. API keys come from the environment or the config file, never from
    arguments, and are never part of the snapshot written to the trace."""

    spec: str = "planner"
    base_url: str | None = None
    strict: bool = False
    parallel_tool_calls: bool | None = None
    tool_choice: str = "auto"
    temperature: float | None = None
    seed: int | None = None
    timeout_s: float = 120.0
    engine: str = "native"  # native | langgraph (LangChain's chat models for the providers, driven by a graph)

    def snapshot(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def config_file() -> Path:
    return settings.user_file()


def _api_key(provider: str, base_url: str | None, env: dict[str, str]) -> str | None:
    names = {"openai": ["OPENAI_API_KEY", "DEEPSEEK_API_KEY"] if base_url and "deepseek" in base_url
             else ["OPENAI_API_KEY"], "anthropic": ["ANTHROPIC_API_KEY"]}[provider]
    for n in names:
        if env.get(n):
            return env[n]
    path = config_file()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ModelConfigError(f"{path} is not valid TOML: {e}") from None
        key = (data.get(provider) or {}).get("api_key")
        if key:
            return str(key)
    return None


def configured_secrets(env: dict[str, str]) -> list[str]:
    """Every API key crossbuild could be using: the environment's *_API_KEY variables (OPENAI_API_KEY,
    ANTHROPIC_API_KEY, DEEPSEEK_API_KEY...) and the user file's [openai] and [anthropic] api_key. No error leaving a
    model may show one of them (redact.py); an unreadable file adds none (make_model says what is wrong with it)."""
    keys = [v for k, v in env.items() if k.endswith("_API_KEY") and v]
    path = config_file()
    try:
        data = tomllib.loads(path.read_text()) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = {}
    for provider in ("openai", "anthropic"):
        table = data.get(provider)
        if isinstance(table, dict) and table.get("api_key"):
            keys.append(str(table["api_key"]))
    return keys


def make_model(config: ModelConfig, *, env: dict[str, str] | None = None, on_retry=None) -> Model:
    env = dict(os.environ) if env is None else env
    spec = config.spec
    if spec == "planner":
        return Planner()
    if spec.startswith("replay:"):
        db, _, run_id = spec.removeprefix("replay:").partition("#")
        if not run_id:
            raise ModelConfigError("replay needs replay:DB#RUN_ID")
        return ScriptedModel.from_trace(db, run_id)
    if spec == "auto":
        llm_spec = env.get("CROSSBUILD_MODEL")
        if not llm_spec or llm_spec in ("auto", "planner"):
            return Planner()  # no LLM configured: the planner alone
        llm = make_model(ModelConfig(**{**config.__dict__, "spec": llm_spec}), env=env, on_retry=on_retry)
        return HandoverModel(Planner(), llm)
    provider, _, name = spec.partition(":")
    if provider not in ("openai", "anthropic") or not name:
        raise ModelConfigError(f"unknown model {spec!r}: use planner, auto, openai:MODEL (any OpenAI-compatible "
                               "server; --base-url for DeepSeek, vLLM, Ollama, llama.cpp) or anthropic:MODEL")
    base_url = config.base_url or env.get("OPENAI_BASE_URL" if provider == "openai" else "ANTHROPIC_BASE_URL")
    key = _api_key(provider, base_url, env)
    local = base_url and any(h in base_url for h in ("127.0.0.1", "localhost", "[::1]"))
    if not key and not local:
        var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        raise ModelConfigError(f"no API key for {spec}: set {var} or add [{provider}] api_key = \"...\" to "
                               f"{config_file()}")
    if config.engine == "langgraph":
        from crossbuild.models import langchain_chat

        try:
            chat = langchain_chat.chat_model(provider, name, base_url=base_url, api_key=key,
                                             timeout_s=config.timeout_s, temperature=config.temperature,
                                             seed=config.seed)
        except langchain_chat.LangChainUnavailable as e:
            raise ModelConfigError(str(e)) from None
        bind = {k: v for k, v in (("parallel_tool_calls", config.parallel_tool_calls),
                                  ("strict", config.strict or None),
                                  ("tool_choice", None if config.tool_choice == "auto" else config.tool_choice))
                if v is not None and not (provider == "anthropic" and k == "strict")}
        return langchain_chat.LangChainModel(chat, spec, secrets=[key, *configured_secrets(env)], **bind)
    if provider == "openai":
        from crossbuild.models.openai_chat import OpenAIChatModel, OpenAIOptions

        return OpenAIChatModel(OpenAIOptions(
            model=name, base_url=base_url, api_key=key, strict=config.strict,
            parallel_tool_calls=config.parallel_tool_calls, tool_choice=config.tool_choice,
            temperature=config.temperature, seed=config.seed, timeout_s=config.timeout_s), on_retry=on_retry,
            secrets=configured_secrets(env))
    from crossbuild.models.anthropic_chat import AnthropicChatModel, AnthropicOptions

    choice = {"required": "any"}.get(config.tool_choice, config.tool_choice)
    return AnthropicChatModel(AnthropicOptions(
        model=name, base_url=base_url, api_key=key, tool_choice=choice,
        parallel_tool_calls=config.parallel_tool_calls, temperature=config.temperature,
        timeout_s=config.timeout_s), on_retry=on_retry, secrets=configured_secrets(env))


class HandoverModel:
    """`--model auto`: the planner first; when it is out of ideas (it would finish as blocked), the LLM takes over
    with the planner's transcript and a note on why."""

    def __init__(self, first: Planner, then: Model):
        self.first = first
        self.then = then
        self.name = f"auto({then.name})"
        self.handed_over_at: int | None = None
        self._note = ""

    @property
    def rebuilds_state(self) -> bool:
        """While the planner drives, a resumed run asks it again; the LLM's turns are replayed as recorded."""
        return self.handed_over_at is None

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        if self.handed_over_at is None:
            turn = self.first.complete(messages, tools, cancel=cancel)
            if self.first.gave_up is None:
                return turn
            self.handed_over_at = len(messages)
            self._note = ("The offline planner could not finish this build and hands over to you. Its reason: "
                          f"{self.first.gave_up}. Continue from here with the tools.")
        convo = [*messages[: self.handed_over_at], Message("user", self._note), *messages[self.handed_over_at:]]
        return self.then.complete(convo, tools, cancel=cancel)
