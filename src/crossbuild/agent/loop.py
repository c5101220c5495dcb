"""The agent loop: ask the model, dispatch every call (exactly one result each, in the model's order), attach
knowledge-base entries to failed build commands, watch budgets and progress, and let only the verifier say
"verified". Every model call and tool call lands in the trace as it happens.

Longer than 350 lines: the steps of one run share its state (messages, budgets, progress, trace, the last verdict);
what stands alone already lives beside it (budgets, context_window, finish, outcome, progress, resume)."""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from crossbuild import __version__
from crossbuild.agent import events, prompt
from crossbuild.agent.budgets import Budgets, cost_usd
from crossbuild.agent.context_window import compact
from crossbuild.agent.events import Event, EventSink, ignore
from crossbuild.agent.finish import FINISH
from crossbuild.agent.outcome import RunOutcome, Stop, StopReason
from crossbuild.agent.progress import ProgressMonitor, Verdict, call_signature
from crossbuild.agent.resume import Replay
from crossbuild.foundation.background import Abandoned, call_in_thread
from crossbuild.foundation.progress import Note
from crossbuild.models.base import Message, Model, ProviderError, ToolCall, Turn, Usage
from crossbuild.proof import native_check
from crossbuild.proof.partial_suite import tests_alone_failed
from crossbuild.proof.verify import VerifyReport, verify
from crossbuild.tools import Toolset, default_toolset
from crossbuild.tools.base import ErrorType, ToolResult
from crossbuild.tools.build import replay_steps
from crossbuild.tools.build_dependency import provide_again
from crossbuild.tools.context import RunContext
from crossbuild.tools.knowledge import attach_knowledge
from crossbuild.tools.schemas import openai_tools
from crossbuild.trace.store import Trace, messages_hash, new_run_id

# A dependency's own test suite runs at most this long on the target (OpenSSL's `make test`: well over 40 minutes
# under qemu): a consumer waits on it, and its own tests prove what it uses; past it the suite is unfinished and
# the dependency is verified at a lower level, which its result says
DEPENDENCY_SUITE_S = 300.0
CONTINUE = ("Continue with tool calls. When the build is done, call finish(status='built'); if it cannot be done, "
            "finish(status='blocked') with the reason.")


class Agent:
    def __init__(self, model: Model, ctx: RunContext, *, source: str = "", toolset: Toolset | None = None,
                 budgets: Budgets | None = None, trace: Trace | None = None, on_event: EventSink = ignore,
                 config: dict[str, Any] | None = None, run_id: str | None = None, replay: Replay | None = None):
        self.model = model
        self.ctx = ctx
        self.source = source
        self.toolset = toolset or Toolset([*default_toolset().tools.values(), FINISH])
        if FINISH.name not in self.toolset:
            self.toolset = Toolset([*self.toolset.tools.values(), FINISH])
        self.budgets = budgets or Budgets()
        self.trace = trace
        self.emit = on_event
        self.config = config or {}
        self.run_id = run_id or new_run_id()
        self.messages: list[Message] = []
        self.usage = Usage()
        self.steps = 0
        self.tool_calls = 0
        self.denials = 0
        self.text_only_turns = 0
        self.kb_attached: list[str] = []
        self.progress = ProgressMonitor()
        self._pending_nudge: str | None = None
        # the last verdict that refused the build: an unverified run's outcome says which program failed and why
        self._failed_verify: VerifyReport | None = None
        self._failed_verify_dir = "build"
        self._sent = 0  # messages already recorded in the trace
        self._start = 0.0
        self.replay = replay  # a resumed run: its recorded turns and results come first

    # ---- the run ------------------------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        self._start = time.monotonic()
        system = prompt.SYSTEM
        self.messages = [Message("system", system), Message("user", prompt.task_message(self.ctx, self.source))]
        specs = json.dumps(openai_tools(self.toolset), sort_keys=True)
        if self.replay:
            self._start -= self.replay.elapsed_s
            self.usage += self.replay.usage
            if self.trace:
                self.trace.resume_run(self.run_id, replayed_turns=len(self.replay.turns),
                                      replayed_calls=len(self.replay.results))
        elif self.trace:
            self.trace.start_run(run_id=self.run_id, source=self.source, target=self.ctx.target.name,
                                 model=self.model.name, config=self.config, version=__version__,
                                 prompt_hash=prompt.prompt_hash(system, specs), workspace=str(self.ctx.root))
        self.emit(Event("run_started", {"run_id": self.run_id, "model": self.model.name,
                                        "target": self.ctx.target.name, "workspace": str(self.ctx.root),
                                        "sandbox": self.ctx.sandbox.backend, "resumed": self.replay is not None}))
        if self.model.name.startswith(("openai:", "anthropic:")) and self.budgets.max_cost_usd is not None \
                and cost_usd(self.model.name, Usage()) is None:  # said once, at the start
            self.emit(Event("budget_note", {"message": f"no price is known for {self.model.name}: the "
                                                       f"${self.budgets.max_cost_usd:.2f} money budget is not enforced "
                                                       "(the token and step budgets are)"}))
        outcome: RunOutcome | None = None
        # what a long tool call is doing reaches the renderers; a dependency's run reports to whoever watches the
        # call that asked for it
        watching, before = self.ctx.depth == 0 or self.ctx.watch.sink is None, self.ctx.watch.sink
        if watching:
            self.ctx.watch.sink = self._progress
        try:
            with self.trace.alive(self.run_id) if self.trace else contextlib.nullcontext():
                self._drive()
        except Stop as stop:
            outcome = self._outcome(stop.reason, stop.message, stop.verify, stop.output_dir)
        except Exception as e:  # a bug in crossbuild: the run ends with status error, traceback in the trace
            outcome = self._outcome(StopReason.ERROR,
                                    f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        finally:  # even a KeyboardInterrupt leaves a finished run record behind
            if outcome is None:
                outcome = self._outcome(StopReason.CANCELLED, "interrupted")
            if watching:
                self.ctx.watch.sink = before
            self._record_outcome(outcome)
        self.emit(Event("finished", outcome.to_dict()))
        return outcome

    def _record_outcome(self, outcome: RunOutcome) -> None:
        if self.trace:
            self.trace.finish_run(self.run_id, status=outcome.status, stop_reason=str(outcome.stop_reason),
                                  message=outcome.message, verify=outcome.verify.to_dict() if outcome.verify else None,
                                  wall_s=outcome.wall_s, steps=outcome.steps, tool_calls=outcome.tool_calls,
                                  input_tokens=self.usage.input_tokens, output_tokens=self.usage.output_tokens,
                                  cached_tokens=self.usage.cached_tokens,
                                  cache_write_tokens=self.usage.cache_write_tokens, cost_usd=outcome.cost_usd)

    def _outcome(self, reason: StopReason, message: str, report: VerifyReport | None = None,
                 output_dir: str | None = None) -> RunOutcome:
        return RunOutcome(run_id=self.run_id, status=reason.status, stop_reason=reason, message=message,
                          verify=report or self._failed_verify, output_dir=output_dir, steps=self.steps,
                          tool_calls=self.tool_calls, usage=self.usage, cost_usd=self._cost(),
                          wall_s=time.monotonic() - self._start, kb_attached=list(self.kb_attached))

    def _cost(self) -> float | None:
        return cost_usd(self.model.name, self.usage)

    def _check_budgets(self) -> None:
        b = self.budgets
        if self.ctx.cancel.is_set():
            raise Stop(StopReason.CANCELLED, "cancelled by the user")
        if self.steps >= b.max_steps:
            raise Stop(StopReason.BUDGET_STEPS, f"step budget spent ({b.max_steps} model turns)")
        if self.tool_calls >= b.max_tool_calls:
            raise Stop(StopReason.BUDGET_TOOL_CALLS, f"tool-call budget spent ({b.max_tool_calls} calls)")
        if self.usage.input_tokens + self.usage.output_tokens >= b.max_tokens:
            raise Stop(StopReason.BUDGET_TOKENS, f"token budget spent ({b.max_tokens} tokens)")
        if time.monotonic() - self._start >= b.max_wall_s:
            raise Stop(StopReason.BUDGET_WALL, f"wall-time budget spent ({b.max_wall_s:.0f}s)")
        cost = self._cost()
        if b.max_cost_usd is not None and cost is not None and cost >= b.max_cost_usd:
            raise Stop(StopReason.BUDGET_COST, f"money budget spent (${cost:.2f} of ${b.max_cost_usd:.2f})")

    def _drive(self) -> None:
        """The control flow: a model turn, then its calls, until a Stop. The LangGraph engine replaces only this
        (agent/graph.py); every policy below is shared."""
        while True:
            turn = self.model_step()
            if turn.tool_calls:
                self.tool_step(turn)

    def model_step(self) -> Turn:
        """Budgets, one model turn (recorded), and the nudge after a turn without tool calls."""
        self._check_budgets()
        self.steps += 1
        self.emit(Event("step_started", {"step": self.steps}))
        compact(self.messages, self.budgets.context_chars)
        turn = self._ask_model()
        self.messages.append(Message("assistant", turn.text, tool_calls=list(turn.tool_calls)))
        if turn.text:
            self.emit(Event("model_text", {"step": self.steps, "text": turn.text}))
        if turn.tool_calls:
            self.text_only_turns = 0
            return turn
        self.text_only_turns += 1
        if self.text_only_turns >= self.budgets.max_text_only_turns:
            raise Stop(StopReason.GAVE_UP, "the model stopped calling tools without finishing: "
                                   + (turn.text[:500] or "(no text)"))
        self.messages.append(Message("user", CONTINUE))
        return turn

    def tool_step(self, turn: Turn) -> list[Message]:
        """Every call of TURN answered, in order (the tool messages the model reads next); raises the Stop one of
        them asked for once all are answered."""
        results = self._dispatch_all(turn.tool_calls)
        stop: Stop | None = None
        for call, result in zip(turn.tool_calls, results, strict=True):
            stop = self._after_call(call, result) or stop
        answers = self.messages[-len(turn.tool_calls):]
        if stop:
            raise stop
        return answers

    def _ask_model(self) -> Turn:
        new = [m.to_dict() for m in self.messages[self._sent:]]
        request_hash = messages_hash([m.to_dict() for m in self.messages])
        if self.replay and self.replay.replaying:
            turn, replayed = self.replay.turn(self.model, lambda: self._call_model(new, request_hash))
            if not self.replay.replaying:
                self.emit(Event("replay_done", {"step": self.steps, "turns": self.replay.replayed_turns,
                                                "calls": self.replay.replayed_calls,
                                                "diverged": self.replay.diverged}))
            if replayed:  # in the trace already, usage counted
                self._sent = len(self.messages) + 1
                return turn
        else:
            turn = self._call_model(new, request_hash)
        self.usage += turn.usage
        self._sent = len(self.messages) + 1  # the assistant message appended next is in the response
        if self.trace:
            self.trace.model_call(self.run_id, step=self.steps, model=self.model.name, request_hash=request_hash,
                                  new_messages=new, response=turn.raw, text=turn.text,
                                  tool_calls=[c.__dict__ for c in turn.tool_calls], finish_reason=turn.finish_reason,
                                  input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                                  cached_tokens=turn.usage.cached_tokens,
                                  cache_write_tokens=turn.usage.cache_write_tokens, latency_s=turn.latency_s)
        return turn

    def _call_model(self, new: list[dict[str, Any]], request_hash: str) -> Turn:
        """One model call, live; a failure is recorded and ends the run."""
        try:  # Ctrl-C and a cancel must not wait for a slow provider
            turn = call_in_thread(lambda: self.model.complete(self.messages, self.toolset, cancel=self.ctx.cancel),
                                  name="model-call", until=self.ctx.cancel.is_set)
        except Abandoned:
            raise Stop(StopReason.CANCELLED, "cancelled by the user during a model call") from None
        except Exception as error:
            if self.trace:
                self.trace.model_call(self.run_id, step=self.steps, model=self.model.name, request_hash=request_hash,
                                      new_messages=new, response=None, text="", tool_calls=[], finish_reason="error",
                                      input_tokens=0, output_tokens=0, cached_tokens=0, latency_s=0.0,
                                      error=str(error))
            if isinstance(error, ProviderError):
                raise Stop(StopReason.PROVIDER_ERROR, f"model provider error: {error}"
                           + (f" (HTTP {error.status})" if error.status and str(error.status) not in str(error)
                              else "")) from None
            raise
        return turn

    # ---- tool calls ---------------------------------------------------------------------------------------------

    def _dispatch_all(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Read-only calls next to each other run concurrently; writes and commands run alone, in order."""
        results: list[ToolResult | None] = [None] * len(calls)
        i = 0
        while i < len(calls):
            if self.toolset.is_read_only(calls[i].name):
                j = i
                while j < len(calls) and self.toolset.is_read_only(calls[j].name):
                    j += 1
                group = list(range(i, j))
                for k in group:
                    self._emit_call(calls[k])
                if len(group) == 1:
                    results[i] = self._dispatch(calls[i])
                else:
                    with ThreadPoolExecutor(max_workers=min(4, len(group))) as pool:
                        for k, r in zip(group, pool.map(lambda k: self._dispatch(calls[k]), group), strict=True):
                            results[k] = r
                i = j
            else:
                self._emit_call(calls[i])
                results[i] = self._dispatch(calls[i])
                i += 1
        return [r for r in results if r is not None]

    def _progress(self, note: Note) -> None:
        self.emit(events.progress(note, self.steps))

    def _emit_call(self, call: ToolCall) -> None:
        self.emit(Event("tool_call", {"step": self.steps, "id": call.id, "name": call.name,
                                      "arguments": call.arguments}))

    def _dispatch(self, call: ToolCall) -> ToolResult:
        if self.tool_calls >= self.budgets.max_tool_calls:
            return ToolResult(ok=False, error_type=ErrorType.CANCELLED,
                              message="not run: the tool-call budget is spent.")
        self.tool_calls += 1
        recorded = self.replay.result_for(self.steps, call) if self.replay else None
        return recorded or self.toolset.dispatch(self.ctx, call.name, call.arguments)

    def _after_call(self, call: ToolCall, result: ToolResult) -> Stop | None:
        """One result, in order: the verifier's verdict on a finish, the guards' refusals, the progress check, the
        trace and events, then the message the model reads. Returns a stop for after the turn, if any."""
        denied = self._count_denial(result)
        stop = (self._finish(result) if call.name == FINISH.name and result.ok else None) or denied
        if result.internal:
            stop = Stop(StopReason.ERROR, f"internal error in tool {call.name}: {result.data.get('exception')}")
        attached = result.data.get("kb") or []  # attached where the result was made (run_command, a verdict)
        self.kb_attached += [k["id"] for k in attached]
        verdict = self._watch_progress(call, result)
        if verdict and verdict.stuck:
            stop = stop or Stop(StopReason.STUCK, f"no progress: {verdict.why}")
        elif verdict:
            self._pending_nudge = verdict.why
        text = result.render()
        if self._pending_nudge and call.name != FINISH.name:
            text += self._nudge_text()
        self._record_call(call, result, attached, text)
        self.messages.append(Message("tool", text, call_id=call.id, name=call.name, is_error=not result.ok,
                                     data=result.data))
        return stop

    def _count_denial(self, result: ToolResult) -> Stop | None:
        if result.error_type != ErrorType.PERMISSION_DENIED:
            return None
        self.denials += 1
        if self.denials < self.budgets.max_permission_denials:
            return None
        return Stop(StopReason.PERMISSION_LOOP, f"{self.denials} calls were refused by the guards; the last: "
                                                f"{result.message[:300]}")

    def _watch_progress(self, call: ToolCall, result: ToolResult) -> Verdict | None:
        tool = self.toolset.tools.get(call.name)
        return self.progress.observe(call_signature(call.name, call.arguments), result.ok, result.fingerprint,
                                     changed_files=tool is not None and tool.changes_files)

    def _nudge_text(self) -> str:
        why, self._pending_nudge = self._pending_nudge, None
        self.emit(Event("nudge", {"step": self.steps, "why": why}))
        return (f"\n\n[crossbuild: no progress — {why}. Try something different: read the full log, apply the "
                "attached fix, or change the build files. Repeating it will end the run.]")

    def _record_call(self, call: ToolCall, result: ToolResult, attached: list[dict], text: str) -> None:
        replayed = bool(self.replay and self.replay.is_replayed(result))
        if self.trace and not replayed:
            row = self.trace.tool_call(self.run_id, step=self.steps, seq=self.tool_calls, call_id=call.id,
                                       name=call.name, raw_arguments=call.arguments, parsed=_parsed(call.arguments),
                                       result=result.to_dict(), fingerprint=result.fingerprint)
            for k in attached:
                self.trace.kb_attachment(self.run_id, row, k["id"], k["score"], k["how"])
        for k in attached:
            self.emit(Event("kb_attached", {"step": self.steps, "entry": k["id"], "title": k["title"]}))
        self.emit(Event("tool_result", {"step": self.steps, "id": call.id, "name": call.name, "ok": result.ok,
                                        "error_type": result.error_type, "summary": text.splitlines()[0][:200],
                                        "duration_s": result.duration_s, "log": result.data.get("log"),
                                        "replayed": replayed}))

    def _finish(self, result: ToolResult) -> Stop | None:
        data = result.data
        if data["status"] == "blocked":
            return self._judged_with_the_build_machine(data["summary"]) or Stop(StopReason.GAVE_UP, data["summary"])
        out_dir = data["output_dir"]
        report = self._verify(out_dir)
        if report.ok:
            return Stop(StopReason.VERIFIED, data["summary"], report, out_dir)
        # not verified: the model gets the reasons (in place of "finish requested") and may continue
        self._failed_verify, self._failed_verify_dir = report, out_dir
        result.ok = False
        result.error_type = ErrorType.NOT_VERIFIED
        result.data["verify"] = {"ok": False, "reasons": report.reasons[:30]}
        result.message, result.hint = attach_knowledge(
            self.ctx, report.failed_output(), report.summary(out_dir),
            "fix these and call finish again, or finish(status='blocked') if you cannot; test programs that still "
            "fail then are run again from a build for the build machine", result.data)
        return None

    def _judged_with_the_build_machine(self, summary: str) -> Stop | None:
        """The model gave up after a verdict that only test programs failing without a crash refused. Its fixes came
        first (a known cause's fix makes a test pass, which is better than excusing it); now the judge builds the
        project for the build machine too, and a failure it shows there as well is the project's own
        (proof/native_check.py)."""
        failed = self._failed_verify
        if failed is None or not failed.only_tests_failed() or native_check.build_machine_target(
                self.ctx.target) is None:
            return None
        if self.ctx.depth and tests_alone_failed(failed):
            # a dependency provided with these few failures said (dependency_builder): the build for the build
            # machine (its own dependencies too: minutes each) would change only how they are said
            return None
        out_dir = self._failed_verify_dir
        report = self._verify(out_dir, build_machine_check=True)
        if not report.ok:
            self._failed_verify = report  # the outcome shows what the build machine said of each failed program
            return None
        excused = [r.path for r in report.smoke_runs if r.triage == "project"]
        emulator = [r.path for r in report.smoke_runs if r.triage == "environment" and r.why
                    and r.why.startswith("the emulator's")]
        said = [f"{', '.join(excused)} {'fails' if len(excused) == 1 else 'fail'} the same way built for the build "
                "machine"] if excused else []
        said += [f"{', '.join(emulator)} {'fails' if len(emulator) == 1 else 'fail'} the same way under the build "
                 "machine's qemu-user and passes run natively"] if emulator else []
        return Stop(StopReason.VERIFIED, f"{'; '.join(said) or 'the build machine check passed'} (not counted); the "
                                         f"model had given up: {summary}", report, out_dir)

    def _verify(self, out_dir: str, *, build_machine_check: bool = False) -> VerifyReport:
        report = verify(self.ctx.root / out_dir, self.ctx.target, toolchain=self.ctx.toolchain, box=self.ctx.sandbox,
                        rebuild_steps=replay_steps(self.ctx) or None, rebuild_edits=self.ctx.edited,
                        build_machine_check=build_machine_check,
                        provide_dependencies=lambda target, prefix: provide_again(self.ctx, target, prefix),
                        suite_budget_s=DEPENDENCY_SUITE_S if self.ctx.depth else None,
                        install_dir=self.ctx.install_dir)
        self.emit(Event("verify", {"step": self.steps, "ok": report.ok, "reasons": report.reasons[:10],
                                   "counts": report.counts, "output_dir": out_dir, "proof": report.proof,
                                   "proof_counts": report.proof_counts, "proof_why": report.proof_why}))
        return report


def _parsed(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except (json.JSONDecodeError, RecursionError):
        return None


__all__ = ["Agent", "RunOutcome"]
