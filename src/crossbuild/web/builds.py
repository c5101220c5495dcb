"""Builds started from the web page: each is `session.build` in a thread of its own with its own cancel event and
workspace, so none blocks or sees another; the page watches them through the trace, as it watches any run."""

from __future__ import annotations

import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.agent import session
from crossbuild.agent.events import Event
from crossbuild.agent.loop import RunOutcome
from crossbuild.env import sandbox, workspace
from crossbuild.foundation.settings import Resolved
from crossbuild.foundation.targets import UnknownTargetError, parse_target
from crossbuild.models import ModelConfig, ModelConfigError, make_model
from crossbuild.tools.paths import HostRoots, OutsideRoots
from crossbuild.trace.store import new_run_id

MODEL_PREFIXES = ("openai:", "anthropic:")  # besides planner and auto; replay: names a host file, so the page can't


class Refused(ValueError):
    """A build the page asked for that cannot start; the message says what to change."""


@dataclass
class WebBuild:
    run_id: str
    source: str
    target: str
    model: str
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    outcome: RunOutcome | None = None
    error: str | None = None  # why it ended before or outside the agent (a source that cannot be prepared)
    progress: str | None = None  # what the running call is doing now (the trace has calls only once they end)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def _follow(build: WebBuild, e: Event) -> None:
    if e.kind == "progress":
        build.progress = e.data["message"]
    elif e.kind in ("tool_result", "finished"):
        build.progress = None


class Builds:
    """The builds this server started, by run id. At most MAX_RUNNING at once: each one compiles."""

    def __init__(self, *, settings: Resolved, roots: HostRoots, runs_dir: Path, db: Path,
                 sandbox_backend: str = "auto", max_running: int = 4):
        self.settings = settings
        self.roots = roots
        self.runs_dir = runs_dir.resolve()
        self.db = db
        self.sandbox_backend = sandbox_backend
        try:
            sandbox.require(sandbox_backend)
            self.no_sandbox: str | None = None
        except sandbox.NoSandbox as e:  # the page still shows runs; it starts no build
            self.no_sandbox = str(e)
        self.max_running = max_running
        self._builds: dict[str, WebBuild] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> WebBuild | None:
        with self._lock:
            return self._builds.get(run_id)

    def start(self, source: str, target: str, model: str | None = None) -> WebBuild:
        """Check what the page sent, then start the build in its own thread. Raises Refused."""
        source, model = (source or "").strip(), (model or "").strip() or self.settings.settings.model
        if self.no_sandbox:
            raise Refused(self.no_sandbox)
        if not source:
            raise Refused("give a source: a folder under the server's roots, a tarball, a git URL or debian:NAME")
        try:
            source = self.roots.source(source)
        except OutsideRoots as e:
            raise Refused(f"{e}; the user can add folders with `crossbuild serve --root DIR`") from None
        except ValueError as e:
            raise Refused(str(e)) from None
        try:
            t = parse_target(target or "")
        except UnknownTargetError as e:
            raise Refused(str(e)) from None
        if model not in ("planner", "auto") and not model.startswith(MODEL_PREFIXES):
            raise Refused(f"model {model!r}: use planner, auto, openai:MODEL or anthropic:MODEL (the server's "
                          "--base-url and keys apply)")
        config = ModelConfig(spec=model, base_url=self.settings.settings.base_url)
        try:
            make_model(config)  # a missing key is said now, not after the workspace was made
        except ModelConfigError as e:
            raise Refused(str(e)) from None
        run_id = new_run_id()
        root = self.runs_dir / workspace.safe_label(f"{workspace.label_for(source)}-{t.name}-{run_id}")
        req = session.request_for(self.settings, source, t, model=config, db=self.db, workspace_dir=root,
                                  sandbox_backend=self.sandbox_backend)
        build = WebBuild(run_id=run_id, source=source, target=t.name, model=model)
        with self._lock:
            if sum(b.running for b in self._builds.values()) >= self.max_running:
                raise Refused(f"{self.max_running} builds are running: wait for one to end or cancel one "
                              "(crossbuild serve --max-builds N allows more)")
            build.thread = threading.Thread(target=self._run, args=(build, req), name=f"build-{run_id}",
                                            daemon=True)
            self._builds[run_id] = build
            build.thread.start()
        return build

    def cancel(self, run_id: str) -> bool:
        """Ask a running build to stop (the agent kills its command and records it cancelled)."""
        build = self.get(run_id)
        if build is None or not build.running:
            return False
        build.cancel.set()
        return True

    def shutdown(self, wait_s: float = 30.0) -> None:
        with self._lock:
            builds = list(self._builds.values())
        for b in builds:
            b.cancel.set()
        for b in builds:
            if b.thread is not None:
                b.thread.join(wait_s)

    def _run(self, build: WebBuild, req: session.BuildRequest) -> None:
        try:
            build.outcome, _ = session.build(req, cancel=build.cancel, run_id=build.run_id,
                                             on_event=lambda e: _follow(build, e))
        except (workspace.SourceError, ModelConfigError) as e:
            build.error = str(e)
        except Exception as e:  # a bug: the page says so, the traceback goes to the server's log
            build.error = f"internal error: {type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
