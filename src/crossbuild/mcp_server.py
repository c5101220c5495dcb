"""`crossbuild mcp`: the same guarded tools, served over MCP (stdio or streamable HTTP) with the official SDK.

Tool calls go through the very same `Toolset.dispatch` as the agent loop; failures come back as `isError` results
with the actionable message, unknown tools as protocol errors. Each session can pick its own workspace and target
with `open_workspace`, confined to the roots the user gave (`--root`); over HTTP every request needs the bearer
token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from pydantic import Field, ValidationError

from crossbuild import __version__, kb, mcp_resources
from crossbuild.env import sandbox, workspace
from crossbuild.foundation import bearer
from crossbuild.foundation.progress import Watch
from crossbuild.foundation.targets import UnknownTargetError, parse_target
from crossbuild.mcp_watch import watched
from crossbuild.tools import Toolset, default_toolset
from crossbuild.tools.base import ErrorType, Tool, ToolArgs, ToolResult, _schema_error
from crossbuild.tools.context import RunContext
from crossbuild.tools.paths import HostRoots, OutsideRoots
from crossbuild.tools.schemas import input_schema, mcp_annotations

INSTRUCTIONS = """crossbuild cross-compiles C/C++ projects for another machine with zig cc and proves the result.
Start with build_status (it prints the exact configure arguments for the target), configure and build with
run_command into build/, then call verify: its verdict is the last step and the only proof (VERIFIED, or the reasons
it is not). A failed build command comes back with the matching knowledge-base entries and, for a missing library,
the build_dependency call to make. If no workspace is open, call open_workspace first."""


class OpenWorkspaceArgs(ToolArgs):
    target: str = Field(description="Target to build for, e.g. aarch64-linux-musl, riscv64-linux-musl, "
                                    "x86_64-windows-gnu, aarch64-macos, x86_64-freebsd, wasm32-wasi "
                                    "(see `crossbuild targets`).")
    source: str | None = Field(None, max_length=4096,
                               description="Project to copy into a new workspace: a folder or tarball inside one of "
                                           "the server's roots, a git URL, or debian:NAME[=VERSION].")
    workspace: str | None = Field(None, max_length=4096,
                                  description="An existing crossbuild workspace (a folder with src/ and .xbuild/) "
                                              "to keep working in, or a new empty folder (with source). Must lie "
                                              "inside one of the server's roots.")


def _not_dispatched(ctx: Any, args: Any, auth: Any) -> ToolResult:  # pragma: no cover - handled by the server
    raise RuntimeError("open_workspace is handled by the MCP session, not by dispatch")


OPEN_WORKSPACE = Tool(
    name="open_workspace", args=OpenWorkspaceArgs, run=_not_dispatched, destructive=False, idempotent=False,
    description=(
        "Choose this session's workspace and target. With `source`, the project is copied (or downloaded: git URL, "
        "debian:NAME) into a new workspace, so the original is never modified; with `workspace`, an existing "
        "crossbuild workspace is reopened. All other tools work inside the chosen workspace only. Call it again to "
        "switch; each MCP session has its own."),
)


@dataclass
class SessionState:
    ctx: RunContext | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # this session's resource events, heard only by its own listeners (another session's log activity is not news
    # to share), with a bound of its own on open listen streams
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus, max_subscriptions=MAX_LISTENS)


MAX_LISTENS = 16  # open subscriptions/listen streams per session


class CrossbuildMCP:
    """Per-session RunContexts around one shared Toolset."""

    def __init__(self, *, default: tuple[str | None, str | None, str] | None = None, runs_dir: Path | None = None,
                 sandbox_backend: str = "auto", toolset: Toolset | None = None, roots: list[Path] | None = None,
                 prefix_root: Path | None = None):
        self.toolset = toolset or default_toolset()
        self.default = default  # (source, workspace, target) from the command line: the user's, not confined
        # the only folders a client may copy from or work in (the user's --root options; default: here)
        self.host_roots = HostRoots(roots or [Path.cwd()])
        self.roots = self.host_roots.roots
        runs_dir = (runs_dir or Path("crossbuild-runs")).resolve()
        self.runs_dir = runs_dir if self.host_roots.contain(runs_dir) else self.roots[0] / "crossbuild-runs"
        self.sandbox_backend = sandbox_backend
        # where dependencies go, one folder per target (default: the shared per-target prefixes of the cache)
        self.prefix_root = Path(prefix_root).resolve() if prefix_root else None
        self.knowledge = kb.load()
        self._sessions: dict[str, SessionState] = {}
        self._shared_default: RunContext | None = None
        self._guard = threading.Lock()
        self._stateless = SessionState()  # stateless HTTP requests: the server's default workspace, shared

    def server(self) -> Server:
        return Server("crossbuild", version=__version__, instructions=INSTRUCTIONS,
                      on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                      on_list_resources=self._list_resources, on_list_resource_templates=self._list_templates,
                      on_read_resource=self._read_resource, on_subscriptions_listen=self._listen,
                      on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    # ---- handlers ---------------------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [OPEN_WORKSPACE, *self.toolset.tools.values()]
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=input_schema(t),
                       annotations=types.ToolAnnotations(**_snake(mcp_annotations(t))))
            for t in tools])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        if name != OPEN_WORKSPACE.name and name not in self.toolset:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"unknown tool {name!r}; the tools are: open_workspace, "
                                   f"{', '.join(self.toolset.names())}")
        state = self._state(ctx)
        if name == OPEN_WORKSPACE.name and state is None:
            result = ToolResult(
                ok=False, error_type=ErrorType.INVALID_ARGUMENTS,
                message="this request has no MCP session (stateless HTTP), so a workspace opened now could not be "
                        "told apart from other clients'.",
                hint="connect with sessions (legacy streamable HTTP or stdio), or start the server with a project: "
                     "crossbuild mcp SOURCE --target T --transport http")
        elif name == OPEN_WORKSPACE.name:
            watch = Watch()
            result = await watched(ctx, watch, lambda: self._open_workspace(state, params.arguments or {}, watch))
        else:
            run_ctx = (state and state.ctx) or await anyio.to_thread.run_sync(self._default_ctx)
            if run_ctx is None:
                result = ToolResult(ok=False, error_type=ErrorType.INVALID_ARGUMENTS,
                                    message="no workspace is open in this session.",
                                    hint="call open_workspace with a source (or workspace) and a target first")
            else:
                result = await watched(ctx, run_ctx.watch,
                                        lambda: self.toolset.dispatch(run_ctx, name, params.arguments),
                                        logs_of=run_ctx, bus=(state or self._stateless).bus)
        return to_mcp_result(result)

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        run_ctx = await self._session_ctx(ctx)
        return types.ListResourcesResult(resources=mcp_resources.listed(run_ctx, self.knowledge))

    async def _list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=mcp_resources.templates())

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        run_ctx = await self._session_ctx(ctx)
        return await anyio.to_thread.run_sync(mcp_resources.read, str(params.uri), run_ctx, self.knowledge)

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[mcp_resources.PROMPT])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != mcp_resources.PROMPT.name:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"unknown prompt {params.name!r}; the prompt is {mcp_resources.PROMPT.name}")
        return mcp_resources.prompt_messages(params.arguments)

    async def _listen(self, ctx: Any, params: Any) -> Any:
        return await (self._state(ctx) or self._stateless).listen(ctx, params)

    async def _session_ctx(self, ctx: Any) -> RunContext | None:
        state = self._state(ctx)
        return (state and state.ctx) or await anyio.to_thread.run_sync(self._default_ctx)

    # ---- sessions ---------------------------------------------------------------------------------------------

    def _state(self, ctx: Any) -> SessionState | None:
        """Streamable-HTTP sessions are told apart by their Mcp-Session-Id; stdio serves one client per process.
        Stateless (2026-07-28) HTTP requests carry no session: None, so they only see the server's default."""
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        key = headers.get("mcp-session-id") if headers is not None else "stdio"
        if not key:
            return None
        with self._guard:
            return self._sessions.setdefault(key, SessionState())

    def _default_ctx(self) -> RunContext | None:
        if self.default is None:
            return None
        with self._guard:
            if self._shared_default is None:
                source, ws, target = self.default
                self._shared_default = self._make_ctx(source, ws, target)[0]
            return self._shared_default

    def _open_workspace(self, state: SessionState, arguments: dict[str, Any], watch: Watch) -> ToolResult:
        try:
            args = OpenWorkspaceArgs.model_validate(arguments, strict=True)
        except ValidationError as e:
            return _schema_error(OPEN_WORKSPACE, e)
        if not args.source and not args.workspace:
            return ToolResult(ok=False, error_type=ErrorType.INVALID_ARGUMENTS, message="give a source or a workspace.",
                              hint="source: a folder, tarball, git URL or debian:NAME; workspace: a folder with src/")
        try:
            source, ws_dir = self._check_client_paths(args)
            new, left_out = self._make_ctx(source, ws_dir, args.target, note=watch.note)
        except OutsideRoots as e:
            return ToolResult(ok=False, error_type=ErrorType.PERMISSION_DENIED, message=str(e),
                              hint=f"use a folder inside {self.host_roots}, a git URL or debian:NAME; "
                                   "the user can add folders with `crossbuild mcp --root DIR`")
        except UnknownTargetError as e:
            return ToolResult(ok=False, error_type=ErrorType.INVALID_ARGUMENTS, message=str(e),
                              hint="see the list with `crossbuild targets`")
        except (workspace.SourceError, ValueError) as e:
            return ToolResult(ok=False, error_type=ErrorType.NOT_FOUND, message=str(e))
        except OSError as e:  # e.g. a workspace whose .xbuild/ is a link: nothing is followed
            return ToolResult(ok=False, error_type=ErrorType.PERMISSION_DENIED,
                              message=f"cannot open that workspace: {e.strerror or e} ({e.filename})",
                              hint="start a new workspace from the source instead")
        if watch.cancel.is_set():  # cancelled while it was being prepared: the session keeps its workspace
            return ToolResult(ok=False, error_type=ErrorType.CANCELLED, message="cancelled: no workspace was opened.")
        with state.lock:
            state.ctx = new
        note = (f" Not copied: {', '.join(left_out[:8])}{' ...' if len(left_out) > 8 else ''} (credential and "
                "special files never enter a workspace)." if left_out else "")
        unsandboxed = f"{sandbox.UNSANDBOXED}. " if new.sandbox.backend == "none" else ""
        return ToolResult(ok=True, message=f"{unsandboxed}workspace {new.root} is open for {new.target.name}; the "
                                           f"project is in src/.{note} Next: build_status.",
                          data={"workspace": str(new.root), "target": new.target.name, "left_out": list(left_out),
                                "sandbox": new.sandbox.backend})

    def _check_client_paths(self, args: OpenWorkspaceArgs) -> tuple[str | None, str | None]:
        """Host paths a client names must resolve (links followed) inside a root, by path component, whatever form
        the source is written in. Returns the source and the workspace as checked: the real paths, which are the
        ones used (the raw text would be read again, `~` and `..` after a link differently)."""
        source = self.host_roots.source(args.source) if args.source else None
        real = self.host_roots.resolve("workspace", args.workspace) if args.workspace else None
        if real is not None and not args.source and not workspace.is_workspace(real):
            raise ValueError(f"{real} is not a crossbuild workspace (real src/ and .xbuild/ folders, no links); "
                             "pass the project as source to copy it into a new workspace")
        return source, str(real) if real is not None else None

    def _make_ctx(self, source: str | None, ws_dir: str | None, target_name: str,
                  note: Callable[[str], None] | None = None) -> tuple[RunContext, tuple[str, ...]]:
        """The session's RunContext, and what of the source was not copied into the workspace (NOTE: its phases)."""
        target = parse_target(target_name)
        left_out: tuple[str, ...] = ()
        if source:
            root = Path(ws_dir) if ws_dir else workspace.new_root(self.runs_dir, source, target.name)
            ws = workspace.prepare(source, root, note=note)
            root, left_out = ws.root, ws.left_out
        else:
            root = Path(ws_dir or ".").resolve()
            if not (root / "src").is_dir():
                raise ValueError(f"{root} is not a crossbuild workspace (it has no src/ folder); pass the project "
                                 "as source to copy it into a new workspace")
        from crossbuild.agent.dependency_builder import DependencyBuilder

        # the same planner-driven dependency builds as the CLI
        ctx = RunContext.create(root, target, sandbox_backend=self.sandbox_backend, kb=self.knowledge,
                                dependency_builder=DependencyBuilder(),
                                prefix=self.prefix_root / target.name if self.prefix_root else None)
        return ctx, left_out


def to_mcp_result(result: ToolResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=result.render())], is_error=not result.ok,
        structured_content={"ok": result.ok, "error_type": result.error_type, "data": result.data})


def _snake(hints: dict[str, bool]) -> dict[str, bool]:
    return {"read_only_hint": hints["readOnlyHint"], "destructive_hint": hints["destructiveHint"],
            "idempotent_hint": hints["idempotentHint"], "open_world_hint": hints["openWorldHint"]}


def serve_stdio(app: CrossbuildMCP) -> None:
    from mcp.server.stdio import stdio_server

    server = app.server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


class StaticTokenVerifier:
    """The SDK's TokenVerifier for one bearer token the user holds (compared in constant time)."""

    def __init__(self, token: str):
        self._token = token

    async def verify_token(self, token: str):
        from mcp.server.auth.provider import AccessToken

        if bearer.matches(token, self._token):
            return AccessToken(token=token, client_id="crossbuild-user", scopes=[])
        return None


TOKEN_ENV = "CROSSBUILD_MCP_TOKEN"


def http_token(token_file: Path | None) -> tuple[str, str]:
    """The bearer token HTTP clients must send, and where it came from: --token-file, $CROSSBUILD_MCP_TOKEN, or
    a new random one (shown once when the server starts)."""
    return bearer.bearer_token(token_file, TOKEN_ENV)


def http_app(app: CrossbuildMCP, *, token: str, host: str = "127.0.0.1", port: int = 8765):
    """The streamable-HTTP ASGI app; requests without `Authorization: Bearer TOKEN` get 401 (the SDK's bearer
    middleware)."""
    from mcp.server.auth.settings import AuthSettings

    auth = AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None)
    return app.server().streamable_http_app(host=host, auth=auth, token_verifier=StaticTokenVerifier(token))


def serve_http(app: CrossbuildMCP, *, token: str, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    uvicorn.run(http_app(app, token=token, host=host, port=port), host=host, port=port, log_level="warning")
