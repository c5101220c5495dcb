"""`crossbuild mcp`: serve the guarded tools over MCP."""

from __future__ import annotations

from pathlib import Path

import typer

from crossbuild.cli.common import err, load_settings, require_sandbox, target_from
from crossbuild.env import sandbox

app = typer.Typer()


@app.command()
def mcp(
    source: str = typer.Argument(None, help="Project to copy into a new workspace (folder, tarball, git URL or "
                                            "debian:NAME); or use --workspace, or let the client call open_workspace."),
    workspace_dir: Path = typer.Option(None, "--workspace", "-w", help="An existing workspace (a folder with src/)."),
    target: str = typer.Option(None, "--target", "-t", help="Default target for the session."),
    transport: str = typer.Option("stdio", "--transport", help="stdio | http (streamable HTTP)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8765, "--port"),
    sandbox_backend: str = typer.Option(None, "--sandbox", help="auto (default): bubblewrap, and the server does "
                                        "not start without it | bubblewrap | none: no isolation, by your choice."),
    roots: list[Path] = typer.Option([], "--root", help="A folder clients may copy projects from and keep "
                                     "workspaces in (repeatable; default: the current folder)."),
    prefix_root: Path = typer.Option(None, "--prefix-root", help="Cross-built dependencies go to DIR/<target> "
                                     "(default: the shared per-target prefixes in crossbuild's cache)."),
    token_file: Path = typer.Option(None, "--token-file", help="HTTP: read the bearer token from this file "
                                    "(or set $CROSSBUILD_MCP_TOKEN); default: a new one, printed at start."),
) -> None:
    """Serve crossbuild's guarded tools over MCP, for agents such as Claude Code or Cursor."""
    from crossbuild import mcp_server

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    if (source or workspace_dir) and not target:
        raise typer.BadParameter("a workspace or source needs a target, e.g. -t aarch64-linux-musl",
                                 param_hint="--target")
    default = None
    if target:
        target_from(target)  # unknown targets fail here, with close matches, before the server starts
        default = (source, str(workspace_dir) if workspace_dir else None, target) if (source or workspace_dir) \
            else None
    for r in roots:
        if not r.is_dir():
            raise typer.BadParameter(f"{r} is not a folder", param_hint="--root")
    backend = load_settings(None, False, {"sandbox": sandbox_backend}).settings.sandbox
    require_sandbox(backend)  # every tool call builds: without a sandbox the server does not start
    if backend == "none":
        err.print(f"[bold red]warning: {sandbox.UNSANDBOXED}[/]", highlight=False)
    app_ = mcp_server.CrossbuildMCP(default=default, sandbox_backend=backend, roots=roots or None,
                                    prefix_root=prefix_root)
    if transport == "stdio":
        mcp_server.serve_stdio(app_)
    else:
        try:
            token, origin = mcp_server.http_token(token_file)
        except (OSError, ValueError) as e:
            raise typer.BadParameter(str(e), param_hint="--token-file") from None
        err.print(f"crossbuild MCP server on http://{host}:{port}/mcp (roots: {', '.join(map(str, app_.roots))})")
        if origin == "generated":
            err.print(f"bearer token (send `Authorization: Bearer <token>`; shown once): {token}")
        else:
            err.print(f"bearer token {origin}")
        mcp_server.serve_http(app_, token=token, host=host, port=port)
