"""A model that plays back scripted turns: for tests, and to replay a recorded run from the trace."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from crossbuild.models.base import Message, ToolCall, Turn, Usage
from crossbuild.tools.base import Toolset
from crossbuild.trace import runs
from crossbuild.trace import store as trace_store


class ScriptedModel:
    rebuilds_state = True  # a resumed run plays its turns through again, in order
    def __init__(self, turns: list[Turn], name: str = "scripted", workspace: str | None = None):
        self.turns = list(turns)
        self.name = name
        self.workspace = workspace  # where the recorded run worked; rebase() moves its paths to a new workspace
        self.requests: list[list[Message]] = []  # what the loop sent, for assertions

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        self.requests.append(list(messages))
        if not self.turns:
            return Turn(text="(the script has no more turns)", usage=Usage())
        return self.turns.pop(0)

    def rebase(self, new_root: str | Path) -> None:
        """Absolute paths into the recorded run's workspace now point into NEW_ROOT."""
        if not self.workspace or str(new_root) == self.workspace:
            return
        old, new = json.dumps(self.workspace)[1:-1], json.dumps(str(new_root))[1:-1]
        for turn in self.turns:
            for call in turn.tool_calls:
                call.arguments = call.arguments.replace(old, new)
        self.workspace = str(new_root)

    def assert_complete(self) -> None:
        assert not self.turns, f"{len(self.turns)} scripted turns were never used"

    @classmethod
    def from_trace(cls, db_path: str | Path, run_id: str) -> ScriptedModel:
        """The model turns of a recorded run, in order: replaying them reproduces its tool calls."""
        db = trace_store.connect(db_path)
        try:
            rows, ws = runs.model_turns(db, run_id)
        finally:
            db.close()
        if not rows:
            raise ValueError(f"run {run_id} has no recorded model calls in {db_path}")
        turns = [Turn(text=text or "", tool_calls=[ToolCall(**c) for c in json.loads(calls or "[]")])
                 for text, calls in rows]
        return cls(turns, name=f"replay:{run_id}", workspace=ws)
