"""A provider that echoes the API key it refused, as a user meets it: the real `crossbuild build` against a local
OpenAI- or Anthropic-compatible server answering 401 with the key in its error. Afterwards the key is nowhere on the
host: not in the JSON events printed, not in any row of runs.db (nor its raw bytes), not in the workspace, not in
the spans sent to an OTLP collector."""

from __future__ import annotations

import json
import secrets
import sqlite3
from pathlib import Path

import pytest

from tests.agent.fake_provider import FakeProvider, Reply
from tests.conftest import cb
from tests.trace.test_otel import Receiver


def _echoing(provider: str, extra: str = "") -> FakeProvider:
    """A server that answers every request with 401 and the credential it was sent (and EXTRA) in the error, as
    OpenAI ("Incorrect API key provided: ...") and Anthropic do."""
    server: FakeProvider

    def reply(n: int, body: dict) -> Reply:
        headers = server.headers[-1]
        sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        if provider == "openai":
            error = {"error": {"message": f"Incorrect API key provided: {sent}{extra}. You can find your API key at "
                                          "https://platform.openai.com/account/api-keys.",
                               "type": "invalid_request_error", "param": None, "code": "invalid_api_key"},
                     "echo": {"authorization": headers.get("authorization")}}
        else:
            error = {"type": "error", "error": {"type": "authentication_error",
                                                "message": f"invalid x-api-key: {sent}{extra}"}}
        return Reply(status=401, body=json.dumps(error))

    server = FakeProvider(reply)
    return server


def _db_rows(db: Path) -> str:
    """Every row of every table of runs.db, as text."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "runs" in tables and "model_calls" in tables, tables
        return "\n".join(f"{t}: {row!r}" for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    finally:
        conn.close()


def _files_holding(root: Path, needle: bytes, skip: set[Path]) -> list[str]:
    """The files below ROOT (links not followed) whose bytes hold NEEDLE."""
    found = []
    for path in root.rglob("*"):
        if path in skip or path.is_symlink() or not path.is_file():
            continue
        if needle in path.read_bytes():
            found.append(str(path))
    return found


def _spans_bytes(receiver: Receiver) -> tuple[bytes, list[str]]:
    """What the collector got (serialized) and the status messages of its spans."""
    data, messages = b"", []
    for request in receiver.requests:
        data += request.SerializeToString()
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                messages += [s.status.message for s in ss.spans if s.status.message]
    return data, messages


CASES = {
    "openai-env": ("openai", "env", "native", lambda: "sk-test-" + secrets.token_urlsafe(32)),
    "openai-project-key": ("openai", "env", "native", lambda: "sk-proj-" + secrets.token_urlsafe(60)),
    "openai-user-file-odd-shape": ("openai", "file", "native", lambda: "loc4l/" + secrets.token_hex(6) + "\"q"),
    "anthropic-env": ("anthropic", "env", "native", lambda: "sk-ant-api03-" + secrets.token_urlsafe(40)),
    "openai-langgraph": ("openai", "env", "langgraph", lambda: "sk-test-" + secrets.token_urlsafe(32)),
    "anthropic-langgraph": ("anthropic", "env", "langgraph", lambda: "sk-ant-" + secrets.token_urlsafe(40)),
}


@pytest.mark.parametrize("case", CASES)
def test_a_key_the_provider_echoes_is_recorded_nowhere(tmp_path, case):
    provider, where, engine, make_key = CASES[case]
    key = make_key()
    other = "sk-ant-" + secrets.token_urlsafe(30) if provider == "openai" else "sk-" + secrets.token_urlsafe(30)
    xdg = tmp_path / "xdg"
    (xdg / "crossbuild").mkdir(parents=True)
    config = xdg / "crossbuild" / "config.toml"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    var = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    other_var = "ANTHROPIC_API_KEY" if provider == "openai" else "OPENAI_API_KEY"
    if where == "env":
        env |= {var: key, other_var: other}
    else:  # the user's own file, whatever the key looks like
        second = "anthropic" if provider == "openai" else "openai"
        config.write_text(f"[{provider}]\napi_key = {json.dumps(key)}\n[{second}]\napi_key = {json.dumps(other)}\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(p C)\n")
    receiver = Receiver()
    try:
        # the server echoes the key it was sent, and the other configured key too (a proxy in front of both)
        with _echoing(provider, extra=f" (also tried {other})") as server:
            url = server.base_url + ("/v1" if provider == "openai" else "")
            model = "openai:gpt-x" if provider == "openai" else "anthropic:claude-x"
            r = cb("build", str(src), "-t", "x86_64-linux-musl", "--model", model, "--base-url", url, "--engine",
                   engine, "--progress", "json", "--db", str(tmp_path / "runs.db"), "-w", str(tmp_path / "ws"),
                   cwd=tmp_path, timeout=300, env=env | {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
            sent = server.headers
    finally:
        receiver.close()
    # the attack happened: the server got the key and answered with it
    assert sent and any(key in (h.get("authorization", "") + h.get("x-api-key", "")) for h in sent), sent
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    events = [json.loads(line) for line in r.stdout.splitlines()]  # every line printed is one event
    rows = _db_rows(tmp_path / "runs.db")
    spans, messages = _spans_bytes(receiver)
    assert spans, "the live export sent no spans"
    for secret in (key, other):
        escaped = json.dumps(secret)[1:-1]
        assert secret not in r.stdout and escaped not in r.stdout and secret not in r.stderr
        assert secret not in rows and escaped not in rows
        # nothing anywhere under tmp_path (runs.db and its journal, the workspace) but the user's own config file
        for needle in {secret, escaped, secret[:16]}:
            assert _files_holding(tmp_path, needle.encode(), skip={config}) == [], needle
            assert needle.encode() not in spans, needle
    # ...and what the provider said is still there, with the key taken out
    outcome = events[-1]["data"]
    assert events[-1]["event"] == "outcome" and outcome["stop_reason"] == "provider_error", outcome
    assert "401" in outcome["message"] and "[redacted]" in outcome["message"], outcome["message"]
    assert "[redacted]" in rows and any("[redacted]" in m for m in messages), messages
