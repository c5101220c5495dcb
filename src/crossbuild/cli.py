"""The `crossbuild` command line: parse, call the layers, render. No build logic lives here."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from . import __version__, recipes, sandbox, workspace
from . import doctor as doctor_mod
from .targets import TARGETS, UnknownTargetError, parse_target
from .toolchain import Toolchain
from .verify import VerifyReport
from .verify import verify as run_verify

app = typer.Typer(
    help="Cross-compile real C/C++ projects with zig cc, and prove the result.",
    no_args_is_help=True, rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]},
)
console = Console()
err = Console(stderr=True)


def _register_agent_commands() -> None:
    from .cli_build import build_command, deps_app, runs_app

    app.command("build")(build_command)
    app.add_typer(runs_app, name="runs")
    app.add_typer(deps_app, name="deps")
    from .cli_kb import kb_app

    app.add_typer(kb_app, name="kb")
    from .cli_eval import eval_app

    app.add_typer(eval_app, name="eval")


def _target(name: str):
    try:
        return parse_target(name)
    except UnknownTargetError as e:
        raise typer.BadParameter(str(e), param_hint="--target") from None


@app.command()
def version() -> None:
    """Print crossbuild's version."""
    console.print(__version__)


@app.command()
def targets(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """The supported targets and what crossbuild knows about each."""
    rows = [t.facts() for t in TARGETS.values()]
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table(title="crossbuild targets (glibc targets also take a version: aarch64-linux-gnu.2.28)")
    for col in rows[0]:
        table.add_column(col)
    for r in rows:
        table.add_row(*r.values())
    console.print(table)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json")) -> None:
    """Check the host tools crossbuild needs; each line says OK or the exact fix."""
    checks = doctor_mod.run_checks()
    if as_json:
        console.print_json(json.dumps([c.__dict__ for c in checks]))
    else:
        table = Table(title="crossbuild doctor")
        for col in ("check", "status", "detail"):
            table.add_column(col)
        for c in checks:
            style = {"ok": "green", "missing": "red", "warn": "yellow"}[c.status]
            table.add_row(c.name, f"[{style}]{c.status.upper()}[/]", c.detail)
        console.print(table)
    if any(c.status == "missing" and c.required for c in checks):
        raise typer.Exit(1)


@app.command()
def env(
    target: str = typer.Argument(..., help="Target, e.g. aarch64-linux-musl."),
    workspace_dir: Path = typer.Option(Path("."), "--workspace", "-w", help="Where .xbuild/ is written."),
    prefix: Path = typer.Option(None, "--prefix", help="Per-target dependency prefix (default: shared cache)."),
    shell: bool = typer.Option(False, "--shell", help="Print `export` lines for eval."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Write the toolchain files for TARGET and print the BuildEnv, to cross-build by hand."""
    # a person's own shell: zig writes the shared cache directly (no sandbox, no layer)
    tc = Toolchain.for_target(_target(target), workspace_dir, prefix=prefix, isolated=False).materialise()
    if shell:
        print(tc.env.shell_exports())
        return
    if as_json:
        console.print_json(json.dumps({"env": tc.env.as_dict(), "cmake_args": tc.cmake_args(),
                                       "meson_args": tc.meson_args(), "configure_args": tc.configure_args()}))
        return
    table = Table(title=f"BuildEnv for {tc.target.name}")
    table.add_column("variable")
    table.add_column("value", overflow="fold")
    for k, v in sorted(tc.env.vars.items()):
        table.add_row(k, v)
    console.print(table)
    console.print("CMake:     cmake -S . -B build " + " ".join(tc.cmake_args()))
    console.print("Meson:     meson setup build " + " ".join(tc.meson_args()))
    console.print("autotools: ./configure " + " ".join(tc.configure_args()))
    console.print(f'Use it:    eval "$(crossbuild env {tc.target.name} -w {tc.workspace} --shell)"')


@app.command()
def verify(
    directory: Path = typer.Argument(..., help="Build folder or install prefix to judge."),
    target: str = typer.Option(..., "--target", "-t"),
    no_run: bool = typer.Option(False, "--no-run", help="Scan only; do not run test programs under qemu."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="Glob of files allowed to be for another "
                                         "machine (build-time helper programs)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Judge a build: every binary must be for TARGET; test programs must pass under qemu."""
    t = _target(target)
    if not directory.is_dir():
        raise typer.BadParameter(f"{directory} is not a directory", param_hint="DIRECTORY")
    report = run_verify(directory.resolve(), t, run_tests=not no_run, allow_host=allow_host)
    _print_report(report, as_json)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def quick(
    source: str = typer.Argument(..., help="Folder, tarball, git URL or debian:NAME[=VERSION]."),
    target: str = typer.Option(..., "--target", "-t"),
    system: str = typer.Option("auto", "--system", help="auto | " + " | ".join(recipes.BUILD_SYSTEMS)),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="Run folder (default: ./crossbuild-runs/...)."),
    rebuild: bool = typer.Option(True, "--rebuild/--no-rebuild", help="Verify with a clean rebuild."),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="auto | bubblewrap | none"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Cross-build SOURCE with the standard recipe of its build system (no agent), then verify it."""
    t = _target(target)
    root = workspace_dir or workspace.new_root(Path("crossbuild-runs"), f"{workspace.label_for(source)}-{t.name}")
    try:
        ws = workspace.prepare(source, root)
        chosen = recipes.detect(ws.src) if system == "auto" else system
        tc = Toolchain.for_target(t, ws.root).materialise()
        steps = recipes.steps_for(chosen, tc)
        box = sandbox.for_toolchain(tc, backend=sandbox_backend)
    except (workspace.SourceError, recipes.NoBuildSystemError, RuntimeError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    if box.backend == "none":
        err.print(f"[yellow]warning:[/] builds run without isolation: {sandbox.probe().reason}")
    console.print(f"[bold]{chosen}[/] build of {source} for [bold]{t.name}[/] in {ws.root} (sandbox: {box.backend})")
    env_vars = tc.env.as_dict()
    for i, step in enumerate(steps, 1):
        console.print(f"  [{i}/{len(steps)}] {step}")
        res = box.run(list(step.argv), cwd=ws.root / step.cwd, env=env_vars, log_path=tc.logs / f"step{i}.log")
        if not res.ok:
            err.print(f"[red]step failed[/] ({res.stopped or f'exit {res.returncode}'}); log: {res.log_path}")
            tail = Path(res.log_path).read_text(errors="replace").splitlines()[-15:]
            err.print("\n".join(tail), markup=False, highlight=False)
            raise typer.Exit(1)
    report = run_verify(ws.root / recipes.output_dir(chosen), t, toolchain=tc, box=box,
                        rebuild_steps=steps if rebuild else None)
    _print_report(report, as_json)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def mcp(
    source: str = typer.Argument(None, help="Project to copy into a new workspace (folder, tarball, git URL or "
                                            "debian:NAME); or use --workspace, or let the client call open_workspace."),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="An existing workspace (a folder with src/)."),
    target: str = typer.Option(None, "--target", "-t", help="Default target for the session."),
    transport: str = typer.Option("stdio", "--transport", help="stdio | http (streamable HTTP)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8765, "--port"),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="auto | bubblewrap | none"),
    roots: list[Path] = typer.Option([], "--root", help="A folder clients may copy projects from and keep "
                                     "workspaces in (repeatable; default: the current folder)."),
    token_file: Path = typer.Option(None, "--token-file", help="HTTP: read the bearer token from this file "
                                    "(or set $CROSSBUILD_MCP_TOKEN); default: a new one, printed at start."),
) -> None:
    """Serve crossbuild's guarded tools over MCP, for agents such as Claude Code or Cursor."""
    from . import mcp_server

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    if (source or workspace_dir) and not target:
        raise typer.BadParameter("a workspace or source needs a target, e.g. -t aarch64-linux-musl",
                                 param_hint="--target")
    default = None
    if target:
        _target(target)  # unknown targets fail here, with close matches, before the server starts
        default = (source, str(workspace_dir) if workspace_dir else None, target) if (source or workspace_dir) \
            else None
    for r in roots:
        if not r.is_dir():
            raise typer.BadParameter(f"{r} is not a folder", param_hint="--root")
    app_ = mcp_server.CrossbuildMCP(default=default, sandbox_backend=sandbox_backend, roots=roots or None)
    if transport == "stdio":
        mcp_server.serve_stdio(app_)
    else:
        try:
            token, origin = mcp_server.http_token(token_file)
        except (OSError, ValueError) as e:
            raise typer.BadParameter(str(e), param_hint="--token-file") from None
        err.print(f"crossbuild MCP server on http://{host}:{port}/mcp (roots: {', '.join(map(str, app_.roots))})")
        if origin == "generated":
            err.print(f"bearer token (send `Authorization: Bearer <token>`; shown once): {token}")
        else:
            err.print(f"bearer token {origin}")
        mcp_server.serve_http(app_, token=token, host=host, port=port)


@app.command("musl-loader")
def musl_loader_cmd(
    target: str = typer.Argument(..., help="A musl target, e.g. aarch64-linux-musl."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the loader is cached."),
) -> None:
    """Build musl's dynamic loader for TARGET's architecture (from Debian's musl source), so the verifier can run
    dynamically linked musl programs under qemu."""
    from . import musl_loader

    t = _target(target)
    try:
        path = musl_loader.build(t, force=force, progress=lambda m: console.print(f"  {m}"))
    except (musl_loader.LoaderBuildError, workspace.SourceError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    console.print(f"musl loader for {t.arch}: {path}")


@app.command()
def bench(
    target: str = typer.Option("aarch64-linux-musl", "--target", "-t"),
    source: str = typer.Option("debian:zlib", "--source", help="A project whose ./configure && make builds it."),
    repeats: int = typer.Option(3, "--repeats", min=1),
    scan_copies: int = typer.Option(40, "--scan-copies", min=1, help="Copies of the build tree for the scan test."),
) -> None:
    """Measure the sandbox+BuildEnv overhead on a real build, and the verifier's scan rate."""
    from . import bench as bench_mod

    t = _target(target)
    console.print(f"building {source} for {t.name}: {repeats} repeats per mode, alternating")
    try:
        result = bench_mod.run(t, source=source, repeats=repeats, scan_copies=scan_copies, progress=console.print)
    except (workspace.SourceError, RuntimeError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    for label, times in ((f"sandboxed ({result.backend})", result.sandboxed_s), ("by hand", result.by_hand_s)):
        runs = ", ".join(f"{x:.2f}" for x in times)
        console.print(f"{label:24s} median {statistics.median(times):.2f} s  (runs: {runs})")
    console.print(f"[bold]overhead ratio: {result.overhead:.3f}[/] (goal <= 1.10)")
    console.print(f"[bold]verifier scan: {result.scan_artifacts} artifacts in {result.scan_seconds:.2f} s = "
                  f"{result.scan_rate:.0f} artifacts/s[/]")


@app.command("bench-tools")
def bench_tools(calls: int = typer.Option(20_000, "--calls", min=100)) -> None:
    """Measure tool dispatch overhead (p50/p99 µs per call) and the size of each schema set."""
    from .tools import bench as tools_bench

    r = tools_bench.run(calls)
    console.print(f"dispatch of a no-op tool (parse + validate + authorize), {r.calls} calls: "
                  f"[bold]p50 {r.p50_us:.1f} µs[/], p99 {r.p99_us:.1f} µs (goal: p50 < 200 µs)")
    for name, chars in r.schema_chars.items():
        console.print(f"schema set {name:14s} {chars:6d} characters")
    console.print(f"tool descriptions total   {r.description_chars:6d} characters")


@app.command("bench-agent")
def bench_agent(
    target: str = typer.Option("aarch64-linux-musl", "--target", "-t"),
    source: str = typer.Option("debian:zlib", "--source"),
    repeats: int = typer.Option(3, "--repeats", min=1),
) -> None:
    """Measure the agent loop on a real build: `crossbuild build` (planner) vs the same commands typed by hand."""
    from .agent import bench as agent_bench

    t = _target(target)
    console.print(f"crossbuild build {source} -t {t.name} with the planner, {repeats} runs, each against the same "
                  "commands typed by hand")
    try:
        r = agent_bench.run(t, source=source, repeats=repeats, progress=console.print)
    except (workspace.SourceError, RuntimeError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    console.print("commands the planner ran: " + "; ".join(r.commands), markup=False, highlight=False)
    console.print(f"[bold]agent build / by hand: {r.ratio:.3f}[/] (goal <= 1.15; medians "
                  f"{statistics.median(r.agent_build_s):.2f}s vs {statistics.median(r.by_hand_s):.2f}s)")
    console.print(f"whole crossbuild build incl. verification (clean rebuild + qemu runs) / by hand: "
                  f"{r.total_ratio:.3f}")
    console.print(f"tool calls: {r.tool_calls}, steps: {r.steps}, loop overhead per step (excluding the commands): "
                  f"{statistics.median(r.overhead_per_step_ms):.1f} ms; verified: {r.verified}")


def _print_report(report: VerifyReport, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(report.to_dict()))
        return
    table = Table(title=f"artifacts in {report.root} (target {report.target})")
    for col in ("artifact", "kind", "format", "machine", "details", "ok"):
        table.add_column(col, overflow="fold")
    shown = [a for a in report.artifacts if "(" not in a["path"]]
    for a in shown[:60]:
        details = ", ".join(filter(None, [
            a.get("linkage"), a.get("interpreter"), a.get("float_abi") and f"{a['float_abi']}-float",
            a.get("max_glibc") and f"GLIBC_{a['max_glibc']}",
            a.get("members") is not None and f"{a['members']} members",
            a.get("subsystem"),
        ]))
        mark = "[green]yes[/]" if a["ok"] else "[red]NO[/] " + "; ".join(a.get("problems", []))
        table.add_row(a["path"], a["kind"], a["format"], str(a.get("machine")), details, mark)
    if len(shown) > 60:
        table.add_row(f"... {len(shown) - 60} more", "", "", "", "", "")
    console.print(table)
    counts = ", ".join(f"{k}: {v}" for k, v in report.counts.items())
    console.print(f"counted: {counts}; configure probes excluded: {report.probes_excluded}")
    if report.rebuild:
        status = "[green]passed[/]" if report.rebuild["ok"] else f"[red]failed[/]: {report.rebuild['error']}"
        console.print(f"clean rebuild: {status}")
    if report.smoke_runs:
        runs = Table(title=f"smoke runs under qemu (sandbox: {report.sandbox})")
        for col in ("program", "result", "time", "output (tail)"):
            runs.add_column(col, overflow="fold")
        for r in report.smoke_runs:
            if r.skipped:
                result = f"[yellow]skipped[/]: {r.skipped}"
            elif r.passed:
                result = "[green]exit 0[/]"
            elif r.needs_arguments:
                result = f"[green]ran[/], printed its usage (exit {r.exit_code}; needs arguments)"
            else:
                result = f"[red]{r.stopped or f'exit {r.exit_code}'}[/]"
            runs.add_row(r.path, result, f"{r.duration_s:.2f}s", r.output_tail[-300:])
        console.print(runs)
    if report.ok:
        console.print(f"[bold green]VERIFIED[/] for {report.target}")
    else:
        console.print(f"[bold red]NOT VERIFIED[/] for {report.target}:")
        for reason in report.reasons:
            console.print(f"  - {reason}", markup=False, highlight=False)


_register_agent_commands()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("COLUMNS", "160")
    app()
