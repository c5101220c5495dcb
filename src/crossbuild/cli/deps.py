"""`crossbuild deps ...`: what a dependency name resolves to, and the cache of dependency builds."""

from __future__ import annotations

import json
import time

import typer
from rich.markup import escape
from rich.table import Table

from crossbuild.cli.common import console, err, print_table

deps_app = typer.Typer(help="Dependencies cross-built into per-target prefixes, and their cache.",
                       no_args_is_help=True)


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
