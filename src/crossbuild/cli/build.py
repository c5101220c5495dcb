"""`crossbuild build` and `crossbuild runs ...`: render the agent's events live and read the trace."""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from crossbuild.agent.budgets import Budgets
from crossbuild.agent.events import Event
from crossbuild.agent.session import BuildRequest, build
from crossbuild.cli.common import console, err, open_trace, print_report, print_table, target_from
from crossbuild.env import workspace
from crossbuild.foundation.background import call_in_thread
from crossbuild.models import ModelConfig, ModelConfigError
from crossbuild.trace import runs as runs_mod

app = typer.Typer()
runs_app = typer.Typer(help="The record of past runs (SQLite trace).", no_args_is_help=True)
deps_app = typer.Typer(help="Dependencies cross-built into per-target prefixes, and their cache.",
                       no_args_is_help=True)


class LiveProgress:
    """A line per step and tool call, a spinner with elapsed time while a command runs."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.start = time.monotonic()
        self.status = None

    def __call__(self, e: Event) -> None:
        if self.quiet:
            return
        d = e.data
        t = f"[dim]{time.monotonic() - self.start:6.1f}s[/]"
        if e.kind == "workspace_prepared" and d["left_out"]:
            shown = ", ".join(d["left_out"][:8]) + (f" and {len(d['left_out']) - 8} more" if len(d["left_out"]) > 8
                                                    else "")
            console.print(f"[yellow]not copied into the workspace:[/] {escape(shown)}", highlight=False)
        elif e.kind == "run_started":
            console.print(f"run [bold]{d['run_id']}[/] · model {d['model']} · target {d['target']} · {d['workspace']}")
        elif e.kind == "tool_call":
            args = d["arguments"]
            try:
                parsed = json.loads(args)
                shown = parsed.get("command") or parsed.get("path") or parsed.get("query") or ""
            except (json.JSONDecodeError, AttributeError):
                shown = args[:80]
            if self.status is None:
                self.status = console.status(escape(f"step {d['step']}: {d['name']} {shown}"[:150]))
                self.status.start()
            else:
                self.status.update(escape(f"step {d['step']}: {d['name']} {shown}"[:150]))
        elif e.kind == "tool_result":
            self._stop_spinner()
            mark = "[green]✓[/]" if d["ok"] else f"[red]✗ {d['error_type']}[/]"
            console.print(f"{t} {d['step']:>3} {d['name']:<16} {mark} {escape(d['summary'])}", highlight=False)
        elif e.kind == "model_text":
            console.print(f"{t}     [italic]{escape(d['text'][:300])}[/]", highlight=False)
        elif e.kind == "kb_attached":
            console.print(f"{t}     [yellow]knowledge:[/] {d['entry']} — {escape(d['title'])}", highlight=False)
        elif e.kind == "nudge":
            console.print(f"{t}     [yellow]no progress:[/] {escape(d['why'])}", highlight=False)
        elif e.kind == "budget_note":
            console.print(f"[yellow]note:[/] {escape(d['message'])}", highlight=False)
        elif e.kind == "provider_retry":
            console.print(f"{t}     [yellow]provider retry {d['attempt']}[/] ({d['reason']}), waiting {d['delay_s']}s")
        elif e.kind == "verify":
            console.print(f"{t}     verify {d['output_dir']}: " + ("[green]VERIFIED[/]" if d["ok"] else
                                                                     "[red]not verified[/]"))
        elif e.kind == "finished":
            self._stop_spinner()

    def _stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


@app.command("build")
def build_command(
    source: str = typer.Argument(..., help="Folder, tarball, git URL or debian:NAME[=VERSION]."),
    target: str = typer.Option(..., "--target", "-t"),
    model: str = typer.Option("planner", "--model", "-m",
                              help="planner | auto | openai:MODEL | anthropic:MODEL | replay:DB#RUN_ID"),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server (DeepSeek, vLLM, Ollama, "
                                                          "llama.cpp); default $OPENAI_BASE_URL."),
    max_steps: int = typer.Option(60, "--max-steps", min=1),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="Parallel build jobs (default: all cores)."),
    keep: bool = typer.Option(False, "--keep", help="Also keep the clean-rebuild copy of the workspace."),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="Run folder (default ./crossbuild-runs/...)."),
    prefix: Path = typer.Option(None, "--prefix", help="Per-target dependency prefix (default: shared cache)."),
    db: Path = typer.Option(None, "--db", help="Trace database (default ~/.local/share/crossbuild/runs.db)."),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="auto | bubblewrap | none"),
    strict: bool = typer.Option(False, "--strict", help="OpenAI strict tool schemas.", rich_help_panel="Model"),
    tool_choice: str = typer.Option("auto", "--tool-choice", help="auto | required | none | TOOL",
                                    rich_help_panel="Model"),
    parallel: bool = typer.Option(None, "--parallel-tool-calls/--no-parallel-tool-calls", rich_help_panel="Model"),
    temperature: float = typer.Option(None, "--temperature", rich_help_panel="Model"),
    seed: int = typer.Option(None, "--seed", rich_help_panel="Model"),
    dep_source: list[str] = typer.Option([], "--dep-source", help="NAME=PATH: build dependency NAME from this "
                                         "local folder or tarball (repeatable). Only you can name such paths; the "
                                         "agent and builds can only ask for names."),
    keep_features: bool = typer.Option(False, "--keep-features", help="A dependency that cannot be cross-built ends "
                                       "the build, instead of the optional feature that needs it being turned off."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON (no live progress)."),
) -> None:
    """Cross-build SOURCE with an agent until the verifier accepts it. Exit 0 only when verified."""
    t = target_from(target)
    if db is not None and db.exists():
        open_trace(db).close()  # a file that is not a trace database ends here, in one line
    req = BuildRequest(source=source, target=t, budgets=Budgets(max_steps=max_steps), db=db,
                       workspace_dir=workspace_dir, prefix=prefix.resolve() if prefix else None, jobs=jobs,
                       keep=keep, sandbox_backend=sandbox_backend, dep_sources=_dep_sources(dep_source),
                       keep_features=keep_features,
                       model=ModelConfig(spec=model, base_url=base_url, strict=strict, tool_choice=tool_choice,
                                         parallel_tool_calls=parallel, temperature=temperature, seed=seed))
    progress = LiveProgress(quiet=as_json)
    cancel = threading.Event()

    def interrupted() -> None:
        cancel.set()
        err.print("[yellow]cancelling: stopping the model call and killing the running build...[/]")

    error: BaseException | None = None
    try:
        outcome, ctx = call_in_thread(lambda: build(req, on_event=progress, cancel=cancel), name="crossbuild-build",
                                      on_interrupt=interrupted, poll_s=0.2)
    except Exception as e:  # reported below, after the spinner stops
        error = e
    progress._stop_spinner()
    if isinstance(error, workspace.SourceError | ModelConfigError):
        err.print(f"[red]error:[/] {error}")
        raise typer.Exit(2)
    if error is not None:
        raise error
    if as_json:
        console.print_json(json.dumps({**outcome.to_dict(), "workspace": str(ctx.root)}))
    else:
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
    raise typer.Exit(0 if outcome.ok else 1)


def _dep_sources(specs: list[str]) -> dict[str, str]:
    """--dep-source NAME=PATH options: each PATH must exist (a folder or a tarball)."""
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise typer.BadParameter(f"{spec!r}: use NAME=PATH, e.g. zlib=../zlib-1.3", param_hint="--dep-source")
        real = Path(path).expanduser().resolve()
        if not real.exists():
            raise typer.BadParameter(f"{path} does not exist", param_hint="--dep-source")
        out[name] = str(real)
    return out


@runs_app.command("list")
def runs_list(db: Path = typer.Option(None, "--db"), limit: int = typer.Option(20, "--limit", "-n"),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """The most recent runs."""
    rows = runs_mod.list_runs(open_trace(db), limit)
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table(title="runs")
    for col in ("id", "source", "target", "model", "status", "stop", "steps", "calls", "time", "tokens"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["id"], r["source"], r["target"], r["model"], r["status"], r["stop_reason"] or "",
                      str(r["steps"]), str(r["tool_calls"]), f"{r['wall_s'] or 0:.1f}s", str(r["tokens"] or 0))
    print_table(table)


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="A run id (or a unique prefix)."),
              db: Path = typer.Option(None, "--db"), as_json: bool = typer.Option(False, "--json")) -> None:
    """The whole story of a run: every model turn and tool call, with results and knowledge attached."""
    conn = open_trace(db)
    run = runs_mod.find_run(conn, run_id)
    if run is None:
        err.print(f"[red]error:[/] no single run matches {run_id!r}; see crossbuild runs list")
        raise typer.Exit(2)
    events = runs_mod.story(conn, run["id"])
    if as_json:
        console.print_json(json.dumps({"run": run, "events": events}, default=str))
        return
    console.print(f"[bold]run {run['id']}[/]: {run['source']} → {run['target']} with {run['model']} "
                  f"(crossbuild {run['version']})")
    console.print(f"workspace {run['workspace']}; status [bold]{run['status']}[/] ({run['stop_reason']}); "
                  f"{run['steps']} steps, {run['tool_calls']} tool calls, {run['wall_s'] or 0:.1f}s, "
                  f"{(run['input_tokens'] or 0) + (run['output_tokens'] or 0)} tokens")
    for e in events:
        if e["kind"] == "model":
            calls = json.loads(e["tool_calls_json"] or "[]")
            names = ", ".join(c["name"] for c in calls) or "no tool calls"
            line = f"[cyan]step {e['step']}[/] model → {names}"
            if e["error"]:
                line += f" [red]error: {e['error']}[/]"
            console.print(line)
            if e["text"]:
                console.print(f"    {e['text'][:500]}", markup=False, highlight=False)
        else:
            mark = "ok" if e["ok"] else f"FAILED ({e['error_type']})"
            console.print(f"    {e['name']} {e['raw_arguments'][:200]} → {mark}", markup=False, highlight=False)
            first = (e["message"] or "").splitlines()[:1]
            if first:
                console.print(f"      {first[0][:200]}", markup=False, highlight=False)
            if e["kb"]:
                console.print(f"      knowledge attached: {e['kb']}", markup=False, highlight=False)
    console.print(f"outcome: {run['message'] or ''}"[:2000], markup=False, highlight=False)


@runs_app.command("stats")
def runs_stats(db: Path = typer.Option(None, "--db"), model: str = typer.Option(None, "--model"),
               target: str = typer.Option(None, "--target"), source: str = typer.Option(None, "--source"),
               since: str = typer.Option(None, "--since", help="Run id or date prefix, e.g. 20261130."),
               as_json: bool = typer.Option(False, "--json")) -> None:
    """Per-tool call counts and failure rates, repeated calls, denials, knowledge attachments, steps, tokens, time."""
    s = runs_mod.stats(open_trace(db), model=model, target=target, source=source, since=since)
    if as_json:
        console.print_json(json.dumps(s.__dict__, default=lambda o: dict(o) if isinstance(o, dict) else str(o)))
        return
    if not s.runs:
        console.print("no finished runs match")
        return
    console.print(f"[bold]{s.runs} runs[/]: " + ", ".join(f"{k} {v}" for k, v in s.by_status.most_common())
                  + " · stop reasons: " + ", ".join(f"{k} {v}" for k, v in s.by_stop.most_common()))
    table = Table(title="tool calls")
    for col in ("tool", "calls", "failed", "failure rate", "errors", "time"):
        table.add_column(col)
    for name, t in sorted(s.tools.items(), key=lambda kv: -kv[1]["calls"]):
        errors = ", ".join(f"{k} {v}" for k, v in t["errors"].most_common(3))
        table.add_row(name, str(t["calls"]), str(t["failed"]), f"{t['failed'] / t['calls']:.0%}", errors,
                      f"{t['time_s']:.1f}s")
    print_table(table)
    console.print(f"repeated identical calls: {s.repeated_calls} · permission denials: {s.permission_denials}")
    kb = ", ".join(f"{k} {v} (in verified runs {s.kb_in_verified_runs[k]})" for k, v in s.kb_attachments.most_common())
    console.print(f"knowledge-base attachments: {sum(s.kb_attachments.values())}" + (f" — {kb}" if kb else ""))

    def med(xs):
        return statistics.median(xs) if xs else 0

    console.print(f"per run: median steps {med(s.steps):.0f} (max {max(s.steps)}), median tokens {med(s.tokens):.0f} "
                  f"(total {sum(s.tokens)}), median time {med(s.wall_s):.1f}s (total {sum(s.wall_s):.1f}s), "
                  f"cost ${s.cost_usd:.4f}")


@deps_app.command("resolve")
def deps_resolve(name: str = typer.Argument(..., help="What a build asks for: ZLIB, libzstd, zlib.h, -lz, PNG::PNG."),
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """The Debian source package that provides NAME, and the files that show it."""
    from crossbuild.env import debian_index
    from crossbuild.env import dependency_cache as deps

    if not name.strip():
        raise typer.BadParameter("give a name a build asks for, e.g. ZLIB, zlib.h or -lz", param_hint="NAME")
    try:
        package = deps.resolve(name)
        answer = package.source
    except deps.UnknownDependencyError as e:
        answer, package = None, None
        why = str(e)
    try:
        found = debian_index.resolve(name, progress=lambda m: err.print(m, highlight=False))
    except debian_index.IndexError_ as e:
        found = debian_index.Resolution(name, None, [str(e)])
    if as_json:
        console.print_json(json.dumps({"name": name, "source": answer, "evidence": found.evidence,
                                       "candidates": found.candidates}))
    else:
        console.print(f"{escape(name)} -> [bold]{answer or 'unknown'}[/]" if answer else
                      f"{escape(name)} -> [red]unknown[/]: {escape(why)}", highlight=False)
        for line in found.evidence:
            console.print(f"  {escape(line)}", highlight=False)
        if found.candidates:
            console.print(f"  also: {escape(', '.join(found.candidates))}", highlight=False)
    raise typer.Exit(0 if answer else 1)


@deps_app.command("list")
def deps_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Cached dependency builds (reused by every project for the same target)."""
    from crossbuild.env import dependency_cache as deps

    entries = deps.list_cached()
    if as_json:
        console.print_json(json.dumps([{**e.__dict__, "files": len(e.files), "dir": str(e.dir)} for e in entries]))
        return
    table = Table(title=f"dependency cache ({deps.deps_root()})")
    for col in ("target", "package", "version", "files", "build time", "built", "run"):
        table.add_column(col)
    for e in entries:
        table.add_row(e.target, e.source, e.version or "default", str(len(e.files)), f"{e.build_s:.0f}s",
                      time.strftime("%Y-%m-%d %H:%M", time.localtime(e.built_at)), e.run_id or "")
    print_table(table)


@deps_app.command("clear")
def deps_clear(target: str = typer.Option(None, "--target", "-t", help="Only this target's builds.")) -> None:
    """Forget cached dependency builds (prefixes that already hold them are not touched)."""
    from crossbuild.env import dependency_cache as deps

    console.print(f"removed {deps.clear(target)} cached dependency builds")
