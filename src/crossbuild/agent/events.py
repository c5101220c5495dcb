"""Events a run emits (step started, model text, tool call, tool result, KB attached, verify, finished); the CLI
renders them now, the web page later."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Event:
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    pass
