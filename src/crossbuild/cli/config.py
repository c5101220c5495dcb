"""`crossbuild config show`: the merged settings and the layer each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from crossbuild.cli.common import console, load_settings, print_table
from crossbuild.foundation import settings

config_app = typer.Typer(help="Settings: crossbuild.toml in the project, ~/.config/crossbuild/config.toml, "
                              "CROSSBUILD_* variables.", no_args_is_help=True)


@config_app.command("show")
def config_show(config: Path = typer.Option(None, "--config", help="Use this file instead of the nearest "
                                            "crossbuild.toml."),
                no_config: bool = typer.Option(False, "--no-config", help="Read no settings file."),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """Every setting with its value and where it came from (command line > environment > project file > user file
    > default). API keys are shown only as set."""
    resolved = load_settings(config, no_config, {})
    values = settings.flat(resolved.settings)
    if as_json:
        console.print_json(json.dumps({"files": [str(f) for f in resolved.files], "ignored": list(resolved.ignored),
                                       "settings": {k: {"value": v, "from": resolved.origin(k)}
                                                    for k, v in values.items()}}))
        return
    files = ", ".join(str(f) for f in resolved.files) or (
        f"none (no {settings.PROJECT_FILE} here or above, no {settings.user_file()})")
    console.print(f"settings files: {escape(files)}", highlight=False)
    table = Table(title="settings")
    for col in ("setting", "value", "from"):
        table.add_column(col, overflow="fold")
    for key, value in values.items():
        table.add_row(escape(key), escape(json.dumps(value)), escape(resolved.origin(key)))
    print_table(table)
