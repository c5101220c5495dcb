"""What every command group shares: the consoles, one-line errors, the target option, the settings, the verify
report."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from crossbuild.env import sandbox
from crossbuild.foundation import settings
from crossbuild.foundation.targets import Target, UnknownTargetError, parse_target
from crossbuild.proof.levels import LEVELS, meets
from crossbuild.proof.verify import VerifyReport
from crossbuild.trace import store as trace_store

# Piped, Rich would wrap every line at 80 columns; soft wrap leaves lines whole (tables: print_table)
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_table(table: Table) -> None:
    """A table for a person at a terminal; piped, one row per line with tab-separated cells, never cut (as `gh`
    prints), so `crossbuild targets | grep riscv` finds whole names."""
    if console.is_terminal:
        console.print(table)
        return
    cells = [[Text.from_markup(c) if isinstance(c, str) else c for c in col.cells] for col in table.columns]
    for row in zip(*cells, strict=True):  # a cell's own line breaks and tabs would split the row
        print("\t".join(" | ".join((c.plain if isinstance(c, Text) else str(c)).split("\n")).replace("\t", " ")
                        for c in row))


def fail(message: str, code: int = 2) -> NoReturn:
    """One red line on stderr, then exit: the shape of every user-facing error."""
    err.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


def require_sandbox(backend: str) -> None:
    """The one-line refusal when BACKEND gives no sandbox here and the user did not choose `none` by name."""
    try:
        sandbox.require(backend)
    except sandbox.NoSandbox as e:
        fail(str(e))


def dep_sources(specs: list[str]) -> dict[str, str]:
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


def target_from(name: str) -> Target:
    try:
        return parse_target(name)
    except UnknownTargetError as e:
        raise typer.BadParameter(str(e), param_hint="--target") from None


def open_trace(db: Path | None):
    path = db or trace_store.default_path()
    if not path.exists():
        fail(f"no trace database at {path} (run crossbuild build first, or pass --db)")
    try:
        return trace_store.connect(path)
    except sqlite3.DatabaseError as e:
        fail(f"{path} is not a crossbuild trace database ({e}); pass --db with the runs.db a build wrote")


def load_settings(config: Path | None, no_config: bool, given: dict[str, Any]) -> settings.Resolved:
    """The merged settings (command line > CROSSBUILD_* > crossbuild.toml > user file); GIVEN holds the options the
    command line set (None for the ones it did not)."""
    if config is not None and no_config:
        fail("--config and --no-config contradict each other: pass one")
    try:
        resolved = settings.load({k: v for k, v in given.items() if v is not None}, project=config,
                                 use_files=not no_config)
    except settings.ConfigError as e:
        fail(escape(str(e)))
    for line in resolved.ignored:  # a project file asked for more than it may: said, never applied
        err.print(f"[yellow]warning:[/] ignored {escape(line)}", highlight=False)
    return resolved


def check_required(level: str | None) -> str:
    """A --require value, or one line and status 2."""
    if level not in LEVELS:
        fail(f"--require {level!r}: choose one of {', '.join(LEVELS)} (README, \"Verifying\")")
    return level


def below_required(report: VerifyReport | None, required: str) -> str | None:
    """Why a VERIFIED report does not meet REQUIRED (one line that says how to accept it), or None; None too for a
    report that is not verified (its own reasons say why)."""
    if report is None or not report.ok or meets(report.proof, required):
        return None
    return (f"verified for {report.target} at `{report.proof}`, below the required `{required}`: "
            f"{report.proof_why}. Pass --require {report.proof} (or set require in your settings) to accept it.")


def print_report(report: VerifyReport, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(report.to_dict()))
        return
    table = Table(title=f"artifacts in {report.root} (target {report.target})")
    for col in ("artifact", "kind", "format", "machine", "details", "ok"):
        table.add_column(col, overflow="fold")
    shown = [a for a in report.artifacts if not a.get("member_of")]
    for a in shown[:60]:
        details = ", ".join(filter(None, [
            a.get("linkage"), a.get("interpreter"), a.get("float_abi") and f"{a['float_abi']}-float",
            a.get("max_glibc") and f"GLIBC_{a['max_glibc']}",
            a.get("members") is not None and f"{a['members']} members",
            a.get("subsystem"), a.get("min_os") and f"macOS {a['min_os']}+",
            a.get("install_name") and f"install name {a['install_name']}",
        ]))
        mark = "[green]yes[/]" if a["ok"] else "[red]NO[/] " + "; ".join(a.get("problems", []))
        table.add_row(a["path"], a["kind"], a["format"], str(a.get("machine")), details, mark)
    if len(shown) > 60:
        table.add_row(f"... {len(shown) - 60} more", "", "", "", "", "")
    print_table(table)
    counts = ", ".join(f"{k}: {v}" for k, v in report.counts.items())
    console.print(f"counted: {counts}; configure probes excluded: {report.probes_excluded}")
    if report.linker_temporaries or report.build_tools:
        console.print(report.not_counted(), markup=False, highlight=False)
    if report.programs_not_built:
        console.print(report.left_out(), markup=False, highlight=False)
    if report.needs_runtime:
        console.print(f"needs crossbuild's shared C++ runtime: ship {report.needs_runtime} with it", markup=False,
                      highlight=False)
    if report.rebuild:
        status = "[green]passed[/]" if report.rebuild["ok"] else f"[red]failed[/]: {report.rebuild['error']}"
        console.print(f"clean rebuild: {status}{report.compiles_reused()}")
    if report.smoke_runs:
        title = (f"the project's tests, run by {report.harness} on the target" if report.harness
                 else "test programs run under qemu")
        runs = Table(title=f"{title} (sandbox: {report.sandbox})")
        for col in ("test" if report.harness else "program", "result", "time", "output (tail)"):
            runs.add_column(col, overflow="fold")
        for r in report.smoke_runs:
            style = "yellow" if r.skipped else "red" if r.failed else "green"
            result = f"[{style}]{escape(r.outcome())}[/]"
            runs.add_row(r.path, result, f"{r.duration_s:.2f}s", r.output_tail[-300:])
        print_table(runs)
    if report.probe_runs:
        probes = Table(title="crossbuild's probes on the target (no usable test suite)")
        for col in ("product", "kind", "result", "time"):
            probes.add_column(col, overflow="fold")
        for p in report.probe_runs:
            style = "yellow" if p.skipped else "green" if p.passed else "red"
            probes.add_row(p.path, p.kind, f"[{style}]{escape(p.outcome())}[/]", f"{p.duration_s:.2f}s")
        print_table(probes)
    if report.ok:
        console.print(f"[bold green]VERIFIED[/] for {report.target}; proof: {escape(report.level().phrase())}",
                      highlight=False)
    else:
        console.print(f"[bold red]NOT VERIFIED[/] for {report.target}:")
        for reason in report.reasons:
            console.print(f"  - {reason}", markup=False, highlight=False)
