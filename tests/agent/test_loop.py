"""The loop with the offline planner and the scripted model: a real build, replay from the trace, stats, the
auto handover, cancel, and the context compaction."""

from __future__ import annotations

import json
import threading
import time

import pytest

from crossbuild.agent import Agent, Budgets
from crossbuild.models import HandoverModel, Planner, ScriptedModel, Turn
from crossbuild.models.base import Message, ToolCall
from crossbuild.models.openai_chat import OpenAIChatModel, OpenAIOptions
from crossbuild.trace import runs
from crossbuild.trace.store import connect

from .fake_provider import FakeProvider, calls


def _tool_calls(db, run_id):
    return [(r["name"], json.loads(r["raw_arguments"])) for r in
            db.execute("SELECT name, raw_arguments FROM tool_calls WHERE run_id=? ORDER BY id", (run_id,))]


@pytest.mark.slow
def test_planner_builds_the_example_and_a_replay_gives_the_same_calls(ctx, trace, tmp_path):
    outcome = Agent(Planner(), ctx, source="libcalc", trace=trace).run()
    assert outcome.status == "verified", outcome.message
    assert outcome.verify.rebuild["ok"] and any(r.passed for r in outcome.verify.smoke_runs)
    recorded = _tool_calls(trace.db, outcome.run_id)
    assert recorded[0] == ("build_status", {}) and recorded[-1][0] == "finish"
    assert [n for n, _ in recorded].count("run_command") == 3

    from crossbuild.foundation.targets import parse_target
    from crossbuild.tools.context import RunContext
    from tests.conftest import copy_example

    root = tmp_path / "replay"
    copy_example(root / "src")
    replay_ctx = RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix2")
    model = ScriptedModel.from_trace(trace.path, outcome.run_id)
    model.rebase(replay_ctx.root)
    again = Agent(model, replay_ctx, trace=trace).run()
    model.assert_complete()
    assert again.status == "verified"
    replayed = [(n, {k: (v.replace(str(tmp_path / "replay"), str(ctx.root)) if isinstance(v, str) else v)
                     for k, v in a.items()}) for n, a in _tool_calls(trace.db, again.run_id)]
    assert replayed == recorded


def test_runs_stats_on_a_database_of_runs(ctx, trace):
    Agent(ScriptedModel([Turn(tool_calls=[ToolCall("a", "read_file", '{"path": "../x"}')]),
                         Turn(tool_calls=[ToolCall("b", "read_file", '{"path": "../x"}')]),
                         Turn(tool_calls=[ToolCall("c", "read_file", '{"path": "../x"}')])]), ctx, trace=trace).run()
    Agent(ScriptedModel([Turn(tool_calls=[ToolCall("a", "run_command", '{"command": "cmake -S nope -B build"}')]),
                         Turn(tool_calls=[ToolCall("b", "finish", '{"status": "blocked", "summary": "no"}')])]),
          ctx, trace=trace).run()
    s = runs.stats(connect(trace.path))
    assert s.runs == 2 and s.by_stop["permission_loop"] == 1 and s.by_stop["gave_up"] == 1
    assert s.permission_denials == 3 and s.repeated_calls == 2
    assert s.tools["read_file"]["failed"] == 3 and s.tools["run_command"]["calls"] == 1
    listed = runs.list_runs(connect(trace.path))
    assert {r["stop_reason"] for r in listed} == {"permission_loop", "gave_up"}
    story = runs.story(connect(trace.path), listed[0]["id"])
    assert [e["kind"] for e in story] == ["model", "tool", "model", "tool"]


def test_auto_hands_over_to_the_llm_when_the_planner_is_out_of_ideas(ctx, trace):
    (ctx.root / "src" / "CMakeLists.txt").write_text("this is not cmake(\n")
    for other in ("meson.build", "configure.ac", "configure", "Makefile"):  # no other build system to try
        (ctx.root / "src" / other).unlink(missing_ok=True)
    script = [calls(("build_status", {})),
              calls(("finish", {"status": "blocked", "summary": "the LLM could not fix it either"}))]
    with FakeProvider(script) as fake:
        llm = OpenAIChatModel(OpenAIOptions(model="gpt-4o-mini", base_url=fake.base_url + "/v1", api_key="k"))
        model = HandoverModel(Planner(), llm)
        outcome = Agent(model, ctx, trace=trace).run()
    assert outcome.message == "the LLM could not fix it either" and model.handed_over_at is not None
    first = fake.requests[0]["messages"]
    assert any("offline planner could not finish" in (m.get("content") or "") for m in first)
    assert any(m["role"] == "tool" and "cmake -S src" in m["content"] for m in first)  # the planner's transcript


def test_cancel_kills_the_running_command_and_records_it(ctx, trace):
    script = ctx.root / "src" / "slow.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o755)
    model = ScriptedModel([Turn(tool_calls=[ToolCall("a", "run_command", '{"command": "./slow.sh", "cwd": "src"}')])])
    threading.Timer(1.0, ctx.cancel.set).start()
    start = time.monotonic()
    outcome = Agent(model, ctx, trace=trace).run()
    assert outcome.status == "cancelled" and time.monotonic() - start < 15
    row = trace.db.execute("SELECT status, stop_reason FROM runs WHERE id=?", (outcome.run_id,)).fetchone()
    assert tuple(row) == ("cancelled", "cancelled")
    err = trace.db.execute("SELECT error_type FROM tool_calls WHERE run_id=?", (outcome.run_id,)).fetchone()[0]
    assert err == "cancelled"


def test_text_only_turns_are_nudged_then_given_up(ctx, trace):
    model = ScriptedModel([Turn(text="I think it is done."), Turn(text="Really done.")])
    outcome = Agent(model, ctx, trace=trace).run()
    assert outcome.stop_reason == "gave_up" and "Really done" in outcome.message
    assert model.requests[1][-1].role == "user" and "finish" in model.requests[1][-1].text


def test_old_tool_outputs_are_compacted_but_their_logs_stay(ctx, trace):
    big = ctx.root / "src" / "big.txt"
    big.write_text("".join(f"line {i} " + "x" * 50 + "\n" for i in range(400)))
    turns = [Turn(tool_calls=[ToolCall(str(i), "read_file", json.dumps({"path": "src/big.txt", "offset": i + 1}))])
             for i in range(12)]
    model = ScriptedModel(turns)
    Agent(model, ctx, trace=trace, budgets=Budgets(context_chars=60_000, max_steps=12)).run()
    last = model.requests[-1]
    tool_msgs = [m for m in last if m.role == "tool"]
    assert any("older output compacted" in m.text for m in tool_msgs[:-2])
    assert all("compacted" not in m.text for m in tool_msgs[-2:])  # the latest results stay whole
    assert sum(len(m.text) for m in last) < 60_000 + 30_000  # within budget, plus the newest result


def test_an_internal_error_ends_the_run_with_status_error(ctx, trace):
    class Broken:
        name = "broken"

        def complete(self, messages: list[Message], tools, *, cancel=None):
            raise ZeroDivisionError("bug in a model adapter")

    outcome = Agent(Broken(), ctx, trace=trace).run()
    assert outcome.status == "error" and "ZeroDivisionError" in outcome.message
