"""The `crossbuild` command line: this module only assembles the command groups; each lives in its own module, and
no build logic lives in any of them."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape
from typer.exceptions import TyperException

from crossbuild.cli import bench, build, common, config, deps, env, evaluation, kb, mcp, proof, runs, serve

app = typer.Typer(
    help="Cross-compile real C/C++ projects with zig cc, and prove the result.",
    no_args_is_help=True, rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]},
)
for group in (env, proof, build, mcp, serve, bench):
    app.registered_commands += group.app.registered_commands
app.add_typer(runs.runs_app, name="runs")
app.add_typer(deps.deps_app, name="deps")
app.add_typer(kb.kb_app, name="kb")
app.add_typer(evaluation.eval_app, name="eval")
app.add_typer(config.config_app, name="config")


def main() -> None:
    """The `crossbuild` command. A bad command line gets one line on stderr and its exit status (2 for usage), like
    every other error crossbuild reports, instead of a usage box."""
    try:
        code = app(prog_name="crossbuild", standalone_mode=False)
    except TyperException as e:  # Typer's own Click: UsageError, BadParameter, NoSuchOption, ...
        ctx = getattr(e, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        common.err.print(f"[red]error:[/] {escape(e.format_message())}{where}")
        sys.exit(e.exit_code)
    except typer.Abort:
        common.err.print("aborted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
