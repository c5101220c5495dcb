"""MCP resources and prompts beside the tools: a session's workspace logs and last verdict, the knowledge base's
entries, and the `cross-build` prompt that opens a conversation the way the agent loop does.

A client reads only the workspace its own session opened: a URI naming another workspace is not found, whatever
exists on disk. Logs are crossbuild's own (`.xbuild/logs/`, which builds cannot write), read without following
links and bounded, as `read_file` pages them.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import mcp_types as types
from mcp.shared.exceptions import MCPError

from crossbuild.agent import prompt
from crossbuild.foundation import safefs
from crossbuild.foundation.targets import UnknownTargetError, parse_target
from crossbuild.kb import KnowledgeBase
from crossbuild.tools.context import RunContext

SCHEME = "crossbuild://"
LOG_TEMPLATE = SCHEME + "workspace/{workspace}/log/{name}"
VERDICT_TEMPLATE = SCHEME + "workspace/{workspace}/verdict"
KNOWLEDGE_TEMPLATE = SCHEME + "knowledge/{entry}"
MAX_LOG_BYTES = 1 << 20  # a resource read returns at most the last MiB of a log (read_file pages the rest)
LOGS = ".xbuild/logs"  # where RunContext.next_log puts every command's log
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource that does not exist

_LOG = re.compile(r"^crossbuild://workspace/([^/]+)/log/([0-9]{4}-[A-Za-z0-9._+-]+\.log)\Z")
_VERDICT = re.compile(r"^crossbuild://workspace/([^/]+)/verdict\Z")
_KNOWLEDGE = re.compile(r"^crossbuild://knowledge/([a-z0-9][a-z0-9-]*)\Z")

PROMPT = types.Prompt(
    name="cross-build", title="Cross-build a C/C++ project",
    description="Start a conversation that cross-compiles a project with these tools and proves the result, set "
                "up as crossbuild's own agent loop sets up its model: its system prompt and its task.",
    arguments=[
        types.PromptArgument(name="source", required=True,
                             description="The project: a folder or tarball inside the server's roots, a git URL, "
                                         "or debian:NAME[=VERSION]."),
        types.PromptArgument(name="target", required=True,
                             description="The machine to build for, e.g. aarch64-linux-musl, riscv64-linux-musl, "
                                         "x86_64-windows-gnu."),
    ])


def log_uri(ctx: RunContext, name: str) -> str:
    return f"{SCHEME}workspace/{ctx.root.name}/log/{name}"


def logs(ctx: RunContext) -> dict[str, int]:
    """The workspace's command logs (regular files only, no link followed) and their sizes, by URI."""
    out = {}
    try:
        with safefs.open_dir(ctx.root, LOGS) as fd:
            for name in os.listdir(fd):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and _LOG.match(uri := log_uri(ctx, name)):
                    out[uri] = st.st_size
    except OSError:
        return {}
    return out


def listed(ctx: RunContext | None, knowledge: KnowledgeBase) -> list[types.Resource]:
    out: list[types.Resource] = []
    if ctx is not None:
        out += [types.Resource(uri=uri, name=uri.rsplit("/", 1)[1], mime_type="text/plain", size=size,
                               description="the full output of one command crossbuild ran in the workspace")
                for uri, size in sorted(logs(ctx).items())]
        if ctx.last_verdict is not None:
            out.append(types.Resource(uri=f"{SCHEME}workspace/{ctx.root.name}/verdict", name="verdict",
                                      mime_type="application/json",
                                      description="the last verify verdict in this workspace, whole"))
    out += [types.Resource(uri=f"{SCHEME}knowledge/{e.id}", name=e.id, title=e.title, mime_type="text/plain",
                           description="a knowledge-base entry: cause, fix and the real error texts it was written "
                                       "from") for e in knowledge.entries.values()]
    return out


def templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(uri_template=LOG_TEMPLATE, name="log", mime_type="text/plain",
                               description="a command's log in this session's workspace (names as run_command "
                                           "and verify give them: .xbuild/logs/NAME)"),
        types.ResourceTemplate(uri_template=VERDICT_TEMPLATE, name="verdict", mime_type="application/json",
                               description="the last verify verdict in this session's workspace"),
        types.ResourceTemplate(uri_template=KNOWLEDGE_TEMPLATE, name="knowledge", mime_type="text/plain",
                               description="a knowledge-base entry by id (search_knowledge finds them)"),
    ]


def read(uri: str, ctx: RunContext | None, knowledge: KnowledgeBase) -> types.ReadResourceResult:
    """The resource at URI, or MCPError: not found (also for a workspace this session did not open)."""
    if m := _KNOWLEDGE.match(uri):
        entry = knowledge.get(m.group(1))
        if entry is None:
            raise _not_found(uri, "no knowledge-base entry has that id (search_knowledge finds them)")
        text = entry.render() + "\n  written from:\n" + "\n".join(f"    {f}" for f in entry.fixtures)
        return _text(uri, text, "text/plain")
    m = _LOG.match(uri) or _VERDICT.match(uri)
    if m is None:
        raise _not_found(uri, f"the forms are {LOG_TEMPLATE}, {VERDICT_TEMPLATE} and {KNOWLEDGE_TEMPLATE}")
    if ctx is None or m.group(1) != ctx.root.name:
        raise _not_found(uri, "only the workspace this session opened can be read: call open_workspace first")
    if m.re is _VERDICT:
        if ctx.last_verdict is None:
            raise _not_found(uri, "no verdict yet in this workspace: call verify")
        return _text(uri, json.dumps(ctx.last_verdict, indent=1, default=str), "application/json")
    rel = Path(LOGS, m.group(2))
    try:
        size = safefs.lstat(ctx.root, rel).st_size
        data, _ = safefs.read_page(ctx.root, rel, offset=max(0, size - MAX_LOG_BYTES), size=MAX_LOG_BYTES)
    except (OSError, ValueError):
        raise _not_found(uri, "no such log in this workspace") from None
    cut = f"[the first {size - MAX_LOG_BYTES} bytes are left out: read_file pages the whole log]\n" \
        if size > MAX_LOG_BYTES else ""
    return _text(uri, cut + data.decode(errors="replace"), "text/plain")


def prompt_messages(arguments: dict[str, str] | None) -> types.GetPromptResult:
    args = arguments or {}
    source, target = (args.get("source") or "").strip(), (args.get("target") or "").strip()
    if not source or not target:
        raise MCPError(code=types.INVALID_PARAMS, message="cross-build needs a source and a target, e.g. "
                                                          "source=debian:zlib target=aarch64-linux-musl")
    try:
        t = parse_target(target)
    except UnknownTargetError as e:
        raise MCPError(code=types.INVALID_PARAMS, message=str(e)) from None
    task = (f"Cross-build {source} for {t.name} ({t.arch}, {t.os}, {t.libc}; zig target {t.zig_target}). First "
            f"call open_workspace with source={json.dumps(source)} and target={json.dumps(t.name)}; the project "
            "is then in src/. Continue with build_status.")
    return types.GetPromptResult(
        description=f"cross-build {source} for {t.name}",
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=f"{prompt.SYSTEM_MCP}\n\n{task}"))])


def _text(uri: str, text: str, mime: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])


def _not_found(uri: str, why: str) -> MCPError:
    return MCPError(code=RESOURCE_NOT_FOUND, message=f"resource {uri} not found: {why}")
