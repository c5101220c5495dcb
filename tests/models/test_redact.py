"""Secrets out of provider errors (models/redact.py): the Redactor's rules, and every adapter's errors through it,
over real HTTP with the official SDKs against a local server that echoes keys."""

from __future__ import annotations

import json
import secrets
import types

import pytest

from crossbuild.models import Message, ModelConfig, ProviderError, configured_secrets, make_model
from crossbuild.models.anthropic_chat import AnthropicChatModel, AnthropicOptions
from crossbuild.models.openai_chat import OpenAIChatModel, OpenAIOptions
from crossbuild.models.redact import MARK, RedactedError, Redactor
from crossbuild.models.retry import RetryPolicy, Transient, sdk_call
from crossbuild.tools.base import Toolset
from tests.agent.fake_provider import FakeProvider, Reply

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, budget_s=5)


def _key(prefix: str = "sk-test-", n: int = 32) -> str:
    return prefix + secrets.token_urlsafe(n)


def test_configured_secrets_whatever_their_shape_also_escaped_quoted_or_cut_short():
    odd = "pa55 w/\"ord" + secrets.token_hex(4)
    r = Redactor([odd, None, "", "abc"])  # too short to be a secret: "abc" stays in the text
    for form in (odd, json.dumps(odd)[1:-1], odd.replace("/", "\\/").replace('"', '\\"'), "pa55%20w%2F%22ord",
                 odd[:14]):
        assert odd[:12] not in r.text(f"key was {form} here") and MARK in r.text(f"key was {form}"), form
    assert r.text("abc and abcdef") == "abc and abcdef"
    long = _key(n=300)
    cut = ("Incorrect API key provided: " + long)[:200] + "..."  # a provider or a log that shortened it
    assert r.text(cut).count(MARK) == 1 and long[8:20] not in Redactor([long]).text(cut)


@pytest.mark.parametrize("text", [
    "Incorrect API key provided: sk-proj-abcDEF123456...xyz789. You can find your API key at",
    "invalid x-api-key: sk-ant-api03-AbCdEf0123456789_-AbCdEf0123456789",
    "header was Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dGVzdA",
    "Authorization: Bearer 0123456789abcdefghij",
    "failed to reach http://user:hunter2pass@proxy.example:8080/v1",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 refused",
    "opaque aB3dEfGh1jKlMn0pQrStUvWxYz0123456789AbCd refused",
])
def test_anything_shaped_like_a_key_is_removed_even_unconfigured(text):
    clean = Redactor().text(text)
    assert MARK in clean
    for secret in ("abcDEF123456", "AbCdEf0123456789", "eyJzdWIi", "0123456789abcdefghij", "hunter2pass",
                   "ghp_abcdef", "aB3dEfGh1jKl"):
        assert secret not in clean, clean


def test_ordinary_error_text_stays_readable():
    text = ("HTTP 404 model or endpoint not found: The model `gpt-4o-mini-2024-07-18` does not exist or you do not "
            "have access to it; see /usr/lib/x86_64-linux-gnu/libcrypto.so.3 and task-force, Bearer authentication.")
    assert Redactor([_key()]).text(text) == text


def test_the_guard_cleans_provider_errors_and_any_other_error_with_a_secret_in_its_chain():
    key = _key()
    r = Redactor([key])
    with pytest.raises(ProviderError) as e, r.guard():
        raise ProviderError(f"refused {key}", status=401, fatal=True)
    assert key not in str(e.value) and e.value.status == 401 and e.value.fatal
    with pytest.raises(RedactedError) as e2, r.guard():
        try:
            raise KeyError(f"header {key}")
        except KeyError as inner:
            raise ValueError("while parsing the response") from inner
    told = str(e2.value)
    assert key not in told and "ValueError: while parsing the response" in told and "KeyError" in told
    assert e2.value.__cause__ is None and e2.value.__suppress_context__
    with pytest.raises(ZeroDivisionError), r.guard():  # an error without a secret stays what it was
        raise ZeroDivisionError("division by zero")


def test_sdk_call_cleans_what_it_retries_and_what_it_gives_up_on():
    key = _key()

    class Unreadable(Exception):
        pass

    sdk = types.SimpleNamespace(APIStatusError=KeyError, APITimeoutError=TimeoutError,
                                APIConnectionError=ConnectionError, APIResponseValidationError=Unreadable)

    def garbage():
        raise Unreadable(f"could not parse {{'echo': '{key}'}}")

    with pytest.raises(Transient) as t:
        sdk_call(sdk, "openai:x", garbage, redactor=Redactor([key]))
    assert key not in t.value.reason and MARK in t.value.reason

    def refused():
        raise ConnectionError(f"proxy said no to Bearer {key}")

    with pytest.raises(Transient) as t:
        sdk_call(sdk, "openai:x", refused, redactor=Redactor([key]))
    assert key not in t.value.reason


def _echo(provider: str, *keys: str, status: int = 401) -> FakeProvider:
    message = "Incorrect API key provided: " + " / ".join(keys)
    body = ({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
            if provider == "openai" else {"type": "error", "error": {"type": "authentication_error",
                                                                     "message": message}})
    return FakeProvider(lambda n, b: Reply(status=status, body=json.dumps(body)))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_each_adapter_says_the_status_without_the_key_it_was_made_with(provider):
    key = _key(n=400)  # longer than the 300 characters an error message keeps: the cut must not leave a piece
    with _echo(provider, key) as fake:
        if provider == "openai":
            model = OpenAIChatModel(OpenAIOptions(model="m", base_url=fake.base_url + "/v1", api_key=key, retry=FAST))
        else:
            model = AnthropicChatModel(AnthropicOptions(model="m", base_url=fake.base_url, api_key=key, retry=FAST))
        with pytest.raises(ProviderError) as e:
            model.complete([Message("user", "hi")], Toolset([]))
    text = str(e.value)
    assert e.value.status == 401 and "401" in text and MARK in text
    assert not any(key[i:i + 12] in text for i in range(len(key) - 11)), text


@pytest.mark.parametrize("engine", ["native", "langgraph"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_make_model_also_keeps_the_other_configured_keys_and_the_user_files_out(provider, engine, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "crossbuild").mkdir()
    in_file = "file-" + secrets.token_hex(10)
    (tmp_path / "crossbuild" / "config.toml").write_text(f'[anthropic]\napi_key = "{in_file}"\n'
                                                         f'[openai]\napi_key = "{in_file}-o"\n')
    own, other, deepseek = _key(), _key("sk-ant-"), "ds-" + secrets.token_hex(12)
    env = {"OPENAI_API_KEY": own, "ANTHROPIC_API_KEY": own, "DEEPSEEK_API_KEY": deepseek, "UNRELATED": "visible"}
    assert set(configured_secrets(env)) == {own, deepseek, in_file, in_file + "-o"}
    env["ANTHROPIC_API_KEY" if provider == "openai" else "OPENAI_API_KEY"] = other
    with _echo(provider, own, other, deepseek, in_file, status=403) as fake:
        config = ModelConfig(spec=f"{provider}:m", base_url=fake.base_url + ("/v1" if provider == "openai" else ""),
                             engine=engine, timeout_s=10)
        model = make_model(config, env=env)
        with pytest.raises(ProviderError) as e:
            model.complete([Message("user", "hi")], Toolset([]))
    text = str(e.value)
    assert "403" in text or e.value.status == 403, text
    for secret in (own, other, deepseek, in_file):
        assert secret not in text, text
