"""`crossbuild deps ...`: what a dependency name resolves to, and the cache of dependency builds."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from crossbuild.cli.common import console, dep_sources, err, fail, print_table, require_sandbox, target_from

deps_app = typer.Typer(help="Dependencies cross-built into per-target prefixes, and their cache.",
                       no_args_is_help=True)


@deps_app.command("resolve")
def deps_resolve(name: str = typer.Argument(..., help="What a build asks for: ZLIB, libzstd, zlib.h, -lz, PNG::PNG."),
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """The Debian source package that provides NAME, and the files that show it."""
    from crossbuild.env import debian_index, dependency_names

    if not name.strip():
        raise typer.BadParameter("give a name a build asks for, e.g. ZLIB, zlib.h or -lz", param_hint="NAME")
    try:
        package = dependency_names.resolve(name)
        answer = package.source
    except dependency_names.UnknownDependencyError as e:
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
    failures = deps.list_failures()
    if failures:
        failed = Table(title="remembered failures (not tried again with the same inputs; deps clear forgets them)")
        for col in ("target", "package", "failed", "after", "why"):
            failed.add_column(col)
        for f in failures:
            failed.add_row(f["target"], escape(str(f.get("source"))),
                           time.strftime("%Y-%m-%d %H:%M", time.localtime(f["at"])), f"{f.get('seconds', 0):.0f}s",
                           escape(str(f.get("message"))[:200]))
        print_table(failed)


@deps_app.command("clear")
def deps_clear(target: str = typer.Option(None, "--target", "-t", help="Only this target's builds.")) -> None:
    """Forget cached dependency builds (prefixes that already hold them are not touched)."""
    from crossbuild.env import dependency_cache as deps

    console.print(f"removed {deps.clear(target)} cached dependency builds")


@deps_app.command("build")
def deps_build(
    names: list[str] = typer.Argument(..., help="What builds ask for: OpenSSL, ZLIB, libxml-2.0, pcre2, json-c."),
    targets: list[str] = typer.Option(..., "--target", "-t", help="Repeatable."),
    prefix: Path = typer.Option(None, "--prefix", help="Install into DIR/<target> (default: the shared per-target "
                                "prefixes a build uses)."),
    dep_source: list[str] = typer.Option([], "--dep-source", help="NAME=PATH: build NAME from this local folder or "
                                         "tarball instead of Debian's source (repeatable)."),
    sandbox_backend: str = typer.Option("auto", "--sandbox", help="auto (bubblewrap, and no build without it) | "
                                        "bubblewrap | none (by your choice)."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Cross-build dependencies into the per-target prefix ahead of a build (as build_dependency does in one), from
    the cache when they were built before. Exit 0 only when every one is there."""
    from crossbuild.agent.dependency_builder import DependencyBuilder
    from crossbuild.tools.context import RunContext

    parsed = [target_from(t) for t in targets]
    if not all(n.strip() for n in names):
        raise typer.BadParameter("give the names builds ask for, e.g. OpenSSL zlib", param_hint="NAMES")
    require_sandbox(sandbox_backend)
    builder = DependencyBuilder(user_sources=dep_sources(dep_source))
    rows = []
    for target in parsed:
        with tempfile.TemporaryDirectory(prefix=f"crossbuild-deps-{target.name}-") as scratch:
            (Path(scratch) / "src").mkdir()  # no project: nothing of its own to mistake for a dependency
            try:
                ctx = RunContext.create(scratch, target, prefix=prefix / target.name if prefix else None,
                                        sandbox_backend=sandbox_backend, jobs=jobs, dependency_builder=builder)
            except RuntimeError as e:  # zig missing: the toolchain says what to install
                fail(str(e))
            ctx.watch.sink = lambda note: err.print(f"  {escape(note.text())}", highlight=False)
            for name in names:
                err.print(f"{escape(name)} for {target.name}", highlight=False)
                start = time.monotonic()
                out = builder(ctx, name)
                rows.append({"target": target.name, "name": name, "source": out.source, "ok": out.ok,
                             "cached": out.cached, "seconds": round(time.monotonic() - start, 1), "files": out.files,
                             "prefix": str(ctx.prefix), "message": out.message})
    if as_json:
        console.print_json(json.dumps(rows))
    else:
        table = Table(title="dependencies")
        for col in ("target", "name", "package", "result", "seconds", "files"):
            table.add_column(col)
        for r in rows:
            result = ("[green]reused[/]" if r["cached"] else "[green]built[/]") if r["ok"] else "[red]failed[/]"
            table.add_row(r["target"], escape(r["name"]), escape(r["source"]), result, f"{r['seconds']:.0f}",
                          str(r["files"]))
        print_table(table)
        for r in rows:
            if not r["ok"]:
                err.print(f"[red]{escape(r['name'])} for {r['target']}:[/] {escape(r['message'][:600])}",
                          highlight=False)
    raise typer.Exit(0 if all(r["ok"] for r in rows) else 1)
