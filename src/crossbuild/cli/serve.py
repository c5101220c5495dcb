"""`crossbuild serve`: the web page over the trace, and builds started from it."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import typer
from rich.markup import escape

from crossbuild.cli.common import err, fail, load_settings
from crossbuild.env import sandbox

app = typer.Typer()

TOKEN_ENV = "CROSSBUILD_SERVE_TOKEN"


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; anything but loopback needs the token."),
    port: int = typer.Option(8780, "--port", min=1, max=65535),
    roots: list[Path] = typer.Option([], "--root", help="A folder the page may build projects from (repeatable; "
                                     "default: the current folder). debian:NAME and git URLs are always allowed."),
    runs_dir: Path = typer.Option(Path("crossbuild-runs"), "--runs-dir", help="Where the page's builds keep their "
                                  "workspaces."),
    db: Path = typer.Option(None, "--db", help="Trace database (default ~/.local/share/crossbuild/runs.db)."),
    reports: list[Path] = typer.Option([], "--reports", help="A folder of evaluation results (e.g. docs/results) "
                                       "whose reports the statistics page shows (repeatable)."),
    token_file: Path = typer.Option(None, "--token-file", help=f"Demand the token in this file (or ${TOKEN_ENV}); "
                                    "bound beyond loopback a token is always demanded (default: a new one, shown "
                                    "once)."),
    max_builds: int = typer.Option(4, "--max-builds", min=1, help="Builds the page may run at once."),
    sandbox_backend: str = typer.Option(None, "--sandbox", help="auto (default): bubblewrap, and the page starts no "
                                        "build without it | bubblewrap | none: no isolation, by your choice."),
    config: Path = typer.Option(None, "--config", help="Settings file for the page's builds (default: the nearest "
                                "crossbuild.toml)."),
    no_config: bool = typer.Option(False, "--no-config", help="Read no settings file."),
) -> None:
    """Serve the web page: runs list, each run's story live, builds started and cancelled from the page,
    statistics and evaluation reports."""
    import os

    import uvicorn

    from crossbuild.foundation import bearer
    from crossbuild.tools.paths import HostRoots
    from crossbuild.trace import store as trace_store
    from crossbuild.web.app import ServeConfig, create_app
    from crossbuild.web.builds import Builds

    for r in [*roots, *reports]:
        if not r.is_dir():
            fail(f"{r} is not a folder")
    resolved = load_settings(config, no_config, {"sandbox": sandbox_backend})
    path = db or trace_store.default_path()
    try:
        trace_store.connect(path).close()  # created and migrated once; requests only read it
    except Exception as e:  # noqa: BLE001 - any reason the file cannot be the trace
        fail(f"{path} cannot be used as the trace database: {e}")
    loopback = _is_loopback(host)
    token = None
    if not loopback or token_file is not None or os.environ.get(TOKEN_ENV):
        try:
            token, origin = bearer.bearer_token(token_file, TOKEN_ENV)
        except (OSError, ValueError) as e:
            fail(str(e))
    builds = Builds(settings=resolved, roots=HostRoots(roots or [Path.cwd()]), runs_dir=runs_dir, db=path,
                    sandbox_backend=resolved.settings.sandbox, max_running=max_builds)
    hosts = frozenset({f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]", host.lower())})
    web = create_app(ServeConfig(db=path, builds=builds, token=token, hosts=hosts,
                                 reports=[r.resolve() for r in reports]))
    shown = f"[{host}]" if ":" in host else host
    err.print(f"crossbuild on http://{shown}:{port}/ (builds from: {builds.roots}; trace: {path})")
    if builds.no_sandbox:
        err.print(f"[yellow]warning:[/] the page will start no build: {escape(builds.no_sandbox)}", highlight=False)
    elif resolved.settings.sandbox == "none":
        err.print(f"[bold red]warning: {sandbox.UNSANDBOXED}[/]", highlight=False)
    if token is not None:
        err.print(f"open http://{shown}:{port}/login?token={token} once to sign in"
                  + (" (the token is shown only now)" if origin == "generated" else f" (token {origin})"))
    uvicorn.run(web, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
