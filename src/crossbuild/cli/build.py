"""`crossbuild build`: the settings merged, the agent run for each target, its events rendered live."""

from __future__ import annotations

import functools
import importlib.util
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import typer
from rich.markup import escape

from crossbuild.agent import session
from crossbuild.agent.loop import RunOutcome
from crossbuild.agent.resume import NotResumable
from crossbuild.cli.common import (
    below_required,
    check_required,
    console,
    dep_sources,
    err,
    fail,
    load_settings,
    open_trace,
    print_report,
    require_sandbox,
    target_from,
)
from crossbuild.cli.progress import MODES, renderer
from crossbuild.env import sandbox, workspace
from crossbuild.foundation.background import call_in_thread
from crossbuild.models import ModelConfig, ModelConfigError
from crossbuild.tools.context import RunContext

app = typer.Typer()


@app.command("build")
def build_command(
    source: str = typer.Argument(None, help="Folder, tarball, git URL or debian:NAME[=VERSION]."),
    target: list[str] = typer.Option(None, "--target", "-t", help="Repeatable; default: `targets` from the settings "
                                     "(crossbuild config show)."),
    model: str = typer.Option(None, "--model", "-m",
                              help="planner (default) | auto | openai:MODEL | anthropic:MODEL | replay:DB#RUN_ID"),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server (DeepSeek, vLLM, Ollama, "
                                                          "llama.cpp); default $OPENAI_BASE_URL."),
    max_steps: int = typer.Option(None, "--max-steps", min=1, help="Model turns (default 60)."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="Parallel build jobs (default: all cores)."),
    keep: bool = typer.Option(False, "--keep", help="Also keep the clean-rebuild copy of the workspace."),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="Run folder (default ./crossbuild-runs/...)."),
    prefix: Path = typer.Option(None, "--prefix", help="Per-target dependency prefix (default: shared cache)."),
    db: Path = typer.Option(None, "--db", help="Trace database (default ~/.local/share/crossbuild/runs.db)."),
    sandbox_backend: str = typer.Option(None, "--sandbox", help="auto (default): bubblewrap, and no build without "
                                        "it | bubblewrap | none: no isolation, by your choice."),
    strict: bool = typer.Option(False, "--strict", help="OpenAI strict tool schemas.", rich_help_panel="Model"),
    tool_choice: str = typer.Option("auto", "--tool-choice", help="auto | required | none | TOOL",
                                    rich_help_panel="Model"),
    parallel: bool = typer.Option(None, "--parallel-tool-calls/--no-parallel-tool-calls", rich_help_panel="Model"),
    temperature: float = typer.Option(None, "--temperature", rich_help_panel="Model"),
    seed: int = typer.Option(None, "--seed", rich_help_panel="Model"),
    dep_source: list[str] = typer.Option([], "--dep-source", help="NAME=PATH: build dependency NAME from this "
                                         "local folder or tarball (repeatable). Only you can name such paths; the "
                                         "agent and builds can only ask for names."),
    keep_features: bool = typer.Option(None, "--keep-features/--drop-features", help="Whether a dependency that "
                                       "cannot be cross-built ends the build, instead of the optional feature that "
                                       "needs it being turned off (default: dropped)."),
    keep_libc: bool = typer.Option(None, "--keep-libc/--switch-libc", help="Whether a musl build that ends on "
                                   "what musl lacks (glibc's execinfo.h, backtrace...) stays failed, instead of the "
                                   "same machine's glibc target being built next and reported (default: built)."),
    config: Path = typer.Option(None, "--config", help="Settings file to use instead of the nearest crossbuild.toml."),
    no_config: bool = typer.Option(False, "--no-config", help="Read no settings file (options and CROSSBUILD_* "
                                   "variables still apply)."),
    progress: str = typer.Option("auto", "--progress", help="auto | tty | plain | json: how the run is shown as it "
                                 "happens (auto: tty at a terminal, plain in a log)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --progress json: one JSON object per event (JSON "
                                 "Lines), the last one per target {\"event\": \"outcome\", ...}."),
    engine: str = typer.Option("native", "--engine", help="native | langgraph: the agent's control flow (the "
                               "tools, guards, budgets and verification are the same)."),
    source_hints: bool = typer.Option(True, "--source-hints/--no-source-hints", help="Whether the source's "
                                      "packaging (debian/, quilt's .pc/) stays in the workspace for the agent to "
                                      "read; --no-source-hints builds the project as its upstream release ships."),
    require: str = typer.Option(None, "--require", help="tested | exercised (default) | built: the proof level a "
                                "verified build must reach to exit 0 (crossbuild README, \"Verifying\")."),
    resume: str = typer.Option(None, "--resume", help="Continue an interrupted run (crossbuild runs list) in its "
                               "workspace with its settings: finished tool calls are not run again."),
) -> None:
    """Cross-build SOURCE with an agent until the verifier accepts it. Exit 0 only when every target is verified."""
    if progress not in MODES:
        fail(f"--progress {progress!r}: choose one of {', '.join(MODES)}")
    if engine not in ("native", "langgraph"):
        fail(f"--engine {engine!r}: choose native or langgraph")
    if engine == "langgraph" and importlib.util.find_spec("langgraph") is None:
        fail("--engine langgraph needs the langgraph extra: pip install 'crossbuild[langgraph]'")
    mode = "json" if as_json else progress
    if require is not None:
        check_required(require)
    if resume and (source or target or workspace_dir):
        fail("--resume continues a run in its own workspace: leave out SOURCE, --target and --workspace")
    if not source and not resume:
        fail("missing SOURCE: a folder, tarball, git URL or debian:NAME (or --resume RUN_ID)")
    for name in target or []:
        target_from(name)  # an unknown --target gets the targets' own message before anything else
    resolved = load_settings(config, no_config, {
        "targets": target or None, "model": model, "base_url": base_url, "jobs": jobs,
        "keep_features": keep_features, "keep_libc": keep_libc, "budgets.max_steps": max_steps,
        "dependencies": dep_sources(dep_source) or None, "sandbox": sandbox_backend,
        "require": require})
    s = resolved.settings
    require_sandbox(s.sandbox)  # no sandbox is never silent: refused here unless chosen by name
    if resume:
        if db is not None and db.exists():
            open_trace(db).close()
        chosen = ModelConfig(spec=s.model, base_url=s.base_url, strict=strict, tool_choice=tool_choice,
                             parallel_tool_calls=parallel, temperature=temperature, seed=seed, engine=engine) \
            if model else None  # else the run's own model, by name; never its stored URL
        start = functools.partial(session.resume, resume, db, resolved=resolved, sandbox_backend=s.sandbox,
                                  prefix=prefix.resolve() if prefix else None, model=chosen)
        raise typer.Exit(0 if _build_one(start, mode, s.require) else 1)
    if not s.targets:
        fail("no target: pass --target (e.g. -t aarch64-linux-musl) or set targets in crossbuild.toml")
    if workspace_dir is not None and len(s.targets) > 1:
        fail(f"--workspace names one run folder, and {len(s.targets)} targets are asked for "
             f"({', '.join(s.targets)}): leave it out or pass one --target")
    if db is not None and db.exists():
        open_trace(db).close()  # a file that is not a trace database ends here, in one line
    outcomes = []
    for name in s.targets:
        t = target_from(name)
        req = session.request_for(
            resolved, source, t, db=db, workspace_dir=workspace_dir, prefix=prefix.resolve() if prefix else None,
            keep=keep, sandbox_backend=s.sandbox, source_hints=source_hints,
            model=ModelConfig(spec=s.model, base_url=s.base_url, strict=strict, tool_choice=tool_choice,
                              parallel_tool_calls=parallel, temperature=temperature, seed=seed, engine=engine))
        outcomes.append(_build_one(functools.partial(session.build, req), mode, s.require))
    if len(outcomes) > 1 and mode != "json":
        for name, ok in zip(s.targets, outcomes, strict=True):
            console.print(f"{name}: " + ("[green]VERIFIED[/]" if ok else f"[red]not verified at {s.require}[/]"))
    raise typer.Exit(0 if all(outcomes) else 1)


def _build_one(start: Callable[..., tuple[RunOutcome, RunContext]], mode: str, required: str) -> bool:
    """One target's run (START(on_event=, cancel=)), rendered as it happens; True when verified at the REQUIRED
    proof level or above."""
    show = renderer(mode)
    cancel = threading.Event()

    def interrupted() -> None:
        cancel.set()
        err.print("[yellow]cancelling: stopping the model call and killing the running build...[/]")

    error: BaseException | None = None
    try:
        outcome, ctx = call_in_thread(lambda: start(on_event=show, cancel=cancel), name="crossbuild-build",
                                      on_interrupt=interrupted, poll_s=0.2)
    except Exception as e:  # reported below, after the spinner stops
        error = e
    if cancel.is_set():
        # cancelled: the run has wound down, and more Ctrl-C presses must not break the exit's own cleanup (a
        # finalizer removing a sandbox's folder printed a KeyboardInterrupt traceback)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    show.close()
    if isinstance(error, workspace.SourceError | ModelConfigError | NotResumable | sandbox.NoSandbox):
        err.print(f"[red]error:[/] {error}")
        raise typer.Exit(2)
    if error is not None:
        raise error
    below = below_required(outcome.verify if outcome.ok else None, required)
    if mode == "json":
        show.outcome({**outcome.to_dict(), "workspace": str(ctx.root), "required": required,
                      "meets_requirement": outcome.ok and below is None})
        return outcome.ok and below is None
    if outcome.verify:
        print_report(outcome.verify, False)
    colour = "green" if outcome.ok else "red"
    console.print(f"[bold {colour}]{outcome.status.upper()}[/] ({outcome.stop_reason}) after {outcome.steps} "
                  f"steps, {outcome.tool_calls} tool calls, {outcome.wall_s:.1f}s"
                  + (f", {outcome.usage.input_tokens + outcome.usage.output_tokens} tokens"
                     if outcome.usage.input_tokens else "")
                  + (f", ${outcome.cost_usd:.4f}" if outcome.cost_usd else ""))
    console.print(outcome.message[:2000], markup=False, highlight=False)
    where = ctx.root / outcome.output_dir if outcome.output_dir else ctx.root
    console.print(f"artifacts: {where}\nrun id: {outcome.run_id} (crossbuild runs show {outcome.run_id})")
    if below:
        err.print(f"[red]error:[/] {escape(below)}", highlight=False)
    return outcome.ok and below is None
