"""A local model server over real HTTP that speaks both the OpenAI Chat Completions API and the Anthropic Messages
API, answering from a script. The real SDKs talk to it through loopback; it records every request it gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: tool calls [(name, raw_arguments)], text, or an HTTP error."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # raw body, e.g. garbage
    usage: dict[str, Any] | None = None  # the provider's own usage object (default: a small cached prompt)


def calls(*pairs: tuple[str, Any]) -> Reply:
    return Reply(calls=[(n, a if isinstance(a, str) else json.dumps(a)) for n, a in pairs])


class FakeProvider:
    def __init__(self, script: list[Reply] | Callable[[int, dict], Reply]):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, names lower-cased
        self.rejected: list[str] = []  # requests refused for breaking the call/result pairing rules
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                provider.headers.append({k.lower(): v for k, v in self.headers.items()})
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                unpaired = _unpaired(self.path, body)
                if unpaired:  # as the real APIs do: the request is refused, the script does not advance
                    provider.rejected.append(unpaired)
                    self._send(400, json.dumps({"error": {"message": unpaired, "type": "invalid_request_error"}})
                               .encode(), {})
                    return
                reply, n = provider._next(self.path, body)
                if reply.status != 200 or reply.body is not None:
                    payload = (reply.body if reply.body is not None else
                               json.dumps({"error": {"message": f"scripted {reply.status}", "type": "scripted"}}))
                    self._send(reply.status, payload.encode(), reply.headers)
                    return
                if self.path.endswith("/chat/completions"):
                    payload = _openai_response(reply, n, body)
                else:
                    payload = _anthropic_response(reply, n, body)
                self._send(200, json.dumps(payload).encode(), reply.headers)

            def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _next(self, path: str, body: dict) -> tuple[Reply, int]:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            self.paths.append(path)
        if callable(self.script):
            return self.script(n, body), n
        if n < len(self.script):
            return self.script[n], n
        return Reply(text="(script exhausted)"), n

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _openai_response(reply: Reply, n: int, body: dict) -> dict[str, Any]:
    tool_calls = [{"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                  for i, (name, args) in enumerate(reply.calls)]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": reply.usage or {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050,
                                     "prompt_tokens_details": {"cached_tokens": 200}}}


def _anthropic_response(reply: Reply, n: int, body: dict) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, (name, args) in enumerate(reply.calls):
        try:
            value = json.loads(args)
        except json.JSONDecodeError:
            value = {"_raw": args}  # Anthropic always sends an object; broken JSON cannot reach us from it
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": value})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": content, "stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None,
            "usage": reply.usage or {"input_tokens": 1000, "output_tokens": 50, "cache_read_input_tokens": 200}}


def _unpaired(path: str, body: dict) -> str | None:
    """The pairing rule both APIs enforce: every call of an assistant message is answered, once, right after it
    (OpenAI: tool messages; Anthropic: tool_result blocks in the next user message), and nothing else is."""
    messages = body.get("messages") or []
    if path.endswith("/chat/completions"):
        for i, m in enumerate(messages):
            if m.get("role") == "assistant" and m.get("tool_calls"):
                wanted = [c["id"] for c in m["tool_calls"]]
                answered = []
                for follow in messages[i + 1:]:
                    if follow.get("role") != "tool":
                        break
                    answered.append(follow.get("tool_call_id"))
                if sorted(answered) != sorted(wanted):
                    missing = sorted(set(wanted) - set(answered))
                    return ("An assistant message with 'tool_calls' must be followed by tool messages responding "
                            f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                            f"{', '.join(missing) or '(duplicates)'}")
            if m.get("role") == "tool" and (i == 0 or messages[i - 1].get("role") not in ("assistant", "tool")):
                return "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
        return None
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m.get("content"), list) else []
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        if m.get("role") == "assistant" and uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else {}
            blocks = nxt.get("content") if isinstance(nxt.get("content"), list) else []
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if sorted(results) != sorted(uses):
                return (f"messages.{i + 1}: tool_use ids were found without tool_result blocks immediately after: "
                        f"{', '.join(sorted(set(uses) - set(results)))}. Each tool_use block must have a "
                        "corresponding tool_result block in the next message.")
    return None
