"""Events a run emits (step started, model text, tool call, tool result, KB attached, verify, finished); the CLI
renders them now, the web page later."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crossbuild.foundation.progress import Note


@dataclass
class Event:
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    pass


def progress(note: Note, step: int) -> Event:
    """What a long call is doing (foundation.progress), as the renderers take it; STEP 0 is before the first."""
    return Event("progress", {"step": step, "message": note.text(), "phase": note.message, "done": note.done,
                              "total": note.total})


def outcome_from(stdout: str) -> dict[str, Any] | None:
    """The outcome `crossbuild build --json` ends with (its last {"event": "outcome"} line)."""
    found = None
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "outcome":
            found = event.get("data")
    return found
