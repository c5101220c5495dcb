"""What a long call is doing, and the switch that stops it: a `Watch` is handed to the work (the sandbox every
command runs in, the verifier, a workspace being prepared), which notes its phases and the counts it knows; whoever
started the call (an MCP client's progress token, the CLI's status line, the web page) receives the notes and can
set `cancel`. Notes are throttled here, once, so a build printing thousands of lines sends a note a second."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

EVERY_S = 1.0  # the same phase is noted at most this often; a new phase always goes through


@dataclass(frozen=True)
class Note:
    message: str  # the phase: "clean rebuild: cmake --build build", "test programs"
    done: int | None = None
    total: int | None = None

    def text(self) -> str:
        if self.done is not None and self.total:
            return f"{self.message}: {self.done} of {self.total}"
        return self.message


Sink = Callable[[Note], None]
NoteFn = Callable[[str, "int | None", "int | None"], None]  # Watch.note's shape, for work that only notes


class Watch:
    """One caller's view of the work: SINK receives the notes (none: they go nowhere), CANCEL stops it."""

    def __init__(self, cancel: threading.Event | None = None, sink: Sink | None = None):
        self.cancel = cancel if cancel is not None else threading.Event()
        self.sink = sink
        self._last: tuple[str, float] = ("", 0.0)
        self._lock = threading.Lock()
        # commands stopped by their time limit: how an outcome that may differ on a less busy machine is told apart
        self.time_limits_hit = 0

    def note(self, message: str, done: int | None = None, total: int | None = None) -> None:
        sink = self.sink
        if sink is None:
            return
        now = time.monotonic()
        with self._lock:
            same, at = self._last[0] == message, self._last[1]
            if same and now - at < EVERY_S and not (total and done == total):
                return
            self._last = (message, now)
        try:
            sink(Note(message[:200], done, total))
        except Exception:  # a client that went away must not break the work it watched
            pass

    def counter(self, message: str) -> Callable[[bytes], None]:
        """An output reader (Sandbox.run's on_output) that notes the counts build and test tools print: ninja's
        `[k/N]`, CMake makefiles' `[ 45%]`, CTest's and meson's `k/N Test #…` / `k/N name`."""
        return _CountReader(self, message)


# bounded digits: a build printing a 5000-digit "count" must not reach int()'s digit limit
_COUNT = re.compile(rb"^\s*\[\s*(\d{1,9})/(\d{1,9})\]|^\s*(\d{1,9})/(\d{1,9}) \S")
_PERCENT = re.compile(rb"^\[\s*(\d{1,3})%\]")


# a line that compiles or links one file, where the tool prints no count: automake's silent rules (`  CXX  x.lo`),
# or a compiler command line itself
_COMPILED = re.compile(rb"^\s{1,4}(CC|CXX|CCAS|CPPAS|OBJC|FC|F77)(LD)?\s+\S|\s-c\s")
HEARTBEAT_S = 10.0  # a tool that prints no count is noted this often with what it did so far


class _CountReader:
    def __init__(self, watch: Watch, message: str):
        self.watch, self.message, self.tail = watch, message, b""
        self.compiled, self.lines, self.started = 0, 0, time.monotonic()
        self.counted, self.beat = False, self.started

    def __call__(self, chunk: bytes) -> None:
        if self.watch.sink is None:
            return
        lines = (self.tail + chunk).split(b"\n")
        self.tail = lines.pop()[-4096:]
        self.lines += len(lines)
        self.compiled += sum(1 for line in lines if _COMPILED.search(line[:4096]))
        if not self._count(lines) and not self.counted and time.monotonic() - self.beat >= HEARTBEAT_S:
            self.beat = time.monotonic()  # a make of hand-written or automake rules: what it did so far
            did = f"{self.compiled} files compiled" if self.compiled else f"{self.lines} lines of output"
            self.watch.note(f"{self.message} ({did} in {self.beat - self.started:.0f} s)")

    def _count(self, lines: list[bytes]) -> bool:
        for line in reversed(lines[-50:]):  # the latest count in the chunk is the one to show
            m = _COUNT.match(line)
            if m:
                done, total = (int(g) for g in (m.group(1, 2) if m.group(1) else m.group(3, 4)))
                if 0 < done <= total:
                    self.watch.note(self.message, done, total)
                    self.counted = True
                    return True
            m = _PERCENT.match(line)
            if m and int(m.group(1)) <= 100:
                self.watch.note(self.message, int(m.group(1)), 100)
                self.counted = True
                return True
        return False
