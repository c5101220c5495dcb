"""One MCP tool call as it runs: its work in a worker thread, what it is doing sent as progress notifications,
a client's cancel stopping it (and its process tree), and the workspace's logs published as resource events while
it runs."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated

from crossbuild import mcp_resources
from crossbuild.foundation.progress import Note, Watch
from crossbuild.tools.base import ToolResult
from crossbuild.tools.context import RunContext

CANCEL_WAIT_S = 30.0  # a cancelled call's work is waited for this long (its process tree is killed at once)


async def watched(ctx: Any, watch: Watch, work: Callable[[], ToolResult], *, logs_of: RunContext | None = None,
                   bus: InMemorySubscriptionBus | None = None) -> ToolResult:
    """WORK in a worker thread. Its progress notes go to the client as `notifications/progress` for this request
    (when the request carries a progress token; the SDK sends nothing otherwise), numbered so they only grow. A
    cancelled request (`notifications/cancelled`) sets the watch's cancel: the running command's process tree is
    killed and no other starts; the work is waited for, so the request ends with nothing left running. Meanwhile
    LOGS_OF's logs are watched: each that grows is a resource update on BUS, a new one a list change."""
    session = getattr(ctx, "session", None)
    sent = itertools.count(1)
    ended, cancelled_here = threading.Event(), threading.Event()
    loop = anyio.lowlevel.current_token()  # notes come from any thread (a command's output is read on its own)

    def send(note: Note) -> None:
        anyio.from_thread.run(session.report_progress, next(sent), None, note.text(), token=loop)

    def run() -> ToolResult:
        try:
            return work()
        finally:
            if cancelled_here.is_set():  # only the call that cancelled lifts it, once its work has stopped
                watch.cancel.clear()
            ended.set()

    with anyio.move_on_after(CANCEL_WAIT_S):  # a call cancelled just before is still stopping its work
        while watch.cancel.is_set():
            await anyio.sleep(0.05)
    watch.sink = send if session is not None else None
    try:
        if logs_of is None or bus is None:
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_publish_logs, logs_of, bus, ended)
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        if watch.sink is send:
            watch.sink = None
        cancelled_here.set()
        watch.cancel.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WAIT_S):
            while not ended.is_set():
                await anyio.sleep(0.05)
        if ended.is_set():  # it had ended before the cancel was set
            watch.cancel.clear()
        raise
    finally:
        if watch.sink is send:
            watch.sink = None


LOG_POLL_S = 1.0


async def _publish_logs(ctx: RunContext, bus: InMemorySubscriptionBus, ended: threading.Event) -> None:
    """Until ENDED (and once more after): each log of CTX's workspace that grew is a ResourceUpdated event, and
    new logs a ResourcesListChanged."""
    sizes = await anyio.to_thread.run_sync(mcp_resources.logs, ctx)
    while True:
        last = ended.is_set()
        with anyio.move_on_after(LOG_POLL_S):
            while not ended.is_set():
                await anyio.sleep(0.05)
        now = await anyio.to_thread.run_sync(mcp_resources.logs, ctx)
        for uri, size in now.items():
            if size != sizes.get(uri):
                await bus.publish(ResourceUpdated(uri=uri))
        if now.keys() - sizes.keys():
            await bus.publish(ResourcesListChanged())
        sizes = now
        if last:
            return
