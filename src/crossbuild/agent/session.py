"""One `crossbuild build`: prepare the workspace, set up the RunContext, the model and the trace, run the agent.
Shared by the CLI and the evaluation harness."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossbuild import kb
from crossbuild.agent import events
from crossbuild.agent.budgets import Budgets
from crossbuild.agent.dependency_builder import DependencyBuilder
from crossbuild.agent.events import Event, EventSink, ignore
from crossbuild.agent.graph import GraphAgent
from crossbuild.agent.loop import Agent, RunOutcome
from crossbuild.agent.resume import NotResumable, Replay
from crossbuild.env import sandbox, workspace
from crossbuild.env.toolchain import default_prefix
from crossbuild.foundation import safefs
from crossbuild.foundation.progress import Watch
from crossbuild.foundation.settings import Resolved
from crossbuild.foundation.targets import Target, parse_target
from crossbuild.models import ModelConfig, ScriptedModel, make_model
from crossbuild.tools.context import RunContext
from crossbuild.trace import runs as trace_runs
from crossbuild.trace import store as trace_store
from crossbuild.trace.store import Trace, default_path, new_run_id


@dataclass
class BuildRequest:
    source: str
    target: Target
    model: ModelConfig = field(default_factory=ModelConfig)
    budgets: Budgets = field(default_factory=Budgets)
    db: Path | None = None
    workspace_dir: Path | None = None
    runs_dir: Path = Path("crossbuild-runs")
    jobs: int | None = None
    keep: bool = False
    sandbox_backend: str = "auto"
    prefix: Path | None = None
    dep_sources: dict[str, str] = field(default_factory=dict)  # name -> local source the user vouches for
    keep_features: bool = False  # never drop an optional feature whose dependency cannot be had
    extra_args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "cmake" | "meson" | "configure" -> args
    passthrough: dict[str, str] = field(default_factory=dict)  # the user's variables their settings allow in builds
    source_hints: bool = True  # False: the source's packaging (debian/) is removed before the build
    keep_libc: bool = False  # a musl target that lacks what the project needs ends the build, no glibc build instead
    libc_switch: dict[str, str] | None = None  # set on the glibc build that follows a musl one (build)
    copy_from: Path | None = None  # the folder a new workspace copies instead of SOURCE (the glibc follow-up's)


def request_for(resolved: Resolved, source: str, target: Target, *, model: ModelConfig | None = None,
                **fields: Any) -> BuildRequest:
    """The request the merged settings make for SOURCE and TARGET (budgets, jobs, dependency sources, features,
    the target's extra arguments, the allowed variables); FIELDS are what the face itself decides."""
    s = resolved.settings
    return BuildRequest(source=source, target=target, budgets=Budgets(**s.budgets.model_dump()), jobs=s.jobs,
                        dep_sources=s.dependencies, keep_features=s.keep_features, keep_libc=s.keep_libc,
                        extra_args=resolved.target_args(target.name), passthrough=resolved.passthrough_env(),
                        model=model or ModelConfig(spec=s.model, base_url=s.base_url), **fields)


def build(req: BuildRequest, *, on_event: EventSink = ignore, cancel: threading.Event | None = None,
          run_id: str | None = None, replay: Replay | None = None) -> tuple[RunOutcome, RunContext]:
    """Raises workspace.SourceError / ModelConfigError before anything runs when the request cannot start.
    With REPLAY (see resume), the run continues in its own workspace instead of a new one. A musl build that ended
    on what musl lacks (glibc's execinfo.h, backtrace...) is followed by a build for the same machine with glibc,
    unless the request keeps the libc; the outcome says so."""
    outcome, ctx = _build_once(req, on_event=on_event, cancel=cancel, run_id=run_id, replay=replay)
    because = [] if req.keep_libc or (cancel is not None and cancel.is_set()) else _musl_lacks(req, outcome)
    glibc = req.target.glibc_variant
    if not because or glibc is None or outcome.ok:
        return outcome, ctx
    switch = {"from": req.target.name, "to": glibc.name, "because": ", ".join(because),
              "first_run_id": outcome.run_id}
    on_event(Event("note", {"message": f"{req.target.name} ended on what musl lacks ({switch['because']}): "
                                       f"building for {glibc.name} instead (--keep-libc stops here)"}))
    # the same source as the musl build had, from its prepared copy: never SOURCE again (a resumed run's SOURCE is
    # stored data, and a download would be fetched twice)
    glibc_req = dataclasses.replace(req, target=glibc, libc_switch=switch, copy_from=ctx.root / workspace.PRISTINE
                                    / "src", workspace_dir=_beside(req.workspace_dir, glibc),
                                    prefix=_beside(req.prefix, glibc))
    second, ctx = _build_once(glibc_req, on_event=on_event, cancel=cancel, run_id=None, replay=None)
    second.message = (f"built for {glibc.name}, not {req.target.name}: musl lacks what the project needs "
                      f"({switch['because']}; run {outcome.run_id}). " + second.message)
    return second, ctx


def _musl_lacks(req: BuildRequest, outcome: RunOutcome) -> list[str]:
    """The knowledge-base entries naming something musl lacks (their action: use_glibc) attached to the run's last
    command, when that command failed: the failure the run ended on, not one a later fix got past."""
    if req.target.libc != "musl" or outcome.ok:
        return []
    conn = trace_store.connect(req.db or default_path())
    try:
        row = conn.execute("SELECT result_json FROM tool_calls WHERE run_id=? AND name='run_command' "
                           "ORDER BY id DESC LIMIT 1", (outcome.run_id,)).fetchone()
    finally:
        conn.close()
    result = json.loads(row[0]) if row and row[0] else {}
    if result.get("ok", True):
        return []
    return [k["id"] for k in (result.get("data") or {}).get("kb") or []
            if any(a.get("kind") == "use_glibc" for a in k.get("actions") or [])]


def _beside(path: Path | None, target: Target) -> Path | None:
    """A folder next to PATH for TARGET's build (the musl build's workspace and prefix stay as they are)."""
    return path.with_name(f"{path.name}-{target.name}") if path is not None else None


def _build_once(req: BuildRequest, *, on_event: EventSink, cancel: threading.Event | None, run_id: str | None,
                replay: Replay | None) -> tuple[RunOutcome, RunContext]:
    model = make_model(req.model, on_retry=lambda n, t, d: on_event(Event(
        "provider_retry", {"attempt": n, "reason": t.reason, "delay_s": round(d, 2)})))
    status = sandbox.require(req.sandbox_backend)  # NoSandbox before anything is made
    if status.backend == "none":  # the first thing a run says, in every face
        on_event(Event("unsandboxed", {"message": sandbox.UNSANDBOXED}))
    # what is prepared before the first step (the workspace, zig's runtime for a target's first use): said, not
    # silent; the agent takes the watch over for its steps
    watch = Watch(cancel=cancel, sink=lambda note: on_event(events.progress(note, 0)))
    if replay is None:
        root = req.workspace_dir or workspace.new_root(req.runs_dir, req.source, req.target.name)
        ws = workspace.prepare(str(req.copy_from or req.source), root, source_hints=req.source_hints,
                               note=watch.note)
        left_out = list(ws.left_out)
        on_event(Event("workspace_prepared", {"root": str(ws.root), "left_out": left_out}))
    else:
        ws = workspace.Workspace(root=req.workspace_dir or Path())
        left_out = []
    trace = Trace(req.db or default_path(), listener=_live_export(on_event))
    try:
        builder = DependencyBuilder(trace=trace, on_event=on_event, user_sources=req.dep_sources,
                                    project=_debian_name(req.source))
        ctx = RunContext.create(ws.root, req.target, prefix=req.prefix, sandbox_backend=req.sandbox_backend,
                                kb=kb.load(), jobs=req.jobs, watch=watch, dependency_builder=builder,
                                keep_features=req.keep_features, extra_args=req.extra_args,
                                passthrough=req.passthrough)
        if isinstance(model, ScriptedModel):
            model.rebase(ctx.root)
        config = {"model": req.model.snapshot(), "budgets": req.budgets.to_dict(), "jobs": ctx.jobs,
                  "sandbox": ctx.sandbox.backend, "prefix": str(ctx.prefix), "left_out": left_out,
                  "dep_sources": req.dep_sources, "keep_features": req.keep_features,
                  "extra_args": req.extra_args, "passthrough": sorted(req.passthrough),
                  "source_hints": req.source_hints, "keep_libc": req.keep_libc,
                  **({"libc_switch": req.libc_switch} if req.libc_switch else {})}  # names only, never values
        engine = GraphAgent if req.model.engine == "langgraph" else Agent
        agent = engine(model, ctx, source=req.source, budgets=req.budgets, trace=trace, on_event=on_event,
                      config=config, run_id=run_id or new_run_id(), replay=replay)
        outcome = agent.run()
        outcome.libc_switch = req.libc_switch
    finally:
        trace.close()
        if trace.listener is not None:
            trace.listener.close()
            if trace.listener_error:
                on_event(Event("note", {"message": f"OpenTelemetry export failed: {trace.listener_error}"}))
    if not req.keep:  # the clean-rebuild copy and the zig cache layer are bulk; the build stays for inspection
        safefs.remove_tree(ctx.root, Path(".xbuild", "rebuild"))
        scratch = ctx.toolchain.scratch.relative_to(ctx.root)
        try:
            safefs.remove_tree(ctx.root, scratch / "zig")
        except safefs.UnsafePath:  # the build replaced its scratch folder by a link: remove the link, nothing else
            safefs.remove_tree(ctx.root, scratch)
    return outcome, ctx


def _live_export(on_event: EventSink):
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, the run's spans go to that collector as it runs (the standard OTEL_*
    variables configure the exporter; tool arguments and results only with
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    from crossbuild.trace import otel

    try:
        content = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() == "true"
        return otel.LiveExport(include_content=content)
    except otel.OtelUnavailable as e:
        on_event(Event("note", {"message": f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but {e}"}))
        return None


def _debian_name(source: str) -> str | None:
    """debian:NAME[=VERSION] -> NAME: the source package a dependency must not turn out to be."""
    return source.removeprefix("debian:").split("=", 1)[0] if source.startswith("debian:") else None


def resume(run_id: str, db: Path | None = None, *, resolved: Resolved, sandbox_backend: str,
           prefix: Path | None = None, model: ModelConfig | None = None, on_event: EventSink = ignore,
           cancel: threading.Event | None = None) -> tuple[RunOutcome, RunContext]:
    """Continue an interrupted run in its workspace: finished calls are replayed from the trace, the rest run.
    The stored run is data, not settings: every setting that decides what a build or a model may reach (sandbox,
    prefix, base URL, dependency sources, passed-through variables, budgets) comes from RESOLVED and the command
    line as for a new run; the record gives only the workspace, source, target and the model's name, each checked.
    A stored value that differs from what is used now is said once (an event). Raises NotResumable."""
    path = db or default_path()
    conn = trace_store.connect(path)
    try:
        rec = trace_runs.recorded(conn, run_id)
    finally:
        conn.close()
    if rec is None:
        raise NotResumable(f"no single run in {path} matches {run_id!r}: see crossbuild runs list")
    replay = Replay.of(rec)
    root = Path(rec.run["workspace"] or "")
    if not root.is_absolute() or not workspace.is_workspace(root):
        raise NotResumable(f"run {rec.run['id']}'s workspace {root} is gone (or is no crossbuild workspace): it "
                           "cannot be continued")
    try:
        target = parse_target(rec.run["target"] or "")
    except ValueError as e:
        raise NotResumable(f"run {rec.run['id']} names a target crossbuild does not know: {e}") from None
    cfg = json.loads(rec.run["config_json"] or "{}")
    cfg = cfg if isinstance(cfg, dict) else {}
    stored_model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    if model is None:
        spec = str(stored_model.get("spec") or "planner")
        if spec not in ("planner", "auto") and not spec.startswith(("openai:", "anthropic:")):
            raise NotResumable(f"run {rec.run['id']} was made with model {spec[:80]!r}: pass --model to resume it")
        kept = {k: stored_model[k] for k in ("strict", "parallel_tool_calls", "tool_choice", "temperature", "seed",
                                             "engine") if k in stored_model}
        try:
            model = ModelConfig(spec=spec, base_url=resolved.settings.base_url, **kept)
        except TypeError as e:
            raise NotResumable(f"run {rec.run['id']}'s model settings cannot be read ({e}): pass --model") from None
    req = request_for(resolved, rec.run["source"] or "", target, model=model, db=path, workspace_dir=root,
                      sandbox_backend=sandbox_backend, prefix=prefix, source_hints=bool(cfg.get("source_hints", True)))
    if isinstance(cfg.get("libc_switch"), dict):
        req.libc_switch = {str(k): str(v) for k, v in cfg["libc_switch"].items()}
    differs = _not_taken(cfg, req, stored_model)
    on_event(Event("resuming", {"run_id": rec.run["id"], "workspace": str(root), "turns": len(replay.turns),
                                "calls": len(replay.results), "not_taken": differs}))
    return build(req, on_event=on_event, cancel=cancel, run_id=rec.run["id"], replay=replay)


def _not_taken(stored: dict[str, Any], req: BuildRequest, stored_model: dict[str, Any]) -> list[str]:
    """The stored run's security-relevant settings that the resumed run does not use, for a person to re-give."""
    now = {"sandbox": sandbox.require(req.sandbox_backend).backend,
           "prefix": str((req.prefix or default_prefix(req.target)).resolve()), "dep_sources": req.dep_sources,
           "passthrough": sorted(req.passthrough), "base_url": req.model.base_url}
    before = {"sandbox": stored.get("sandbox"), "prefix": stored.get("prefix"),
              "dep_sources": stored.get("dep_sources") or {}, "passthrough": stored.get("passthrough") or [],
              "base_url": stored_model.get("base_url")}
    said = []
    for key, value in before.items():
        if value and value != now[key]:
            said.append(f"{key} was {json.dumps(value, default=str)[:200]}, now {json.dumps(now[key], default=str)}")
    return said
