"""Commands that build without an agent and judge a build: quick, verify."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from crossbuild.cli.common import (
    below_required,
    check_required,
    console,
    err,
    print_report,
    require_sandbox,
    target_from,
)
from crossbuild.env import recipes, sandbox, workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.proof.verify import verify as run_verify

app = typer.Typer()


@app.command()
def verify(
    directory: Path = typer.Argument(..., help="Build folder or install prefix to judge."),
    target: str = typer.Option(..., "--target", "-t"),
    no_run: bool = typer.Option(False, "--no-run", help="Scan only; do not run test programs under qemu."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="Glob of files allowed to be for another "
                                         "machine (build-time helper programs)."),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="Where test programs run: auto (bubblewrap, "
                                        "refusing to run them without it) | bubblewrap | none (by your choice)."),
    require: str = typer.Option("exercised", "--require", help="tested | exercised | built: the proof level a "
                                "verified build must reach to exit 0 (README, \"Verifying\")."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Judge a build: every binary must be for TARGET; test programs must pass under qemu."""
    t = target_from(target)
    check_required(require)
    if not directory.is_dir():
        raise typer.BadParameter(f"{directory} is not a directory", param_hint="DIRECTORY")
    if not no_run:
        require_sandbox(sandbox_backend)
    root = directory.resolve()
    # inside a crossbuild workspace, its toolchain builds the probes that exercise a build without tests
    ws = None if no_run else workspace.enclosing(root)
    tc = Toolchain.for_target(t, ws).materialise(warm=("c",)) if ws else None
    box = None if no_run else sandbox.for_toolchain(tc, sandbox_backend) if tc else sandbox.for_tree(root,
                                                                                                      sandbox_backend)
    report = run_verify(root, t, toolchain=tc, run_tests=not no_run, allow_host=allow_host, box=box)
    raise typer.Exit(_judged(report, as_json, require))


@app.command()
def quick(
    source: str = typer.Argument(..., help="Folder, tarball, git URL or debian:NAME[=VERSION]."),
    target: str = typer.Option(..., "--target", "-t"),
    system: str = typer.Option("auto", "--system", help="auto | " + " | ".join(recipes.BUILD_SYSTEMS)),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="Run folder (default: ./crossbuild-runs/...)."),
    rebuild: bool = typer.Option(True, "--rebuild/--no-rebuild", help="Verify with a clean rebuild."),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="auto | bubblewrap | none"),
    require: str = typer.Option("exercised", "--require", help="tested | exercised | built: the proof level a "
                                "verified build must reach to exit 0 (README, \"Verifying\")."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Cross-build SOURCE with the standard recipe of its build system (no agent), then verify it."""
    t = target_from(target)
    check_required(require)
    require_sandbox(sandbox_backend)  # before anything is made
    root = workspace_dir or workspace.new_root(Path("crossbuild-runs"), source, t.name)
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
        console.print(f"[bold red]warning: {sandbox.UNSANDBOXED}[/]", highlight=False)
    console.print(f"[bold]{chosen}[/] build of {source} for [bold]{t.name}[/] in {ws.root} (sandbox: {box.backend})")
    env_vars = tc.env.as_dict()
    failed = box.run_steps([(step.argv, ws.root / step.cwd, env_vars) for step in steps], log_dir=tc.logs,
                           stem="step", on_step=lambda n, argv: console.print(f"  [{n}/{len(steps)}] {steps[n - 1]}"))
    if failed:
        _, res = failed
        err.print(f"[red]step failed[/] ({res.stopped or f'exit {res.returncode}'}); log: {res.log_path}")
        tail = Path(res.log_path).read_text(errors="replace").splitlines()[-15:]
        err.print("\n".join(tail), markup=False, highlight=False)
        raise typer.Exit(1)
    report = run_verify(ws.root / recipes.output_dir(chosen), t, toolchain=tc, box=box,
                        rebuild_steps=steps if rebuild else None)
    raise typer.Exit(_judged(report, as_json, require))


def _judged(report, as_json: bool, required: str) -> int:
    """Print the verdict; its exit status: 0 only when verified at REQUIRED or above."""
    print_report(report, as_json)
    below = below_required(report, required)
    if below:
        err.print(f"[red]error:[/] {escape(below)}", highlight=False)
    return 0 if report.ok and below is None else 1
