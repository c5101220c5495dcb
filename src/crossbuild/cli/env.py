"""Commands about this machine and the build environment: version, targets, doctor, env, musl-loader."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from crossbuild import __version__
from crossbuild.cli.common import console, err, fail, print_table, target_from
from crossbuild.env import doctor as doctor_mod
from crossbuild.env import workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.targets import TARGETS, aliases_of

app = typer.Typer()


@app.command()
def version() -> None:
    """Print crossbuild's version."""
    console.print(__version__)


@app.command()
def targets(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """The supported targets and what crossbuild knows about each."""
    rows = [{**t.facts(), "also_accepted": " ".join(aliases_of(t.name))} for t in TARGETS.values()]
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table(title="crossbuild targets (glibc targets also take a version: aarch64-linux-gnu.2.28)")
    for col in rows[0]:
        table.add_column(col)
    for r in rows:
        table.add_row(*r.values())
    print_table(table)


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
        print_table(table)
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
    """Write the toolchain files for TARGET and print the BuildEnv, to cross-build by hand (in your own shell: what
    you run with it is not sandboxed)."""
    # a person's own shell: zig writes the shared cache directly (no sandbox, no layer)
    try:
        tc = Toolchain.for_target(target_from(target), workspace_dir, prefix=prefix, isolated=False).materialise()
    except OSError as e:
        fail(f"cannot write the toolchain files into {workspace_dir}: {e.strerror or e}; choose a folder you can "
             "write (-w)")
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
    print_table(table)
    console.print("CMake:     cmake -S . -B build " + " ".join(tc.cmake_args()))
    console.print("Meson:     meson setup build " + " ".join(tc.meson_args()))
    console.print("autotools: ./configure " + " ".join(tc.configure_args()))
    console.print(f'Use it:    eval "$(crossbuild env {tc.target.name} -w {tc.workspace} --shell)"')


@app.command("musl-loader")
def musl_loader_cmd(
    target: str = typer.Argument(..., help="A musl target, e.g. aarch64-linux-musl."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the loader is cached."),
) -> None:
    """Build musl's dynamic loader for TARGET's architecture (from the release of musl zig links against, fetched
    from the Debian archive and checked by its SHA-256), so the verifier can run dynamically linked musl programs
    under qemu."""
    from crossbuild.env import musl_loader

    t = target_from(target)
    try:
        path = musl_loader.build(t, force=force, progress=lambda m: console.print(f"  {m}"))
    except (musl_loader.LoaderBuildError, workspace.SourceError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    console.print(f"musl loader for {t.arch}: {path}")
