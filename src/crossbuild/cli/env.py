"""Commands about this machine and the build environment: version, targets, doctor, env, musl-loader."""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
import time
from pathlib import Path

import typer
from rich.table import Table

from crossbuild import __version__
from crossbuild.cli.common import console, err, fail, print_table, target_from
from crossbuild.env import doctor as doctor_mod
from crossbuild.env import workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.targets import TARGETS, UnknownTargetError, aliases_of, parse_target

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


@app.command()
def prepare(
    target_names: list[str] = typer.Argument(..., metavar="TARGET...", help="Targets to prepare, e.g. "
                                             "aarch64-linux-musl riscv64-linux-musl."),
    cxx: bool = typer.Option(True, "--cxx/--no-cxx", help="Also zig's C++ runtime and crossbuild's shared one."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Targets prepared at once (default: one per two cores; zig "
                                                     "itself uses every core for each)."),
) -> None:
    """Build what a target's first build would wait for (zig's libc and compiler-rt, its C++ runtime, crossbuild's
    shared C++ runtime) ahead of time, e.g. in a CI image: each line says what is prepared now."""
    from crossbuild.env import cxx_runtime, zigcache
    from crossbuild.foundation import host

    try:
        chosen = list(dict.fromkeys(parse_target(n) for n in target_names))
    except UnknownTargetError as e:
        fail(str(e))
    zig = host.zig_executable()
    if zig is None:
        fail("zig is not installed: `pip install ziglang` (crossbuild pins its zig), or run scripts/setup.sh")
    start, said, lock = time.monotonic(), set(), threading.Lock()

    def note(phase: str, done: int | None, total: int | None) -> None:
        with lock:  # a line per phase: the counts change too often for a log
            if phase not in said:
                said.add(phase)
                console.print(f"[dim]{time.monotonic() - start:6.1f}s[/] {phase}", highlight=False)

    def one(t) -> str:
        began = time.monotonic()
        built = zigcache.warm(t, languages=("c", "c++") if cxx else ("c",), zig=zig, note=note)
        if cxx and cxx_runtime.supported(t) and not cxx_runtime.available(t, zig):
            cxx_runtime.build(t, zig, note=note)
            built.append("shared C++ runtime")
        return (f"{t.name}: prepared ({', '.join(built)}) in {time.monotonic() - began:.0f}s" if built
                else f"{t.name}: already prepared")

    workers = jobs or max(1, (os.cpu_count() or 2) // 2)
    failed = False
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(workers, len(chosen))) as pool:
        for t, fut in [(t, pool.submit(one, t)) for t in chosen]:
            try:
                console.print(fut.result(), highlight=False)
            except (zigcache.WarmError, cxx_runtime.RuntimeBuildError) as e:
                err.print(f"[red]error:[/] {t.name}: {e}", highlight=False)
                failed = True
    if failed:
        raise typer.Exit(1)
