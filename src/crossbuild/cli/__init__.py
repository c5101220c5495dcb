"""The `crossbuild` command line: this module only assembles the command groups; each lives in its own module, and
no build logic lives in any of them."""

from __future__ import annotations

import typer

from crossbuild.cli import bench, build, env, evaluation, kb, mcp, proof

app = typer.Typer(
    help="Cross-compile real C/C++ projects with zig cc, and prove the result.",
    no_args_is_help=True, rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]},
)
for group in (env, proof, build, mcp, bench):
    app.registered_commands += group.app.registered_commands
app.add_typer(build.runs_app, name="runs")
app.add_typer(build.deps_app, name="deps")
app.add_typer(kb.kb_app, name="kb")
app.add_typer(evaluation.eval_app, name="eval")
