"""The agent loop: ask the model, dispatch every call (exactly one result each, in the model's order), attach
knowledge-base entries to failed build commands, watch budgets and progress, and let only the verifier say
"verified". Every model call and tool call lands in the trace as it happens."""

from __future__ import annotations

import json
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..context import RunContext
from ..models.base import Message, Model, ProviderError, ToolCall, Turn, Usage
from ..tools import Toolset, default_toolset
from ..tools.base import INTERNAL, PERMISSION_DENIED, ToolResult
from ..tools.build import replay_steps
from ..tools.command import INSPECTION_TOOLS
from ..tools.schemas import openai_tools
from ..trace import Trace, messages_hash, new_run_id
from ..verify import VerifyReport, verify
from . import prompt
from .budgets import Budgets, cost_usd
from .events import Event, EventSink, ignore
from .finish import FINISH
from .progress import ProgressMonitor, call_signature, error_fingerprint

COMPACT_KEEP_RECENT = 8


@dataclass
class RunOutcome:
    run_id: str
    status: str  # verified | failed | cancelled | error
    stop_reason: str  # verified | gave_up | budget_* | stuck | permission_loop | provider_error | error | cancelled
    message: str
    verify: VerifyReport | None = None
    output_dir: str | None = None
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    wall_s: float = 0.0
    kb_attached: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "verified"

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "stop_reason": self.stop_reason,
                "message": self.message, "output_dir": self.output_dir, "steps": self.steps,
                "tool_calls": self.tool_calls, "usage": self.usage.__dict__, "cost_usd": self.cost_usd,
                "wall_s": round(self.wall_s, 3), "kb_attached": self.kb_attached,
                "verify": self.verify.to_dict() if self.verify else None}


class _Stop(Exception):
    def __init__(self, reason: str, message: str, verify_report: VerifyReport | None = None,
                 output_dir: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.verify = verify_report
        self.output_dir = output_dir


class Agent:
    def __init__(self, model: Model, ctx: RunContext, *, source: str = "", toolset: Toolset | None = None,
                 budgets: Budgets | None = None, trace: Trace | None = None, on_event: EventSink = ignore,
                 config: dict[str, Any] | None = None, run_id: str | None = None):
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
        self._sent = 0  # messages already recorded in the trace
        self._start = 0.0

    # ---- the run ------------------------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        self._start = time.monotonic()
        system = prompt.SYSTEM
        self.messages = [Message("system", system), Message("user", prompt.task_message(self.ctx, self.source))]
        specs = json.dumps(openai_tools(self.toolset), sort_keys=True)
        if self.trace:
            self.trace.start_run(run_id=self.run_id, source=self.source, target=self.ctx.target.name,
                                 model=self.model.name, config=self.config, version=__version__,
                                 prompt_hash=prompt.prompt_hash(system, specs), workspace=str(self.ctx.root))
        self.emit(Event("run_started", {"run_id": self.run_id, "model": self.model.name,
                                        "target": self.ctx.target.name, "workspace": str(self.ctx.root)}))
        try:
            while True:
                self._step()
        except _Stop as stop:
            outcome = self._outcome(stop.reason, stop.message, stop.verify, stop.output_dir)
        except Exception as e:  # a bug in crossbuild: the run ends with status error, traceback in the trace
            outcome = self._outcome("error", f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        if self.trace:
            self.trace.finish_run(self.run_id, status=outcome.status, stop_reason=outcome.stop_reason,
                                  message=outcome.message, verify=outcome.verify.to_dict() if outcome.verify else None,
                                  wall_s=outcome.wall_s, steps=outcome.steps, tool_calls=outcome.tool_calls,
                                  input_tokens=self.usage.input_tokens, output_tokens=self.usage.output_tokens,
                                  cached_tokens=self.usage.cached_tokens, cost_usd=outcome.cost_usd)
        self.emit(Event("finished", outcome.to_dict()))
        return outcome

    def _outcome(self, reason: str, message: str, report: VerifyReport | None = None,
                 output_dir: str | None = None) -> RunOutcome:
        status = {"verified": "verified", "cancelled": "cancelled", "error": "error"}.get(reason, "failed")
        return RunOutcome(run_id=self.run_id, status=status, stop_reason=reason, message=message, verify=report,
                          output_dir=output_dir, steps=self.steps, tool_calls=self.tool_calls, usage=self.usage,
                          cost_usd=self._cost(), wall_s=time.monotonic() - self._start,
                          kb_attached=list(self.kb_attached))

    def _cost(self) -> float | None:
        return cost_usd(self.model.name, self.usage.input_tokens, self.usage.cached_tokens, self.usage.output_tokens)

    def _check_budgets(self) -> None:
        b = self.budgets
        if self.ctx.cancel.is_set():
            raise _Stop("cancelled", "cancelled by the user")
        if self.steps >= b.max_steps:
            raise _Stop("budget_steps", f"step budget spent ({b.max_steps} model turns)")
        if self.tool_calls >= b.max_tool_calls:
            raise _Stop("budget_tool_calls", f"tool-call budget spent ({b.max_tool_calls} calls)")
        if self.usage.input_tokens + self.usage.output_tokens >= b.max_tokens:
            raise _Stop("budget_tokens", f"token budget spent ({b.max_tokens} tokens)")
        if time.monotonic() - self._start >= b.max_wall_s:
            raise _Stop("budget_wall", f"wall-time budget spent ({b.max_wall_s:.0f}s)")
        cost = self._cost()
        if b.max_cost_usd is not None and cost is not None and cost >= b.max_cost_usd:
            raise _Stop("budget_cost", f"money budget spent (${cost:.2f} of ${b.max_cost_usd:.2f})")

    def _step(self) -> None:
        self._check_budgets()
        self.steps += 1
        self.emit(Event("step_started", {"step": self.steps}))
        self._compact()
        turn = self._ask_model()
        self.messages.append(Message("assistant", turn.text, tool_calls=list(turn.tool_calls)))
        if turn.text:
            self.emit(Event("model_text", {"step": self.steps, "text": turn.text}))
        if not turn.tool_calls:
            self.text_only_turns += 1
            if self.text_only_turns >= self.budgets.max_text_only_turns:
                raise _Stop("gave_up", "the model stopped calling tools without finishing: "
                                       + (turn.text[:500] or "(no text)"))
            self.messages.append(Message("user", "Continue with tool calls. When the build is done, call "
                                                 "finish(status='built'); if it cannot be done, "
                                                 "finish(status='blocked') with the reason."))
            return
        self.text_only_turns = 0
        results = self._dispatch_all(turn.tool_calls)
        stop: _Stop | None = None
        for call, result in zip(turn.tool_calls, results, strict=True):
            stop = self._after_call(call, result) or stop
        if stop:
            raise stop

    def _ask_model(self) -> Turn:
        new = [m.to_dict() for m in self.messages[self._sent:]]
        request_hash = messages_hash([m.to_dict() for m in self.messages])
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["turn"] = self.model.complete(self.messages, self.toolset, cancel=self.ctx.cancel)
            except BaseException as e:  # noqa: BLE001 - handed to the loop's thread below
                box["error"] = e

        worker = threading.Thread(target=call, daemon=True, name="model-call")
        worker.start()
        while worker.is_alive():  # Ctrl-C must not wait for a slow provider
            worker.join(0.1)
            if self.ctx.cancel.is_set():
                raise _Stop("cancelled", "cancelled by the user during a model call")
        error = box.get("error")
        if error is not None:
            if self.trace:
                self.trace.model_call(self.run_id, step=self.steps, model=self.model.name, request_hash=request_hash,
                                      new_messages=new, response=None, text="", tool_calls=[], finish_reason="error",
                                      input_tokens=0, output_tokens=0, cached_tokens=0, latency_s=0.0,
                                      error=str(error))
            if isinstance(error, ProviderError):
                raise _Stop("provider_error", f"model provider error: {error}"
                            + (f" (HTTP {error.status})" if error.status and str(error.status) not in str(error)
                               else ""))
            raise error
        turn: Turn = box["turn"]
        self.usage += turn.usage
        self._sent = len(self.messages) + 1  # the assistant message appended next is in the response
        if self.trace:
            self.trace.model_call(self.run_id, step=self.steps, model=self.model.name, request_hash=request_hash,
                                  new_messages=new, response=turn.raw, text=turn.text,
                                  tool_calls=[c.__dict__ for c in turn.tool_calls], finish_reason=turn.finish_reason,
                                  input_tokens=turn.usage.input_tokens, output_tokens=turn.usage.output_tokens,
                                  cached_tokens=turn.usage.cached_tokens, latency_s=turn.latency_s)
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

    def _emit_call(self, call: ToolCall) -> None:
        self.emit(Event("tool_call", {"step": self.steps, "id": call.id, "name": call.name,
                                      "arguments": call.arguments}))

    def _dispatch(self, call: ToolCall) -> ToolResult:
        if self.tool_calls >= self.budgets.max_tool_calls:
            return ToolResult(ok=False, error_type="cancelled", message="not run: the tool-call budget is spent.")
        self.tool_calls += 1
        return self.toolset.dispatch(self.ctx, call.name, call.arguments)

    def _after_call(self, call: ToolCall, result: ToolResult) -> _Stop | None:
        """Record one result, attach knowledge, check progress; returns a stop for after the turn, if any."""
        stop: _Stop | None = None
        if call.name == FINISH.name and result.ok:
            stop = self._finish(result, call)  # the verifier's verdict replaces "finish requested"
        text = result.render()
        fingerprint = None
        is_build_command = call.name == "run_command" and "argv" in result.data and \
            Path(result.data["argv"][0]).name not in INSPECTION_TOOLS
        attached = result.data.get("kb") or []  # run_command attached them where the result was made
        self.kb_attached += [k["id"] for k in attached]
        if is_build_command and not result.ok:
            fingerprint = error_fingerprint(self._log_text(result, tail_lines=400) or result.message)
        if result.error_type == PERMISSION_DENIED:
            self.denials += 1
            if self.denials >= self.budgets.max_permission_denials and stop is None:
                stop = _Stop("permission_loop", f"{self.denials} calls were refused by the guards; the last: "
                                                f"{result.message[:300]}")
        if result.internal:
            stop = _Stop("error", f"internal error in tool {call.name}: {result.data.get('exception')}")
        changed = call.name in ("write_file", "edit_file")
        verdict = self.progress.observe(call_signature(call.name, call.arguments), result.ok, fingerprint,
                                        changed_files=changed)
        if verdict and verdict.startswith("stuck:") and stop is None:
            stop = _Stop("stuck", f"no progress: {verdict.removeprefix('stuck:')}")
        elif verdict and verdict.startswith("nudge:"):
            self._pending_nudge = verdict.removeprefix("nudge:")
        if self._pending_nudge and call.name != FINISH.name:
            text += (f"\n\n[crossbuild: no progress — {self._pending_nudge}. Try something different: read the full "
                     "log, apply the attached fix, or change the build files. Repeating it will end the run.]")
            self.emit(Event("nudge", {"step": self.steps, "why": self._pending_nudge}))
            self._pending_nudge = None
        row = 0
        if self.trace:
            row = self.trace.tool_call(self.run_id, step=self.steps, seq=self.tool_calls, call_id=call.id,
                                       name=call.name, raw_arguments=call.arguments, parsed=_parsed(call.arguments),
                                       result=result.to_dict(), fingerprint=fingerprint)
            for k in attached:
                self.trace.kb_attachment(self.run_id, row, k["id"], k["score"], k["how"])
        for k in attached:
            self.emit(Event("kb_attached", {"step": self.steps, "entry": k["id"], "title": k["title"]}))
        self.emit(Event("tool_result", {"step": self.steps, "id": call.id, "name": call.name, "ok": result.ok,
                                        "error_type": result.error_type, "summary": text.splitlines()[0][:200],
                                        "duration_s": result.duration_s}))
        self.messages.append(Message("tool", text, call_id=call.id, name=call.name, is_error=not result.ok,
                                     data=result.data))
        return stop

    def _log_text(self, result: ToolResult, tail_lines: int) -> str:
        log = result.data.get("log")
        if not log:
            return ""
        path = self.ctx.root / log
        try:
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - 256 * 1024))
                return "\n".join(f.read().decode(errors="replace").splitlines()[-tail_lines:])
        except OSError:
            return ""

    def _finish(self, result: ToolResult, call: ToolCall) -> _Stop | None:
        data = result.data
        if data["status"] == "blocked":
            return _Stop("gave_up", data["summary"])
        out_dir = data["output_dir"]
        report = verify(self.ctx.root / out_dir, self.ctx.target, toolchain=self.ctx.toolchain, box=self.ctx.sandbox,
                        rebuild_steps=replay_steps(self.ctx) or None)
        self.emit(Event("verify", {"step": self.steps, "ok": report.ok, "reasons": report.reasons[:10],
                                   "counts": report.counts, "output_dir": out_dir}))
        if report.ok:
            return _Stop("verified", data["summary"], report, out_dir)
        # not verified: the model gets the reasons (in place of "finish requested") and may continue
        result.ok = False
        result.error_type = "command_failed"
        result.message = "NOT VERIFIED:\n- " + "\n- ".join(report.reasons[:15])
        result.hint = "fix these and call finish again, or finish(status='blocked') if you cannot"
        result.data["verify"] = {"ok": False, "reasons": report.reasons[:30]}
        return None

    # ---- context ------------------------------------------------------------------------------------------------

    def _compact(self) -> None:
        """Keep the conversation within the model's context: old tool outputs shrink to their first line and the
        log path (the logs stay on disk). The latest results stay whole as long as the budget allows."""
        budget = self.budgets.context_chars
        total = sum(len(m.text) for m in self.messages)
        if total <= budget:
            return
        tool_messages = [m for m in self.messages if m.role == "tool"]
        for keep in (COMPACT_KEEP_RECENT, 2):
            for m in tool_messages[:-keep]:
                if total <= budget * 0.7:
                    return
                if not m.data.get("compacted") and len(m.text) > 300:
                    first = m.text.splitlines()[0][:200]
                    log = m.data.get("log")
                    before = len(m.text)
                    m.text = f"{first}\n[older output compacted" + (f"; full log: {log}]" if log else "]")
                    m.data = {**m.data, "compacted": True}
                    total -= before - len(m.text)


def _parsed(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except (json.JSONDecodeError, RecursionError):
        return None


__all__ = ["Agent", "RunOutcome", "INTERNAL"]
