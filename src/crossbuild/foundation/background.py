"""Waiting for a blocking call without becoming deaf: the call runs in a daemon thread while the caller wakes every
few tenths of a second, so Ctrl-C and a cancel flag reach it however long a provider or a build takes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Abandoned(Exception):
    """`until` turned true before the call returned; the thread is left to finish on its own."""


def call_in_thread(fn: Callable[[], T], *, name: str, until: Callable[[], bool] | None = None,
                   on_interrupt: Callable[[], None] | None = None, poll_s: float = 0.1) -> T:
    """FN's result, or its exception re-raised here. With ON_INTERRUPT, a Ctrl-C calls it (e.g. to set a cancel
    flag the call watches) and keeps waiting for the call to wind down; without, the KeyboardInterrupt propagates."""
    box: dict[str, object] = {}
    done = threading.Event()  # set by the worker itself: a Ctrl-C inside Thread.join() can leave is_alive() False
    # while the call still runs (CPython's join is not interrupt-safe), and the result was then read before it existed

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e
        finally:
            done.set()

    worker = threading.Thread(target=work, daemon=True, name=name)
    worker.start()
    while not done.is_set():
        try:
            done.wait(poll_s)
        except KeyboardInterrupt:
            if on_interrupt is None:
                raise
            on_interrupt()  # and keep waiting: a second Ctrl-C says it again, the call winds down on its own
            continue
        if until is not None and not done.is_set() and until():
            raise Abandoned
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
