"""Resuming an interrupted run. Its recorded model turns and tool results are replayed in order, so the
conversation, the planner's state and the no-progress checks come back as they were; the first call without a
recorded result (the one the process died in) runs for real, as does everything after it. Nothing that finished
runs twice: the workspace already holds what it did."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from crossbuild.models.base import Model, ToolCall, Turn, Usage
from crossbuild.tools.base import ErrorType, ToolResult
from crossbuild.trace.runs import Recorded
from crossbuild.trace.store import canonical_arguments

RESUMABLE = ("interrupted", "cancelled")


class NotResumable(ValueError):
    """The run cannot be resumed; the message says why."""


@dataclass
class Replay:
    turns: list[Turn]
    results: dict[tuple[int, str], tuple[str, str, ToolResult]]  # (step, call id) -> name, arguments, result
    usage: Usage
    elapsed_s: float
    replayed_turns: int = 0
    replayed_calls: int = 0
    diverged: str | None = None
    _replayed: set[int] = field(default_factory=set)  # id() of the results handed out

    @classmethod
    def of(cls, rec: Recorded) -> Replay:
        status = rec.run["status"]
        if status not in RESUMABLE:
            raise NotResumable(f"run {rec.run['id']} is {status}: only an interrupted or cancelled run can be "
                               "resumed" + (" (it is still running)" if status == "running" else ""))
        turns, usage = [], Usage()
        for t in rec.turns:
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                     for c in json.loads(t["tool_calls_json"] or "[]")]
            u = Usage(t["input_tokens"] or 0, t["output_tokens"] or 0, t["cached_tokens"] or 0,
                      t["cache_write_tokens"] or 0)
            usage += u
            turns.append(Turn(text=t["text"] or "", tool_calls=calls, usage=u,
                              finish_reason="tool_calls" if calls else "stop"))
        results = {}
        for c in rec.calls:
            result = _result(c["result_json"], c["fingerprint"])
            if result.error_type != ErrorType.CANCELLED:  # cancelled half-way (Ctrl-C): it did not finish, runs again
                results[(c["step"], c["call_id"])] = (c["name"], canonical_arguments(c["raw_arguments"]), result)
        return cls(turns=turns, results=results, usage=usage, elapsed_s=rec.elapsed_s)

    @property
    def replaying(self) -> bool:
        return bool(self.turns)

    def turn(self, model: Model, ask: Callable[[], Turn]) -> tuple[Turn, bool]:
        """The next turn and whether it is the recorded one. A model whose turns follow from the results it has
        been shown (the planner) is asked again, which rebuilds its state; if it now answers differently, the
        replay ends there and its new turn is live. Any other model (an LLM) is given its recorded turn."""
        recorded = self.turns.pop(0)
        if not getattr(model, "rebuilds_state", False):
            self.replayed_turns += 1
            return recorded, True
        live = ask()
        if _calls(live) == _calls(recorded):
            self.replayed_turns += 1
            return recorded, True
        self.diverge(f"the model answered step {self.replayed_turns + 1} differently this time")
        return live, False

    def result_for(self, step: int, call: ToolCall) -> ToolResult | None:
        """The recorded result of this call, or None when it must run (it never finished, or the replay ended)."""
        entry = self.results.pop((step, call.id), None)
        if entry is None:
            return None
        name, arguments, result = entry
        if (name, arguments) != (call.name, canonical_arguments(call.arguments)):
            self.diverge(f"call {call.id} was {name} with other arguments in the record")
            return None
        self.replayed_calls += 1
        self._replayed.add(id(result))
        return result

    def is_replayed(self, result: ToolResult) -> bool:
        return id(result) in self._replayed

    def diverge(self, why: str) -> None:
        self.diverged = why
        self.turns.clear()
        self.results.clear()


def _calls(turn: Turn) -> list[tuple[str, str]]:
    return [(c.name, canonical_arguments(c.arguments)) for c in turn.tool_calls]


def _result(result_json: str, fingerprint: str | None) -> ToolResult:
    d = json.loads(result_json or "{}")
    error = d.get("error_type")
    return ToolResult(ok=bool(d.get("ok")), message=d.get("message") or "", hint=d.get("hint"),
                      error_type=ErrorType(error) if error else None, data=d.get("data") or {},
                      duration_s=d.get("duration_s") or 0.0, fingerprint=fingerprint)
