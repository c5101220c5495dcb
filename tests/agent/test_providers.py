"""The OpenAI-compatible and Anthropic paths over real HTTP (the official SDKs against a local fake server):
pairing of every call with one result, retries, fatal statuses, budgets, stuck and permission loops."""

from __future__ import annotations

import json
import time

import pytest

from crossbuild.agent import Agent, Budgets
from crossbuild.models.anthropic_chat import AnthropicChatModel, AnthropicOptions
from crossbuild.models.openai_chat import OpenAIChatModel, OpenAIOptions
from crossbuild.models.retry import RetryPolicy

from .fake_provider import FakeProvider, Reply, calls

PROVIDERS = ["openai", "anthropic"]
FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, budget_s=5)


def make_model(provider: str, url: str, **kw):
    if provider == "openai":
        return OpenAIChatModel(OpenAIOptions(model="gpt-4o-mini", base_url=url + "/v1", api_key="sk-test",
                                             retry=kw.pop("retry", FAST_RETRY), **kw))
    return AnthropicChatModel(AnthropicOptions(model="claude-haiku-4-5", base_url=url, api_key="sk-test",
                                               retry=kw.pop("retry", FAST_RETRY), **kw))


def _tool_results(provider: str, request: dict) -> list[tuple[str, bool, str]]:
    """(call id, is_error, text) of the tool results in the last message(s) of a request, in order."""
    if provider == "openai":
        tail = []
        for m in reversed(request["messages"]):
            if m["role"] != "tool":
                break
            tail.append((m["tool_call_id"], m["content"].startswith("Error ("), m["content"]))
        return list(reversed(tail))
    last = request["messages"][-1]
    return [(b["tool_use_id"], b["is_error"], b["content"]) for b in last["content"] if b["type"] == "tool_result"]


def _assistant_call_ids(provider: str, request: dict) -> list[str]:
    if provider == "openai":
        msg = [m for m in request["messages"] if m["role"] == "assistant"][-1]
        return [c["id"] for c in msg["tool_calls"]]
    msg = [m for m in request["messages"] if m["role"] == "assistant"][-1]
    return [b["id"] for b in msg["content"] if b["type"] == "tool_use"]


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_broken_and_unknown_calls_each_get_one_result_then_a_verified_build(provider, ctx, trace):
    script = [
        calls(("list_files", {"path": "src", "depth": 1}), ("read_file", '{"path": "src/CMakeLists.txt"'),
              ("bash", {"command": "id"}), ("build_status", {})),
        calls(("run_command", {"command": "cmake -S src -B build -DCMAKE_BUILD_TYPE=Release"})),
        calls(("run_command", {"command": "cmake --build build -j2"})),
        calls(("finish", {"status": "built", "summary": "built with CMake", "output_dir": "build"})),
    ]
    with FakeProvider(script) as fake:
        outcome = Agent(make_model(provider, fake.base_url, parallel_tool_calls=True), ctx, source="libcalc",
                        trace=trace).run()
    assert outcome.status == "verified", outcome.message
    second = fake.requests[1]
    results = _tool_results(provider, second)
    assert [r[0] for r in results] == _assistant_call_ids(provider, second)  # one result per call, same order
    assert [r[1] for r in results] == [False, True, True, False]
    assert "unknown_tool" in results[2][2] and "run_command" in results[2][2]
    assert ("invalid_json" if provider == "openai" else "invalid_arguments") in results[1][2]
    # four turns of the fake server's usage: OpenAI's 1000 prompt tokens include the 200 cached; Anthropic's 1000
    # input tokens exclude its 200 cache reads, which crossbuild counts as input too
    total_input = 4000 if provider == "openai" else 4800
    assert outcome.usage.input_tokens == total_input and outcome.usage.cached_tokens == 800
    if provider == "openai":
        assert fake.requests[0]["parallel_tool_calls"] is True
        assert {t["function"]["name"] for t in fake.requests[0]["tools"]} >= {"run_command", "finish"}
    else:
        assert fake.paths[0] == "/v1/messages" and "system" in fake.requests[0]
    rows = trace.db.execute("SELECT count(*) FROM tool_calls WHERE run_id=?", (outcome.run_id,)).fetchone()[0]
    assert rows == 7
    run = trace.db.execute("SELECT status, stop_reason, input_tokens FROM runs WHERE id=?",
                           (outcome.run_id,)).fetchone()
    assert tuple(run) == ("verified", "verified", total_input)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_then_success_is_invisible_to_the_model(provider, ctx, trace):
    script = [Reply(status=429, headers={"retry-after": "0"}),
              calls(("build_status", {})),
              calls(("finish", {"status": "blocked", "summary": "just testing"}))]
    with FakeProvider(script) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "gave_up" and outcome.message == "just testing"
    assert len(fake.requests) == 3
    seen_by_model = json.dumps(fake.requests[2]["messages"])
    assert "scripted 429" not in seen_by_model and "429" not in seen_by_model


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_500_storm_spends_the_retry_budget_and_stops_the_run(provider, ctx, trace):
    status = 500 if provider == "openai" else 529
    with FakeProvider(lambda n, body: Reply(status=status)) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "provider_error" and outcome.status == "failed"
    assert "retry budget spent" in outcome.message and len(fake.requests) == FAST_RETRY.max_attempts
    err = trace.db.execute("SELECT error FROM model_calls WHERE run_id=?", (outcome.run_id,)).fetchone()[0]
    assert "retry budget" in err


@pytest.mark.parametrize("provider", PROVIDERS)
def test_payment_required_stops_at_once(provider, ctx, trace):
    with FakeProvider(lambda n, body: Reply(status=402)) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "provider_error" and "402" in outcome.message and "payment" in outcome.message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_garbage_and_timeouts_are_provider_errors_not_crashes(provider, ctx, trace):
    with FakeProvider(lambda n, body: Reply(body="<html>bad gateway</html>")) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "provider_error", outcome.message

    def slow(n, body):
        time.sleep(1.5)
        return Reply(text="late")

    with FakeProvider(slow) as fake:
        retry = RetryPolicy(max_attempts=2, base_delay_s=0.01, budget_s=5)
        outcome = Agent(make_model(provider, fake.base_url, timeout_s=0.3, retry=retry), ctx, trace=trace).run()
    assert outcome.stop_reason == "provider_error" and "timed out" in outcome.message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_never_stops_hits_the_step_budget(provider, ctx, trace):
    with FakeProvider(lambda n, body: calls(("list_files", {"path": "src", "depth": n % 6 + 1}),
                                            ("read_file", {"path": "src/CMakeLists.txt", "offset": n + 1}))) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace, budgets=Budgets(max_steps=5)).run()
    assert outcome.stop_reason == "budget_steps" and outcome.steps == 5 and len(fake.requests) == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_repeats_itself_is_nudged_then_stopped_as_stuck(provider, ctx, trace):
    with FakeProvider(lambda n, body: calls(("run_command", {"command": "cmake -S src/nope -B build"}))) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "stuck", outcome.message
    nudged = [r for req in fake.requests for r in _tool_results(provider, req) if "no progress" in r[2]]
    assert nudged, "the model must be nudged before the run stops"
    assert len(fake.requests) < 8


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_keeps_trying_dotdot_is_a_permission_loop(provider, ctx, trace):
    paths = ["../../etc/passwd", "src/../../../etc/shadow", "/etc/passwd", "../prefix"]
    with FakeProvider(lambda n, body: calls(("read_file", {"path": paths[n % 4]}))) as fake:
        outcome = Agent(make_model(provider, fake.base_url), ctx, trace=trace).run()
    assert outcome.stop_reason == "permission_loop" and len(fake.requests) == 3
    assert "root:" not in json.dumps(fake.requests)


def test_openai_strict_schemas_and_named_tool_choice_reach_the_server(ctx, trace):
    script = [calls(("finish", {"status": "blocked", "summary": "x", "output_dir": None}))]
    with FakeProvider(script) as fake:
        Agent(make_model("openai", fake.base_url, strict=True, tool_choice="required", seed=7, temperature=0.0),
              ctx, trace=trace).run()
    body = fake.requests[0]
    assert body["tool_choice"] == "required" and body["seed"] == 7 and body["temperature"] == 0.0
    fn = next(t["function"] for t in body["tools"] if t["function"]["name"] == "read_file")
    assert fn["strict"] is True and fn["parameters"]["required"] == ["path", "offset", "limit"]


# Each provider's usage object as its API sends it, and the cost worked out by hand from the published prices
# (USD per million tokens; crossbuild's override table): two text-only turns, after which the run gives up.
COST_CASES = [
    # Anthropic's buckets are separate: input 1000 + cache read 2000 + cache write 500 = 3500 input tokens;
    # claude-haiku-4-5: 1000 x 1.00 + 2000 x 0.10 + 500 x 1.25 + 300 x 5.00 = 3325 per turn
    ("anthropic", "claude-haiku-4-5", {"input_tokens": 1000, "output_tokens": 300, "cache_read_input_tokens": 2000,
                                       "cache_creation_input_tokens": 500}, (3500, 2000, 500), 2 * 3325e-6),
    ("anthropic", "claude-haiku-4-5", {"input_tokens": 1000, "output_tokens": 300}, (1000, 0, 0), 2 * 2500e-6),
    # OpenAI's prompt_tokens include the cached ones: gpt-4o-mini: 1000 x 0.15 + 2000 x 0.075 + 300 x 0.60 = 480
    ("openai", "gpt-4o-mini", {"prompt_tokens": 3000, "completion_tokens": 300, "total_tokens": 3300,
                               "prompt_tokens_details": {"cached_tokens": 2000}}, (3000, 2000, 0), 2 * 480e-6),
    ("openai", "gpt-4o-mini", {"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300},
     (1000, 0, 0), 2 * 330e-6),
    # not in crossbuild's table: genai-prices' maintained table (gpt-4.1-nano: 0.10 / 0.025 cached / 0.40)
    ("openai", "gpt-4.1-nano", {"prompt_tokens": 3000, "completion_tokens": 300, "total_tokens": 3300,
                                "prompt_tokens_details": {"cached_tokens": 2000}}, (3000, 2000, 0),
     2 * (1000 * 0.10 + 2000 * 0.025 + 300 * 0.40) * 1e-6),
]


@pytest.mark.parametrize("provider, model, usage, counted, cost", COST_CASES)
def test_cost_follows_each_providers_usage_buckets(provider, model, usage, counted, cost, ctx, trace):
    events = []
    with FakeProvider(lambda n, body: Reply(text="thinking", usage=usage)) as fake:
        m = make_model(provider, fake.base_url)
        m.name = f"{provider}:{model}"  # priced as this model; the fake server answers any name
        outcome = Agent(m, ctx, trace=trace, on_event=events.append).run()
    u = outcome.usage
    assert (u.input_tokens, u.cached_tokens, u.cache_write_tokens) == tuple(2 * c for c in counted)
    assert outcome.cost_usd == pytest.approx(cost, rel=1e-9)
    row = trace.db.execute("SELECT input_tokens, cached_tokens, cache_write_tokens, cost_usd FROM runs WHERE id=?",
                           (outcome.run_id,)).fetchone()
    assert tuple(row) == (u.input_tokens, u.cached_tokens, u.cache_write_tokens, pytest.approx(cost, rel=1e-9))
    assert not [e for e in events if e.kind == "budget_note"]


def test_an_unknown_price_means_no_money_budget_said_once(ctx, trace):
    events = []
    with FakeProvider(lambda n, body: Reply(text="thinking")) as fake:
        m = make_model("openai", fake.base_url)
        m.name = "openai:my-local-llama"
        outcome = Agent(m, ctx, trace=trace, on_event=events.append, budgets=Budgets(max_cost_usd=0.0)).run()
    notes = [e.data["message"] for e in events if e.kind == "budget_note"]
    assert notes == ["no price is known for openai:my-local-llama: the $0.00 money budget is not enforced (the "
                     "token and step budgets are)"]
    assert outcome.cost_usd is None and outcome.stop_reason != "budget_cost"


def _http_date(seconds_ahead: float) -> str:
    import email.utils

    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


# (what the server answers first, whether the SDK rules retry it, the delay it asked for when believed)
RETRY_CASES = [
    (Reply(status=429, headers={"retry-after-ms": "40"}), True, 0.04),
    (Reply(status=503, headers={"retry-after": "1"}), True, 1.0),
    (Reply(status=429, headers={"retry-after": "date"}), True, 3.0),  # the HTTP-date form, 3 s ahead (whole seconds)
    (Reply(status=429, headers={"retry-after": "3600"}), True, None),  # an hour is not believed: backoff
    (Reply(status=408), True, None),
    (Reply(status=409), True, None),
    (Reply(status=503, headers={"x-should-retry": "false"}), False, None),  # the server's word wins
    (Reply(status=400, headers={"x-should-retry": "true"}), True, None),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("first, retried, asked", RETRY_CASES)
def test_retries_follow_the_sdks_rules(provider, first, retried, asked, ctx, trace):
    if first.headers.get("retry-after") == "date":
        first = Reply(status=first.status, headers={"retry-after": _http_date(3.0)})
    delays = []
    script = [first, Reply(text="done")]
    with FakeProvider(lambda n, body: script[min(n, 1)]) as fake:
        model = make_model(provider, fake.base_url)
        model._on_retry = lambda attempt, transient, delay: delays.append(delay)
        outcome = Agent(model, ctx, trace=trace).run()
    if not retried:
        assert outcome.stop_reason == "provider_error" and len(fake.requests) == 1 and not delays
        return
    assert outcome.stop_reason != "provider_error" and len(delays) == 1
    if asked is None:
        assert delays[0] <= FAST_RETRY.max_delay_s  # the policy's own backoff
    elif first.headers.get("retry-after", "").endswith("GMT"):
        assert asked - 2.0 < delays[0] <= asked  # the date has whole seconds, and time passed since it was sent
    else:
        assert delays[0] == pytest.approx(asked)
